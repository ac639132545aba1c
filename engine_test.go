package redisrate

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// fastClient is a go-redis client that fails at once when Redis is down:
// no retries, one dial (without the wait after it that go-redis before
// v9.19, the floor make floor tests on, takes); and a pool large enough that go-redis never turns
// to failing fast for a second of real time after many failed dials.
func fastClient(t testing.TB, addr string) *redis.Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr, Protocol: 2, DisableIdentity: true, MaxRetries: -1, DialerRetries: 1, DialerRetryTimeout: time.Millisecond, PoolSize: 1000})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// downRedis returns a client of a Redis that has stopped.
func downRedis(t testing.TB) *redis.Client {
	t.Helper()
	mr := miniredis.RunT(t)
	rdb := fastClient(t, mr.Addr())
	mr.Close()
	return rdb
}

// callKinds are every call of a Limiter, each as a function that returns
// the Result and error a caller sees (DecideBatch: its one request's).
func callKinds(l *Limiter) map[string]func(ctx context.Context) (Result, error) {
	lim := PerMinute(3)
	return map[string]func(ctx context.Context) (Result, error){
		"Allow":  func(ctx context.Context) (Result, error) { return l.Allow(ctx, "k", lim) },
		"AllowN": func(ctx context.Context) (Result, error) { return l.AllowN(ctx, "k", lim, 2) },
		"Decide/Check": func(ctx context.Context) (Result, error) {
			return l.Decide(ctx, Request{Kind: KindCheck, Key: "k", Limits: []Limit{lim}})
		},
		"Decide/Check/N": func(ctx context.Context) (Result, error) {
			return l.Decide(ctx, Request{Kind: KindCheck, Key: "k", Limits: []Limit{lim}, N: 2})
		},
		"Decide/Peek": func(ctx context.Context) (Result, error) {
			return l.Decide(ctx, Request{Kind: KindPeek, Key: "k", Limits: []Limit{lim}})
		},
		"Decide/Limits": func(ctx context.Context) (Result, error) {
			return l.Decide(ctx, Request{Key: "k", Limits: []Limit{lim, PerHour(100)}})
		},
		"Decide/Check/Limits": func(ctx context.Context) (Result, error) {
			return l.Decide(ctx, Request{Kind: KindCheck, Key: "k", Limits: []Limit{lim, PerHour(100)}})
		},
		"Wait":  func(ctx context.Context) (Result, error) { return l.Wait(ctx, "k", lim) },
		"WaitN": func(ctx context.Context) (Result, error) { return l.WaitN(ctx, "k", lim, 2) },
		"Decide/Wait/Limits": func(ctx context.Context) (Result, error) {
			return l.Decide(ctx, Request{Kind: KindWait, Key: "k", Limits: []Limit{lim, PerHour(100)}})
		},
		"DecideBatch": func(ctx context.Context) (Result, error) {
			return batchOne(ctx, l, Request{Key: "k", Limits: []Limit{lim}})
		},
		"DecideBatch/Check": func(ctx context.Context) (Result, error) {
			return batchOne(ctx, l, Request{Key: "k", Limits: []Limit{lim}, Kind: KindCheck})
		},
		"DecideBatch/Peek": func(ctx context.Context) (Result, error) {
			return batchOne(ctx, l, Request{Key: "k", Limits: []Limit{lim}, Kind: KindPeek})
		},
		"DecideBatch/two": func(ctx context.Context) (Result, error) { // pipelined
			res, err := l.DecideBatch(ctx, []Request{{Key: "k", Limits: []Limit{lim}}, {Key: "k2", Limits: []Limit{lim}}})
			var be *BatchError
			if errors.As(err, &be) {
				if (be.Errs[0] == nil) != (be.Errs[1] == nil) || res[0] != res[1] {
					return Result{}, fmt.Errorf("the two requests answered apart: %+v %v", res, be.Errs)
				}
				return res[0], be.Errs[0]
			}
			if res[0].Source != res[1].Source {
				return Result{}, fmt.Errorf("the two requests answered apart: %+v", res)
			}
			return res[0], err
		},
		"Decide/Keys": func(ctx context.Context) (Result, error) { return l.Decide(ctx, Request{Keys: keysOf(lim)}) },
		"Decide/Check/Keys": func(ctx context.Context) (Result, error) {
			return l.Decide(ctx, Request{Kind: KindCheck, Keys: keysOf(lim)})
		},
		"Decide/Peek/Keys": func(ctx context.Context) (Result, error) {
			return l.Decide(ctx, Request{Kind: KindPeek, Keys: keysOf(lim)})
		},
		"DecideBatch/Keys": func(ctx context.Context) (Result, error) {
			return batchOne(ctx, l, Request{Keys: keysOf(lim)})
		},
		"Reset": func(ctx context.Context) (Result, error) { return Result{}, l.Reset(ctx, "k") },
	}
}

// keysOf is callKinds' call of several keys: "k" under lim and its
// organisation's key under a looser limit.
func keysOf(lim Limit) []KeyLimit {
	return []KeyLimit{{Key: "k", Limit: lim}, {Key: "k:org", Limit: PerHour(100)}}
}

func batchOne(ctx context.Context, l *Limiter, r Request) (Result, error) {
	res, err := l.DecideBatch(ctx, []Request{r})
	if len(res) != 1 {
		return Result{}, fmt.Errorf("%d results for 1 request", len(res))
	}
	var be *BatchError
	if errors.As(err, &be) {
		return res[0], be.Errs[0]
	}
	return res[0], err
}

// TestRedisDownEveryCallAlike is issue #10's table: every kind of call,
// with Redis down, under each policy (and with a fallback), answers alike:
// the same Source, and errors.Is(err, ErrUnavailable) the same, on the
// call that finds Redis down and on the calls the open breaker answers.
// The exceptions are documented at FailurePolicy: Wait cannot pass a
// FailClosed denial off as its turn, and nothing but Redis can Reset.
func TestRedisDownEveryCallAlike(t *testing.T) {
	fb := testLimiter(newFakeRedis(t).rdb)
	for _, pc := range []struct {
		name   string
		opts   []Option
		source Source
		unavailable,
		allowed bool
	}{
		{"FailError", nil, SourceRedis, true, false},
		{"FailClosed", []Option{WithFailurePolicy(FailClosed)}, SourceFailClosed, false, false},
		{"FailOpen", []Option{WithFailurePolicy(FailOpen)}, SourceFailOpen, false, true},
		{"Fallback", []Option{WithFallback(fb), WithFailurePolicy(FailClosed)}, SourceFallback, false, true},
	} {
		for _, breaker := range []bool{true, false} {
			opts := pc.opts
			if !breaker {
				opts = append(opts[:len(opts):len(opts)], WithCircuitBreaker(0))
			}
			l := testLimiter(downRedis(t), opts...)
			for name, call := range callKinds(l) {
				for attempt := range 2 { // the failure itself, then the open breaker
					t.Run(fmt.Sprintf("%s/breaker=%v/%s/%d", pc.name, breaker, name, attempt), func(t *testing.T) {
						ctx := context.Background()
						_ = fb.Reset(ctx, "k")
						_ = fb.Reset(ctx, "k2")
						res, err := call(ctx)
						source, unavailable, allowed := pc.source, pc.unavailable, pc.allowed
						switch {
						case name == "Reset":
							source, unavailable, allowed = SourceRedis, true, false
						case pc.name == "FailClosed" && (name == "Wait" || name == "WaitN" || name == "Decide/Wait/Limits"):
							unavailable = true
						}
						if got := errors.Is(err, ErrUnavailable); got != unavailable {
							t.Errorf("errors.Is(%v, ErrUnavailable) = %v, want %v", err, got, unavailable)
						}
						if res.Source != source || res.Allowed != allowed {
							t.Errorf("%+v: want Source %v, Allowed %v", res, source, allowed)
						}
						if source != SourceRedis && (!res.Degraded() || !errors.Is(res.Cause, ErrUnavailable)) {
							t.Errorf("%+v: a degraded result must say why (Cause matching ErrUnavailable)", res)
						}
						if source == SourceRedis && res != (Result{}) {
							t.Errorf("%+v with an error, want the zero Result", res)
						}
						if errors.Is(err, ErrInvalid) || errors.Is(err, ErrForeignKey) {
							t.Errorf("%v is classified as the caller's fault", err)
						}
					})
				}
			}
		}
	}
}

// TestFailureOfRedisIsTyped: the error of a call Redis could not decide is
// an *Error naming the script and key, matching ErrUnavailable only.
func TestFailureOfRedisIsTyped(t *testing.T) {
	l := testLimiter(downRedis(t), WithKeyPrefix("p:"))
	res, err := l.Allow(context.Background(), "k", PerMinute(3))
	var e *Error
	if !errors.As(err, &e) || e.Key != "p:k" || e.Script != "gcra" || !errors.Is(err, ErrUnavailable) {
		t.Fatalf("err = %#v, want a *Error for gcra on p:k matching ErrUnavailable", err)
	}
	if res != (Result{}) {
		t.Fatalf("result %+v with an error, want the zero Result", res)
	}
	err = l.Reset(context.Background(), "k")
	if !errors.As(err, &e) || e.Script != "reset" || !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Reset: %v, want a *Error for reset matching ErrUnavailable", err)
	}
}

// TestPolicyNeverMasksCallerErrors: the caller's mistakes are errors
// whatever the policy and the fallback, with Redis up or down: masking them
// would hide a bug behind "Redis is down".
func TestPolicyNeverMasksCallerErrors(t *testing.T) {
	f := newFakeRedis(t)
	fb := testLimiter(newFakeRedis(t).rdb)
	for _, rdb := range []*redis.Client{f.rdb, downRedis(t)} {
		for _, p := range []FailurePolicy{FailOpen, FailClosed} {
			l := testLimiter(rdb, WithFailurePolicy(p), WithFallback(fb))
			bad := Limit{Rate: -1, Period: time.Second}
			if _, err := l.Allow(context.Background(), "k", bad); !errors.Is(err, ErrInvalid) {
				t.Errorf("%v: bad limit gave %v, want ErrInvalid", p, err)
			}
			if _, err := l.Wait(context.Background(), "k", bad); !errors.Is(err, ErrInvalid) {
				t.Errorf("%v: Wait with a bad limit gave %v, want ErrInvalid", p, err)
			}
			if _, err := batchOne(context.Background(), l, Request{Key: "k", Limits: []Limit{bad}}); !errors.Is(err, ErrInvalid) {
				t.Errorf("%v: DecideBatch with a bad limit gave %v, want ErrInvalid", p, err)
			}
		}
	}
	f.mr.Set("user", "order 42")
	l := testLimiter(f.rdb, WithFailurePolicy(FailOpen), WithFallback(fb))
	if _, err := l.Allow(context.Background(), "user", PerMinute(3)); !errors.Is(err, ErrForeignKey) {
		t.Fatalf("foreign key gave %v, want ErrForeignKey", err)
	}
	if v, _ := f.mr.Get("user"); v != "order 42" {
		t.Fatalf("user's value is now %q", v)
	}
}

// TestFallbackAndBack: while Redis is away the fallback decides with the
// same limits, on its own state; when Redis is back (the breaker's probe
// sees it), Redis decides again, from its own state.
func TestFallbackAndBack(t *testing.T) {
	f := newFakeRedis(t)
	rdb := fastClient(t, f.mr.Addr())
	fbr := newFakeRedis(t)
	clk := &fakeClock{t: epoch2026}
	l := testLimiterOn(clk, rdb, WithKeyPrefix("rate:"), WithFallback(testLimiter(fbr.rdb)))
	ctx := context.Background()
	lim := PerMinute(3)

	res, err := l.Allow(ctx, "k", lim)
	if err != nil || !res.Allowed || res.Source != SourceRedis || res.Degraded() || res.Cause != nil {
		t.Fatalf("Redis up: %+v, %v", res, err)
	}
	f.mr.Close()
	for i := range 4 {
		res, err := l.Allow(ctx, "k", lim)
		if err != nil {
			t.Fatal(err)
		}
		if res.Source != SourceFallback || !errors.Is(res.Cause, ErrUnavailable) {
			t.Fatalf("Redis down, call %d: %+v", i, res)
		}
		if res.Allowed != (i < 3) || res.Capacity != 3 {
			t.Fatalf("fallback call %d: %+v, want the first 3 of 3/min admitted", i, res)
		}
	}
	// The fallback keeps the caller's key under its own (empty) prefix.
	if n := fbr.rdb.Exists(ctx, "k").Val(); n != 1 {
		t.Fatalf("fallback state under k: %d", n)
	}
	if err := f.mr.Restart(); err != nil {
		t.Fatal(err)
	}
	clk.Advance(defaultProbeInterval)
	if res, _ := l.Allow(ctx, "k", lim); res.Source != SourceFallback {
		t.Fatalf("the call that starts the probe: %+v, want the fallback's answer (it does not wait)", res)
	}
	l.health.probes.Wait()
	res, err = l.Allow(ctx, "k", lim)
	if err != nil || res.Source != SourceRedis || !res.Allowed || res.Remaining != 1 {
		t.Fatalf("Redis back: %+v, %v; want Redis's own state: 1 of 3 left", res, err)
	}
}

// TestFallbackFailsToo: a fallback that fails too leaves the decision to
// the policy, and the error names both failures but is classed as Redis's
// failure: not as the fallback's (here its open breaker).
func TestFallbackFailsToo(t *testing.T) {
	fb := testLimiter(downRedis(t))
	l := testLimiter(downRedis(t), WithFallback(fb), WithCircuitBreaker(0))
	for i := range 2 { // the second time, the fallback's breaker is open
		_, err := l.Allow(context.Background(), "k", PerMinute(3))
		if !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrCircuitOpen) || !containsAll(err.Error(), "fallback failed") {
			t.Fatalf("call %d: err = %v, want ErrUnavailable (not ErrCircuitOpen) naming the fallback's failure", i+1, err)
		}
	}
	res, err := testLimiter(downRedis(t), WithFallback(fb), WithFailurePolicy(FailClosed)).Allow(context.Background(), "k", PerMinute(3))
	if err != nil || res.Allowed || res.Source != SourceFailClosed || res.RetryAfter != time.Second {
		t.Fatalf("%+v, %v: want a fail-closed denial, retry in 1s", res, err)
	}
}

// TestFallbackCycle: two limiters that fall back on each other, both down:
// one hop, then the policy, not an endless loop.
func TestFallbackCycle(t *testing.T) {
	a := testLimiter(downRedis(t), WithFailurePolicy(FailClosed))
	b := testLimiter(downRedis(t), WithFallback(a))
	WithFallback(b)(a)
	res, err := b.Allow(context.Background(), "k", PerMinute(3))
	if err != nil || res.Allowed || res.Source != SourceFailClosed {
		t.Fatalf("%+v, %v: want a's fail-closed denial", res, err)
	}
	var e *Error
	if !errors.As(res.Cause, &e) || !containsAll(res.Cause.Error(), "\n") {
		t.Fatalf("Cause %v: want both failures", res.Cause)
	}
	if _, err := a.Allow(context.Background(), "k", PerMinute(3)); err != nil {
		t.Fatal(err)
	}
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// fakeClock is a clock a test moves by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

// AfterFunc: lease timers on the real clock (no test on this clock ends a
// lease by moving it).
func (c *fakeClock) AfterFunc(d time.Duration, f func()) func() bool {
	return time.AfterFunc(d, f).Stop
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Sleep moves the clock by d instead of sleeping.
func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.Advance(d)
	return nil
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// A call the caller cancelled, or whose deadline passed, is not decided by
// a failure policy or a fallback: nobody waits for the answer, an
// admission would be recorded in the fallback for nothing, and a caller
// could buy admissions with a deadline in the past. So too while the
// circuit breaker is open (the default), when the call never reaches
// Redis.
func TestCancelledCallIsNotDecidedByPolicy(t *testing.T) {
	fb := testLimiter(newFakeRedis(t).rdb)
	for _, c := range []struct {
		name  string
		opts  []Option
		blown bool // open the breaker first, with a call nobody cancelled
	}{
		{"policy", []Option{WithFailurePolicy(FailOpen), WithCircuitBreaker(0)}, false},
		{"fallback", []Option{WithFallback(fb), WithFailurePolicy(FailOpen), WithCircuitBreaker(0)}, false},
		{"policy, breaker open", []Option{WithFailurePolicy(FailOpen)}, true},
		{"fallback, breaker open", []Option{WithFallback(fb), WithFailurePolicy(FailOpen)}, true},
	} {
		l := testLimiter(downRedis(t), c.opts...)
		if c.blown {
			if res, _ := l.Allow(context.Background(), "open", PerSecond(1)); res.Source == SourceRedis {
				t.Fatalf("%s: the call that opens the breaker: %+v", c.name, res)
			}
		}
		for name, call := range callKinds(l) {
			for how, ctx := range gaveUp(t) {
				t.Run(c.name+"/"+name+"/"+how, func(t *testing.T) {
					res, err := call(ctx)
					if !isCallerError(err, ctx.Err()) || res.Allowed || res.Source != SourceRedis {
						t.Errorf("%s %s on a down Redis (%s): %+v, %v; want the context's error alone", how, name, c.name, res, err)
					}
				})
			}
		}
	}
}

// TestFailClosedRetryHintIsTheOutage: a FailClosed denial while Redis is
// down asks the caller to come back when the outage may be over, not when
// the quota would refill: 1 s, or the breaker's probe interval when longer,
// for a PerDay(1) limit as for any other (issue 24 item 4: it said 24 h).
func TestFailClosedRetryHintIsTheOutage(t *testing.T) {
	for _, c := range []struct {
		opts []Option
		want time.Duration
	}{
		{nil, time.Second},
		{[]Option{WithCircuitBreaker(0)}, time.Second},
		{[]Option{WithCircuitBreaker(5 * time.Second)}, 5 * time.Second},
	} {
		l := testLimiter(downRedis(t), append(c.opts, WithFailurePolicy(FailClosed))...)
		for _, lim := range []Limit{PerDay(1), PerSecond(1000), PerMinute(3)} {
			for call := range 2 { // the failure, then the open breaker's answer
				res, err := l.Allow(context.Background(), "k", lim)
				if err != nil || res.Source != SourceFailClosed || res.RetryAfter != c.want {
					t.Errorf("%v, call %d: %+v, %v; want a fail-closed denial with RetryAfter %v", lim, call, res, err, c.want)
				}
			}
		}
	}
}

// TestPeekResultString: the answer to a Peek, which admits nothing, never
// prints "allowed" (issue 22), alone, in a batch, or by a failure policy.
func TestPeekResultString(t *testing.T) {
	ctx := context.Background()
	f := newFakeRedis(t)
	l := testLimiter(f.rdb)
	lim := PerMinute(10)
	_, _ = l.AllowN(ctx, "k", lim, 4)
	res, err := l.Decide(ctx, Request{Kind: KindPeek, Key: "k", Limits: []Limit{lim}})
	if s := res.String(); err != nil || s != "peek: 6 of 10 left, full in 24s" {
		t.Errorf("Peek: %q, %v", s, err)
	}
	res, err = batchOne(ctx, l, Request{Key: "k", Limits: []Limit{lim}, Kind: KindPeek})
	if s := res.String(); err != nil || s != "peek: 6 of 10 left, full in 24s" {
		t.Errorf("DecideBatch's KindPeek: %q, %v", s, err)
	}
	res, err = testLimiter(downRedis(t), WithFailurePolicy(FailOpen)).Decide(ctx, Request{Kind: KindPeek, Key: "k", Limits: []Limit{lim}})
	if s := res.String(); err != nil || s != "peek: state unknown (fail-open)" {
		t.Errorf("Peek by FailOpen: %q, %v", s, err)
	}
	if res, _ := l.Allow(ctx, "k", lim); !strings.HasPrefix(res.String(), "allowed: ") {
		t.Errorf("Allow: %q", res.String())
	}
}

// TestEmptyKeyRefused: an empty key is refused by every call kind before
// any round trip, naming it, and nothing reaches Redis.
func TestEmptyKeyRefused(t *testing.T) {
	ctx := context.Background()
	f := newFakeRedis(t)
	cnt := countCommands(f.rdb)
	l := testLimiter(f.rdb, WithKeyPrefix("rate:"))
	lim := PerMinute(5)
	calls := map[string]func() error{
		"Allow": func() error { _, err := l.Allow(ctx, "", lim); return err },
		"Check": func() error {
			_, err := l.Decide(ctx, Request{Kind: KindCheck, Key: "", Limits: []Limit{lim}})
			return err
		},
		"Peek": func() error {
			_, err := l.Decide(ctx, Request{Kind: KindPeek, Key: "", Limits: []Limit{lim}})
			return err
		},
		"Wait": func() error { _, err := l.Wait(ctx, "", lim); return err },
		"Decide/Keys": func() error {
			_, err := l.Decide(ctx, Request{Keys: []KeyLimit{KeyLimit{Key: "", Limit: lim}}})
			return err
		},
		"Reset": func() error { return l.Reset(ctx, "") },
		"DecideBatch": func() error {
			_, err := l.DecideBatch(ctx, []Request{{Key: "", Limits: []Limit{lim}}})
			return err
		},
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "invalid key '': must not be empty") {
			t.Errorf("%s: %v, want ErrInvalid naming the empty key", name, err)
		}
	}
	if n := cnt.scriptCalls(); n != 0 {
		t.Errorf("%d commands reached Redis", n)
	}
}
