package hardening

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redisrate/redisrate"
	"github.com/redisrate/redisrate/integration_test/internal/redistest"
)

// Clocks that disagree: a replica whose clock is 2 s behind (then 2 s
// ahead of) its primary's is promoted (FAILOVER) while every algorithm's
// hot key is under load. No algorithm admits more than contract guarantee
// 4 allows across the switch (guarantee 9 for the clock that steps back;
// for the clock that jumps ahead, the scripts' clock spans 2 s more than
// the real one, and the bound is taken over that span), and waits stay
// honest: a key exhausted before the switch, asked after it, is admitted
// when its RetryAfter has passed.
func TestClocksThatDisagree(t *testing.T) {
	redistest.NeedLocal(t, "a shifted clock and replication")
	t.Logf("clock shift by %s", redistest.ClockMethod())
	for _, shift := range []time.Duration{-2 * time.Second, 2 * time.Second} {
		t.Run(map[bool]string{true: "replica 2s behind", false: "replica 2s ahead"}[shift < 0], func(t *testing.T) {
			t.Parallel()
			clockFailover(t, shift)
		})
	}
}

func clockFailover(t *testing.T, shift time.Duration) {
	ctx := context.Background()
	primary := redistest.StartServer(t, redistest.Options{Config: []string{"repl-diskless-sync-delay 0"}})
	replica := redistest.StartServer(t, redistest.Options{ClockShift: shift,
		Args: []string{"--replicaof", "127.0.0.1", strconv.Itoa(primary.Port)}})
	padmin := primary.Client(&redis.Options{MaxRetries: -1})
	radmin := replica.Client(&redis.Options{MaxRetries: -1})
	redistest.WaitFor(t, 15*time.Second, "replica online", func() bool {
		info, _ := padmin.Info(ctx, "replication").Result()
		return strings.Contains(info, "state=online")
	})
	pOff, _ := redistest.ClockOffset(ctx, padmin)
	rOff, _ := redistest.ClockOffset(ctx, radmin)
	redistest.Report(t, "clocks "+shift.String(), "primary's TIME off by %v, replica's by %v", pOff.Round(time.Millisecond), rOff.Round(time.Millisecond))

	opts := &redis.Options{ContextTimeoutEnabled: true, MaxRetries: -1}
	lp := redistest.NewLimiter(primary.Client(opts), redisrate.WithKeyPrefix("rate:"), redisrate.WithCircuitBreaker(0))
	lr := redistest.NewLimiter(replica.Client(opts), redisrate.WithKeyPrefix("rate:"), redisrate.WithCircuitBreaker(0))
	var current atomic.Pointer[redisrate.Limiter]
	current.Store(lp)

	var keys []*hot
	waitLim := map[redisrate.Algorithm]redisrate.Limit{}
	for _, algo := range redistest.Algorithms {
		lim := redisrate.PerSecond(20).WithAlgorithm(algo)
		if algo == redisrate.GCRA || algo == redisrate.TokenBucket || algo == redisrate.LeakyBucket {
			lim = lim.WithBurst(40)
		}
		keys = append(keys, &hot{key: "hot:" + algo.String(), lim: lim})
		// A key exhausted on the primary just before the failover, to be
		// asked on the new primary: one unit per 5 s, so that it is still
		// denied there when the new primary's clock is 2 s ahead and the
		// failover took a second.
		waitLim[algo] = redisrate.Per(1, 5*time.Second).WithAlgorithm(algo)
	}
	stop := hammer(keys, 2, 500*time.Microsecond, func(ctx context.Context, h *hot) (redisrate.Result, error) {
		return current.Load().Allow(ctx, h.key, h.lim)
	})
	defer stop()
	time.Sleep(redistest.LoadFor(t, 500*time.Millisecond)) // a whole soak phase under -soak
	for _, algo := range redistest.Algorithms {
		if _, err := lp.Allow(ctx, "wait:"+algo.String(), waitLim[algo]); err != nil {
			t.Fatal(err)
		}
	}
	spent := time.Now()

	// Promote the replica: FAILOVER pauses writes on the primary until the
	// replica has everything, then swaps their roles.
	if err := padmin.Do(ctx, "FAILOVER", "TIMEOUT", 5000).Err(); err != nil {
		t.Fatal(err)
	}
	switched := time.Now()
	redistest.WaitFor(t, 10*time.Second, "replica promoted", func() bool {
		info, _ := radmin.Info(ctx, "replication").Result()
		return strings.Contains(info, "role:master")
	})
	current.Store(lr)
	redistest.Report(t, "clocks "+shift.String()+" failover", "the replica took over %v after FAILOVER", time.Since(switched).Round(time.Millisecond))

	// Honest waits across the switch, every algorithm at once.
	var wg sync.WaitGroup
	for _, algo := range redistest.Algorithms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key, lim := "wait:"+algo.String(), waitLim[algo]
			res, err := lr.Allow(ctx, key, lim)
			if err != nil {
				t.Errorf("%s after the switch: %v", algo, err)
				return
			}
			if res.Allowed {
				// Denial is certain only while the unit cannot be back on
				// the new primary's clock; a slow failover may outlast it.
				if time.Since(spent)+max(shift, 0) < lim.Period {
					t.Errorf("%s: admitted at once on the new primary (clock %v), before the unit it spent came back: %v", algo, shift, res)
				} else {
					t.Logf("%s: admitted on the new primary %v after the unit was spent (clock %v): the unit had come back", algo, time.Since(spent), shift)
				}
				return
			}
			time.Sleep(res.RetryAfter)
			res2, err := lr.Allow(ctx, key, lim)
			redistest.Report(t, "clocks "+shift.String()+" wait "+algo.String(), "denied with RetryAfter %v on the new primary; after it: %v", res.RetryAfter, res2)
			if err != nil || !res2.Allowed {
				t.Errorf("%s: RetryAfter %v after the switch was not honest: %v, %v", algo, res.RetryAfter, res2, err)
			}
		}()
	}
	wg.Wait()
	time.Sleep(redistest.LoadFor(t, time.Second))
	stop()
	extra := time.Duration(0)
	if shift > 0 {
		extra = shift
	}
	checkBounds(t, "clocks "+shift.String(), keys, extra, true)
	var failed int64
	for _, h := range keys {
		failed += h.Failed.Load()
	}
	redistest.Report(t, "clocks "+shift.String()+" failed", "%d calls failed during the switch (READONLY or paused writes; the test switches clients by hand)", failed)
}
