package integration_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redisrate/redisrate"
	"github.com/redisrate/redisrate/integration_test/internal/redistest"
)

// faultClient is a client as a service should configure one for a rate
// limiter: the caller's context deadline bounds every call
// (ContextTimeoutEnabled), and a refused connection fails at once.
func faultClient(t *testing.T, addr string) *redis.Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{
		Addr:                  addr,
		ContextTimeoutEnabled: true,
		ReadTimeout:           30 * time.Second, // only the context may end a wait early
		DialerRetries:         1,
	})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// callWithin makes one call with a deadline of d and fails the test if it
// takes much longer (it hung) or panics.
func callWithin(t *testing.T, d time.Duration, call func(ctx context.Context) (redisrate.Result, error)) (redisrate.Result, time.Duration, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	start := time.Now()
	res, err := call(ctx)
	took := time.Since(start)
	// Generous: the machine is shared; what matters is that the call did
	// not wait for the server (seconds) or forever.
	if took > d+time.Second {
		t.Fatalf("call with a %v deadline took %v", d, took)
	}
	return res, took, err
}

// Redis unreachable, slow (DEBUG SLEEP, CLIENT PAUSE) and restarting: each
// call returns a typed error within its deadline, and the failure policy
// decides what the caller gets; when Redis is back, Redis decides again.
func TestReliabilityFaults(t *testing.T) {
	redistest.NeedLocal(t, "pauses, stops and restarts its server")
	srv := redistest.StartServer(t, redistest.Options{Config: []string{"enable-debug-command yes"}})
	fbSrv := redistest.StartServer(t, redistest.Options{})
	rdb := faultClient(t, srv.Addr)
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = admin.Close() })
	ctx := context.Background()
	limit := redisrate.PerMinute(5)

	plain := redisrate.NewLimiter(rdb)
	closed := redisrate.NewLimiter(rdb, redisrate.WithFailurePolicy(redisrate.FailClosed))
	open := redisrate.NewLimiter(rdb, redisrate.WithFailurePolicy(redisrate.FailOpen))
	fallback := redisrate.NewLimiter(rdb, redisrate.WithFallback(redisrate.NewLimiter(faultClient(t, fbSrv.Addr))))

	// expect checks each limiter's answer to a failed call.
	expect := func(phase string) {
		t.Helper()
		_, took, err := callWithin(t, 300*time.Millisecond, func(ctx context.Context) (redisrate.Result, error) { return plain.Allow(ctx, "k", limit) })
		var e *redisrate.Error
		if !errors.Is(err, redisrate.ErrUnavailable) || !errors.As(err, &e) {
			t.Fatalf("%s: err = %v, want a *redisrate.Error matching ErrUnavailable", phase, err)
		}
		t.Logf("%s: error after %v: %v", phase, took.Round(time.Millisecond), err)
		for _, tc := range []struct {
			l       *redisrate.Limiter
			source  redisrate.Source
			allowed bool
		}{{closed, redisrate.SourceFailClosed, false}, {open, redisrate.SourceFailOpen, true}, {fallback, redisrate.SourceFallback, true}} {
			// A deadline that leaves the fallback more than the 100 ms
			// after the primary's decision timeout that a busy machine,
			// under -race, could overrun ("deadline exceeded before Redis
			// decided"); each policy still answers at that timeout.
			res, _, err := callWithin(t, time.Second, func(ctx context.Context) (redisrate.Result, error) { return tc.l.Allow(ctx, "k", limit) })
			if err != nil || res.Source != tc.source || res.Allowed != tc.allowed || !errors.Is(res.Cause, redisrate.ErrUnavailable) {
				t.Fatalf("%s: %v gave %+v, %v", phase, tc.source, res, err)
			}
		}
	}
	// backToRedis waits until Redis decides again for every limiter: the
	// circuit breaker (on by default) answers at once after a failure and
	// closes when one of its probes, every 200 ms by default, gets an
	// answer. It reports how long that took from the moment Redis was back.
	var slowestBack time.Duration
	backToRedis := func(phase string) {
		t.Helper()
		back := time.Now()
		for _, l := range []*redisrate.Limiter{plain, closed, open, fallback} {
			for {
				cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
				res, err := l.Allow(cctx, "k", limit)
				cancel()
				if err == nil && res.Source == redisrate.SourceRedis && res.Cause == nil {
					break
				}
				if time.Since(back) > 5*time.Second {
					t.Fatalf("%s: %+v, %v 5s after Redis was back; want Redis to decide again", phase, res, err)
				}
				time.Sleep(5 * time.Millisecond)
			}
		}
		took := time.Since(back)
		slowestBack = max(slowestBack, took)
		t.Logf("%s: Redis decides again for all 4 limiters %v after it was back", phase, took.Round(time.Millisecond))
	}

	backToRedis("healthy")

	// blocked waits until the server stops answering: a PING unanswered
	// for 50 ms, then, to tell a server that sleeps or pauses from one a
	// busy machine merely delays (which let a phase's calls be answered),
	// another unanswered for 500 ms. The outages last 3 s.
	probe := faultClient(t, srv.Addr)
	unanswered := func(within time.Duration) bool {
		pctx, cancel := context.WithTimeout(ctx, within)
		defer cancel()
		return probe.Ping(pctx).Err() != nil
	}
	blocked := func() {
		t.Helper()
		redistest.WaitFor(t, 2*time.Second, "the server to stop answering", func() bool {
			return unanswered(50*time.Millisecond) && unanswered(500*time.Millisecond)
		})
	}

	// Slow: the server is busy for 3 s; calls give up at their deadline.
	sleeping := make(chan error, 1)
	go func() { sleeping <- admin.Do(ctx, "DEBUG", "SLEEP", "3").Err() }()
	blocked()
	expect("DEBUG SLEEP")
	if err := <-sleeping; err != nil {
		t.Fatal(err)
	}
	backToRedis("after DEBUG SLEEP")

	if err := admin.ClientPause(ctx, 3*time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	blocked()
	expect("CLIENT PAUSE")
	if err := admin.ClientUnpause(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	backToRedis("after CLIENT UNPAUSE")

	// Unreachable.
	srv.Stop()
	expect("stopped")
	// Restarting: calls during the restart fail cleanly, then succeed.
	srv.Restart()
	backToRedis("restarted")
	redistest.Report(t, "faults-recovery", "Redis decided again at most %v after it was back (DEBUG SLEEP, CLIENT PAUSE, restart; the breaker's default probe every 200ms)",
		slowestBack.Round(time.Millisecond))
}

// Calls racing a restart under load: every error is typed, no call hangs
// past the decision timeout, nothing panics, and decisions resume.
func TestReliabilityRestartUnderLoad(t *testing.T) {
	redistest.NeedLocal(t, "restarts its server")
	srv := redistest.StartServer(t, redistest.Options{})
	lim := redisrate.NewLimiter(faultClient(t, srv.Addr))
	var calls, failed, untyped atomic.Int64
	var slowest atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				// The Limiter's decision timeout (200 ms) ends a wait, not
				// the caller's deadline: a call that reaches its own
				// deadline returns the context's error, not ErrUnavailable.
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				start := time.Now()
				_, err := lim.Allow(ctx, fmt.Sprintf("w%d:%d", w, i%50), redisrate.PerSecond(100))
				took := time.Since(start)
				cancel()
				calls.Add(1)
				for {
					s := slowest.Load()
					if int64(took) <= s || slowest.CompareAndSwap(s, int64(took)) {
						break
					}
				}
				if err != nil {
					failed.Add(1)
					if !errors.Is(err, redisrate.ErrUnavailable) {
						untyped.Add(1)
						t.Errorf("untyped error: %v", err)
					}
					time.Sleep(5 * time.Millisecond)
				}
			}
		}()
	}
	for range 3 {
		time.Sleep(300 * time.Millisecond)
		srv.Restart()
	}
	time.Sleep(300 * time.Millisecond)
	close(stop)
	wg.Wait()
	redistest.Report(t, "restart-under-load", "3 restarts during %d calls: %d failed (all ErrUnavailable: %v), slowest call %v (decision timeout %v)",
		calls.Load(), failed.Load(), untyped.Load() == 0, time.Duration(slowest.Load()).Round(time.Millisecond), defaultDecisionTimeout)
	if time.Duration(slowest.Load()) > defaultDecisionTimeout+time.Second {
		t.Fatalf("a call took %v, with a decision timeout of %v", time.Duration(slowest.Load()), defaultDecisionTimeout)
	}
	// go-redis stops dialling a server that refused it for a while and
	// tries again in the background once a second: decisions resume then.
	back := time.Now()
	for {
		_, err := lim.Allow(context.Background(), "after", redisrate.PerSecond(100))
		if err == nil {
			break
		}
		if time.Since(back) > 10*time.Second {
			t.Fatalf("10s after the last restart: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	redistest.Report(t, "restart-resume", "decisions resumed %.2fs after the last restart was up", time.Since(back).Seconds())
}

// SCRIPT FLUSH every 100 ms during load: the client reloads the scripts
// and no error reaches a caller.
func TestReliabilityScriptFlush(t *testing.T) {
	srv := redistest.StartServer(t, redistest.Options{})
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = rdb.Close() })
	lim := redistest.NewLimiter(rdb)
	var i atomic.Int64
	l := redistest.StartLoad(4, 0, func(ctx context.Context) (redisrate.Result, error) {
		n := i.Add(1)
		algo := redistest.Algorithms[n%int64(len(redistest.Algorithms))]
		return lim.Allow(ctx, fmt.Sprintf("flush:%s:%d", algo, n%64), redisrate.PerSecond(50).WithAlgorithm(algo))
	}, nil)
	flushes := 0
	for end := time.Now().Add(redistest.LoadFor(t, 3*time.Second)); time.Now().Before(end); flushes++ {
		time.Sleep(100 * time.Millisecond)
		if err := rdb.ScriptFlush(context.Background()).Err(); err != nil {
			t.Fatal(err)
		}
	}
	l.Stop()
	decisions := l.Decisions()
	redistest.Report(t, "script-flush", "%d SCRIPT FLUSHes during %d decisions: %d errors", flushes, decisions, l.Failed.Load())
	if l.Failed.Load() != 0 {
		t.Fatalf("%d errors reached callers, e.g. %v", l.Failed.Load(), l.Errs())
	}
	if decisions < int64(flushes) {
		t.Fatalf("only %d decisions during %d flushes", decisions, flushes)
	}
}

// A key deleted, expired or flushed mid-run starts again from full; a
// killed connection costs at most the call in flight. Every decision
// afterwards is the one a fresh key gets.
func TestReliabilityStateLossAndKilledConnections(t *testing.T) {
	srv := redistest.StartServer(t, redistest.Options{})
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = rdb.Close() })
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = admin.Close() })
	lim := redistest.NewLimiter(rdb)
	ctx := context.Background()

	for _, algo := range redistest.Algorithms {
		limit := redisrate.PerHour(5).WithAlgorithm(algo)
		key := "loss:" + algo.String()
		// exhaust takes the 5 units, checking every decision.
		exhaust := func(phase string) {
			t.Helper()
			for i := range 6 {
				res, err := lim.Allow(ctx, key, limit)
				if err != nil {
					t.Fatalf("%s %s call %d: %v", algo, phase, i+1, err)
				}
				if res.Allowed != (i < 5) || (i < 5 && res.Remaining != int64(4-i)) {
					t.Fatalf("%s %s call %d: %v", algo, phase, i+1, res)
				}
			}
		}
		exhaust("fresh")
		for _, lose := range []struct {
			name string
			do   func() error
		}{
			{"DEL", func() error { return admin.Del(ctx, key).Err() }},
			{"expired", func() error {
				if err := admin.PExpire(ctx, key, time.Millisecond).Err(); err != nil {
					return err
				}
				for admin.Exists(ctx, key).Val() == 1 {
					time.Sleep(time.Millisecond)
				}
				return nil
			}},
			{"FLUSHALL", func() error { return admin.FlushAll(ctx).Err() }},
		} {
			if err := lose.do(); err != nil {
				t.Fatal(err)
			}
			exhaust("after " + lose.name)
		}
	}

	// CLIENT KILL under load: only calls in flight may fail, and the count
	// of admissions stays exact.
	key := "kill:gcra"
	limit := redisrate.PerDay(1000) // refills one unit in 86 s: none during the test
	const callers = 4
	l := redistest.StartLoad(callers, 0, func(ctx context.Context) (redisrate.Result, error) { return lim.Allow(ctx, key, limit) }, nil)
	kills := 0
	for range 20 {
		time.Sleep(25 * time.Millisecond)
		n, err := admin.ClientKillByFilter(ctx, "TYPE", "normal", "SKIPME", "yes").Result()
		if err != nil {
			t.Fatal(err)
		}
		kills += int(n)
	}
	l.Stop()
	redistest.Report(t, "client-kill", "%d connections killed during %d decisions: %d calls failed (%d of them answered at once by the open circuit breaker)", kills,
		l.Decisions(), l.Failed.Load(), l.ByBreaker.Load())
	// Only a call in flight on a killed connection can fail at Redis: at
	// most the callers' calls, pipelined on it together; the breaker it
	// opens may answer more at once until a probe closes it.
	if f := l.Failed.Load() - l.ByBreaker.Load(); f > callers*int64(kills) {
		t.Fatalf("%d calls failed for %d killed connections: more than the calls in flight; e.g. %v", f, kills, l.Errs())
	}
	// The state agrees with what callers were told: a call whose reply was
	// lost (its connection killed after Redis ran it) counted a unit its
	// caller was not told of, so Redis may have used more units than
	// callers saw, never fewer.
	// A call in flight on a killed connection fails and is not sent again
	// (a lone call is never resent: it may have run), so the kills open the
	// breaker; the Peek waits for a probe to close it.
	peek := redisrate.Request{Kind: redisrate.KindPeek, Key: key, Limits: []redisrate.Limit{limit}} // cost 0: the units available now
	res, err := lim.Decide(ctx, peek)
	for deadline := time.Now().Add(10 * time.Second); errors.Is(err, redisrate.ErrUnavailable) && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
		res, err = lim.Decide(ctx, peek)
	}
	if err != nil {
		t.Fatal(err)
	}
	used := 1000 - res.Remaining
	if admitted := l.Admitted.Load(); admitted > 1000 || used < admitted {
		t.Fatalf("callers saw %d admitted, the key says %d used", admitted, used)
	}
}
