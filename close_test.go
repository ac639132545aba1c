package redisrate

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestReserveLeaseRace: the timer of a lease of 1 ns fires while Reserve
// is still arming it; Reserve's write of the timer's stop and the timer's
// read of it must not race (#40 finding 5: go test -race reported it).
// Every lease gives its unit back.
func TestReserveLeaseRace(t *testing.T) {
	t.Parallel() // its own Redis; runs beside the other slow tests
	needV3Mode(t, "upto")
	f := newFakeRedis(t)
	l := testLimiter(f.rdb)
	ctx, lim := context.Background(), PerHour(10_000)
	const n = 2000
	for i := range n {
		v, err := l.Reserve(ctx, Request{Kind: KindUpTo, Key: "k", Limits: []Limit{lim}, N: 1, Lease: time.Nanosecond})
		if err != nil || v.Result.Units != 1 {
			t.Fatalf("lease %d: %+v %v", i, v, err)
		}
	}
	if err := l.Close(ctx); err != nil { // waits for the refunds in flight
		t.Fatal(err)
	}
	if left := peekLeft(t, testLimiter(f.rdb), "k", lim); left != 10_000 {
		t.Errorf("%d left after %d leases of 1 ns; want every unit back", left, n)
	}
}

// TestLimiterClose: Close gives back what the leases hold, one refund
// each, stops their timers, and fails every later call, of the Limiter and
// of those made from it, with an error matching ErrNoClient that says so;
// closing a Limiter made with With leaves its parent open.
func TestLimiterClose(t *testing.T) {
	needV3Mode(t, "upto")
	f, log := newFakeRedis(t), &cmdLog{}
	c := newTimedClock(f)
	l := testLimiterOn(c, f.rdb)
	child := l.With(WithShadowMode())
	f.rdb.AddHook(log)
	ctx, lim := context.Background(), PerHour(20)
	a, _ := l.Reserve(ctx, Request{Kind: KindUpTo, Key: "k", Limits: []Limit{lim}, N: 5, Lease: time.Hour})
	b, _ := child.Reserve(ctx, Request{Kind: KindUpTo, Key: "k", Limits: []Limit{lim}, N: 5, Lease: time.Hour})
	if a == nil || b == nil || !a.Take(2) || !b.Take(1) {
		t.Fatalf("leases: %+v %+v", a, b)
	}
	log.take()
	if err := l.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if n := log.scriptCalls(); n != 2 {
		t.Errorf("Close made %d script calls; want one refund per lease", n)
	}
	if left := peekLeft(t, testLimiter(f.rdb), "k", lim); left != 17 {
		t.Errorf("%d left after Close; want 17 (20 less the 3 spent)", left)
	}
	log.take()
	c.advance(2 * time.Hour)
	if n := log.scriptCalls(); n != 0 {
		t.Errorf("the leases' timers made %d calls after Close", n)
	}
	if a.Take(1) || b.Take(1) {
		t.Error("Take on a lease given back by Close: want false")
	}
	for name, lim := range map[string]*Limiter{"closed": l, "made with With": child} {
		_, err := lim.Allow(ctx, "k", PerHour(20))
		if !errors.Is(err, ErrNoClient) || !strings.Contains(err.Error(), "closed") {
			t.Errorf("Allow on the %s Limiter: %v; want ErrNoClient, closed", name, err)
		}
		if _, err := lim.Reserve(ctx, Request{Key: "k", Limits: []Limit{PerHour(20)}}); !errors.Is(err, ErrNoClient) {
			t.Errorf("Reserve on the %s Limiter: %v", name, err)
		}
		if _, err := lim.DecideBatch(ctx, []Request{{Key: "k", Limits: []Limit{PerHour(20)}}}); !errors.Is(err, ErrNoClient) {
			t.Errorf("DecideBatch on the %s Limiter: %v", name, err)
		}
	}
	if err := l.Close(ctx); err != nil {
		t.Errorf("Close again: %v", err)
	}
	if _, err := a.Close(ctx); !errors.Is(err, ErrInvalid) {
		t.Errorf("closing a lease that Close gave back: %v; want already settled", err)
	}

	parent := testLimiterOn(c, f.rdb)
	part := parent.With()
	if err := part.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := parent.Allow(ctx, "k2", lim); err != nil {
		t.Errorf("the parent of a closed Limiter: %v; want it open", err)
	}
	var zero Limiter
	if err := zero.Close(ctx); err != nil {
		t.Errorf("Close of the zero Limiter: %v", err)
	}
}

// TestLimiterCloseEndsProbes: a probe in flight (on a Redis that never
// answers, under a decision timeout of an hour) is ended by Close, which
// returns once it has.
func TestLimiterCloseEndsProbes(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: blackhole(t), Protocol: 2, DisableIdentity: true, MaxRetries: -1, ReadTimeout: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	l := testLimiter(rdb, WithDecisionTimeout(time.Hour))
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := l.Allow(ctx, "k", PerSecond(1)); err == nil {
		t.Fatal("a call to a Redis that never answers: no error")
	}
	if err := l.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	l.health.probes.Wait() // ended: without Close, an hour
}

// TestLeaseTimerClosedClient: a lease whose Redis client was closed before
// its timer fired logs no outage (nothing is down: the client was closed
// by its owner), does not open the breaker, and says that its units were
// not given back, rather than keeping them silently (#40 finding 6).
func TestLeaseTimerClosedClient(t *testing.T) {
	needV3Mode(t, "upto")
	for _, policy := range []FailurePolicy{FailError, FailOpen} {
		t.Run(policy.String(), func(t *testing.T) {
			f := newFakeRedis(t)
			c := newTimedClock(f)
			out := &syncBuffer{}
			l := testLimiterOn(c, f.rdb, WithLogger(slog.New(slog.NewTextHandler(out, nil))), WithFailurePolicy(policy))
			lease, err := l.Reserve(context.Background(), Request{Kind: KindUpTo, Key: "k", Limits: []Limit{PerHour(10)}, N: 4, Lease: time.Minute})
			if err != nil || !lease.Take(1) {
				t.Fatalf("lease: %+v %v", lease, err)
			}
			_ = f.rdb.Close()
			c.advance(time.Minute)
			l.health.probes.Wait()
			logged := out.String()
			if strings.Contains(logged, outageMsg) {
				t.Errorf("a lease on a closed client logged an outage:\n%s", logged)
			}
			if !strings.Contains(logged, "not given back") || !strings.Contains(logged, "units=3") {
				t.Errorf("the lease's 3 units kept were not logged:\n%s", logged)
			}
			if l.health.failing.Load() {
				t.Error("a closed client opened the circuit breaker")
			}
			c.advance(time.Hour) // no retry: nothing to wait for
			if n := strings.Count(out.String(), "not given back"); n != 1 {
				t.Errorf("logged %d times; want once", n)
			}
		})
	}
}
