package redisrate

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// slack is what a timed bound in these tests allows on top of the
// deadline: a shared machine under the race detector. What is shown is
// that a call does not wait for Redis (seconds) or forever.
const slack = 750 * time.Millisecond

// TestDecisionTimeoutPausedRedis: Redis accepts the connection and never
// answers (CLIENT PAUSE, a wedged proxy). Every kind of call returns by the
// decision deadline, with or without go-redis's ContextTimeoutEnabled, as a
// Redis failure: ErrUnavailable (not the caller's context.DeadlineExceeded)
// under FailError, FailOpen's admission under FailOpen; and the breaker
// opens.
func TestDecisionTimeoutPausedRedis(t *testing.T) {
	t.Parallel() // its own Redis; runs beside the other slow tests
	addr := blackhole(t)
	for _, honours := range []bool{true, false} {
		for _, timeout := range []time.Duration{0, 50 * time.Millisecond} { // 0: the default, for Allow only
			for _, policy := range []FailurePolicy{FailError, FailOpen} {
				rdb := redis.NewClient(&redis.Options{Addr: addr, Protocol: 2, DisableIdentity: true, ContextTimeoutEnabled: honours})
				t.Cleanup(func() { _ = rdb.Close() })
				opts := []Option{WithFailurePolicy(policy), WithCircuitBreaker(0)} // every call meets the pause
				want := defaultDecisionTimeout
				if timeout > 0 {
					opts, want = append(opts, WithDecisionTimeout(timeout)), timeout
				}
				l := NewLimiter(rdb, opts...)
				for kind, call := range callKinds(l) {
					if timeout == 0 && kind != "Allow" {
						continue
					}
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // the caller's is later
					start := time.Now()
					res, err := call(ctx)
					took := time.Since(start)
					cancel()
					name := kind + ", " + policy.String() + ", ContextTimeoutEnabled " + map[bool]string{true: "on", false: "off"}[honours]
					if took < want || took > want+5*time.Second { // the caller's 10 s, which a call without the deadline waits out: a bound a loaded machine holds

						t.Errorf("%s: answered after %v; want the decision timeout, %v", name, took, want)
					}
					if errors.Is(err, context.DeadlineExceeded) {
						t.Errorf("%s: %v matches context.DeadlineExceeded: the Limiter's own deadline is not the caller's", name, err)
					}
					switch {
					case policy == FailOpen && kind != "Reset":
						if err != nil || !res.Allowed || res.Source != SourceFailOpen || !errors.Is(res.Cause, ErrUnavailable) {
							t.Errorf("%s: %+v, %v; want FailOpen's admission", name, res, err)
						}
					case !errors.Is(err, ErrUnavailable) || !containsAll(err.Error(), "decision timeout of "+want.String()):
						t.Errorf("%s: %v; want ErrUnavailable naming the decision timeout", name, err)
					}
				}
			}
		}
	}
}

// TestDecisionTimeoutWithoutSocketDeadlines: a client with
// ContextTimeoutEnabled whose ReadTimeout and WriteTimeout are -2 sets no
// socket deadline at all, not even its context's, so it does not stop at
// the decision deadline: the Limiter sends aside, as on a client without
// ContextTimeoutEnabled, and the call returns at the deadline. Sent on the
// caller's goroutine it waited for a Redis that never answers, for ever.
func TestDecisionTimeoutWithoutSocketDeadlines(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: blackhole(t), Protocol: 2, DisableIdentity: true, ContextTimeoutEnabled: true, ReadTimeout: -2, WriteTimeout: -2})
	t.Cleanup(func() { _ = rdb.Close() })
	l := testLimiter(rdb, WithDecisionTimeout(50*time.Millisecond))
	if l.honoursCtx {
		t.Error("a client that sets no socket deadline is taken to stop at its context's")
	}
	done := make(chan error, 1)
	go func() {
		_, err := l.Allow(context.Background(), "k", PerMinute(1))
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, ErrUnavailable) || !containsAll(err.Error(), "decision timeout of 50ms") {
			t.Errorf("%v; want ErrUnavailable naming the decision timeout", err)
		}
	case <-time.After(10 * time.Second): // the decision timeout and 10 s: a bound a loaded machine holds
		t.Fatal("Allow still waits for a Redis that never answers, 10 s after its 50 ms decision timeout")
	}
	// The same rule for every client that has the option.
	for name, c := range map[string]redis.Scripter{
		"ClusterClient":   redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}, ContextTimeoutEnabled: true, ReadTimeout: -2, WriteTimeout: -2}),
		"Ring":            redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}, ContextTimeoutEnabled: true, ReadTimeout: -2, WriteTimeout: -2}),
		"Ring, deadlines": redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}, ContextTimeoutEnabled: true}),
	} {
		if got, want := honoursDeadlines(c), name == "Ring, deadlines"; got != want {
			t.Errorf("%s: honoursDeadlines %v; want %v", name, got, want)
		}
		_ = c.(interface{ Close() error }).Close()
	}
}

// TestDecisionTimeoutOpensBreaker: the Limiter's own deadline passing is a
// Redis failure: the breaker opens, and the calls after it are answered at
// once.
func TestDecisionTimeoutOpensBreaker(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: blackhole(t), Protocol: 2, DisableIdentity: true})
	t.Cleanup(func() { _ = rdb.Close() })
	l := testLimiter(rdb, WithFailurePolicy(FailOpen), WithDecisionTimeout(30*time.Millisecond))
	res, err := l.Allow(context.Background(), "k", PerMinute(1))
	if err != nil || res.Source != SourceFailOpen {
		t.Fatalf("%+v, %v; want FailOpen's admission", res, err)
	}
	if !l.health.skip() {
		t.Fatal("the decision timeout left the breaker shut")
	}
	start := time.Now()
	res, err = l.Allow(context.Background(), "k", PerMinute(1))
	if took := time.Since(start); err != nil || !errors.Is(res.Cause, ErrCircuitOpen) || took > 20*time.Millisecond+slack {
		t.Fatalf("%+v, %v after %v; want the open breaker's answer, at once", res, err, took)
	}
}

// TestDecisionTimeoutRefusedConnections: with go-redis's default options
// (5 dials with backoff, 3 retries), a Redis that refuses connections
// cost a call 0.5 to 1.1 s (issue 22); the decision deadline cuts it.
func TestDecisionTimeoutRefusedConnections(t *testing.T) {
	mr := miniredis.RunT(t)
	addr := mr.Addr()
	mr.Close()
	for _, honours := range []bool{true, false} {
		rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: honours})
		t.Cleanup(func() { _ = rdb.Close() })
		l := NewLimiter(rdb, WithCircuitBreaker(0))
		for range 2 {
			start := time.Now()
			_, err := l.Allow(context.Background(), "k", PerMinute(1))
			if took := time.Since(start); !errors.Is(err, ErrUnavailable) || took > defaultDecisionTimeout+slack {
				t.Errorf("ContextTimeoutEnabled %v: %v after %v; want ErrUnavailable by the decision deadline", honours, err, took)
			}
		}
	}
}

// TestDecisionTimeoutOff: WithDecisionTimeout(0) leaves only the caller's
// deadline, which is the caller's: its error, no policy.
func TestDecisionTimeoutOff(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: blackhole(t), Protocol: 2, DisableIdentity: true, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = rdb.Close() })
	l := testLimiter(rdb, WithFailurePolicy(FailOpen), WithDecisionTimeout(0))
	ctx, cancel := context.WithTimeout(context.Background(), defaultDecisionTimeout+100*time.Millisecond)
	defer cancel()
	start := time.Now()
	res, err := l.Allow(ctx, "k", PerMinute(1))
	if took := time.Since(start); res.Allowed || !isCallerError(err, context.DeadlineExceeded) || took < defaultDecisionTimeout+100*time.Millisecond {
		t.Fatalf("%+v, %v after %v; want the caller's deadline to end it, with its error", res, err, took)
	}
}

// NewLimiter's default deadline is defaultDecisionTimeout, 200 ms as
// WithDecisionTimeout's doc and docs/go.md say.
func TestDefaultDecisionTimeoutIsDocumented(t *testing.T) {
	if got := NewLimiter(newFakeRedis(t).rdb).timeout; got != 200*time.Millisecond {
		t.Errorf("NewLimiter's default decision timeout is %v, defaultDecisionTimeout says %v", got, defaultDecisionTimeout)
	}
}

// TestProbeBoundedByDecisionTimeout: the breaker's probe waits no longer
// than a call would, also on a client that does not stop at its context's
// deadline (the probe ran to go-redis's own timeouts there: 5 s here).
func TestProbeBoundedByDecisionTimeout(t *testing.T) {
	addr := blackhole(t)
	for _, honours := range []bool{true, false} {
		rdb := redis.NewClient(&redis.Options{Addr: addr, Protocol: 2, DisableIdentity: true, ContextTimeoutEnabled: honours})
		t.Cleanup(func() { _ = rdb.Close() })
		const timeout = 50 * time.Millisecond
		l := testLimiter(rdb, WithDecisionTimeout(timeout))
		l.health.probes.Add(1)
		start := time.Now()
		l.probe(l.health, "k")
		if took := time.Since(start); took > timeout+slack {
			t.Errorf("ContextTimeoutEnabled %t: the probe took %v, want the decision timeout, %v", honours, took, timeout)
		}
	}
}

// TestCallerGaveUpDuringFallback: a caller whose deadline passes while the
// fallback decides gets its context's error, not the failure policy's
// admission (else a short deadline would buy a FailOpen admission).
func TestCallerGaveUpDuringFallback(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: blackhole(t), Protocol: 2, DisableIdentity: true, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = rdb.Close() })
	l := testLimiter(downRedis(t), WithFallback(testLimiter(rdb, WithDecisionTimeout(0))), WithFailurePolicy(FailOpen), WithDecisionTimeout(time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if res, err := l.Allow(ctx, "k", PerMinute(1)); res.Allowed || !isCallerError(err, context.DeadlineExceeded) {
		t.Fatalf("%+v %v: want the caller's error, no admission", res, err)
	}
}

// TestDecisionTimeoutBatchWithoutPipelines: a client without pipelines gets
// a DecideBatch's requests one after another, under the batch's one
// decision deadline, as a pipeline would be: with the breaker off, a Redis
// that does not answer cost the batch one timeout per request.
func TestDecisionTimeoutBatchWithoutPipelines(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: blackhole(t), Protocol: 2, DisableIdentity: true, MaxRetries: -1, PoolSize: 32})
	t.Cleanup(func() { _ = rdb.Close() })
	const timeout = 100 * time.Millisecond
	l := testLimiter(plainClient{rdb}, WithFailurePolicy(FailOpen), WithCircuitBreaker(0), WithDecisionTimeout(timeout))
	reqs := make([]Request, 16) // 1.6 s, one timeout each
	for i := range reqs {
		reqs[i] = Request{Key: fmt.Sprint("k", i), Limits: []Limit{PerMinute(1)}}
	}
	start := time.Now()
	res, err := l.DecideBatch(context.Background(), reqs)
	if took := time.Since(start); took > timeout+slack {
		t.Errorf("the batch took %v; want the decision timeout, %v", took, timeout)
	}
	for i, r := range res {
		if err != nil || r.Source != SourceFailOpen || !errors.Is(r.Cause, ErrUnavailable) {
			t.Fatalf("request %d: %+v, %v; want FailOpen's admission", i, r, err)
		}
	}
}
