package integration

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redisrate/redisrate"
	"github.com/redisrate/redisrate/integration_test/internal/redistest"
	"github.com/redisrate/redisrate/scripts"
)

// via is one way a Limiter sends its read-only checks, as the server's
// command statistics name the commands.
type via struct {
	name      string
	functions bool     // the library is loaded: FCALL and FCALL_RO
	ro        []string // the commands a read-only check or peek is sent with
	notRO     []string // the read-only commands it must not use
	write     []string // the commands of Allow (and of a Check without WithReadOnlyCheck)
}

var vias = []via{
	{name: "evalsha_ro", ro: []string{"evalsha_ro", "eval_ro"}, notRO: []string{"fcall_ro"}, write: []string{"evalsha", "eval"}},
	{name: "fcall_ro", functions: true, ro: []string{"fcall_ro"}, notRO: []string{"evalsha_ro", "eval_ro"}, write: []string{"fcall"}},
}

// learn makes each Limiter's first call on a key of its own, so that it
// knows whether the server has the library (one FCALL_RO redisrate_version,
// then none for a minute) before a test counts commands. Errors are
// ignored: a Limiter that may only fail (Allow on a replica) learns too.
func learn(ctx context.Context, lims ...*redisrate.Limiter) {
	for _, l := range lims {
		_, _ = l.Decide(ctx, redisrate.Request{Kind: redisrate.KindPeek, Key: "learn", Limits: []redisrate.Limit{redisrate.PerMinute(1)}})
	}
}

// TestReadOnlyCheck: WithReadOnlyCheck sends Check and Peek through
// EVALSHA_RO, or FCALL_RO of the "_ro" functions when scripts.Library is
// loaded. They decide as Allow would and write nothing, for every
// algorithm; the server's command statistics show which command served
// every check, peek and allow. A user allowed only the read-only commands
// can check and peek but not allow; its refusals are ErrMisconfigured.
func TestReadOnlyCheck(t *testing.T) {
	for _, v := range vias {
		t.Run(v.name, func(t *testing.T) {
			addr, _ := startRedis(t)
			c := newClient(t, addr)
			needRedis7(t, c)
			ctx := context.Background()
			if v.functions {
				loadLibrary(t, c)
			} else {
				loadScripts(t, c) // so that each check is one EVALSHA_RO
			}
			lim := redistest.NewLimiter(c)
			ro := redistest.NewLimiter(c, redisrate.WithReadOnlyCheck())
			learn(ctx, lim, ro)
			for _, a := range redistest.Algorithms {
				t.Run(a.String(), func(t *testing.T) {
					l := perMinute(a)
					key := "ro:" + a.String()
					before := redistest.ReadCommandStats(t, c)
					res, err := ro.Decide(ctx, redisrate.Request{Kind: redisrate.KindCheck, Key: key, Limits: []redisrate.Limit{l}})
					if err != nil {
						t.Fatal(err)
					}
					if !res.Allowed || res.Remaining != 2 {
						t.Fatalf("check of a fresh key: %v, want allowed with 2 remaining", res)
					}
					res, err = ro.Decide(ctx, redisrate.Request{Kind: redisrate.KindPeek, Key: key, Limits: []redisrate.Limit{l}})
					if err != nil {
						t.Fatal(err)
					}
					if !res.Allowed || res.Remaining != 3 || res.ResetAfter != 0 {
						t.Fatalf("peek of a fresh key: %v, want 3 remaining, reset 0", res)
					}
					if n := c.Exists(ctx, key).Val(); n != 0 {
						t.Fatal("a read-only check or peek created the key")
					}
					for range 3 {
						if res, err := lim.Allow(ctx, key, l); err != nil || !res.Allowed {
							t.Fatalf("allow: %v, %v", res, err)
						}
					}
					dump := c.Dump(ctx, key).Val()
					ttl := c.PTTL(ctx, key).Val()
					checked, err := ro.Decide(ctx, redisrate.Request{Kind: redisrate.KindCheck, Key: key, Limits: []redisrate.Limit{l}})
					if err != nil {
						t.Fatal(err)
					}
					peeked, err := ro.Decide(ctx, redisrate.Request{Kind: redisrate.KindPeek, Key: key, Limits: []redisrate.Limit{l}})
					if err != nil {
						t.Fatal(err)
					}
					if d := c.Dump(ctx, key).Val(); d != dump {
						t.Fatal("a read-only check or peek changed the key")
					}
					if ttl2 := c.PTTL(ctx, key).Val(); ttl2 > ttl {
						t.Fatalf("a read-only check or peek extended the TTL from %v to %v", ttl, ttl2)
					}
					allowed, err := lim.Allow(ctx, key, l)
					if err != nil {
						t.Fatal(err)
					}
					if checked.Allowed || allowed.Allowed || checked.Remaining != allowed.Remaining ||
						allowed.RetryAfter > checked.RetryAfter || checked.RetryAfter-allowed.RetryAfter > time.Second {
						t.Fatalf("check said %v, allow right after said %v", checked, allowed)
					}
					if !peeked.Allowed || peeked.Remaining != 0 || peeked.ResetAfter <= 0 || peeked.ResetAfter > 2*time.Minute {
						t.Fatalf("peek of a used-up key: %v, want 0 remaining and a reset within 2 minutes", peeked)
					}
					after := redistest.ReadCommandStats(t, c)
					if n := after.Since(before, v.ro...); n != 4 {
						t.Errorf("%d calls of %v for 2 read-only checks and 2 peeks (loaded beforehand: one each)", n, v.ro)
					}
					if n := after.Since(before, v.notRO...); n != 0 {
						t.Errorf("%d calls of %v: read-only calls went the other way", n, v.notRO)
					}
					if n := after.Since(before, v.write...); n != 4 {
						t.Errorf("%d calls of %v for 4 allows", n, v.write)
					}
				})
			}
			t.Run("acl", func(t *testing.T) { readOnlyUser(t, v, addr) })
		})
	}
}

// readOnlyUser checks a user that may run only the read-only commands of
// v (and the reads they make): it can check and peek through
// WithReadOnlyCheck, and a plain check or an allow is refused with
// ErrMisconfigured, whatever the failure policy.
func readOnlyUser(t *testing.T, v via, addr string) {
	ctx := context.Background()
	c := newClient(t, addr)
	rules := []any{"ACL", "SETUSER", "checker", "reset", "on", ">secret", "~*", "resetchannels", "-@all",
		"+@read", "+time", "+ping", "+hello", "+auth"}
	for _, cmd := range v.ro {
		rules = append(rules, "+"+cmd)
	}
	if err := c.Do(ctx, rules...).Err(); err != nil {
		t.Fatal(err)
	}
	user := redis.NewClient(&redis.Options{Addr: addr, Username: "checker", Password: "secret"})
	t.Cleanup(func() { _ = user.Close() })
	ro := redistest.NewLimiter(user, redisrate.WithReadOnlyCheck())
	plain := redistest.NewLimiter(user, redisrate.WithFailurePolicy(redisrate.FailOpen))
	before := redistest.ReadCommandStats(t, c)
	for _, a := range redistest.Algorithms {
		l := perMinute(a)
		key := "acl:" + a.String()
		if res, err := ro.Decide(ctx, redisrate.Request{Kind: redisrate.KindCheck, Key: key, Limits: []redisrate.Limit{l}}); err != nil || !res.Allowed || res.Source != redisrate.SourceRedis {
			t.Errorf("%s: read-only check as a read-only user: %v, %v", a, res, err)
		}
		if res, err := ro.Decide(ctx, redisrate.Request{Kind: redisrate.KindPeek, Key: key, Limits: []redisrate.Limit{l}}); err != nil || res.Remaining != 3 {
			t.Errorf("%s: peek as a read-only user: %v, %v", a, res, err)
		}
		_, err := plain.Decide(ctx, redisrate.Request{Kind: redisrate.KindCheck, Key: key, Limits: []redisrate.Limit{l}})
		if !errors.Is(err, redisrate.ErrMisconfigured) || !strings.Contains(err.Error(), "NOPERM") {
			t.Errorf("%s: a plain check as a read-only user: %v, want ErrMisconfigured with the server's NOPERM", a, err)
		}
		_, err = plain.Allow(ctx, key, l)
		var e *redisrate.Error
		if !errors.Is(err, redisrate.ErrMisconfigured) || errors.Is(err, redisrate.ErrUnavailable) || !errors.As(err, &e) || e.Script != a.String() {
			t.Errorf("%s: allow as a read-only user under FailOpen: %v, want a *redisrate.Error matching ErrMisconfigured only", a, err)
		}
	}
	after := redistest.ReadCommandStats(t, c)
	if n := after.Since(before, v.ro...); n < 12 {
		t.Errorf("%d calls of %v for 6 checks and 6 peeks as the read-only user", n, v.ro)
	}
}

// TestReadOnlyCheckOnReplica: Check and Peek through EVALSHA_RO, and through
// FCALL_RO once the library is loaded on the primary (FUNCTION LOAD
// replicates), on a replica give the primary's answers once replicated,
// and are served by the replica; an Allow sent to the replica fails with
// READONLY (ErrUnavailable) instead of deciding on stale state.
func TestReadOnlyCheckOnReplica(t *testing.T) {
	redistest.NeedLocal(t, "replication between two servers")
	ctx := context.Background()
	// No delay before a full sync: the replica is up at once.
	paddr, _ := startRedis(t, "--repl-diskless-sync-delay", "0")
	_, pport, _ := net.SplitHostPort(paddr)
	raddr, _ := startRedis(t, "--replicaof", "127.0.0.1", pport)
	primary, replica := newClient(t, paddr), newClient(t, raddr)
	needRedis7(t, primary)
	redistest.WaitFor(t, 10*time.Second, "the replica to sync", func() bool {
		return strings.Contains(replica.Info(ctx, "replication").Val(), "master_link_status:up")
	})
	for _, v := range vias {
		t.Run(v.name, func(t *testing.T) {
			if v.functions {
				loadLibrary(t, primary)
				redistest.WaitFor(t, 10*time.Second, "the library on the replica", func() bool {
					libs, err := replica.FunctionList(ctx, redis.FunctionListQuery{LibraryNamePattern: scripts.LibraryName}).Result()
					return err == nil && len(libs) == 1
				})
			}
			onPrimary := redistest.NewLimiter(primary)
			onReplica := redistest.NewLimiter(replica, redisrate.WithReadOnlyCheck())
			// No breaker: every Allow below must reach the replica.
			writer := redistest.NewLimiter(replica, redisrate.WithCircuitBreaker(0))
			learn(ctx, onPrimary, onReplica, writer)
			before := redistest.ReadCommandStats(t, replica)
			for _, a := range redistest.Algorithms {
				l := perMinute(a)
				key := v.name + ":replica:" + a.String()
				for range 2 {
					if _, err := onPrimary.Allow(ctx, key, l); err != nil {
						t.Fatal(err)
					}
				}
				// WAIT waits for the writes of its own connection, and the
				// Limiter's went on another of the pool's: a write of WAIT's
				// connection after them carries a later replication offset.
				synced := primary.Conn()
				if err := synced.Set(ctx, "synced:"+key, 1, time.Minute).Err(); err != nil {
					t.Fatal(err)
				}
				n, werr := synced.Do(ctx, "WAIT", 1, 5000).Int()
				_ = synced.Close()
				if werr != nil || n != 1 {
					t.Fatalf("WAIT 1: %d, %v", n, werr)
				}
				// 2 of 3 used: a check of one unit leaves 0, a peek sees 1.
				for left, kind := range []string{"check", "peek"} {
					var want, got redisrate.Result
					var errP, errR error
					if kind == "check" {
						want, errP = onPrimary.Decide(ctx, redisrate.Request{Kind: redisrate.KindCheck, Key: key, Limits: []redisrate.Limit{l}})
						got, errR = onReplica.Decide(ctx, redisrate.Request{Kind: redisrate.KindCheck, Key: key, Limits: []redisrate.Limit{l}})
					} else {
						want, errP = onPrimary.Decide(ctx, redisrate.Request{Kind: redisrate.KindPeek, Key: key, Limits: []redisrate.Limit{l}})
						got, errR = onReplica.Decide(ctx, redisrate.Request{Kind: redisrate.KindPeek, Key: key, Limits: []redisrate.Limit{l}})
					}
					if errP != nil || errR != nil {
						t.Fatalf("%s %s: primary %v, replica %v", a, kind, errP, errR)
					}
					if got.Allowed != want.Allowed || got.Remaining != want.Remaining || got.Remaining != int64(left) ||
						got.Capacity != want.Capacity || got.Source != redisrate.SourceRedis ||
						redistest.AbsDur(got.ResetAfter-want.ResetAfter) > time.Second {
						t.Fatalf("%s %s: replica says %v, primary says %v", a, kind, got, want)
					}
				}
				_, err := writer.Allow(ctx, key, l)
				if !errors.Is(err, redisrate.ErrUnavailable) || !strings.Contains(err.Error(), "READONLY") {
					t.Fatalf("%s: Allow on a replica: %v, want ErrUnavailable with READONLY", a, err)
				}
			}
			after := redistest.ReadCommandStats(t, replica)
			t.Logf("replica served %d %v and %d %v", after.Since(before, v.ro...), v.ro, after.Since(before, v.notRO...), v.notRO)
			if n := after.Since(before, v.ro...); n < 12 {
				t.Errorf("the replica ran %d of %v for 6 checks and 6 peeks", n, v.ro)
			}
			if n := after.Since(before, v.notRO...); n != 0 {
				t.Errorf("the replica ran %d of %v: the checks went the other way", n, v.notRO)
			}
		})
	}
}
