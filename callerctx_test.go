package redisrate

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// gaveUp are the contexts of callers that gave up before the call: one
// cancelled, one past its deadline.
func gaveUp(t *testing.T) map[string]context.Context {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Millisecond))
	t.Cleanup(cancel2)
	return map[string]context.Context{"cancelled": cancelled, "expired": expired}
}

// isCallerError reports an error that matches the context's error and is
// not a Redis failure.
func isCallerError(err, ctxErr error) bool {
	return errors.Is(err, ctxErr) && !errors.Is(err, ErrUnavailable)
}

// TestCallerDeadlineIsNotAnOutage is issue 24's first scenario: under
// FailOpen, one call with a deadline in the past must not be admitted by
// the policy, nor open the breaker so that an exhausted key is admitted
// for everyone after it.
func TestCallerDeadlineIsNotAnOutage(t *testing.T) {
	ctx := context.Background()
	f := newFakeRedis(t)
	l := testLimiter(fastClient(t, f.mr.Addr()), WithFailurePolicy(FailOpen))
	victim := PerMinute(1)
	if res, err := l.Allow(ctx, "victim", victim); err != nil || !res.Allowed {
		t.Fatalf("the victim's first call: %+v %v", res, err)
	}
	expired, cancel := context.WithDeadline(ctx, time.Now().Add(-time.Millisecond))
	defer cancel()
	res, err := l.Allow(expired, "attacker", PerMinute(1))
	if res.Allowed || !isCallerError(err, context.DeadlineExceeded) {
		t.Fatalf("an expired call: %+v, %v; want no admission and an error matching context.DeadlineExceeded, not ErrUnavailable", res, err)
	}
	if l.health.skip() {
		t.Fatal("the caller's deadline opened the breaker")
	}
	for i := range 20 {
		res, err := l.Allow(ctx, "victim", victim)
		if err != nil || res.Allowed || res.Source != SourceRedis {
			t.Fatalf("victim call %d after the expired call: %+v %v; want Redis's denial", i, res, err)
		}
	}
}

// TestCallerGaveUpEveryCallKind: every kind of call, with a context that
// was cancelled or is past its deadline, on a Redis that is up, under
// FailOpen: the context's error, no admission, nothing written, and the
// breaker shut; under FailError the next call is Redis's, not the
// breaker's (issue 24: "300 ms later, every caller still gets
// ErrCircuitOpen").
func TestCallerGaveUpEveryCallKind(t *testing.T) {
	for _, policy := range []FailurePolicy{FailOpen, FailError, FailClosed} {
		for how, ctx := range gaveUp(t) {
			f := newFakeRedis(t)
			l := testLimiter(fastClient(t, f.mr.Addr()), WithFailurePolicy(policy))
			for name, call := range callKinds(l) {
				res, err := call(ctx)
				if res.Allowed || res.Source != SourceRedis || !isCallerError(err, ctx.Err()) {
					t.Errorf("%v, %s %s: %+v, %v; want the context's error alone", policy, how, name, res, err)
				}
			}
			if l.health.skip() {
				t.Errorf("%v, %s: the breaker opened", policy, how)
			}
			if keys := f.mr.Keys(); len(keys) != 0 {
				t.Errorf("%v, %s: keys written: %v", policy, how, keys)
			}
			if res, err := l.Allow(context.Background(), "k", PerMinute(1)); err != nil || res.Source != SourceRedis || !res.Allowed {
				t.Errorf("%v, %s: the next call: %+v %v; want Redis's admission", policy, how, res, err)
			}
		}
	}
}

// blackhole is a server that accepts connections and never answers, as a
// paused or wedged Redis does.
func blackhole(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				buf := make([]byte, 4096)
				for {
					if _, err := c.Read(buf); err != nil {
						return
					}
				}
			}()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

// TestCallerDeadlineInFlight: the caller's deadline passes while the call
// waits for a Redis that does not answer. That is the caller's deadline,
// not an outage: the context's error, whatever the policy and with a
// fallback, and the breaker stays shut (until the probe that the first
// call started gets no answer within the decision timeout, 10 s here: see
// TestShortDeadlinesDuringStall).
func TestCallerDeadlineInFlight(t *testing.T) {
	t.Parallel() // its own Redis; runs beside the other slow tests
	addr := blackhole(t)
	fb := testLimiter(newFakeRedis(t).rdb)
	for name, opts := range map[string][]Option{
		"FailOpen":   {WithFailurePolicy(FailOpen)},
		"FailClosed": {WithFailurePolicy(FailClosed)},
		"FailError":  nil,
		"fallback":   {WithFallback(fb), WithFailurePolicy(FailOpen)},
	} {
		rdb := redis.NewClient(&redis.Options{Addr: addr, Protocol: 2, DisableIdentity: true, MaxRetries: -1, ContextTimeoutEnabled: true})
		t.Cleanup(func() { _ = rdb.Close() })
		l := testLimiter(rdb, opts...)
		for kind, call := range callKinds(l) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
			res, err := call(ctx)
			cancel()
			if res.Allowed || !isCallerError(err, context.DeadlineExceeded) {
				t.Errorf("%s, %s: %+v, %v; want the context's error alone", name, kind, res, err)
			}
		}
		if l.health.skip() {
			t.Errorf("%s: the caller's deadline opened the breaker", name)
		}
	}
}
