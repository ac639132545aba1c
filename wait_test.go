package redisrate

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// redisClock is a Limiter's clock on miniredis's time: Sleep moves the fake
// clock instead of sleeping, and Now is the real time at the start of the
// test plus the fake time that has passed since, so that a context
// deadline (which runs on the real clock) can be compared with it.
type redisClock struct {
	f         *fakeRedis
	realStart time.Time
	fakeStart time.Time
	sleeps    []time.Duration
}

func newRedisClock(f *fakeRedis) *redisClock {
	return &redisClock{f: f, realStart: time.Now(), fakeStart: f.now}
}

func (c *redisClock) Now() time.Time { return c.realStart.Add(c.f.now.Sub(c.fakeStart)) }

func (c *redisClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.sleeps = append(c.sleeps, d)
	c.f.advance(d)
	return nil
}

func TestWaitAdmittedAtOnce(t *testing.T) {
	f := newFakeRedis(t)
	c := newRedisClock(f)
	l := testLimiterOn(c, f.rdb)
	res, err := l.Wait(context.Background(), "k", PerSecond(2))
	if err != nil || !res.Allowed || res.Remaining != 1 {
		t.Fatalf("Wait = %v, %v; want allowed with 1 left", res, err)
	}
	if len(c.sleeps) != 0 {
		t.Errorf("slept %v before an admitted request", c.sleeps)
	}
}

// Every sleep is at least the reply's RetryAfter and at most a tenth more,
// and the sleeps are not all the same (jitter).
func TestWaitSleepsRetryAfterWithJitter(t *testing.T) {
	for _, algo := range []Algorithm{GCRA, TokenBucket, LeakyBucket, SlidingWindow, FixedWindow, SlidingLog} {
		t.Run(algo.String(), func(t *testing.T) {
			f := newFakeRedis(t)
			c := newRedisClock(f)
			l := testLimiterOn(c, f.rdb)
			ctx := context.Background()
			lim := Per(2, time.Second).WithAlgorithm(algo)
			for i := range 20 {
				// Use up what is left, so that the next Wait must sleep.
				var probe Result
				for probe.Allowed = true; probe.Allowed; {
					var err error
					if probe, err = l.Allow(ctx, "k", lim); err != nil {
						t.Fatal(err)
					}
				}
				before := len(c.sleeps)
				res, err := l.Wait(ctx, "k", lim)
				if err != nil || !res.Allowed {
					t.Fatalf("round %d: Wait = %v, %v", i, res, err)
				}
				slept := c.sleeps[before:]
				if len(slept) != 1 {
					t.Fatalf("round %d: slept %v; want one sleep", i, slept)
				}
				if ra := probe.RetryAfter; slept[0] < ra || slept[0] > ra+ra/10 {
					t.Errorf("round %d: slept %v for RetryAfter %v; want within [%v, %v]", i, slept[0], ra, ra, ra+ra/10)
				}
			}
			distinct := map[time.Duration]bool{}
			for _, d := range c.sleeps {
				distinct[d] = true
			}
			if len(distinct) < 2 {
				t.Errorf("20 sleeps took %d distinct value(s) %v: no jitter", len(distinct), c.sleeps)
			}
		})
	}
}

// Waiting for several turns in a row: each Wait is admitted after the
// limit's interval, never early.
func TestWaitPacesRequests(t *testing.T) {
	f := newFakeRedis(t)
	l := testLimiterOn(newRedisClock(f), f.rdb)
	ctx := context.Background()
	lim := PerSecond(4) // one every 250ms after a burst of 4
	start := f.now
	for i := range 12 {
		if _, err := l.Wait(ctx, "k", lim); err != nil {
			t.Fatalf("Wait #%d: %v", i, err)
		}
	}
	// 4 at once, then 8 more at 250ms each: at least 2s, and the jitter adds
	// at most a tenth.
	if got := f.now.Sub(start); got < 2*time.Second || got > 2200*time.Millisecond {
		t.Errorf("12 waits took %v of fake time; want within [2s, 2.2s]", got)
	}
}

func TestWaitNeverFits(t *testing.T) {
	f := newFakeRedis(t)
	c := newRedisClock(f)
	l := testLimiterOn(c, f.rdb)
	res, err := l.WaitN(context.Background(), "k", PerSecond(2), 3)
	if !errors.Is(err, ErrExceedsCapacity) {
		t.Fatalf("WaitN(3) under 2/s: err = %v; want ErrExceedsCapacity", err)
	}
	if !res.Never() || res.Capacity != 2 {
		t.Errorf("result = %v; want Never with capacity 2", res)
	}
	if len(c.sleeps) != 0 {
		t.Errorf("slept %v for a cost that never fits", c.sleeps)
	}
	if got := f.dump("k"); got != "none|<nil>|-2ns" {
		t.Errorf("key after a hopeless wait = %s; want none", got)
	}
}

// A turn that comes after the deadline fails at once, without sleeping and
// without recording anything.
func TestWaitDeadlineTooSoon(t *testing.T) {
	f := newFakeRedis(t)
	c := newRedisClock(f)
	l := testLimiterOn(c, f.rdb)
	lim := PerMinute(1)
	if _, err := l.Allow(context.Background(), "k", lim); err != nil {
		t.Fatal(err)
	}
	before := f.dump("k")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := l.Wait(ctx, "k", lim)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait with 30s left for a 60s turn: err = %v; want DeadlineExceeded", err)
	}
	if res.Allowed || res.RetryAfter != time.Minute {
		t.Errorf("result = %v; want the denial with RetryAfter 1m", res)
	}
	if len(c.sleeps) != 0 {
		t.Errorf("slept %v though the deadline comes first", c.sleeps)
	}
	if after := f.dump("k"); after != before {
		t.Errorf("key changed by a failed wait: %s -> %s", before, after)
	}
}

// The deadline is checked before every sleep: the first turn fits, the
// second does not, and the jitter never pushes a sleep past the deadline.
func TestWaitDeadlineAfterSomeTurns(t *testing.T) {
	f := newFakeRedis(t)
	c := newRedisClock(f)
	l := testLimiterOn(c, f.rdb)
	lim := PerSecond(1)
	ctx, cancel := context.WithDeadline(context.Background(), c.Now().Add(1500*time.Millisecond))
	defer cancel()
	for i := range 2 { // the first is admitted at once, the second after 1s
		if _, err := l.Wait(ctx, "k", lim); err != nil {
			t.Fatalf("Wait #%d: %v", i, err)
		}
	}
	_, err := l.Wait(ctx, "k", lim)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("third Wait with about 0.5s left for a 1s turn: err = %v; want DeadlineExceeded", err)
	}
	if len(c.sleeps) != 1 || c.sleeps[0] < time.Second || c.sleeps[0] > 1100*time.Millisecond {
		t.Errorf("sleeps = %v; want one in [1s, 1.1s]", c.sleeps)
	}

	// With the deadline right at the turn, the jitter is cut off.
	f2 := newFakeRedis(t)
	c2 := newRedisClock(f2)
	l2 := testLimiterOn(c2, f2.rdb)
	if _, err := l2.Allow(context.Background(), "k", lim); err != nil {
		t.Fatal(err)
	}
	ctx2, cancel2 := context.WithDeadline(context.Background(), c2.Now().Add(time.Second+time.Millisecond))
	defer cancel2()
	if _, err := l2.Wait(ctx2, "k", lim); err != nil {
		t.Fatalf("Wait with the turn just before the deadline: %v", err)
	}
	if len(c2.sleeps) != 1 || c2.sleeps[0] < time.Second || c2.sleeps[0] > time.Second+time.Millisecond {
		t.Errorf("sleeps = %v; want one in [1s, 1.001s]", c2.sleeps)
	}
}

// clockDeadline is a context whose deadline is on a test clock: it is
// done once the clock reaches the deadline, as a real context is once the
// real clock does. (Done never closes: the clock moves only in Sleep.)
type clockDeadline struct {
	context.Context
	clk      clock
	deadline time.Time
}

func (c clockDeadline) Deadline() (time.Time, bool) { return c.deadline, true }

func (c clockDeadline) Err() error {
	if c.clk.Now().Before(c.deadline) {
		return nil
	}
	return context.DeadlineExceeded
}

// deadlineClock is redisClock whose Sleep, like the real one, ends with the
// context's error when the deadline comes first.
// AfterFunc runs lease timers on the real clock: the tests on this clock
// do not end leases by moving it (timedClock does).
func (c *redisClock) AfterFunc(d time.Duration, f func()) func() bool {
	return time.AfterFunc(d, f).Stop
}

type deadlineClock struct{ *redisClock }

func (c deadlineClock) Sleep(ctx context.Context, d time.Duration) error {
	if deadline, ok := ctx.Deadline(); ok && !c.Now().Add(d).Before(deadline) {
		c.f.advance(deadline.Sub(c.Now()))
		return context.DeadlineExceeded
	}
	return c.redisClock.Sleep(ctx, d)
}

// With the deadline 30 ms after the turn, the jitter (up to 100 ms for a
// 1 s turn) made the wait sleep up to the deadline and then give up
// without trying: 15 of 40 waits failed. The sleep now ends while the try
// can still be made, never before the turn, and every wait is admitted.
func TestWaitJitterKeepsTheTurn(t *testing.T) {
	for a := GCRA; a < numAlgorithms; a++ {
		t.Run(a.String(), func(t *testing.T) {
			f := newFakeRedis(t)
			c := newRedisClock(f)
			l := testLimiterOn(deadlineClock{c}, f.rdb)
			lim := Per(2, 2*time.Second).WithAlgorithm(a)
			jittered := 0
			for i := range 40 {
				var denied Result
				for denied.Allowed = true; denied.Allowed; {
					var err error
					if denied, err = l.Allow(context.Background(), "k", lim); err != nil {
						t.Fatal(err)
					}
				}
				turn := c.Now().Add(denied.RetryAfter)
				ctx := clockDeadline{Context: context.Background(), clk: c, deadline: turn.Add(30 * time.Millisecond)}
				before := len(c.sleeps)
				res, err := l.Wait(ctx, "k", lim)
				if err != nil || !res.Allowed {
					t.Fatalf("wait %d, deadline 30ms after the turn in %v: %+v, %v; want admitted", i, denied.RetryAfter, res, err)
				}
				slept := c.sleeps[before:]
				if len(slept) != 1 || slept[0] < denied.RetryAfter || slept[0] > denied.RetryAfter+29*time.Millisecond {
					t.Fatalf("wait %d: slept %v for a turn in %v; want one sleep within [turn, deadline - 1ms]", i, slept, denied.RetryAfter)
				}
				if slept[0] > denied.RetryAfter {
					jittered++
				}
			}
			if jittered == 0 {
				t.Errorf("no wait was jittered: the test shows nothing")
			}
		})
	}
}

func TestWaitCancelled(t *testing.T) {
	f := newFakeRedis(t)
	l := testLimiterOn(newRedisClock(f), f.rdb)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := l.Wait(ctx, "k", PerSecond(1))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait on a cancelled context: err = %v; want Canceled", err)
	}
	if got := f.dump("k"); got != "none|<nil>|-2ns" {
		t.Errorf("key after a cancelled wait = %s; want none", got)
	}

	// The real clock's Sleep returns as soon as the context is done.
	ctx2, cancel2 := context.WithCancel(context.Background())
	cancel2()
	if err := (realClock{}).Sleep(ctx2, time.Hour); !errors.Is(err, context.Canceled) {
		t.Errorf("realClock.Sleep on a cancelled context = %v; want Canceled", err)
	}
	if err := (realClock{}).Sleep(context.Background(), 0); err != nil {
		t.Errorf("realClock.Sleep(0) = %v", err)
	}
}

// A cancellation while sleeping ends the wait with the context's error.
func TestWaitCancelledWhileSleeping(t *testing.T) {
	f := newFakeRedis(t)
	c := &cancellingClock{redisClock: newRedisClock(f)}
	l := testLimiterOn(c, f.rdb)
	lim := PerSecond(1)
	if _, err := l.Allow(context.Background(), "k", lim); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	_, err := l.Wait(ctx, "k", lim)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait cancelled while sleeping: err = %v; want Canceled", err)
	}
}

type cancellingClock struct {
	*redisClock
	cancel context.CancelFunc
}

func (c *cancellingClock) Sleep(ctx context.Context, d time.Duration) error {
	c.cancel()
	return c.redisClock.Sleep(ctx, d)
}

func TestWaitErrors(t *testing.T) {
	f := newFakeRedis(t)
	c := newRedisClock(f)
	ctx := context.Background()
	if _, err := (&Limiter{}).Wait(ctx, "k", PerSecond(1)); !errors.Is(err, ErrNoClient) {
		t.Errorf("zero Limiter: err = %v; want ErrNoClient", err)
	}
	l := testLimiterOn(c, f.rdb)
	if _, err := l.WaitN(ctx, "k", PerSecond(1), -1); !errors.Is(err, ErrInvalid) {
		t.Errorf("WaitN(-1): err = %v; want ErrInvalid", err)
	}
	if err := f.rdb.Set(ctx, "user", "order 42", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Wait(ctx, "user", PerSecond(1)); !errors.Is(err, ErrForeignKey) {
		t.Errorf("Wait on a user's key: err = %v; want ErrForeignKey", err)
	}
	f.mr.SetError("LOADING Redis is loading the dataset in memory") // not retried
	if _, err := l.Wait(ctx, "k", PerSecond(1)); err == nil || !strings.Contains(err.Error(), "LOADING") {
		t.Errorf("Wait with Redis failing: err = %v; want its error", err)
	}
	if len(c.sleeps) != 0 {
		t.Errorf("slept %v on errors", c.sleeps)
	}
}

func TestWaitSeveralLimits(t *testing.T) {
	f := newFakeRedis(t)
	c := newRedisClock(f)
	l := testLimiterOn(c, f.rdb)
	ctx := context.Background()
	limits := []Limit{PerSecond(2), PerMinute(3)}
	for i := range 3 {
		if _, err := l.Decide(ctx, Request{Kind: KindWait, Key: "k", Limits: limits}); err != nil {
			t.Fatalf("wait #%d under two limits: %v", i, err)
		}
	}
	// The fourth unit waits for the per-minute limit, not the per-second one.
	res, err := l.Decide(ctx, Request{Kind: KindWait, Key: "k", Limits: limits})
	if err != nil || !res.Allowed {
		t.Fatalf("fourth wait under two limits = %v, %v", res, err)
	}
	var total time.Duration
	for _, d := range c.sleeps {
		total += d
	}
	if total < 20*time.Second {
		t.Errorf("slept %v in all (%v); want at least the 20s the per-minute limit needs", total, c.sleeps)
	}
	if _, err := l.Decide(ctx, Request{Kind: KindWait, Key: "k", Limits: []Limit{PerSecond(2), PerMinute(3)}, N: 3}); !errors.Is(err, ErrExceedsCapacity) {
		t.Errorf("a wait of 3 under 2/s: err = %v; want ErrExceedsCapacity", err)
	}
}

func TestJitterBounds(t *testing.T) {
	for _, d := range []time.Duration{0, time.Nanosecond, 9 * time.Nanosecond, time.Millisecond, time.Second, time.Hour} {
		for range 100 {
			j := jitter(d)
			if j < 0 || j > min(d/10, maxJitter) {
				t.Fatalf("jitter(%v) = %v; want within [0, %v]", d, j, min(d/10, maxJitter))
			}
		}
	}
}
