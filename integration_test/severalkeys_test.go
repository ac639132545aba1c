package integration_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redisrate/redisrate"
	"github.com/redisrate/redisrate/integration_test/internal/redistest"
	"github.com/redisrate/redisrate/scripts"
)

// Several keys in one call (issue 21) on real servers: redis-server, or
// valkey-server with REDISRATE_SERVER, and a Redis Cluster.

const orgUsers = 50

// orgKeys is the call of user u of organisation tag: the user's key and
// limit, then the organisation's; the tag is the keys' common hash tag.
func orgKeys(tag string, u int, user, org redisrate.Limit) []redisrate.KeyLimit {
	return []redisrate.KeyLimit{{Key: tag + ":user:" + fmt.Sprint(u), Limit: user}, {Key: tag, Limit: org}}
}

// orgTally is what 64 goroutines calling for 50 users were admitted,
// counted by the callers.
type orgTally struct {
	mu       sync.Mutex
	perUser  [orgUsers]int64
	total    int64
	attempts int64
	errs     []error
}

// calls is the calls made so far, admitted the units admitted.
func (o *orgTally) calls() int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.attempts
}

func (o *orgTally) admitted() int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.total
}

func (o *orgTally) add(u int, r redisrate.Result, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.attempts++
	switch {
	case err != nil:
		o.errs = append(o.errs, err)
	case r.Allowed:
		o.perUser[u]++
		o.total++
	}
}

// hammerOrg calls Decide with Keys from 64 goroutines for the 50 users of tag,
// each goroutine going through the users in an order of its own, until
// stop is closed (or, with stop nil, calls calls in all).
func hammerOrg(ctx context.Context, l *redisrate.Limiter, tag string, user, org redisrate.Limit, calls int, stop <-chan struct{}, tally *orgTally) {
	const workers = 64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; stop != nil || i < calls/workers; i++ {
				if stop != nil {
					select {
					case <-stop:
						return
					default:
					}
				}
				u := (w*7 + i*13) % orgUsers
				r, err := l.Decide(ctx, redisrate.Request{Keys: orgKeys(tag, u, user, org)})
				tally.add(u, r, err)
			}
		}()
	}
	wg.Wait()
}

// checkOrg asserts guarantee 4 per key on a tally, and on the state the
// calls left in Redis: no user over its limit, the organisation exactly at
// its limit (the calls asked for more), every admission taken from both
// keys and no denial from either.
func checkOrg(t *testing.T, ctx context.Context, l *redisrate.Limiter, tag string, user, org redisrate.Limit, tally *orgTally) {
	t.Helper()
	var sum int64
	for u, n := range tally.perUser {
		sum += n
		if n > user.Rate {
			t.Errorf("%s: user %d admitted %d times, over its %d", tag, u, n, user.Rate)
		}
		r, err := l.Decide(ctx, redisrate.Request{Kind: redisrate.KindPeek, Key: tag + ":user:" + fmt.Sprint(u), Limits: []redisrate.Limit{user}})
		if err != nil || r.Remaining != user.Rate-n {
			t.Errorf("%s: user %d: %v %v, want %d left after %d admitted", tag, u, r, err, user.Rate-n, n)
		}
	}
	if tally.total != org.Rate || sum != tally.total {
		t.Errorf("%s: %d attempts admitted %d (users' sum %d), want exactly the organisation's %d", tag, tally.attempts, tally.total, sum, org.Rate)
	}
	if r, err := l.Decide(ctx, redisrate.Request{Kind: redisrate.KindPeek, Key: tag, Limits: []redisrate.Limit{org}}); err != nil || r.Remaining != 0 {
		t.Errorf("%s: the organisation: %v %v, want spent", tag, r, err)
	}
}

// TestSeveralKeysGuarantee4: 64 goroutines, 50 users of one organisation,
// every algorithm, by EVALSHA and by FCALL: no user over its limit, the
// organisation exactly at its. The limits are per day: the clock does not
// matter.
func TestSeveralKeysGuarantee4(t *testing.T) {
	r := redistest.Open(t)
	ctx := context.Background()
	for _, library := range []bool{false, true} {
		t.Run(fmt.Sprintf("fcall=%v", library), func(t *testing.T) {
			if library {
				if !r.Own {
					t.Skip("the FCALL half loads the Functions library: it needs a server of its own, not " + redistest.EnvAddr)
				}
				if err := r.Client.FunctionLoadReplace(ctx, scripts.Library).Err(); err != nil {
					t.Fatalf("FUNCTION LOAD on a server of the test's own: %v", err)
				}
			}
			before, attempts := redistest.ReadCommandStats(t, r.Client), int64(0)
			for _, a := range redistest.Algorithms {
				t.Run(a.String(), func(t *testing.T) {
					l := redistest.NewLimiter(r.Client, redisrate.WithKeyPrefix(r.Key("")))
					user, org := redisrate.PerDay(5).WithAlgorithm(a), redisrate.PerDay(200).WithAlgorithm(a)
					tag := fmt.Sprintf("{org:%s:%v}", a, library)
					var tally orgTally
					hammerOrg(ctx, l, tag, user, org, 64*25, nil, &tally)
					if len(tally.errs) > 0 {
						t.Fatalf("%d calls failed, first: %v", len(tally.errs), tally.errs[0])
					}
					checkOrg(t, ctx, l, tag, user, org, &tally)
					attempts += tally.attempts
				})
			}
			// With the library loaded the calls are FCALL's (but the first
			// ones of a new Limiter, sent by EVALSHA until it finds the
			// library), without it none.
			after := redistest.ReadCommandStats(t, r.Client)
			f, e := after.Since(before, "fcall"), after.Since(before, "evalsha")
			if library && f < attempts*9/10 || !library && (f != 0 || e < attempts) {
				t.Errorf("%d FCALLs and %d EVALSHAs for %d calls", f, e, attempts)
			}
		})
	}
}

// TestSeveralKeysWriteNothingOnRealRedis: a denial by either key, and a
// foreign value on key 2, write nothing (the server's count of writes
// stays put, on a server of the test's own) and leave both keys byte for
// byte as they were, TTL included; the error names key #2.
func TestSeveralKeysWriteNothingOnRealRedis(t *testing.T) {
	r := redistest.Open(t)
	ctx := context.Background()
	for _, a := range redistest.Algorithms {
		t.Run(a.String(), func(t *testing.T) {
			l := redistest.NewLimiter(r.Client, redisrate.WithKeyPrefix(r.Key(a.String()+":")))
			user, org := redisrate.PerHour(2).WithAlgorithm(a), redisrate.PerHour(3).WithAlgorithm(a)
			key := func(k string) string { return r.Key(a.String() + ":" + k) }
			snap := func(keys ...string) []string {
				var out []string
				for _, k := range keys {
					d, _ := r.Client.Dump(ctx, key(k)).Result()
					out = append(out, fmt.Sprintf("%q ttl>0:%v", d, r.Client.PTTL(ctx, key(k)).Val() > 0))
				}
				return out
			}
			pttl := func(k string) time.Duration { return r.Client.PTTL(ctx, key(k)).Val() }
			// unwritten fails t if call wrote: the server's count of
			// writes tells on a server of the test's own; on a shared one
			// (REDIS_ADDR) only the keys can, and a TTL written 5 ms on
			// would be longer.
			unwritten := func(what string, call func(), keys ...string) {
				t.Helper()
				before := snap(keys...)
				var ttls []time.Duration
				for _, k := range keys {
					ttls = append(ttls, pttl(k))
				}
				var writes int64
				if r.Own {
					writes = redistest.Writes(t, r.Client)
				} else {
					time.Sleep(5 * time.Millisecond)
				}
				call()
				if r.Own {
					if n := redistest.Writes(t, r.Client) - writes; n != 0 {
						t.Errorf("%s: %d writes", what, n)
					}
				}
				if after := snap(keys...); fmt.Sprint(after) != fmt.Sprint(before) {
					t.Errorf("%s changed the keys:\n  %q\n  %q", what, before, after)
				}
				for i, k := range keys {
					if ttl := pttl(k); ttl > ttls[i] {
						t.Errorf("%s raised the TTL of %s from %v to %v", what, k, ttls[i], ttl)
					}
				}
			}
			for _, u := range []int{1, 1, 2} {
				if res, err := l.Decide(ctx, redisrate.Request{Keys: orgKeys("{o}", u, user, org)}); err != nil || !res.Allowed {
					t.Fatalf("user %d: %v %v", u, res, err)
				}
			}
			for _, tc := range []struct {
				u       int
				binding int
			}{{1, 0}, {3, 1}} { // user 1 spent; user 3 new, the organisation spent
				keys := orgKeys("{o}", tc.u, user, org)
				unwritten(fmt.Sprintf("user %d's denial", tc.u), func() {
					res, err := l.Decide(ctx, redisrate.Request{Keys: keys})
					if err != nil || res.Allowed || res.Binding != tc.binding || res.Key != keys[tc.binding].Key {
						t.Fatalf("user %d: %v %v, want denied by key #%d", tc.u, res, err, tc.binding+1)
					}
				}, keys[0].Key, keys[1].Key)
			}
			// A foreign value on key 2: an error naming it, key 1 untouched.
			if err := r.Client.Set(ctx, key("{f}"), "someone else's", 0).Err(); err != nil {
				t.Fatal(err)
			}
			if _, err := l.Allow(ctx, "{f}:user:1", user); err != nil {
				t.Fatal(err)
			}
			unwritten("a call with a foreign value on key 2", func() {
				_, err := l.Decide(ctx, redisrate.Request{Keys: orgKeys("{f}", 1, user, org)})
				var e *redisrate.Error
				if !errors.Is(err, redisrate.ErrForeignKey) || !errors.As(err, &e) || e.Key != key("{f}") || !strings.Contains(err.Error(), "key #2") {
					t.Errorf("a foreign value on key 2: %v, want ErrForeignKey naming key #2 (%s)", err, key("{f}"))
				}
			}, "{f}:user:1", "{f}")
		})
	}
}

// TestClusterSeveralKeys: on a 3-primary Redis Cluster, through a
// ClusterClient, a user's and its organisation's keys share a hash tag
// ({org:7}:user:N and {org:7}): 64 goroutines for 50 users admit exactly
// the organisation's limit and no user over its own, both when the slot
// stays put and while it migrates to another primary (the target's script
// cache flushed, as the resharding test does for one key). Calls of keys
// without a common tag get ErrInvalid that says to use a hash tag.
func TestClusterSeveralKeys(t *testing.T) {
	ctx := context.Background()
	c := redistest.StartCluster(t, redistest.ClusterOptions{Primaries: 3})
	// TRYAGAIN (a call whose keys are split between source and target for
	// a moment of a migration) is retried by go-redis up to MaxRedirects.
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), ContextTimeoutEnabled: true, MaxRedirects: 16})
	t.Cleanup(func() { _ = rdb.Close() })
	l := redistest.NewLimiter(rdb, redisrate.WithKeyPrefix("rate:"))
	user, org := redisrate.PerDay(5), redisrate.PerDay(200)

	t.Run("slot in place", func(t *testing.T) {
		var tally orgTally
		hammerOrg(ctx, l, "{org:7}", user, org, 64*25, nil, &tally)
		if len(tally.errs) > 0 {
			t.Fatalf("%d calls failed, first: %v", len(tally.errs), tally.errs[0])
		}
		checkOrg(t, ctx, l, "{org:7}", user, org, &tally)
		// A batch of calls for two organisations, pipelined by slot, by a
		// user the hammer never called: the spent organisation denies it.
		res, err := l.DecideBatch(ctx, []redisrate.Request{
			{Keys: orgKeys("{org:7}", orgUsers, user, org)},
			{Keys: orgKeys("{org:9}", 0, user, org)},
		})
		if err != nil || res[0].Allowed || res[0].Key != "{org:7}" || !res[1].Allowed {
			t.Errorf("batch: %+v %v, want {org:7} spent and {org:9} admitted", res, err)
		}
	})

	t.Run("slot migrating", func(t *testing.T) {
		tag := "{org:8}"
		// The users ask 10,000: enough that the organisation is still
		// admitting when the slot moves, even on a fast machine.
		user, org := redisrate.PerDay(200), redisrate.PerDay(8000)
		slot, err := c.KeySlot(ctx, "rate:"+tag)
		if err != nil {
			t.Fatal(err)
		}
		from, err := c.Owner(ctx, slot)
		if err != nil {
			t.Fatal(err)
		}
		to := c.OtherPrimary(from)
		asking := redistest.ReadCommandStats(t, c.Admin(to)).Sum("asking")
		var tally orgTally
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			hammerOrg(ctx, l, tag, user, org, 0, stop, &tally)
		}()
		var stopOnce sync.Once
		stopLoad := func() { stopOnce.Do(func() { close(stop); <-done }) }
		defer stopLoad() // a failure below must not leave the callers running
		// Each phase lasts until the callers have been through it, however
		// fast or slow the machine: a few calls each before the slot moves
		// (far from spending the organisation), calls that meet it
		// MIGRATING with the keys still on the source, and a call that
		// follows ASK to the target once the first keys are there (the
		// rest move at once: the callers whose keys are split between
		// the nodes get TRYAGAIN until then).
		awaitCalls := func(n int64, what string) {
			t.Helper()
			want := tally.calls() + n
			redistest.WaitFor(t, 30*time.Second, fmt.Sprintf("%d calls %s", n, what), func() bool { return tally.calls() >= want })
		}
		awaitCalls(4*64, "before the slot moves")
		if err := c.Admin(to).ScriptFlush(ctx).Err(); err != nil { // calls sent there by ASK load the scripts
			t.Fatal(err)
		}
		before := tally.admitted()
		m, err := c.BeginMigration(ctx, slot, to)
		if err != nil {
			t.Fatal(err)
		}
		awaitCalls(2*64, "with the slot MIGRATING")
		// The organisation's key and 10 users' move first: those users'
		// calls follow ASK to the target, the others' find their keys split
		// between the nodes and get TRYAGAIN until the rest have moved.
		first := []any{"MIGRATE", "127.0.0.1", to.Port, "", 0, 5000, "KEYS", "rate:" + tag}
		for u := range 10 {
			first = append(first, "rate:"+orgKeys(tag, u, user, org)[0].Key)
		}
		if err := c.Admin(from).Do(ctx, first...).Err(); err != nil {
			t.Fatal(err)
		}
		moved := len(first) - 7
		redistest.WaitFor(t, 30*time.Second, "a call to follow ASK to the target", func() bool {
			return redistest.ReadCommandStats(t, c.Admin(to)).Sum("asking") > asking
		})
		if err := m.Finish(ctx); err != nil {
			t.Fatal(err)
		}
		during := tally.admitted() - before
		c.WaitHealthy(10 * time.Second)
		// Then until the organisation is spent, and a few denials more.
		redistest.WaitFor(t, 60*time.Second, "the organisation to be spent", func() bool { return tally.admitted() >= org.Rate })
		awaitCalls(64, "after the organisation is spent")
		stopLoad()
		if owner, err := c.Owner(ctx, slot); err != nil || owner != to {
			t.Fatalf("slot %d owned by %v (%v), want %s", slot, owner, err, to.Addr)
		}
		t.Logf("FIGURE cluster several keys: %d calls, %d admitted during the migration of slot %d (%d keys moved first), %d failed, %d ASKING on the target",
			tally.attempts, during, slot, moved, len(tally.errs), redistest.ReadCommandStats(t, c.Admin(to)).Sum("asking")-asking)
		for _, err := range tally.errs {
			if !errors.Is(err, redisrate.ErrUnavailable) || !strings.Contains(err.Error(), "TRYAGAIN") {
				t.Errorf("a call failed other than by TRYAGAIN: %v", err)
				break
			}
		}
		if during == 0 {
			t.Error("nothing admitted while the slot migrated: the test did not exercise it")
		}
		checkOrg(t, ctx, l, tag, user, org, &tally)
	})

	t.Run("CROSSSLOT", func(t *testing.T) {
		_, err := l.Decide(ctx, redisrate.Request{Keys: []redisrate.KeyLimit{redisrate.KeyLimit{Key: "user:42", Limit: user}, redisrate.KeyLimit{Key: "org:7", Limit: org}}})
		if !errors.Is(err, redisrate.ErrInvalid) || errors.Is(err, redisrate.ErrUnavailable) ||
			!strings.Contains(err.Error(), "hash tag") || !strings.Contains(err.Error(), "{org:7}:user:42 and {org:7}") {
			t.Errorf("keys in two slots: %v, want ErrInvalid with the hash-tag advice", err)
		}
		// Not a Redis failure: FailOpen does not admit it.
		open := l.With(redisrate.WithFailurePolicy(redisrate.FailOpen))
		if res, err := open.Decide(ctx, redisrate.Request{Keys: []redisrate.KeyLimit{redisrate.KeyLimit{Key: "user:42", Limit: user}, redisrate.KeyLimit{Key: "org:7", Limit: org}}}); !errors.Is(err, redisrate.ErrInvalid) || res.Allowed {
			t.Errorf("keys in two slots under FailOpen: %+v %v, want ErrInvalid", res, err)
		}
	})
}
