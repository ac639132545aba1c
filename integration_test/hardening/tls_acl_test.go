package hardening

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redisrate/redisrate"
	"github.com/redisrate/redisrate/integration_test/internal/redistest"
	"github.com/redisrate/redisrate/scripts"
)

// exercise runs every kind of call for every algorithm on lim and fails
// t on any error or wrong decision: Allow to the capacity and one more
// (denied), Decide of KindCheck, KindPeek and several limits, DecideBatch,
// Wait, Reset.
func exercise(t *testing.T, what string, l *redisrate.Limiter, prefix string) {
	t.Helper()
	ctx := context.Background()
	for _, algo := range redistest.Algorithms {
		lim := redisrate.PerMinute(3).WithAlgorithm(algo)
		key := prefix + algo.String()
		for i := range 4 {
			res, err := l.Allow(ctx, key, lim)
			if err != nil || res.Source != redisrate.SourceRedis || res.Allowed != (i < 3) {
				t.Fatalf("%s: %s Allow %d: %v, %v", what, algo, i+1, res, err)
			}
		}
		if res, err := l.Decide(ctx, redisrate.Request{Kind: redisrate.KindCheck, Key: key, Limits: []redisrate.Limit{lim}}); err != nil || res.Allowed {
			t.Fatalf("%s: %s Check after 3 of 3: %v, %v", what, algo, res, err)
		}
		if res, err := l.Decide(ctx, redisrate.Request{Kind: redisrate.KindPeek, Key: key, Limits: []redisrate.Limit{lim}}); err != nil || res.Remaining != 0 {
			t.Fatalf("%s: %s Peek: %v, %v", what, algo, res, err)
		}
		if res, err := l.Decide(ctx, redisrate.Request{Key: key + ":multi", Limits: []redisrate.Limit{lim, redisrate.PerHour(10).WithAlgorithm(algo)}}); err != nil || !res.Allowed {
			t.Fatalf("%s: %s Decide of two limits: %v, %v", what, algo, res, err)
		}
		rs, err := l.DecideBatch(ctx, []redisrate.Request{{Key: key + ":b1", Limits: []redisrate.Limit{lim}}, {Key: key + ":b2", Limits: []redisrate.Limit{lim}, Kind: redisrate.KindCheck}})
		if err != nil || !rs[0].Allowed || !rs[1].Allowed {
			t.Fatalf("%s: %s DecideBatch: %v, %v", what, algo, rs, err)
		}
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		res, err := l.Wait(wctx, key+":wait", lim)
		cancel()
		if err != nil || !res.Allowed {
			t.Fatalf("%s: %s Wait: %v, %v", what, algo, res, err)
		}
		if err := l.Reset(ctx, key); err != nil {
			t.Fatalf("%s: %s Reset: %v", what, algo, err)
		}
		if res, err := l.Allow(ctx, key, lim); err != nil || !res.Allowed || res.Remaining != 2 {
			t.Fatalf("%s: %s Allow after Reset: %v, %v", what, algo, res, err)
		}
	}
}

// TLS: a server that listens with TLS only (certificates made by the test)
// serves every script through the Go client, by EVALSHA and by FCALL of
// the library; a plain-text client is refused.
func TestTLS(t *testing.T) {
	redistest.NeedLocal(t, "a TLS server")
	t.Parallel()
	ctx := context.Background()
	srv := redistest.StartServer(t, redistest.Options{TLS: redistest.NewCerts(t)})
	rdb := srv.Client(&redis.Options{ContextTimeoutEnabled: true})
	exercise(t, "TLS, EVALSHA", redistest.NewLimiter(rdb, redisrate.WithKeyPrefix("evalsha:")), "")
	if err := rdb.FunctionLoadReplace(ctx, scripts.Library).Err(); err != nil {
		t.Fatal(err)
	}
	exercise(t, "TLS, FCALL", redistest.NewLimiter(rdb, redisrate.WithKeyPrefix("fcall:")), "")
	exercise(t, "TLS, read-only checks", redistest.NewLimiter(rdb, redisrate.WithKeyPrefix("ro:"), redisrate.WithReadOnlyCheck()), "")
	stats, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"cmdstat_evalsha:", "cmdstat_fcall:", "cmdstat_fcall_ro:"} {
		if !strings.Contains(stats, cmd) {
			t.Errorf("the server never ran %s over TLS:\n%s", strings.TrimSuffix(cmd, ":"), stats)
		}
	}

	// A plain-text client: the TLS port drops it, the Limiter says Redis
	// is unavailable, and nothing was written.
	plain := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: time.Second})
	defer plain.Close()
	before, _ := rdb.DBSize(ctx).Result()
	_, err = redistest.NewLimiter(plain).Allow(ctx, "plain", redisrate.PerMinute(3))
	if !errors.Is(err, redisrate.ErrUnavailable) {
		t.Fatalf("plain-text client on the TLS port: %v, want ErrUnavailable", err)
	}
	t.Logf("plain-text client refused: %v", err)
	if after, _ := rdb.DBSize(ctx).Result(); after != before {
		t.Fatalf("a plain-text call changed the key count: %d -> %d", before, after)
	}
}

// LimiterACL is the least-privilege ACL rule set for a limiter's user, as
// docs/reliability.md gives it: its keys, the scripts and the library, the
// commands the scripts call (Redis checks a script's calls against the
// caller's ACL too), and nothing else. SCRIPT LOAD is for "redisrate load";
// the client itself sends EVALSHA, then EVAL on NOSCRIPT.
const LimiterACL = "on >s3cret resetkeys ~rate:* resetchannels -@all " +
	"+evalsha +eval +evalsha_ro +eval_ro +fcall +fcall_ro +script|load " +
	"+time +get +exists +type +del +psetex +pexpire " +
	"+zadd +zcount +zscore +zrangebyscore +zrevrangebyscore +zremrangebyscore"

// Least privilege: the client runs as a user with LimiterACL only. Every
// call works (EVALSHA, EVAL on NOSCRIPT, FCALL of the library an admin
// loaded, read-only checks); GET, FLUSHALL, CONFIG and a key outside the
// prefix are refused by Redis, and the client's error names the missing
// permission.
func TestACLLeastPrivilege(t *testing.T) {
	redistest.NeedLocal(t, "an ACL user in its configuration")
	t.Parallel()
	ctx := context.Background()
	srv := redistest.StartServer(t, redistest.Options{Config: []string{"user limiter " + LimiterACL}})
	admin := srv.Client(nil)
	rdb := srv.Client(&redis.Options{Username: "limiter", Password: "s3cret", ContextTimeoutEnabled: true})

	exercise(t, "ACL, EVALSHA", redistest.NewLimiter(rdb, redisrate.WithKeyPrefix("rate:evalsha:")), "")
	if err := admin.FunctionLoadReplace(ctx, scripts.Library).Err(); err != nil {
		t.Fatal(err)
	}
	exercise(t, "ACL, FCALL", redistest.NewLimiter(rdb, redisrate.WithKeyPrefix("rate:fcall:")), "")
	exercise(t, "ACL, read-only checks", redistest.NewLimiter(rdb, redisrate.WithKeyPrefix("rate:ro:"), redisrate.WithReadOnlyCheck()), "")
	// redisrate load's SCRIPT LOAD works too.
	for _, s := range scripts.Specs() {
		if err := rdb.ScriptLoad(ctx, s.Source).Err(); err != nil {
			t.Fatalf("SCRIPT LOAD %s as the limiter: %v", s.Name, err)
		}
	}

	// Everything else is refused by Redis.
	for _, cmd := range [][]any{{"GET", "user:1"}, {"FLUSHALL"}, {"CONFIG", "GET", "maxmemory"}, {"CONFIG", "SET", "maxmemory-policy", "allkeys-lru"}, {"KEYS", "*"}, {"SET", "rate:x", "1"}, {"INFO"}} {
		err := rdb.Do(ctx, cmd...).Err()
		if err == nil || !strings.HasPrefix(err.Error(), "NOPERM") {
			t.Errorf("%v as the limiter: %v, want NOPERM", cmd, err)
		}
	}
	// GET inside a script needs +get, so the user may GET its own keys
	// (a limiter's state, nothing else).
	if err := rdb.Get(ctx, "rate:x").Err(); err != nil && !errors.Is(err, redis.Nil) {
		t.Errorf("GET rate:x as the limiter: %v (the scripts need +get on ~rate:*)", err)
	}
	// A key outside the prefix, through the client: an error naming the
	// permission, for every algorithm, matching ErrMisconfigured under every
	// policy: a deployment mistake is never answered as "Redis is down".
	for _, policy := range []redisrate.FailurePolicy{redisrate.FailError, redisrate.FailOpen, redisrate.FailClosed} {
		l := redistest.NewLimiter(rdb, redisrate.WithKeyPrefix("other:"), redisrate.WithFailurePolicy(policy), redisrate.WithCircuitBreaker(0))
		for _, algo := range redistest.Algorithms {
			res, err := l.Allow(ctx, "k", redisrate.PerMinute(3).WithAlgorithm(algo))
			var e *redisrate.Error
			if !errors.Is(err, redisrate.ErrMisconfigured) || errors.Is(err, redisrate.ErrUnavailable) || !errors.As(err, &e) ||
				!strings.Contains(err.Error(), "NOPERM") || !strings.Contains(strings.ToLower(err.Error()), "no permissions to access") { // Valkey capitalizes "No"
				t.Errorf("%v, %s: %v / %v; want a *redisrate.Error matching ErrMisconfigured and naming the NOPERM key permission", policy, algo, err, res)
			}
		}
	}
	// A user without a command the scripts call: the script's error names it.
	if err := admin.Do(ctx, "ACL", "SETUSER", "limiter", "-time").Err(); err != nil {
		t.Fatal(err)
	}
	_, err := redistest.NewLimiter(rdb, redisrate.WithKeyPrefix("rate:notime:"), redisrate.WithCircuitBreaker(0)).Allow(ctx, "k", redisrate.PerMinute(3))
	// Redis: "... can't run this command ..."; Valkey names the command.
	if err == nil || !strings.Contains(err.Error(), "can't run this command") && !strings.Contains(err.Error(), "no permissions to run the 'time' command") {
		t.Errorf("without +time: %v, want the script's ACL error", err)
	}
	// Issue 38: a deployment mistake, never an outage.
	if !errors.Is(err, redisrate.ErrMisconfigured) || errors.Is(err, redisrate.ErrUnavailable) {
		t.Errorf("without +time: %v, want an error matching ErrMisconfigured only", err)
	}
	t.Logf("without +time: %v", err)
	if n, _ := admin.Exists(ctx, "other:k").Result(); n != 0 {
		t.Error("a refused call wrote other:k")
	}
}
