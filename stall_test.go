package redisrate

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// stallRun is what callers with short deadlines saw: calls answered by the
// failure policy, calls that returned an error, and when the first policy
// answer came (zero: none).
type stallRun struct {
	calls, byPolicy, failed atomic.Int64
	firstPolicy             atomic.Int64 // ns since the start
	lastErr                 atomic.Value
}

// callWithDeadlines runs workers goroutines calling Allow for span, each
// call under its own context deadline of deadline.
func callWithDeadlines(l *Limiter, workers int, span, deadline time.Duration) *stallRun {
	r := &stallRun{}
	start := time.Now()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; time.Since(start) < span; i++ {
				ctx, cancel := context.WithTimeout(context.Background(), deadline)
				res, err := l.Allow(ctx, fmt.Sprint("k", w, ":", i%4), PerSecond(1000))
				cancel()
				r.calls.Add(1)
				switch {
				case err != nil:
					r.failed.Add(1)
					r.lastErr.Store(err)
				case res.Degraded():
					r.byPolicy.Add(1)
					r.firstPolicy.CompareAndSwap(0, int64(time.Since(start)))
				}
			}
		}()
	}
	wg.Wait()
	return r
}

// TestShortDeadlinesDuringStall is issue 31's first finding on a server
// that accepts connections and never answers: callers whose deadlines come
// before the decision timeout got only their contexts' errors for the
// whole stall, and the breaker never opened. Now the first caller that
// gives up starts a probe under the decision timeout; it gets no answer,
// the breaker opens, and the policy answers every caller at once. In
// shadow mode no call fails, even under FailError.
func TestShortDeadlinesDuringStall(t *testing.T) {
	const timeout = 100 * time.Millisecond
	for _, honours := range []bool{true, false} {
		for _, shadow := range []bool{false, true} {
			name := fmt.Sprintf("ContextTimeoutEnabled %v, shadow %v", honours, shadow)
			rdb := redis.NewClient(&redis.Options{Addr: blackhole(t), Protocol: 2, DisableIdentity: true, ContextTimeoutEnabled: honours, PoolSize: 256})
			t.Cleanup(func() { _ = rdb.Close() })
			opts := []Option{WithFailurePolicy(FailOpen), WithDecisionTimeout(timeout)}
			if shadow {
				opts = []Option{WithShadowMode(), WithDecisionTimeout(timeout)} // FailError: shadow mode still fails nothing
			}
			l := NewLimiter(rdb, opts...)
			r := callWithDeadlines(l, 8, 1500*time.Millisecond, 30*time.Millisecond)
			l.health.probes.Wait()
			opened := time.Duration(r.firstPolicy.Load())
			t.Logf("%s: %d calls, %d answered by the policy (the first after %v), %d failed", name, r.calls.Load(), r.byPolicy.Load(), opened, r.failed.Load())
			if !l.health.skip() {
				t.Errorf("%s: the breaker is shut after 1.5 s of a stall", name)
			}
			// The first caller gives up after 30 ms, its probe after 100 ms
			// more: a bound of a few timeouts holds on a loaded machine.
			if opened == 0 || opened > 2*timeout+slack {
				t.Errorf("%s: the first answer by the policy after %v; want it within a few decision timeouts", name, opened)
			}
			if 2*r.byPolicy.Load() <= r.calls.Load() {
				t.Errorf("%s: %d of %d calls answered by the policy; want most", name, r.byPolicy.Load(), r.calls.Load())
			}
			if shadow && r.failed.Load() > 0 {
				t.Errorf("%s: %d calls failed (last: %v); shadow mode fails no call for the limiter's sake", name, r.failed.Load(), r.lastErr.Load())
			}
		}
	}
}

// TestShortDeadlinesHealthyRedis: what the probes of callers that give up
// must not change. A healthy Redis and callers whose deadlines are a
// microsecond: the breaker never opens, and nothing is admitted by the
// policy (a short deadline buys nothing), under FailOpen. The decision
// timeout is long: a probe that a starved machine (load 15 on 2 cores)
// keeps from miniredis for 200 ms would rightly open the breaker, which is
// not what this test is about.
func TestShortDeadlinesHealthyRedis(t *testing.T) {
	f := newFakeRedis(t)
	l := NewLimiter(fastClient(t, f.mr.Addr()), WithFailurePolicy(FailOpen), WithCircuitBreaker(time.Millisecond), WithDecisionTimeout(10*time.Second))
	r := callWithDeadlines(l, 8, 500*time.Millisecond, time.Microsecond)
	l.health.probes.Wait()
	if r.byPolicy.Load() != 0 || l.health.skip() {
		t.Fatalf("%d of %d calls admitted by the policy, breaker open %v; want none, and shut", r.byPolicy.Load(), r.calls.Load(), l.health.skip())
	}
	if err, _ := r.lastErr.Load().(error); !isCallerError(err, context.DeadlineExceeded) {
		t.Fatalf("a call's error: %v; want the caller's own", err)
	}
}

// TestProbeDeadlineBacksOff: after a probe has timed out, the next one
// waits twice as long (a probe that needs a lookup, a dial and a handshake
// on a starved machine missed the decision deadline again and again), up
// to 2 s or the decision timeout; an answer resets it.
func TestProbeDeadlineBacksOff(t *testing.T) {
	const timeout = 40 * time.Millisecond
	rdb := redis.NewClient(&redis.Options{Addr: blackhole(t), Protocol: 2, DisableIdentity: true, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = rdb.Close() })
	l := NewLimiter(rdb, WithDecisionTimeout(timeout))
	for i, want := range []time.Duration{timeout, 2 * timeout, 4 * timeout} {
		l.health.probes.Add(1)
		start := time.Now()
		l.probe(l.health, "k")
		if took := time.Since(start); took < want || took > want+slack {
			t.Errorf("probe %d waited %v, want %v", i+1, took, want)
		}
	}
	var te *timeoutError
	if err := l.health.openErr(); !errors.As(err, &te) || !te.probe || !l.health.skip() {
		t.Errorf("after the probes: %v, breaker open %v; want open, with the probe's timeout", err, l.health.skip())
	}
	for _, c := range []struct{ wait, base, want time.Duration }{
		{200 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond},
		{1600 * time.Millisecond, 200 * time.Millisecond, probeTimeout},
		{probeTimeout, 200 * time.Millisecond, probeTimeout},
		{5 * time.Second, 5 * time.Second, 5 * time.Second},
	} {
		if got := nextProbeWait(c.wait, c.base); got != c.want {
			t.Errorf("nextProbeWait(%v, %v) = %v, want %v", c.wait, c.base, got, c.want)
		}
	}
	f := newFakeRedis(t)
	up := testLimiter(fastClient(t, f.mr.Addr())) // a probe a busy machine keeps from miniredis for 200 ms would rightly fail
	up.health.failed(up, errors.New("down"), "gcra", "k")
	up.health.probeWait = time.Second
	up.health.probes.Add(1)
	up.probe(up.health, "k")
	if up.health.skip() || up.health.probeWait != 0 {
		t.Errorf("an answered probe: breaker open %v, next probe's deadline %v; want shut and the decision timeout", up.health.skip(), up.health.probeWait)
	}
}

// TestShadowCallerGaveUp: in shadow mode a call whose caller's context
// ends before Redis decides is admitted, whether it ended before the call,
// while Redis was asked, or while the fallback decided: shadow mode fails
// no call for the limiter's sake, and admits every call anyway.
func TestShadowCallerGaveUp(t *testing.T) {
	hole := redis.NewClient(&redis.Options{Addr: blackhole(t), Protocol: 2, DisableIdentity: true, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = hole.Close() })
	expired, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Millisecond))
	defer cancel()
	for name, c := range map[string]struct {
		l       *Limiter
		timeout time.Duration
	}{
		"before the call":       {NewLimiter(fastClient(t, newFakeRedis(t).mr.Addr()), WithShadowMode()), -1},
		"while Redis was asked": {NewLimiter(hole, WithShadowMode(), WithDecisionTimeout(time.Second)), 50 * time.Millisecond},
		"during the fallback": {NewLimiter(downRedis(t), WithFallback(NewLimiter(hole, WithDecisionTimeout(0))),
			WithShadowMode(), WithDecisionTimeout(time.Second)), 100 * time.Millisecond},
	} {
		ctx := context.Context(expired)
		if c.timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(context.Background(), c.timeout)
			defer cancel()
		}
		res, err := c.l.Allow(ctx, "k", PerMinute(1))
		if err != nil || !res.Allowed || !res.Shadow || !res.Degraded() {
			t.Errorf("%s: %+v, %v; want shadow mode's admission", name, res, err)
		}
	}
}
