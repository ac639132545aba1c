package redisrate

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// timedClock is a redisClock (miniredis's time, moved by the test) that
// runs the Limiter's timers: a lease's lifetime ends when the test moves
// the time past it, and its refund is made then, in the test's goroutine.
type timedClock struct {
	*redisClock
	mu     sync.Mutex
	timers []*fakeTimer
}

type fakeTimer struct {
	at   time.Time
	f    func()
	done bool
}

func newTimedClock(f *fakeRedis) *timedClock { return &timedClock{redisClock: newRedisClock(f)} }

func (c *timedClock) AfterFunc(d time.Duration, f func()) func() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{at: c.Now().Add(d), f: f}
	c.timers = append(c.timers, t)
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		stopped := !t.done
		t.done = true
		return stopped
	}
}

// advance moves the time by d, running each timer due on the way at its
// own time, in order.
func (c *timedClock) advance(d time.Duration) {
	end := c.Now().Add(d)
	for {
		c.mu.Lock()
		var next *fakeTimer
		for _, t := range c.timers {
			if !t.done && !t.at.After(end) && (next == nil || t.at.Before(next.at)) {
				next = t
			}
		}
		if next != nil {
			next.done = true
		}
		c.mu.Unlock()
		if next == nil {
			break
		}
		if wait := next.at.Sub(c.Now()); wait > 0 {
			c.f.advance(wait)
		}
		next.f()
	}
	if wait := end.Sub(c.Now()); wait > 0 {
		c.f.advance(wait)
	}
}

// peekLeft is what key has left under lims, read without taking anything.
func peekLeft(t *testing.T, l *Limiter, key string, lims ...Limit) int64 {
	t.Helper()
	res, err := l.Decide(context.Background(), Request{Kind: KindPeek, Key: key, Limits: lims})
	if err != nil {
		t.Fatalf("peek %s: %v", key, err)
	}
	return res.Remaining
}

// loggedLimiter is a Limiter on a fake Redis, with a log of the commands
// sent.
func loggedLimiter(t *testing.T) (*Limiter, *cmdLog) {
	f, log := newFakeRedis(t), &cmdLog{}
	f.rdb.AddHook(log)
	return testLimiter(f.rdb), log
}

// TestReserveSettleDown: settling below the reservation gives the
// difference back, in one refund, on every key of the reservation;
// settling it again is an error that gives nothing back twice.
func TestReserveSettleDown(t *testing.T) {
	needV3Mode(t, "refund")
	l, log := loggedLimiter(t)
	ctx := context.Background()
	user, org := PerHour(20), PerHour(100)
	r, err := l.Reserve(ctx, Request{Keys: []KeyLimit{{"{o}:u", user}, {"{o}", org}}, N: 10})
	if err != nil || !r.Result.Allowed || r.Result.Units != 10 {
		t.Fatalf("reserve 10: %+v %v", r, err)
	}
	log.take()
	res, err := r.Settle(ctx, 4)
	if err != nil || !res.Allowed || res.Units != 6 || res.Remaining != 16 || res.Key != "{o}:u" {
		t.Fatalf("settle 4 of 10: %+v %v, want 6 given back, 16 left on the user's key", res, err)
	}
	if n := log.scriptCalls(); n != 1 {
		t.Errorf("settling made %d script calls, want 1", n)
	}
	if u, o := peekLeft(t, l, "{o}:u", user), peekLeft(t, l, "{o}", org); u != 16 || o != 96 {
		t.Errorf("after settling 4: user %d, org %d left; want 16 and 96", u, o)
	}
	log.take()
	res, err = r.Settle(ctx, 0)
	var e *Error
	if !errors.Is(err, ErrInvalid) || !errors.As(err, &e) || !strings.Contains(err.Error(), "already settled") || e.Key != "{o}:u" || res != (Result{}) {
		t.Errorf("settle twice: %+v %v, want an *Error matching ErrInvalid, already settled", res, err)
	}
	if n := log.scriptCalls(); n != 0 {
		t.Errorf("a second Settle sent %d calls", n)
	}
	if u := peekLeft(t, l, "{o}:u", user); u != 16 {
		t.Errorf("after a second Settle: %d left, want 16 (no second refund)", u)
	}
}

// TestReserveSettleUp: settling past the reservation, and past the limit,
// records the difference with force: a debt the next Allow waits for.
func TestReserveSettleUp(t *testing.T) {
	needV3Mode(t, "force")
	f := newFakeRedis(t)
	l := testLimiterOn(newRedisClock(f), f.rdb)
	ctx := context.Background()
	lim := PerHour(10) // one unit every 6 minutes
	r, err := l.Reserve(ctx, Request{Key: "k", Limits: []Limit{lim}, N: 5})
	if err != nil || r.Result.Units != 5 {
		t.Fatalf("reserve 5: %+v %v", r, err)
	}
	res, err := r.Settle(ctx, 18)
	if err != nil || res.Units != 13 || res.Allowed || res.Remaining != 0 {
		t.Fatalf("settle 18 of 5 under 10/h: %+v %v, want 13 forced, which allow would have denied", res, err)
	}
	res, err = l.Allow(ctx, "k", lim)
	if err != nil || res.Allowed || res.RetryAfter != 54*time.Minute {
		t.Fatalf("allow in debt: %+v %v, want denied until 9 units drain (54m)", res, err)
	}
	f.advance(54 * time.Minute)
	if res, err := l.Allow(ctx, "k", lim); err != nil || !res.Allowed {
		t.Errorf("allow once the debt drained: %+v %v", res, err)
	}
}

// TestReserveCancelAndNoOps: Settle(0) gives everything back; settling
// what was taken, or a denied reservation, makes no call; a reservation
// never settled keeps what it took.
func TestReserveCancelAndNoOps(t *testing.T) {
	needV3Mode(t, "refund")
	l, log := loggedLimiter(t)
	ctx := context.Background()
	lim := PerMinute(10)
	req := Request{Key: "k", Limits: []Limit{lim}, N: 7}
	r, _ := l.Reserve(ctx, req)
	if res, err := r.Settle(ctx, 0); err != nil || res.Units != 7 || res.Remaining != 10 {
		t.Fatalf("cancel: %+v %v, want all 7 back", res, err)
	}
	kept, _ := l.Reserve(ctx, req) // never settled
	exact, _ := l.Reserve(ctx, Request{Key: "k", Limits: []Limit{lim}, N: 3})
	denied, err := l.Reserve(ctx, req)
	if err != nil || denied == nil || denied.Result.Allowed || denied.Result.Units != 0 {
		t.Fatalf("a reservation of 7 with none left: %+v %v, want it back, denied", denied, err)
	}
	log.take()
	for name, settle := range map[string]func() (Result, error){
		"exact":  func() (Result, error) { return exact.Settle(ctx, 3) },
		"denied": func() (Result, error) { return denied.Settle(ctx, 5) },
		"zero":   func() (Result, error) { return (&Reservation{}).Settle(ctx, 0) },
	} {
		if res, err := settle(); err != nil || res != (Result{}) {
			t.Errorf("%s: %+v %v, want the zero Result, no error", name, res, err)
		}
	}
	if n := log.scriptCalls(); n != 0 {
		t.Errorf("settling with nothing to settle sent %d calls", n)
	}
	if left := peekLeft(t, l, "k", lim); left != 0 || !kept.Result.Allowed {
		t.Errorf("%d left, want 0: the unsettled reservation keeps its 7", left)
	}
}

// TestReserveRefusesBadRequests: a kind that reserves nothing, a negative
// lease, a bad settlement, and a Lease given to Decide.
func TestReserveRefusesBadRequests(t *testing.T) {
	l := testLimiter(newFakeRedis(t).rdb)
	ctx, lims := context.Background(), []Limit{PerMinute(10)}
	for _, k := range []Kind{KindCheck, KindPeek, KindWait, KindRefund, KindForce, kindReset, KindForce + 2} {
		if r, err := l.Reserve(ctx, Request{Kind: k, Key: "k", Limits: lims}); !errors.Is(err, ErrInvalid) || r != nil || !strings.Contains(err.Error(), "Reserve takes KindAllow") {
			t.Errorf("Reserve of %v: %v %v, want ErrInvalid", k, r, err)
		}
	}
	if _, err := l.Reserve(ctx, Request{Key: "k", Limits: lims, Lease: -time.Second}); !errors.Is(err, ErrInvalid) {
		t.Errorf("a negative lease: %v", err)
	}
	if _, err := l.Decide(ctx, Request{Key: "k", Limits: lims, Lease: time.Second}); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "Reserve") {
		t.Errorf("Decide with a Lease: %v, want ErrInvalid pointing to Reserve", err)
	}
	r, _ := l.Reserve(ctx, Request{Key: "k", Limits: lims, N: 2})
	if _, err := r.Settle(ctx, -2); !errors.Is(err, ErrInvalid) {
		t.Errorf("settle -2: %v", err)
	}
	if res, err := r.Settle(ctx, 2); err != nil || res != (Result{}) {
		t.Errorf("settle after a refused settlement: %+v %v, want it still open", res, err)
	}
	var nilRes *Reservation
	if _, err := nilRes.Settle(ctx, 1); !errors.Is(err, ErrInvalid) || nilRes.Take(1) {
		t.Errorf("a nil Reservation: %v", err)
	}
}

// TestReserveSettleDuringOutage: a settlement Redis cannot decide is an
// error matching ErrUnavailable whatever the failure policy (the policy's
// answer would hide that nothing was given back or recorded), the
// observer sees the call as the policy answered it (Kind refund or
// force), and the reservation stays open:
// once Redis is back, Settle again records it (#40 finding 4).
func TestReserveSettleDuringOutage(t *testing.T) {
	needV3Mode(t, "force")
	for _, c := range []struct {
		policy FailurePolicy
		used   int64
		want   string
		left   int64 // after the retry
	}{
		{FailOpen, 1, "end refund k allowed=true source=fail-open err=nil", 9},
		{FailClosed, 1, "end refund k allowed=false source=fail-closed err=nil", 9},
		{FailError, 1, "end refund k allowed=false source=redis err=unavailable", 9},
		{FailOpen, 9, "end force k allowed=true source=fail-open err=nil", 1},
		{FailError, 9, "end force k allowed=false source=redis err=unavailable", 1},
	} {
		t.Run(fmt.Sprintf("%v/used %d", c.policy, c.used), func(t *testing.T) {
			f, obs := newFakeRedis(t), &recorder{}
			l := testLimiter(fastClient(t, f.mr.Addr()), WithFailurePolicy(c.policy), WithObserver(obs), WithCircuitBreaker(0))
			ctx := context.Background()
			lim := PerHour(10)
			r, err := l.Reserve(ctx, Request{Key: "k", Limits: []Limit{lim}, N: 4})
			if err != nil || r.Result.Units != 4 {
				t.Fatalf("reserve: %+v %v", r, err)
			}
			f.mr.Close()
			obs.take()
			res, err := r.Settle(ctx, c.used)
			if !errors.Is(err, ErrUnavailable) {
				t.Errorf("settle in an outage: %+v %v; want ErrUnavailable under every policy", res, err)
			}
			if ev := obs.take(); len(ev) != 2 || ev[1] != c.want+" ctx="+strings.Fields(c.want)[1]+":k" {
				t.Errorf("observed %q, want the end %q", ev, c.want)
			}
			if err := f.mr.Restart(); err != nil {
				t.Fatal(err)
			}
			if res, err := r.Settle(ctx, c.used); err != nil || res.Source != SourceRedis {
				t.Fatalf("settle again once Redis is back: %+v %v; want it decided", res, err)
			}
			if n := peekLeft(t, l, "k", lim); n != c.left {
				t.Errorf("after the retried settlement of %d used: %d left, want %d", c.used, n, c.left)
			}
			if _, err := r.Settle(ctx, c.used); !errors.Is(err, ErrInvalid) {
				t.Errorf("settle a third time: %v, want already settled", err)
			}
		})
	}
}

// TestSettleDetachedFromCaller: a Settle under a cancelled context (a
// client that went away) still gives back, bounded by its own timeout
// (#40 finding 4: it failed, and a retry said "already settled").
func TestSettleDetachedFromCaller(t *testing.T) {
	needV3Mode(t, "refund")
	l := testLimiter(newFakeRedis(t).rdb)
	lim := PerHour(100)
	r, err := l.Reserve(context.Background(), Request{Key: "k", Limits: []Limit{lim}, N: 30})
	if err != nil || r.Result.Units != 30 {
		t.Fatalf("reserve 30: %+v %v", r, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if res, err := r.Settle(ctx, 0); err != nil || res.Units != 30 {
		t.Fatalf("settle under a cancelled context: %+v %v; want the 30 units back", res, err)
	}
	if n := peekLeft(t, l, "k", lim); n != 100 {
		t.Errorf("%d left, want 100", n)
	}
}

// TestSettleRefusedStaysOpen: a settlement refused (a debt past what one
// call records: Settle(MaxInt64)) uses nothing up: the reservation can be
// settled again, correctly (#38 finding 11).
func TestSettleRefusedStaysOpen(t *testing.T) {
	needV3Mode(t, "force")
	l := testLimiter(newFakeRedis(t).rdb)
	ctx, lim := context.Background(), PerHour(100)
	r, err := l.Reserve(ctx, Request{Key: "k", Limits: []Limit{lim}, N: 30})
	if err != nil || r.Result.Units != 30 {
		t.Fatalf("reserve 30: %+v %v", r, err)
	}
	if _, err := r.Settle(ctx, math.MaxInt64); err == nil {
		t.Fatal("Settle(MaxInt64): no error")
	}
	if res, err := r.Settle(ctx, 10); err != nil || res.Units != 20 {
		t.Fatalf("settle 10 after a refused settlement: %+v %v; want 20 back", res, err)
	}
	if n := peekLeft(t, l, "k", lim); n != 90 {
		t.Errorf("%d left, want 90", n)
	}
}

// TestReserveDegraded: a reservation admitted without Redis's units
// (FailOpen, shadow mode's would-deny) took nothing there, so its whole
// use is forced when it is settled, and a lease of it may spend N.
func TestReserveDegraded(t *testing.T) {
	needV3Mode(t, "force")
	ctx := context.Background()
	f := newFakeRedis(t)
	lim := PerHour(10)
	l := testLimiter(f.rdb, WithShadowMode())
	_, _ = l.AllowN(ctx, "k", lim, 10)
	r, err := l.Reserve(ctx, Request{Key: "k", Limits: []Limit{lim}, N: 3})
	if err != nil || !r.Result.Allowed || !r.Result.WouldDeny || r.Result.Units != 0 {
		t.Fatalf("shadow reservation with none left: %+v %v", r, err)
	}
	if !r.Take(3) || r.Take(1) {
		t.Error("a shadow admission's Take: want its 3 units, no more")
	}
	if res, err := r.Close(ctx); err != nil || res.Units != 3 {
		t.Errorf("settle 3 used, none taken: %+v %v, want 3 forced", res, err)
	}
	down := testLimiter(downRedis(t), WithFailurePolicy(FailOpen))
	r, err = down.Reserve(ctx, Request{Kind: KindUpTo, Key: "k", Limits: []Limit{lim}, N: 5})
	if err != nil || r.Result.Source != SourceFailOpen || !r.Take(5) {
		t.Fatalf("a FailOpen lease: %+v %v, want its 5 units to spend", r, err)
	}
}

// TestLease: an up-to reservation takes what there is, Take spends it
// locally, and when its lifetime ends Take stops and the rest goes back by
// itself; Settle after that is an error, Settle before it stops the timer.
func TestLease(t *testing.T) {
	needV3Mode(t, "upto")
	f, log := newFakeRedis(t), &cmdLog{}
	c := newTimedClock(f)
	l := testLimiterOn(c, f.rdb)
	f.rdb.AddHook(log)
	ctx := context.Background()
	lim := PerHour(10)
	_, _ = l.AllowN(ctx, "k", lim, 5)
	lease, err := l.Reserve(ctx, Request{Kind: KindUpTo, Key: "k", Limits: []Limit{lim}, N: 8, Lease: time.Minute})
	if err != nil || lease.Result.Units != 5 {
		t.Fatalf("lease of up to 8 with 5 left: %+v %v", lease, err)
	}
	log.take()
	if !lease.Take(3) || lease.Take(3) || !lease.Take(1) || lease.Take(0) {
		t.Error("Take of 3, 3, 1, 0 from 5: want true, false, true, false")
	}
	if n := log.scriptCalls(); n != 0 {
		t.Errorf("Take made %d calls", n)
	}
	c.advance(time.Minute)
	if lease.Take(1) {
		t.Error("Take after the lifetime: want false")
	}
	// 5 taken, 4 spent: 1 back at the lifetime's end (and a minute's drain).
	if left := peekLeft(t, l, "k", lim); left != 1 {
		t.Errorf("after the lease's end: %d left, want the 1 unspent unit back", left)
	}
	if _, err := lease.Close(ctx); !errors.Is(err, ErrInvalid) {
		t.Errorf("settle after the lifetime's refund: %v, want already settled", err)
	}
	early, _ := l.Reserve(ctx, Request{Kind: KindUpTo, Key: "k", Limits: []Limit{lim}, N: 1, Lease: time.Minute})
	if res, err := early.Close(ctx); err != nil || res.Units != 1 {
		t.Fatalf("close a lease with nothing spent: %+v %v", res, err)
	}
	log.take()
	c.advance(time.Hour)
	if n := log.scriptCalls(); n != 0 {
		t.Errorf("a lease settled early was refunded again at its lifetime's end (%d calls)", n)
	}
}

// TestLeaseTakeConcurrently: goroutines that share a lease spend exactly
// its units between them.
func TestLeaseTakeConcurrently(t *testing.T) {
	needV3Mode(t, "upto")
	l := testLimiter(newFakeRedis(t).rdb)
	lease, err := l.Reserve(context.Background(), Request{Kind: KindUpTo, Key: "k", Limits: []Limit{PerHour(50)}, N: 50, Lease: time.Hour})
	if err != nil || lease.Result.Units != 50 {
		t.Fatalf("lease: %+v %v", lease, err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	taken := 0
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for lease.Take(1) {
				mu.Lock()
				taken++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if taken != 50 {
		t.Errorf("8 goroutines took %d units of a lease of 50", taken)
	}
	if res, err := lease.Close(context.Background()); err != nil || res != (Result{}) {
		t.Errorf("close a lease spent whole: %+v %v, want no call", res, err)
	}
}

// TestLeaseRealTimer: on the real clock the lifetime's end is a timer of
// its own, which refunds without anyone calling.
func TestLeaseRealTimer(t *testing.T) {
	needV3Mode(t, "upto")
	l := testLimiter(newFakeRedis(t).rdb)
	ctx, lim := context.Background(), PerHour(10)
	lease, err := l.Reserve(ctx, Request{Kind: KindUpTo, Key: "k", Limits: []Limit{lim}, N: 4, Lease: 20 * time.Millisecond})
	if err != nil || lease.Result.Units != 4 || !lease.Take(1) {
		t.Fatalf("lease: %+v %v", lease, err)
	}
	for deadline := time.Now().Add(time.Minute); peekLeft(t, l, "k", lim) != 9; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the lease's 3 unspent units did not come back within a minute: %d left", peekLeft(t, l, "k", lim))
		}
	}
}

// guarantee4 is CONTRACT.md's guarantee 4: the most units lim admits in
// any span of t.
func guarantee4(lim Limit, t time.Duration) int64 {
	rate, p, burst := float64(lim.Rate), float64(lim.Period), float64(lim.Capacity())
	switch lim.Algorithm {
	case GCRA, LeakyBucket:
		return int64(math.Floor(burst + rate*float64(t)/p))
	case TokenBucket:
		return int64(burst + rate*(1+math.Floor(float64(t)/p)))
	case SlidingLog:
		return int64(rate * (1 + math.Floor(float64(t)/p)))
	}
	return int64(rate * (1 + math.Ceil(float64(t)/p))) // the windows
}

// TestLeaseBound holds leases to their documented bound on a fake clock:
// three holders renew leases of random sizes, spend them at random, close
// some early, let the others run out, while plain AllowN calls compete;
// in every span of t the units spent (by Take, and admitted by AllowN)
// are at most guarantee 4's bound for t plus the lifetime.
func TestLeaseBound(t *testing.T) {
	t.Parallel() // its own Redis; runs beside the other slow tests
	needV3Mode(t, "upto")
	const lifetime = 300 * time.Millisecond
	for a := GCRA; a < numAlgorithms; a++ {
		t.Run(a.String(), func(t *testing.T) {
			f := newFakeRedis(t)
			c := newTimedClock(f)
			l := testLimiterOn(c, f.rdb)
			ctx, rng := context.Background(), rand.New(rand.NewPCG(uint64(a), 30))
			lim := Per(4, 200*time.Millisecond).WithBurst(5).WithAlgorithm(a) // 20 a second
			if a == SlidingWindow || a == FixedWindow || a == SlidingLog {
				lim = Per(20, time.Second).WithAlgorithm(a)
			}
			req := Request{Kind: KindUpTo, Key: "k", Limits: []Limit{lim}, Lease: lifetime}
			var spent []time.Duration // one entry per unit, at the time it was spent
			start := c.Now()
			spend := func(n int64) {
				for range n {
					spent = append(spent, c.Now().Sub(start))
				}
			}
			holders := make([]*Reservation, 3)
			for range 3000 {
				c.advance(time.Duration(rng.IntN(20)) * time.Millisecond)
				i := rng.IntN(len(holders))
				switch h := holders[i]; {
				case h == nil || rng.IntN(10) == 0:
					if h != nil && rng.IntN(2) == 0 {
						_, _ = h.Close(ctx) // closed early; or left to run out
					}
					req.N = 1 + rng.Int64N(6)
					r, err := l.Reserve(ctx, req)
					if err != nil {
						t.Fatal(err)
					}
					holders[i] = r
				case rng.IntN(4) == 0:
					n := 1 + rng.Int64N(3)
					if res, err := l.AllowN(ctx, "k", lim, n); err == nil && res.Allowed {
						spend(n)
					}
				default:
					if n := 1 + rng.Int64N(3); h.Take(n) {
						spend(n)
					}
				}
			}
			checkSpans(t, lim, lifetime, spent)
		})
	}
}

// checkSpans holds every span between two spends to guarantee 4's bound
// for its length plus the lifetime.
func checkSpans(t *testing.T, lim Limit, lifetime time.Duration, spent []time.Duration) {
	t.Helper()
	sort.Slice(spent, func(i, j int) bool { return spent[i] < spent[j] })
	if len(spent) < 200 {
		t.Fatalf("only %d units spent: the test exercises nothing", len(spent))
	}
	worst := 0.0
	for i := range spent {
		for j := i; j < len(spent); j++ {
			span := spent[j] - spent[i]
			n, bound := int64(j-i+1), guarantee4(lim, span+lifetime)
			if n > bound {
				t.Fatalf("%d units spent in %v (from %v), more than %d, guarantee 4's bound for %v plus the lifetime", n, span, spent[i], bound, span)
			}
			worst = max(worst, float64(n)/float64(bound))
		}
	}
	t.Logf("%d units spent; the fullest span used %.0f%% of its bound", len(spent), 100*worst)
}
