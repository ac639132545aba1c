package redisrate_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/redisrate/redisrate"
	"github.com/redisrate/redisrate/localredis"
)

// deadAddr returns a loopback address nothing listens on.
func deadAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

// hangingAddr returns a loopback address that accepts connections and never
// answers: a Redis stuck in a long command, as seen from a client.
func hangingAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c) // held open, never read
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		<-done
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return l.Addr().String()
}

func client(t *testing.T, addr string) *redis.Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{
		Addr:                  addr,
		Protocol:              2,
		DisableIdentity:       true,
		ContextTimeoutEnabled: true,
		ReadTimeout:           30 * time.Second, // so that only the context can end a hang early
		MaxRetries:            -1,
		DialerRetries:         1, // refused at once, not after 5 tries
	})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

func local(t *testing.T) *localredis.Server {
	t.Helper()
	s, err := localredis.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

var perMinute3 = redisrate.PerMinute(3)

func TestFailErrorIsTyped(t *testing.T) {
	l := redisrate.NewLimiter(client(t, deadAddr(t)))
	res, err := l.Allow(context.Background(), "k", perMinute3)
	if !errors.Is(err, redisrate.ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
	var e *redisrate.Error
	if !errors.As(err, &e) || e.Key != "k" || e.Script != "gcra" {
		t.Fatalf("err = %#v, want a *redisrate.Error for gcra on k", err)
	}
	if errors.Is(err, redisrate.ErrInvalid) || errors.Is(err, redisrate.ErrForeignKey) {
		t.Fatalf("err %v is classified as the caller's fault", err)
	}
	if res != (redisrate.Result{}) {
		t.Fatalf("result %+v with an error, want the zero Result", res)
	}
}

func TestFailClosedAndOpen(t *testing.T) {
	rdb := client(t, deadAddr(t))
	for _, tc := range []struct {
		policy  redisrate.FailurePolicy
		allowed bool
		source  redisrate.Source
		retry   time.Duration
	}{
		{redisrate.FailClosed, false, redisrate.SourceFailClosed, 20 * time.Second},
		{redisrate.FailOpen, true, redisrate.SourceFailOpen, 0},
	} {
		t.Run(tc.policy.String(), func(t *testing.T) {
			l := redisrate.NewLimiter(rdb, redisrate.WithFailurePolicy(tc.policy))
			for _, call := range []func() (redisrate.Result, error){
				func() (redisrate.Result, error) { return l.Allow(context.Background(), "k", perMinute3) },
				func() (redisrate.Result, error) { return l.Check(context.Background(), "k", perMinute3) },
				func() (redisrate.Result, error) {
					return l.AllowMulti(context.Background(), "k", 1, perMinute3, redisrate.PerHour(100))
				},
			} {
				res, err := call()
				if err != nil {
					t.Fatal(err)
				}
				if res.Allowed != tc.allowed || res.Source != tc.source || !res.Degraded() ||
					res.RetryAfter != tc.retry || res.Capacity != 3 || res.Limit != perMinute3 {
					t.Fatalf("result %+v, want allowed=%v source=%v retry=%v capacity 3", res, tc.allowed, tc.source, tc.retry)
				}
				if !errors.Is(res.Cause, redisrate.ErrUnavailable) {
					t.Fatalf("Cause = %v, want ErrUnavailable", res.Cause)
				}
			}
		})
	}
}

// The caller's mistakes are errors whatever the policy: masking them would
// hide a bug behind "Redis is down".
func TestPolicyNeverMasksCallerErrors(t *testing.T) {
	mr := miniredis.RunT(t)
	fb := local(t).Limiter()
	for _, addr := range []string{mr.Addr(), deadAddr(t)} {
		for _, p := range []redisrate.FailurePolicy{redisrate.FailOpen, redisrate.FailClosed} {
			l := redisrate.NewLimiter(client(t, addr), redisrate.WithFailurePolicy(p), redisrate.WithFallback(fb))
			if _, err := l.Allow(context.Background(), "k", redisrate.Limit{Rate: -1, Period: time.Second}); !errors.Is(err, redisrate.ErrInvalid) {
				t.Errorf("%s, %v: bad limit gave %v, want ErrInvalid", addr, p, err)
			}
		}
	}
	mr.Set("user", "order 42")
	l := redisrate.NewLimiter(client(t, mr.Addr()), redisrate.WithFailurePolicy(redisrate.FailOpen), redisrate.WithFallback(fb))
	if _, err := l.Allow(context.Background(), "user", perMinute3); !errors.Is(err, redisrate.ErrForeignKey) {
		t.Fatalf("foreign key gave %v, want ErrForeignKey", err)
	}
	if v, _ := mr.Get("user"); v != "order 42" {
		t.Fatalf("user's value is now %q", v)
	}
}

// While Redis is away the fallback decides with the same limits (the same
// scripts, in process); when Redis is back, Redis decides again, from its
// own state.
func TestFallbackAndBack(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := client(t, mr.Addr())
	lr := local(t)
	l := redisrate.NewLimiter(rdb, redisrate.WithKeyPrefix("rate:"), redisrate.WithFallback(lr.Limiter()))
	ctx := context.Background()

	res, err := l.Allow(ctx, "k", perMinute3)
	if err != nil || !res.Allowed || res.Source != redisrate.SourceRedis || res.Degraded() || res.Cause != nil {
		t.Fatalf("Redis up: %+v, %v", res, err)
	}

	mr.Close()
	for i := range 4 {
		res, err := l.Allow(ctx, "k", perMinute3)
		if err != nil {
			t.Fatal(err)
		}
		if res.Source != redisrate.SourceFallback || !errors.Is(res.Cause, redisrate.ErrUnavailable) {
			t.Fatalf("Redis down, call %d: %+v", i, res)
		}
		if res.Allowed != (i < 3) || res.Capacity != 3 {
			t.Fatalf("fallback call %d: %+v, want the first 3 of 3/min admitted", i, res)
		}
		if i == 3 && (res.RetryAfter <= 0 || res.RetryAfter > 20*time.Second) {
			t.Fatalf("fallback denial: retry after %v", res.RetryAfter)
		}
	}
	// The fallback keeps the full key, prefix included, in its own store.
	if n, err := lr.Client().Exists(ctx, "rate:k").Result(); err != nil || n != 1 {
		t.Fatalf("fallback state under rate:k: %d, %v", n, err)
	}

	if err := mr.Restart(); err != nil {
		t.Fatal(err)
	}
	res, err = l.Allow(ctx, "k", perMinute3)
	if err != nil || res.Source != redisrate.SourceRedis || !res.Allowed || res.Remaining != 1 {
		t.Fatalf("Redis back: %+v, %v; want Redis's own state: 1 of 3 left", res, err)
	}
}

// A fallback that fails too leaves the decision to the policy, and the
// error names both failures.
func TestFallbackFailsToo(t *testing.T) {
	lr := local(t)
	fb := lr.Limiter()
	_ = lr.Close()
	rdb := client(t, deadAddr(t))

	_, err := redisrate.NewLimiter(rdb, redisrate.WithFallback(fb)).Allow(context.Background(), "k", perMinute3)
	if !errors.Is(err, redisrate.ErrUnavailable) || !strings.Contains(err.Error(), "fallback failed") {
		t.Fatalf("err = %v, want ErrUnavailable naming the fallback's failure", err)
	}
	res, err := redisrate.NewLimiter(rdb, redisrate.WithFallback(fb), redisrate.WithFailurePolicy(redisrate.FailClosed)).
		Allow(context.Background(), "k", perMinute3)
	if err != nil || res.Allowed || res.Source != redisrate.SourceFailClosed {
		t.Fatalf("%+v, %v: want a fail-closed denial", res, err)
	}
}

// A Redis that does not answer costs a caller its context's deadline, not
// more, and the fallback still answers although that deadline has passed.
func TestHangingRedisHonoursDeadline(t *testing.T) {
	rdb := client(t, hangingAddr(t))
	for _, tc := range []struct {
		name string
		opts []redisrate.Option
	}{
		{"error", nil},
		{"fallback", []redisrate.Option{redisrate.WithFallback(local(t).Limiter())}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := redisrate.NewLimiter(rdb, tc.opts...)
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			start := time.Now()
			res, err := l.Allow(ctx, "k", perMinute3)
			// Far below the client's 30 s ReadTimeout: the deadline ended it.
			if waited := time.Since(start); waited > 10*time.Second {
				t.Fatalf("call took %v with a 100ms deadline", waited)
			}
			if tc.opts == nil {
				if !errors.Is(err, redisrate.ErrUnavailable) {
					t.Fatalf("err = %v, want ErrUnavailable", err)
				}
				return
			}
			if err != nil || !res.Allowed || res.Source != redisrate.SourceFallback {
				t.Fatalf("%+v, %v: want a fallback decision", res, err)
			}
		})
	}
}

func TestFailureStrings(t *testing.T) {
	for v, want := range map[fmt_er]string{
		redisrate.FailError: "fail-error", redisrate.FailClosed: "fail-closed", redisrate.FailOpen: "fail-open",
		redisrate.FailurePolicy(9): "FailurePolicy(9)",
		redisrate.SourceRedis:      "redis", redisrate.SourceFallback: "fallback", redisrate.SourceFailOpen: "fail-open",
		redisrate.SourceFailClosed: "fail-closed", redisrate.Source(9): "Source(9)",
	} {
		if got := v.String(); got != want {
			t.Errorf("%#v.String() = %q, want %q", v, got, want)
		}
	}
}

type fmt_er interface{ String() string }

// Two limiters that fall back on each other, both down: one hop, then the
// policy, not an endless loop.
func TestFallbackCycle(t *testing.T) {
	a := redisrate.NewLimiter(client(t, deadAddr(t)), redisrate.WithFailurePolicy(redisrate.FailClosed))
	b := redisrate.NewLimiter(client(t, deadAddr(t)), redisrate.WithFallback(a))
	redisrate.WithFallback(b)(a)
	res, err := b.Allow(context.Background(), "k", perMinute3)
	if err != nil || res.Allowed || res.Source != redisrate.SourceFailClosed {
		t.Fatalf("%+v, %v: want a's fail-closed denial", res, err)
	}
	var e *redisrate.Error
	if !errors.As(res.Cause, &e) || !strings.Contains(res.Cause.Error(), "\n") {
		t.Fatalf("Cause %v: want both failures", res.Cause)
	}
	if _, err := a.Allow(context.Background(), "k", perMinute3); err != nil {
		t.Fatal(err)
	}
}
