package redisrate

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redisrate/redisrate/internal/hooktest"
	"github.com/redisrate/redisrate/scripts"
)

// cmdCounter is a go-redis hook that counts the script calls that reach the
// server, one by one and in pipelines.
type cmdCounter struct {
	mu    sync.Mutex
	calls map[string]int // "evalsha", "eval", ...
	pipes [][]string     // the command names of each pipeline sent
}

func countCommands(rdb *redis.Client) *cmdCounter {
	c := &cmdCounter{calls: map[string]int{}}
	rdb.AddHook(c)
	return c
}

func (c *cmdCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *cmdCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.mu.Lock()
		c.calls[cmd.Name()]++
		c.mu.Unlock()
		return next(ctx, cmd)
	}
}

func (c *cmdCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.mu.Lock()
		var names []string
		for _, cmd := range cmds {
			c.calls[cmd.Name()]++
			names = append(names, cmd.Name())
		}
		if names[0] != "client" && names[0] != "hello" { // a new connection's handshake
			c.pipes = append(c.pipes, names)
		}
		c.mu.Unlock()
		return next(ctx, cmds)
	}
}

func (c *cmdCounter) scriptCalls() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls["evalsha"] + c.calls["eval"] + c.calls["evalsha_ro"] + c.calls["eval_ro"]
}

// denyLimiter is a Limiter with a deny cache of size entries (and opts) on a
// fake Redis whose script calls are counted, the cache on its clock.
func denyLimiter(t *testing.T, size int, opts ...Option) (*fakeRedis, *cmdCounter, *Limiter) {
	t.Helper()
	f := newFakeRedis(t)
	cnt := countCommands(f.rdb)
	l := testLimiterOn(newRedisClock(f), f.rdb, append([]Option{WithDenyCache(size)}, opts...)...)
	return f, cnt, l
}

func TestDenyCacheAnswersFloodLocally(t *testing.T) {
	ctx := context.Background()
	for a := GCRA; a < numAlgorithms; a++ {
		t.Run(a.String(), func(t *testing.T) {
			f, cnt, l := denyLimiter(t, 100)
			lim := PerMinute(2).WithAlgorithm(a)
			for i := 0; i < 2; i++ {
				if r, err := l.Allow(ctx, "k", lim); err != nil || !r.Allowed {
					t.Fatalf("call %d: %v %v, want allowed", i, r, err)
				}
			}
			first, err := l.Allow(ctx, "k", lim)
			if err != nil || first.Allowed || first.RetryAfter <= 0 {
				t.Fatalf("third call: %+v %v, want a denial with a RetryAfter", first, err)
			}
			before := cnt.scriptCalls()
			for i := 0; i < 100; i++ {
				r, err := l.Allow(ctx, "k", lim)
				if err != nil || r.Allowed {
					t.Fatalf("flood call %d: %v %v, want denied", i, r, err)
				}
				if r.RetryAfter != first.RetryAfter || r.Remaining != first.Remaining || r.Capacity != first.Capacity || r.Limit != lim ||
					r.Source != SourceDenyCache || r.Degraded() {
					t.Fatalf("flood call %d: %+v, want the cached denial %+v", i, r, first)
				}
			}
			if got := cnt.scriptCalls() - before; got != 0 {
				t.Fatalf("the flood sent %d script calls to Redis, want 0", got)
			}
			// Time passes: the answer says so, still without Redis.
			f.advance(first.RetryAfter / 2)
			r, _ := l.Allow(ctx, "k", lim)
			if r.Allowed || r.RetryAfter > first.RetryAfter-first.RetryAfter/2+time.Millisecond || r.RetryAfter <= 0 {
				t.Fatalf("half way: RetryAfter %v, want about %v", r.RetryAfter, first.RetryAfter/2)
			}
			if r.ResetAfter < r.RetryAfter {
				t.Fatalf("half way: ResetAfter %v < RetryAfter %v", r.ResetAfter, r.RetryAfter)
			}
			if got := cnt.scriptCalls() - before; got != 0 {
				t.Fatalf("sent %d script calls before RetryAfter, want 0", got)
			}
			// After RetryAfter, Redis decides again, and admits.
			f.advance(first.RetryAfter)
			if r, err := l.Allow(ctx, "k", lim); err != nil || !r.Allowed {
				t.Fatalf("after RetryAfter: %v %v, want allowed", r, err)
			}
			if got := cnt.scriptCalls() - before; got != 1 {
				t.Fatalf("after RetryAfter: %d script calls, want 1", got)
			}
		})
	}
}

func TestDenyCacheCostsAndLimits(t *testing.T) {
	ctx := context.Background()
	_, cnt, l := denyLimiter(t, 100)
	lim := PerMinute(10)
	if r, _ := l.AllowN(ctx, "k", lim, 8); !r.Allowed {
		t.Fatal("cost 8 of 10 denied")
	}
	if r, _ := l.AllowN(ctx, "k", lim, 5); r.Allowed {
		t.Fatal("cost 5 with 2 left admitted")
	}
	calls := cnt.scriptCalls()
	// the same cost is denied locally, by Allow and Check alike
	if r, _ := l.AllowN(ctx, "k", lim, 5); r.Allowed || r.Source != SourceDenyCache || cnt.scriptCalls() != calls {
		t.Fatalf("cost 5 after a denied 5: %v, %d calls, want a local denial", r, cnt.scriptCalls()-calls)
	}
	if r, _ := l.Decide(ctx, Request{Kind: KindCheck, Key: "k", Limits: []Limit{lim}, N: 5}); r.Allowed || r.Source != SourceDenyCache || cnt.scriptCalls() != calls {
		t.Fatalf("check of cost 5 after a denied 5: %v, want a local denial", r)
	}
	// a larger cost waits longer, which only Redis can tell; a smaller
	// one may fit
	if r, _ := l.AllowN(ctx, "k", lim, 7); r.Allowed || r.Source != SourceRedis || cnt.scriptCalls() != calls+1 {
		t.Fatalf("cost 7 after a denied 5: %v, %d calls, want Redis's denial", r, cnt.scriptCalls()-calls)
	}
	if r, _ := l.AllowN(ctx, "k", lim, 2); !r.Allowed || cnt.scriptCalls() != calls+2 {
		t.Fatalf("cost 2 after a denied 5: %v, %d calls, want Redis to admit it", r, cnt.scriptCalls()-calls)
	}
	// other limits for the same key, or another key, are not covered
	calls = cnt.scriptCalls()
	_, _ = l.AllowN(ctx, "k", PerMinute(20), 5)
	_, _ = l.Decide(ctx, Request{Key: "k", Limits: []Limit{lim, PerHour(100)}, N: 5})
	_, _ = l.AllowN(ctx, "other", lim, 5)
	if got := cnt.scriptCalls() - calls; got != 3 {
		t.Fatalf("other limits or keys: %d script calls, want 3", got)
	}
}

func TestDenyCacheNeverAndReset(t *testing.T) {
	ctx := context.Background()
	_, cnt, l := denyLimiter(t, 100, WithKeyPrefix("p:"))
	lim := PerHour(1)
	_, _ = l.Allow(ctx, "warm", lim) // loads the script (NOSCRIPT, then EVAL)
	calls := cnt.scriptCalls()
	// a cost above capacity is never admitted: not cached, every call asks
	for i := 0; i < 3; i++ {
		if r, _ := l.AllowN(ctx, "k", lim, 2); !r.Never() {
			t.Fatalf("cost 2 of 1: %v, want Never", r)
		}
	}
	if got := cnt.scriptCalls() - calls; got != 3 {
		t.Fatalf("Never denials: %d script calls, want 3 (not cached)", got)
	}
	_, _ = l.Allow(ctx, "k", lim)
	if r, _ := l.Allow(ctx, "k", lim); r.Allowed {
		t.Fatal("second unit of 1/h admitted")
	}
	if n := l.deny.len(); n != 1 {
		t.Fatalf("cache holds %d entries, want 1", n)
	}
	if err := l.Reset(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if n := l.deny.len(); n != 0 {
		t.Fatalf("after Reset the cache holds %d entries, want 0", n)
	}
	if r, err := l.Allow(ctx, "k", lim); err != nil || !r.Allowed {
		t.Fatalf("after Reset: %v %v, want allowed", r, err)
	}
}

func TestDenyCacheBounded(t *testing.T) {
	ctx := context.Background()
	f, _, l := denyLimiter(t, 3)
	lim := PerHour(1)
	for i := 0; i < 10; i++ {
		key := string(rune('a' + i))
		_, _ = l.Allow(ctx, key, lim)
		if r, _ := l.Allow(ctx, key, lim); r.Allowed {
			t.Fatalf("%s: second unit admitted", key)
		}
	}
	c := l.deny
	if c.len() != 3 || len(c.items) != 3 {
		t.Fatalf("cache holds %d entries (%d in the map), want 3", c.len(), len(c.items))
	}
	// the most recent keys stay
	for _, key := range []string{"h", "i", "j"} {
		if _, ok := c.lookup(key, false, 1, []Limit{lim}, c.now()); !ok {
			t.Errorf("key %s was evicted, want the 3 most recent kept", key)
		}
	}
	if _, ok := c.lookup("a", false, 1, []Limit{lim}, c.now()); ok {
		t.Error("key a is still cached beyond the size")
	}
	// off: a size below 1, or no client
	if testLimiter(f.rdb, WithDenyCache(0)).deny != nil || testLimiter(f.rdb, WithDenyCache(5), WithDenyCache(0)).deny != nil {
		t.Error("WithDenyCache(0) left a cache")
	}
	if _, err := testLimiter(nil, WithDenyCache(10)).Allow(ctx, "k", lim); err != ErrNoClient {
		t.Errorf("nil client with a deny cache: %v, want ErrNoClient", err)
	}
}

// TestDenyCacheNeverDeniesWhatRedisAdmits drives random costs and waits and,
// each time the cache answers, asks Redis (a check, recording nothing)
// whether it would have denied too.
func TestDenyCacheNeverDeniesWhatRedisAdmits(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(5, 7))
	for a := GCRA; a < numAlgorithms; a++ {
		t.Run(a.String(), func(t *testing.T) {
			f := newFakeRedis(t)
			plain := testLimiter(f.rdb)
			l := testLimiterOn(newRedisClock(f), f.rdb, WithDenyCache(16))
			lim := Per(5, 10*time.Second).WithAlgorithm(a)
			local := 0
			for i := 0; i < 120; i++ {
				n := int64(rng.IntN(3)) + 1
				c := l.deny
				_, cached := c.lookup("k", false, n, []Limit{lim}, c.now())
				r, err := l.AllowN(ctx, "k", lim, n)
				if err != nil {
					t.Fatal(err)
				}
				if cached {
					local++
					if r.Allowed {
						t.Fatalf("step %d: a cached denial admitted", i)
					}
					truth, err := plain.Decide(ctx, Request{Kind: KindCheck, Key: "k", Limits: []Limit{lim}, N: n})
					if err != nil {
						t.Fatal(err)
					}
					if truth.Allowed {
						t.Fatalf("step %d: cost %v denied locally (retry %v) but Redis admits it", i, n, r.RetryAfter)
					}
					if r.RetryAfter > truth.RetryAfter+time.Millisecond {
						t.Fatalf("step %d: local RetryAfter %v, longer than Redis's %v", i, r.RetryAfter, truth.RetryAfter)
					}
					if r.RetryAfter < truth.RetryAfter-time.Millisecond {
						t.Fatalf("step %d: cost %d: local RetryAfter %v, shorter than Redis's %v", i, n, r.RetryAfter, truth.RetryAfter)
					}
				}
				f.advance(time.Duration(rng.IntN(1500)) * time.Millisecond)
			}
			if local == 0 {
				t.Fatal("the cache never answered: the test proves nothing")
			}
		})
	}
}

// After a cost-1 denial, a cost-2 request was answered from the cache with
// the cost-1 wait (30 s where Redis says 1 m for 2 per minute): a client
// that honoured it came back too early. A cached answer is now given only
// for the cost that was denied, and every answer's wait is Redis's.
func TestDenyCacheLargerCostGetsRedisWait(t *testing.T) {
	ctx := context.Background()
	for a := GCRA; a < numAlgorithms; a++ {
		t.Run(a.String(), func(t *testing.T) {
			f, cnt, l := denyLimiter(t, 100)
			plain := testLimiter(f.rdb)
			lim := PerMinute(2).WithAlgorithm(a)
			for i := range 3 {
				if _, err := l.Allow(ctx, "k", lim); err != nil {
					t.Fatalf("call %d: %v", i, err)
				}
			}
			f.advance(10 * time.Second)
			for _, n := range []int64{2, 1, 2, 1} {
				before := cnt.scriptCalls()
				got, err := l.AllowN(ctx, "k", lim, n)
				if err != nil {
					t.Fatal(err)
				}
				fromRedis := cnt.scriptCalls() > before
				truth, err := plain.Decide(ctx, Request{Kind: KindCheck, Key: "k", Limits: []Limit{lim}, N: n})
				if err != nil {
					t.Fatal(err)
				}
				if got.Allowed || truth.Allowed || got.RetryAfter != truth.RetryAfter {
					t.Fatalf("cost %d (from Redis: %v): %+v; Redis says %+v", n, fromRedis, got, truth)
				}
				f.advance(time.Second)
			}
		})
	}
}

// Units taken on a key after a denial make that denial's wait short: the
// key's cached denials go when this Limiter takes units there, and a
// denial sent before such an admission came back is not stored.
func TestDenyCacheForgetsDenialsOnAdmission(t *testing.T) {
	ctx := context.Background()
	for a := GCRA; a < numAlgorithms; a++ {
		t.Run(a.String(), func(t *testing.T) {
			f, cnt, l := denyLimiter(t, 100)
			plain := testLimiter(f.rdb)
			lim := Per(4, 4*time.Second).WithAlgorithm(a)
			if _, err := l.AllowN(ctx, "k", lim, 3); err != nil {
				t.Fatal(err)
			}
			if r, err := l.AllowN(ctx, "k", lim, 2); err != nil || r.Allowed {
				t.Fatalf("cost 2 with 1 left: %+v %v, want denied", r, err)
			}
			if r, err := l.Allow(ctx, "k", lim); err != nil || !r.Allowed {
				t.Fatalf("cost 1 with 1 left: %+v %v, want admitted", r, err)
			}
			before := cnt.scriptCalls()
			got, err := l.AllowN(ctx, "k", lim, 2)
			if err != nil {
				t.Fatal(err)
			}
			truth, err := plain.Decide(ctx, Request{Kind: KindCheck, Key: "k", Limits: []Limit{lim}, N: 2})
			if err != nil {
				t.Fatal(err)
			}
			if got.Allowed || got.RetryAfter != truth.RetryAfter || cnt.scriptCalls() == before {
				t.Fatalf("cost 2 after a unit was taken: %+v; Redis says %+v: want Redis's answer", got, truth)
			}

			// In flight: a denial sent before an admission came back.
			denied := got
			inFlight := &op{kind: KindAllow, key: "k", cost: 3, res: denied, limits: [maxLimits]Limit{lim}, nlimits: 1}
			inFlight.sent, inFlight.resets = l.sentAt()
			f.advance(time.Millisecond)
			took := &op{kind: KindAllow, key: "k", cost: 1, res: Result{Allowed: true}, limits: [maxLimits]Limit{lim}, nlimits: 1}
			took.sent, took.resets = l.sentAt()
			l.denyStore(took)
			l.denyStore(inFlight)
			if _, hit := l.deny.lookup("k", false, 3, []Limit{lim}, l.deny.now()); hit {
				t.Fatal("a denial sent before an admission came back was stored")
			}
			// A check takes nothing: denials stay.
			later := &op{kind: KindAllow, key: "k", cost: 3, res: denied, limits: [maxLimits]Limit{lim}, nlimits: 1}
			later.sent, later.resets = l.sentAt()
			l.denyStore(later)
			check := &op{kind: KindCheck, key: "k", cost: 1, res: Result{Allowed: true}, limits: [maxLimits]Limit{lim}, nlimits: 1}
			check.sent, check.resets = l.sentAt()
			f.advance(time.Millisecond)
			l.denyStore(check)
			if _, hit := l.deny.lookup("k", false, 3, []Limit{lim}, l.deny.now()); !hit {
				t.Fatal("an admitted check dropped the key's denials")
			}
		})
	}
}

func TestDenyCacheConcurrent(t *testing.T) {
	ctx := context.Background()
	f := newFakeRedis(t)
	l := testLimiter(f.rdb, WithDenyCache(8))
	lim := PerHour(3)
	var allowed atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				key := []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"}[i%10]
				r, err := l.Allow(ctx, key, lim)
				if err != nil {
					t.Error(err)
					return
				}
				if r.Allowed {
					allowed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if got := allowed.Load(); got != 30 {
		t.Fatalf("admitted %d, want exactly 3 per key for 10 keys", got)
	}
}

// TestDenyCacheForwardsErrors: what the cache does not hold goes to Redis,
// errors included: a foreign key error comes back as without the cache.
func TestDenyCacheForwardsErrors(t *testing.T) {
	ctx := context.Background()
	f := newFakeRedis(t)
	f.rdb.Set(ctx, "user", "order 42", 0)
	l := testLimiter(f.rdb, WithDenyCache(8))
	_, err := l.Allow(ctx, "user", PerSecond(1))
	if err == nil || !strings.Contains(err.Error(), "left untouched") {
		t.Fatalf("foreign key: %v", err)
	}
	if got := f.rdb.Get(ctx, "user").Val(); got != "order 42" {
		t.Fatalf("user's value became %q", got)
	}
}

// TestDenyCacheNeverAnswersPeek: a Peek takes nothing, so no denial covers
// it: it always reads Redis's state.
func TestDenyCacheNeverAnswersPeek(t *testing.T) {
	ctx := context.Background()
	_, cnt, l := denyLimiter(t, 10)
	lim := PerHour(1)
	_, _ = l.Allow(ctx, "k", lim)
	if r, _ := l.Allow(ctx, "k", lim); r.Allowed || r.Source != SourceRedis {
		t.Fatalf("%+v", r)
	}
	before := cnt.scriptCalls()
	r, err := l.Decide(ctx, Request{Kind: KindPeek, Key: "k", Limits: []Limit{lim}})
	if err != nil || !r.Allowed || r.Source != SourceRedis || cnt.scriptCalls() != before+1 {
		t.Fatalf("Peek: %+v %v, %d script calls; want Redis's state", r, err, cnt.scriptCalls()-before)
	}
}

// A denial that a replica may have served (a check with WithReadOnlyCheck)
// is not cached: a replica lags this Limiter's own Resets, and a cached
// denial would outlive the lag. So for every kind of check: Check,
// KindCheck with Keys, and the checks of DecideBatch, alone or pipelined. A denial
// from the primary (Allow) still is, and answers checks too.
func TestDenyCacheKeepsNoReplicaDenial(t *testing.T) {
	ctx := context.Background()
	f, _, fs := functionsRedis(t) // Redis 7 with the library: checks go by FCALL_RO (miniredis's EVALSHA_RO refuses TIME)
	l := testLimiterOn(newRedisClock(f), f.rdb, WithDenyCache(10), WithReadOnlyCheck())
	lim := PerHour(1)
	if r, err := l.Allow(ctx, "k", lim); err != nil || !r.Allowed {
		t.Fatalf("first Allow: %+v %v", r, err)
	}
	keys := []KeyLimit{{Key: "k", Limit: lim}, {Key: "k:org", Limit: PerHour(100)}}
	checks := []struct {
		name  string
		sends int64 // script calls per check
		call  func() (Result, error)
	}{
		{"Check", 1, func() (Result, error) { return l.Decide(ctx, Request{Kind: KindCheck, Key: "k", Limits: []Limit{lim}}) }},
		{"Decide/Check/Keys", 1, func() (Result, error) { return l.Decide(ctx, Request{Kind: KindCheck, Keys: keys}) }},
		{"DecideBatch/Check", 1, func() (Result, error) {
			return batchOne(ctx, l, Request{Key: "k", Limits: []Limit{lim}, Kind: KindCheck})
		}},
		{"DecideBatch/Keys/Check", 1, func() (Result, error) { return batchOne(ctx, l, Request{Keys: keys, Kind: KindCheck}) }},
		{"DecideBatch/two", 2, func() (Result, error) { // pipelined
			res, err := l.DecideBatch(ctx, []Request{{Key: "k", Limits: []Limit{lim}, Kind: KindCheck}, {Keys: keys, Kind: KindCheck}})
			if err == nil && res[0].Source != res[1].Source {
				return Result{}, fmt.Errorf("the two requests answered apart: %+v", res)
			}
			return res[1], err
		}},
	}
	for _, c := range checks {
		for i := range 2 {
			before := fs.calls.Load()
			r, err := c.call()
			if err != nil || r.Allowed || r.Source != SourceRedis || fs.calls.Load() != before+c.sends || !strings.HasPrefix(fs.last.Load().(string), "FCALL_RO ") {
				t.Fatalf("%s %d: %+v %v by %v, %d calls; want a denial from Redis by FCALL_RO", c.name, i, r, err, fs.last.Load(), fs.calls.Load()-before)
			}
		}
	}
	if n := l.deny.len(); n != 0 {
		t.Fatalf("the cache holds %d entries after the checks, want none", n)
	}
	if r, err := l.Allow(ctx, "k", lim); err != nil || r.Allowed || r.Source != SourceRedis {
		t.Fatalf("Allow: %+v %v, want a denial from Redis", r, err)
	}
	before := fs.calls.Load()
	if r, err := l.Decide(ctx, Request{Kind: KindCheck, Key: "k", Limits: []Limit{lim}}); err != nil || r.Allowed || r.Source != SourceDenyCache || fs.calls.Load() != before {
		t.Fatalf("Check after Allow's denial: %+v %v, %d calls; want the cached denial", r, err, fs.calls.Load()-before)
	}
}

// A cost above the capacity is answered by Redis ("never"), even while a
// denial of a smaller cost is cached for the key: the cached wait would be a
// lie, and Wait would sleep on it before reporting ErrExceedsCapacity.
func TestDenyCacheNeverAfterCachedDenial(t *testing.T) {
	ctx := context.Background()
	_, cnt, l := denyLimiter(t, 100)
	lim := PerMinute(10)
	if r, _ := l.AllowN(ctx, "k", lim, 10); !r.Allowed {
		t.Fatal("cost 10 of 10 denied")
	}
	if r, _ := l.Allow(ctx, "k", lim); r.Allowed || r.Never() {
		t.Fatalf("11th unit: %v, want a denial with a wait", r)
	}
	if n := l.deny.len(); n != 1 {
		t.Fatalf("cache holds %d entries, want the denial", n)
	}
	calls := cnt.scriptCalls()
	r, err := l.AllowN(ctx, "k", lim, 20)
	if err != nil || !r.Never() || r.Source != SourceRedis {
		t.Fatalf("cost 20 of capacity 10: %+v %v, want Never from Redis", r, err)
	}
	if got := cnt.scriptCalls() - calls; got != 1 {
		t.Fatalf("cost 20: %d script calls, want 1", got)
	}
	// At once: a wait on the cached denial would run into this deadline
	// (the cache's clock stands still) and fail with DeadlineExceeded.
	wctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_, err = l.WaitN(wctx, "k", lim, 20)
	if !errors.Is(err, ErrExceedsCapacity) {
		t.Fatalf("WaitN of 20: %v, want ErrExceedsCapacity at once", err)
	}
}

// A denial sent before a Reset and settled after it is not stored: Redis
// has forgotten it. The call takes its stamp (sentAt) before the Reset, as
// a call in flight does.
func TestDenyCacheDropsDenialSentBeforeReset(t *testing.T) {
	ctx := context.Background()
	_, _, l := denyLimiter(t, 100)
	lim := PerMinute(1)
	_, _ = l.Allow(ctx, "k", lim)
	denied, err := l.Allow(ctx, "k", lim)
	if err != nil || denied.Allowed {
		t.Fatalf("second unit of 1/m: %v %v, want denied", denied, err)
	}
	inFlight := &op{kind: KindAllow, key: "k", cost: 1, res: denied, limits: [maxLimits]Limit{lim}, nlimits: 1}
	inFlight.sent, inFlight.resets = l.sentAt()
	if err := l.Reset(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	l.denyStore(inFlight)
	if n := l.deny.len(); n != 0 {
		t.Fatalf("a denial sent before the Reset was stored (%d entries)", n)
	}
	if r, err := l.Allow(ctx, "k", lim); err != nil || !r.Allowed || r.Source != SourceRedis {
		t.Fatalf("after Reset: %+v %v, want admitted by Redis", r, err)
	}
	// One sent after the Reset is stored as usual.
	after := &op{kind: KindAllow, key: "k", cost: 1, res: denied, limits: [maxLimits]Limit{lim}, nlimits: 1}
	after.sent, after.resets = l.sentAt()
	l.denyStore(after)
	if n := l.deny.len(); n != 1 {
		t.Fatalf("a denial sent after the Reset was not stored (%d entries)", n)
	}
}

// onReset is a go-redis hook that runs do just before the reset script
// goes to Redis: to act while a Reset is on its way.
type onReset struct{ do func() }

func (h onReset) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h onReset) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return hooktest.AsCommand(h.ProcessHook, next)
}
func (h onReset) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if a := cmd.Args(); len(a) > 1 && (a[1] == scripts.ResetSHA1 || a[1] == scripts.ResetSource) {
			h.do()
		}
		return next(ctx, cmd)
	}
}

// Denials Redis gives while a Reset is on its way are dropped once the
// Reset succeeds: they are older than it.
func TestDenyCacheForgetsDenialsDuringReset(t *testing.T) {
	ctx := context.Background()
	f, _, l := denyLimiter(t, 100)
	l.pipes = nil // the Allow made inside the Reset's send goes while it is on its way, not after it
	lim := PerMinute(1)
	_, _ = l.Allow(ctx, "k", lim)
	f.rdb.AddHook(onReset{do: func() {
		if r, err := l.Allow(ctx, "k", lim); err != nil || r.Allowed {
			t.Errorf("during the Reset: %+v %v, want denied", r, err)
		}
	}})
	if err := l.Reset(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if n := l.deny.len(); n != 0 {
		t.Fatalf("a denial given while the Reset was on its way is cached (%d entries)", n)
	}
	if r, err := l.Allow(ctx, "k", lim); err != nil || !r.Allowed || r.Source != SourceRedis {
		t.Fatalf("after Reset: %+v %v, want admitted by Redis", r, err)
	}
}

// TestDenyIdentityCollision: a cached denial of a call of several keys is
// never the answer to a one-key call whose key a client chose to spell
// like that call's identity.
func TestDenyIdentityCollision(t *testing.T) {
	ctx := context.Background()
	_, _, l := denyLimiter(t, 100)
	lim := PerHour(1)
	keys := []KeyLimit{{Key: "a", Limit: lim}, {Key: "b", Limit: lim}}
	_, _ = l.Decide(ctx, Request{Keys: keys})
	_, _ = l.Decide(ctx, Request{Keys: keys}) // denied, cached
	if r, err := l.Decide(ctx, Request{Key: "1:a1:b", Limits: []Limit{lim, lim}}); err != nil || !r.Allowed || r.Source != SourceRedis {
		t.Fatalf("%+v %v: a fresh key must be Redis's admission", r, err)
	}
}
