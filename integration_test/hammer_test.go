package integration

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redisrate/redisrate"
	"github.com/redisrate/redisrate/integration_test/internal/redistest"
)

const (
	hammerWorkers = 64
	hammerCalls   = 40 // per worker
	hammerRate    = 20
	hammerPeriod  = 50 * time.Millisecond
	hammerBurst   = 40 // buckets; windows take hammerRate
)

// maxReset is the longest reset_after any reply may carry.
func maxReset(l redisrate.Limit) time.Duration {
	switch l.Algorithm {
	case redisrate.GCRA, redisrate.LeakyBucket:
		// capacity / rate periods, rounded up to the millisecond.
		return time.Duration(l.Capacity())*l.Period/time.Duration(l.Rate) + time.Millisecond
	case redisrate.TokenBucket:
		refills := (l.Capacity() + l.Rate - 1) / l.Rate
		return time.Duration(refills) * l.Period
	case redisrate.SlidingWindow:
		return 2 * l.Period
	default:
		return l.Period
	}
}

// TestHammer sends hammerWorkers goroutines at one key for every algorithm,
// hammerCalls calls each, as fast as they go. Whatever the interleaving:
// no call fails, every reply is consistent on its own, at least the burst
// is admitted, and no more than guarantee 4 of the contract allows for the
// span the calls took, measured with the server's own clock.
func TestHammer(t *testing.T) {
	r := openRedis(t)
	// One connection per worker, so the calls really do meet at the server.
	opts := *r.Client.Options()
	opts.PoolSize = hammerWorkers
	rdb := redis.NewClient(&opts)
	t.Cleanup(func() { _ = rdb.Close() })
	// Unpaced, the calls contend as hard as they can; paced (2 ms between
	// a worker's calls) they span several periods, so refills are shared out
	// under concurrency too. Without coalescing every call is its own
	// script call, so that they meet at the server; with it (the default)
	// the calls in flight on one key go as one upto, held to the same bound.
	single := redisrate.WithCoalescing(false)
	hammer(t, r, rdb, redistest.NewLimiter(rdb, single), "", 0)
	hammer(t, r, rdb, redistest.NewLimiter(rdb, single), "paced/", 2*time.Millisecond)
	hammer(t, r, rdb, redistest.NewLimiter(rdb), "coalesced/", 0)
}

// TestHammerDenyCache is TestHammer through WithDenyCache, which answers
// repeated denials in process: the bound must hold the same, and a denial
// answered from the cache must be as consistent as one from Redis (its
// RetryAfter and ResetAfter only ever shrink from what Redis said). The
// calls are paced so that they span a few periods despite the cache.
func TestHammerDenyCache(t *testing.T) {
	r := openRedis(t)
	opts := *r.Client.Options()
	opts.PoolSize = hammerWorkers
	rdb := redis.NewClient(&opts)
	t.Cleanup(func() { _ = rdb.Close() })
	hammer(t, r, rdb, redistest.NewLimiter(rdb, redisrate.WithDenyCache(1024)), "", 2*time.Millisecond)
}

// TestHammerFunctions is TestHammer through FCALL of the Functions
// library: the bound holds the same when the library decides.
func TestHammerFunctions(t *testing.T) {
	r := openRedis(t)
	if !r.Own {
		t.Skip("loads the Functions library: needs a server of its own, not " + redistest.EnvAddr)
	}
	needRedis7(t, r.Client)
	loadLibrary(t, r.Client)
	opts := *r.Client.Options()
	opts.PoolSize = hammerWorkers
	rdb := redis.NewClient(&opts)
	t.Cleanup(func() { _ = rdb.Close() })
	before := redistest.ReadCommandStats(t, r.Client)
	hammer(t, r, rdb, redistest.NewLimiter(rdb, redisrate.WithCoalescing(false)), "fcall/", 0) // a script call per decision
	after := redistest.ReadCommandStats(t, r.Client)
	if n, want := after.Since(before, "fcall"), int64(len(redistest.Algorithms)*hammerWorkers*hammerCalls); n < want {
		t.Fatalf("%d FCALLs for %d decisions: the library did not decide", n, want)
	}
}

func hammer(t *testing.T, r *redistest.Redis, rdb *redis.Client, lim *redisrate.Limiter, name string, pace time.Duration) {
	for _, c := range shortLimits(hammerRate, hammerPeriod, hammerBurst) {
		t.Run(name+c.algo.String(), func(t *testing.T) {
			key := r.Key("hammer:" + name + c.algo.String())
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			// Warm the pool and the script cache, so the span measures the
			// decisions; a cost-0 call records nothing.
			var warm sync.WaitGroup
			for range hammerWorkers {
				warm.Go(func() {
					_, _ = lim.Decide(ctx, redisrate.Request{Kind: redisrate.KindPeek, Key: r.Key("warm"), Limits: []redisrate.Limit{c.limit}})
				})
			}
			warm.Wait()

			results := make([][]redisrate.Result, hammerWorkers)
			errs := make(chan error, hammerWorkers*hammerCalls)
			start := make(chan struct{})
			var wg sync.WaitGroup
			for w := range hammerWorkers {
				wg.Go(func() {
					out := make([]redisrate.Result, 0, hammerCalls)
					<-start
					for range hammerCalls {
						if pace > 0 {
							time.Sleep(pace)
						}
						res, err := lim.Allow(ctx, key, c.limit)
						if err != nil {
							errs <- err
							continue
						}
						out = append(out, res)
					}
					results[w] = out
				})
			}
			t0 := serverTime(t, rdb)
			close(start)
			wg.Wait()
			t1 := serverTime(t, rdb)
			close(errs)

			nerr := 0
			for err := range errs {
				if nerr < 5 {
					t.Errorf("call failed: %v", err)
				}
				nerr++
			}
			if nerr > 0 {
				t.Fatalf("%d of %d calls failed", nerr, hammerWorkers*hammerCalls)
			}

			cap := c.limit.Capacity()
			admitted, denied := 0, 0
			byRemaining := make([]int, cap) // fixed_window: admissions per remaining value
			bad := 0
			for _, rs := range results {
				for _, res := range rs {
					if !consistent(c.limit, res) {
						if bad++; bad <= 5 {
							t.Errorf("inconsistent reply for one unit under %v: allowed=%v remaining=%d retry=%v reset=%v capacity=%d", c.limit, res.Allowed, res.Remaining, res.RetryAfter, res.ResetAfter, res.Capacity)
						}
					}
					if res.Allowed {
						admitted++
						if res.Remaining >= 0 && res.Remaining < cap {
							byRemaining[res.Remaining]++
						}
					} else {
						denied++
					}
				}
			}
			if bad > 5 {
				t.Errorf("%d inconsistent replies in all", bad)
			}
			span := t1 - t0
			max := redistest.Bound(c.limit, time.Duration(span)*time.Microsecond)
			t.Logf("FIGURE hammer %s: %v, %d workers x %d calls in %.1f ms: %d admitted (bound %.1f, burst %d), %d denied, 0 failed",
				t.Name(), c.limit, hammerWorkers, hammerCalls, float64(span)/1000, admitted, max, cap, denied)
			if float64(admitted) > max {
				t.Errorf("admitted %d units in %d µs: guarantee 4 allows at most %.2f", admitted, span, max)
			}
			if int64(admitted) < cap {
				t.Errorf("admitted %d units of a fresh key: fewer than the burst %d", admitted, cap)
			}
			if denied == 0 {
				t.Errorf("nothing was denied: the load did not exceed the limit, so the bound was not tested")
			}
			if c.algo == redisrate.FixedWindow {
				checkWindows(t, byRemaining, span, c.limit)
			}
			if c.algo == redisrate.SlidingLog {
				// One member per admitted unit in the last period, plus the marker.
				n, err := rdb.ZCard(ctx, key).Result()
				if err != nil {
					t.Fatal(err)
				}
				if n > cap+1 {
					t.Errorf("the log holds %d members: more than limit %d + its marker", n, cap)
				}
			}
		})
	}
}

// consistent checks one reply on its own: a denied unit waits at most
// the longest reset, and nothing takes longer than maxReset to reset.
func consistent(l redisrate.Limit, res redisrate.Result) bool {
	cap := l.Capacity()
	ok := res.Capacity == cap && res.Binding == 0 && res.Remaining >= 0 &&
		res.ResetAfter >= 0 && res.ResetAfter <= maxReset(l)
	if res.Allowed {
		return ok && res.RetryAfter == 0 && res.Remaining < cap && res.ResetAfter > 0
	}
	return ok && res.RetryAfter > 0 && res.RetryAfter <= maxReset(l) && res.Remaining == 0
}

// checkWindows shows "at most limit per window" for fixed_window from the
// replies alone: within a window, admissions are serialised, so the k-th
// one leaves limit-k remaining. Each window thus adds one admission to
// remaining limit-1, limit-2, ... down to its last, and the number of
// windows is the number of admissions with remaining limit-1. A window opens
// at least a period after the previous one, so a span of t ms meets at most
// 1 + floor(t / period) of them.
func checkWindows(t *testing.T, byRemaining []int, spanUs int64, l redisrate.Limit) {
	t.Helper()
	cap := len(byRemaining)
	windows := byRemaining[cap-1]
	for k := cap - 1; k > 0; k-- {
		if byRemaining[k-1] > byRemaining[k] {
			t.Errorf("%d admissions left %d remaining but only %d left %d: some window admitted more than its count allows",
				byRemaining[k-1], k-1, byRemaining[k], k)
		}
	}
	if most := 1 + spanUs/l.Period.Microseconds(); int64(windows) > most {
		t.Errorf("%d windows opened in %d µs: at most %d can", windows, spanUs, most)
	}
	t.Logf("fixed_window: %d windows, admissions per remaining value %v", windows, byRemaining)
}
