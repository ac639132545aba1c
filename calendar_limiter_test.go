package redisrate

import (
	"context"
	"errors"
	"math/rand/v2"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redisrate/redisrate/internal/redisserver"
)

// skewedClock is a Limiter's clock that reads the fake Redis's clock off
// by skew, and whose sleeps move the fake Redis's clock.
type skewedClock struct {
	f    *fakeRedis
	skew time.Duration
	mu   *sync.Mutex
}

// AfterFunc: lease timers on the real clock (no test on this clock ends a
// lease by moving it).
func (c skewedClock) AfterFunc(d time.Duration, f func()) func() bool {
	return time.AfterFunc(d, f).Stop
}

func (c skewedClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.f.now.Add(c.skew)
}

func (c skewedClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	c.f.advance(d)
	c.mu.Unlock()
	return nil
}

func calendarLimiter(t *testing.T, at time.Time, opts ...Option) (*Limiter, *fakeRedis, skewedClock) {
	t.Helper()
	f := newFakeRedis(t)
	f.setClock(at)
	clk := skewedClock{f: f, mu: new(sync.Mutex)}
	return testLimiterOn(clk, f.rdb, opts...), f, clk
}

func mustLoc(t testing.TB, zone string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(zone)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// A daily quota at midnight Pacific time, across the 23-hour day daylight
// saving time starts (2026-03-08) and the 25-hour day it ends: each day
// has its key, the denial's RetryAfter and ResetAfter run exactly to the
// next midnight, a retry then is admitted, and the key expires within its
// day, its margin and at most a day more.
func TestCalendarDayAcrossDST(t *testing.T) {
	ctx := context.Background()
	la := mustLoc(t, "America/Los_Angeles")
	lim := Limit{Algorithm: FixedWindow, Rate: 3, Calendar: "day America/Los_Angeles"}
	for _, c := range []struct {
		day    time.Time // 1.5 s before its midnight
		next   string    // the next day's key
		length time.Duration
	}{
		{time.Date(2026, 3, 7, 23, 59, 58, 500e6, la), "quota:2026-03-08", 23 * time.Hour},
		{time.Date(2026, 10, 31, 23, 59, 58, 500e6, la), "quota:2026-11-01", 25 * time.Hour},
		{time.Date(2026, 7, 14, 23, 59, 58, 500e6, la), "quota:2026-07-15", 24 * time.Hour},
	} {
		l, f, _ := calendarLimiter(t, c.day)
		for i := range 3 {
			if res, err := l.Allow(ctx, "quota", lim); err != nil || !res.Allowed || res.Remaining != int64(2-i) {
				t.Fatalf("%v: allow %d: %+v, %v", c.day, i+1, res, err)
			}
		}
		res, err := l.Allow(ctx, "quota", lim)
		if err != nil || res.Allowed || res.RetryAfter != 1500*time.Millisecond || res.ResetAfter != 1500*time.Millisecond {
			t.Fatalf("%v: the 4th: %+v, %v; want a denial for 1.5 s, to midnight", c.day, res, err)
		}
		if res.Limit != lim || res.Key != "quota" || res.Capacity != 3 {
			t.Errorf("%v: the result's limit %+v, key %q: want the caller's", c.day, res.Limit, res.Key)
		}
		today := "quota:" + c.day.Format("2006-01-02")
		if ttl := f.mr.TTL(today); ttl <= 0 || ttl > 25*time.Hour+calendarMargin {
			t.Errorf("%v: %s expires in %v", c.day, today, ttl)
		}
		f.advance(res.RetryAfter)
		if res, err := l.Allow(ctx, "quota", lim); err != nil || !res.Allowed || res.Remaining != 2 {
			t.Fatalf("%v: at midnight: %+v, %v; want the new day's first", c.day, res, err)
		}
		if !f.mr.Exists(c.next) {
			t.Fatalf("%v: no key %s: %v", c.day, c.next, f.mr.Keys())
		}
		_, _ = l.AllowN(ctx, "quota", lim, 2)
		res, _ = l.Allow(ctx, "quota", lim)
		if res.Allowed || res.RetryAfter != c.length {
			t.Fatalf("%v: denied at the new day's start: %+v; want RetryAfter %v, the day's length", c.day, res, c.length)
		}
		if peek, err := l.Decide(ctx, Request{Kind: KindPeek, Key: "quota", Limits: []Limit{lim}}); err != nil || peek.Remaining != 0 || peek.ResetAfter != c.length {
			t.Errorf("%v: peek: %+v, %v", c.day, peek, err)
		}
		if chk, err := l.Decide(ctx, Request{Kind: KindCheck, Key: "quota", Limits: []Limit{lim}}); err != nil || chk.Allowed || chk.RetryAfter != c.length {
			t.Errorf("%v: check: %+v, %v", c.day, chk, err)
		}
		f.advance(c.length)
		if res, err := l.Allow(ctx, "quota", lim); err != nil || !res.Allowed {
			t.Fatalf("%v: after the day: %+v, %v", c.day, res, err)
		}
		if over, _ := l.AllowN(ctx, "quota", lim, 4); over.Allowed || !over.Never() {
			t.Errorf("%v: 4 of 3: %+v; want never", c.day, over)
		}
	}
}

// Calendar months (February of a leap year) and ISO weeks in a zone of
// +5:45: the waits run to the first of the next month and to Monday's
// midnight there.
func TestCalendarMonthAndWeek(t *testing.T) {
	ctx := context.Background()
	at := time.Date(2028, 2, 10, 12, 0, 0, 0, time.UTC)
	l, f, _ := calendarLimiter(t, at)
	month := Limit{Algorithm: FixedWindow, Rate: 1_000_000, Calendar: "month"}
	if res, err := l.AllowN(ctx, "tokens", month, 1_000_000); err != nil || !res.Allowed {
		t.Fatalf("month: %+v, %v", res, err)
	}
	res, _ := l.Allow(ctx, "tokens", month)
	if want := time.Date(2028, 3, 1, 0, 0, 0, 0, time.UTC).Sub(at); res.Allowed || res.RetryAfter != want {
		t.Errorf("month: %+v; want a wait of %v, to March", res, want)
	}
	if !f.mr.Exists("tokens:2028-02") {
		t.Errorf("keys %v; want tokens:2028-02", f.mr.Keys())
	}
	ktm := mustLoc(t, "Asia/Kathmandu")
	week := Limit{Algorithm: FixedWindow, Rate: 1, Calendar: "week Asia/Kathmandu"}
	_, _ = l.Allow(ctx, "w", week)
	res, _ = l.Allow(ctx, "w", week)
	monday := time.Date(2028, 2, 14, 0, 0, 0, 0, ktm) // 2028-02-10 is a Thursday
	if res.Allowed || res.RetryAfter != monday.Sub(at) {
		t.Errorf("week: %+v; want a wait of %v, to Monday in Kathmandu", res, monday.Sub(at))
	}
	if !f.mr.Exists("w:2028-W06") {
		t.Errorf("keys %v; want w:2028-W06", f.mr.Keys())
	}
}

// Wait, a reservation settled after midnight, DecideBatch, a request of
// several keys, the deny cache and a fallback all take the calendar
// through the one plan step.
func TestCalendarEveryCallKind(t *testing.T) {
	ctx := context.Background()
	at := time.Date(2026, 12, 7, 23, 59, 59, 0, time.UTC)
	day := Limit{Algorithm: FixedWindow, Rate: 10, Calendar: "day"}

	t.Run("wait", func(t *testing.T) {
		l, f, _ := calendarLimiter(t, at)
		_, _ = l.AllowN(ctx, "k", day, 10)
		res, err := l.WaitN(ctx, "k", day, 4)
		if err != nil || !res.Allowed || res.Remaining != 6 {
			t.Fatalf("wait: %+v, %v", res, err)
		}
		if midnight := at.Add(time.Second); f.now.Before(midnight) || f.now.After(midnight.Add(200*time.Millisecond)) {
			t.Errorf("the wait ended at %v; want just after midnight", f.now)
		}
		if !f.mr.Exists("k:2026-12-08") {
			t.Errorf("keys %v", f.mr.Keys())
		}
	})
	t.Run("reservation", func(t *testing.T) {
		l, f, _ := calendarLimiter(t, at)
		v, err := l.Reserve(ctx, Request{Key: "r", Limits: []Limit{day}, N: 5})
		if err != nil || !v.Result.Allowed {
			t.Fatalf("reserve: %+v, %v", v, err)
		}
		f.advance(2 * time.Second) // the next day
		if _, err := l.Decide(ctx, Request{Key: "r", Limits: []Limit{day}, N: 10}); err != nil {
			t.Fatal(err)
		}
		if _, err := v.Settle(ctx, 1); err != nil {
			t.Fatal(err)
		}
		// The 4 unused units go back to the day they were taken from, not
		// to the next, whose 10 are taken.
		if res, _ := l.Allow(ctx, "r", day); res.Allowed {
			t.Errorf("the next day admits an 11th after a reservation of the day before settled: %+v", res)
		}
		if got := f.dump("r:2026-12-07"); !contains(got, " 1|") {
			t.Errorf("the reservation's day holds %q; want a count of 1", got)
		}
	})
	t.Run("reservation of several keys", func(t *testing.T) {
		l, f, _ := calendarLimiter(t, at)
		month := Limit{Algorithm: FixedWindow, Rate: 100, Calendar: "month"}
		keys := []KeyLimit{{Key: "{o}:u", Limit: day}, {Key: "{o}", Limit: month}}
		v, err := l.Reserve(ctx, Request{Keys: keys, N: 6})
		if err != nil || !v.Result.Allowed {
			t.Fatalf("reserve: %+v, %v", v, err)
		}
		f.advance(2 * time.Second) // the 8th of December: the same month
		if _, err := v.Settle(ctx, 2); err != nil {
			t.Fatal(err)
		}
		if got := f.dump("{o}:u:2026-12-07"); !contains(got, " 2|") {
			t.Errorf("the user's day holds %q; want a count of 2", got)
		}
		if got := f.dump("{o}:2026-12"); !contains(got, " 2|") {
			t.Errorf("the organisation's month holds %q; want a count of 2", got)
		}
		if f.mr.Exists("{o}:u:2026-12-08") {
			t.Errorf("the settlement wrote the next day's key: %v", f.mr.Keys())
		}
	})
	t.Run("batch and keys", func(t *testing.T) {
		l, f, _ := calendarLimiter(t, at)
		month := Limit{Algorithm: FixedWindow, Rate: 100, Calendar: "month Europe/Paris"}
		res, err := l.DecideBatch(ctx, []Request{
			{Key: "b", Limits: []Limit{day}, N: 10},
			{Keys: []KeyLimit{{Key: "{o}:u", Limit: day}, {Key: "{o}", Limit: month}}, N: 3},
			{Key: "plain", Limits: []Limit{PerSecond(1)}},
		})
		if err != nil || !res[0].Allowed || !res[1].Allowed || !res[2].Allowed {
			t.Fatalf("batch: %+v, %v", res, err)
		}
		// In Paris it is already the 8th (00:59:59): December still.
		for _, k := range []string{"b:2026-12-07", "{o}:u:2026-12-07", "{o}:2026-12", "plain"} {
			if !f.mr.Exists(k) {
				t.Errorf("no key %s: %v", k, f.mr.Keys())
			}
		}
		r, err := l.Decide(ctx, Request{Keys: []KeyLimit{{Key: "{o}:u", Limit: day}, {Key: "{o}", Limit: month}}, N: 8})
		if err != nil || r.Allowed || r.Key != "{o}:u" || r.RetryAfter != time.Second || r.Limit != day {
			t.Errorf("several keys, the user's day spent: %+v, %v; want a wait of 1 s on {o}:u", r, err)
		}
	})
	t.Run("deny cache", func(t *testing.T) {
		l, f, _ := calendarLimiter(t, at, WithDenyCache(100))
		_, _ = l.AllowN(ctx, "d", day, 10)
		for range 2 {
			if res, _ := l.Allow(ctx, "d", day); res.Allowed || res.RetryAfter != time.Second {
				t.Fatalf("denied: %+v", res)
			}
		}
		f.advance(time.Second)
		if res, _ := l.Allow(ctx, "d", day); !res.Allowed || res.Source != SourceRedis {
			t.Errorf("at midnight: %+v; want the new day's admission", res)
		}
	})
	t.Run("fallback", func(t *testing.T) {
		fb, f, clk := calendarLimiter(t, at)
		l := testLimiterOn(clk, downRedis(t), WithFallback(fb), WithCircuitBreaker(0))
		res, err := l.AllowN(ctx, "f", day, 10)
		if err != nil || !res.Allowed || res.Source != SourceFallback || res.Limit != day {
			t.Fatalf("fallback: %+v, %v", res, err)
		}
		if res, _ := l.Allow(ctx, "f", day); res.Allowed || res.RetryAfter != time.Second {
			t.Errorf("fallback, spent: %+v", res)
		}
		if !f.mr.Exists("f:2026-12-07") {
			t.Errorf("the fallback's keys: %v", f.mr.Keys())
		}
	})
	t.Run("concurrent", func(t *testing.T) {
		l, _, _ := calendarLimiter(t, at)
		var mu sync.Mutex
		admitted := 0
		var wg sync.WaitGroup
		for range 40 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := l.Allow(ctx, "c", day)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err != nil:
					t.Error(err)
				case res.Allowed:
					admitted++
				case res.RetryAfter != time.Second:
					t.Errorf("a denial waits %v; want 1 s, to midnight", res.RetryAfter)
				}
			}()
		}
		wg.Wait()
		if admitted != 10 {
			t.Errorf("%d admitted of 40 concurrent calls; want 10", admitted)
		}
	})
}

// A calendar limit is refused, before any round trip, with what to do:
// another algorithm, a Period, two calendars on one key; Args, which has
// no key to name the window, says how to build the call.
func TestCalendarRefused(t *testing.T) {
	ctx := context.Background()
	l, _, _ := calendarLimiter(t, epoch2026)
	for _, c := range []struct {
		req  Request
		want string
	}{
		{Request{Key: "k", Limits: []Limit{{Rate: 1, Calendar: "day"}}}, "set Algorithm FixedWindow"},
		{Request{Key: "k", Limits: []Limit{{Algorithm: FixedWindow, Rate: 1, Period: time.Hour, Calendar: "day"}}}, "leave Period 0"},
		{Request{Key: "k", Limits: []Limit{{Algorithm: FixedWindow, Rate: 1, Calendar: "day"}, {Algorithm: FixedWindow, Rate: 9, Calendar: "month"}}},
			"give each calendar its own key"},
		{Request{Key: "k", Limits: []Limit{{Algorithm: FixedWindow, Rate: 1, Calendar: "day Nowhere/Else"}}}, "unknown time zone"},
		{Request{Key: "k", Limits: []Limit{{Algorithm: FixedWindow, Rate: 1, Burst: 2, Calendar: "day"}}}, "invalid burst '2'"},
	} {
		if _, err := l.Decide(ctx, c.req); !errors.Is(err, ErrInvalid) || !contains(err.Error(), c.want) {
			t.Errorf("%+v: %v; want ErrInvalid saying %q", c.req.Limits, err, c.want)
		}
	}
	// A limit of no calendar may share a calendar limit's key: its state
	// goes with the day's key.
	mixed := []Limit{{Algorithm: FixedWindow, Rate: 5, Calendar: "day"}, {Algorithm: FixedWindow, Rate: 2, Period: time.Second}}
	if res, err := l.Decide(ctx, Request{Key: "m", Limits: mixed, N: 2}); err != nil || !res.Allowed {
		t.Errorf("a calendar day and 2/s on one key: %+v, %v", res, err)
	}
	// Args gives the ARGV of today's window (its key is the caller's to
	// name), and refuses what Decide refuses.
	args, err := Args(KindAllow, 1, Limit{Algorithm: FixedWindow, Rate: 7, Calendar: "day"}, PerSecond(3).WithAlgorithm(FixedWindow))
	_, end, _ := calendarWindow("day", time.UTC, time.Now())
	if err != nil || len(args) != 8 || args[0] != int64(7) || args[5] != int64(3) {
		t.Errorf("Args of a calendar limit: %v, %v", args, err)
	} else if p := time.Duration(args[1].(int64)) * time.Millisecond; p < 23*time.Hour+calendarMargin || p > 25*time.Hour+calendarMargin {
		t.Errorf("Args of a calendar day: period_ms %v (today ends %v)", p, end)
	}
	if _, err := Args(KindAllow, 1, Limit{Rate: 7, Calendar: "day"}); !errors.Is(err, ErrInvalid) || !contains(err.Error(), "set Algorithm FixedWindow") {
		t.Errorf("Args of a GCRA calendar limit: %v", err)
	}
}

// The window is chosen on each Limiter's clock, the script reads Redis's:
// with Limiters whose clocks are off Redis's and each other's by less than
// calendarMargin, each window's key admits at most Rate units, every
// admission counts in the window its caller's clock was in, so no window
// spends its units more than the skew outside its own span, and a
// RetryAfter to midnight is honest on the caller's clock: the retry is
// admitted.
func TestCalendarClockSkew(t *testing.T) {
	ctx := context.Background()
	la := mustLoc(t, "America/Los_Angeles")
	const rate = 20
	lim := Limit{Algorithm: FixedWindow, Rate: rate, Calendar: "day America/Los_Angeles"}
	f := newFakeRedis(t)
	begin := time.Date(2026, 3, 6, 22, 0, 0, 0, la) // across the 23-hour day and two midnights
	f.setClock(begin)
	mu := new(sync.Mutex)
	maxSkew := calendarMargin/2 - time.Minute // the clocks disagree by up to 2*maxSkew, under calendarMargin
	skews := []time.Duration{-maxSkew, -3 * time.Second, 0, 1500 * time.Millisecond, maxSkew}
	limiters := make([]*Limiter, len(skews))
	for i, s := range skews {
		limiters[i] = testLimiterOn(skewedClock{f: f, skew: s, mu: mu}, f.rdb)
	}
	type admission struct {
		at     time.Time // Redis's clock
		window string
	}
	perWindow := map[string]int{}
	var admissions []admission
	rng := rand.New(rand.NewPCG(36, 1))
	checked := 0
	for f.now.Before(time.Date(2026, 3, 28, 2, 0, 0, 0, la)) {
		// Bursts near each midnight (by every clock), sparse elsewhere.
		step := time.Duration(rng.Int64N(int64(20 * time.Minute)))
		if near := f.now.In(la); near.Hour() == 23 || near.Hour() == 0 {
			step = time.Duration(rng.Int64N(int64(40 * time.Second)))
		}
		f.advance(step)
		i := rng.IntN(len(limiters))
		l := limiters[i]
		callerNow := f.now.Add(skews[i])
		_, _, window := calendarWindow("day", la, callerNow)
		res, err := l.Allow(ctx, "s", lim)
		if err != nil {
			t.Fatal(err)
		}
		if res.Allowed {
			perWindow[window]++
			admissions = append(admissions, admission{f.now, window})
			continue
		}
		_, end, _ := calendarWindow("day", la, callerNow)
		if want := ceilMs(end.Sub(callerNow)); res.RetryAfter != want {
			t.Fatalf("limiter %d (skew %v), window %s: RetryAfter %v; want %v, to its midnight", i, skews[i], window, res.RetryAfter, want)
		}
		// Honest: after RetryAfter on that clock, unless others spent
		// the next window meanwhile, a check is admitted.
		f.advance(res.RetryAfter)
		if _, _, next := calendarWindow("day", la, f.now.Add(skews[i])); perWindow[next] >= rate {
			continue
		}
		if chk, err := l.Decide(ctx, Request{Kind: KindCheck, Key: "s", Limits: []Limit{lim}}); err != nil || !chk.Allowed {
			t.Fatalf("limiter %d (skew %v): after RetryAfter %v, a check: %+v, %v", i, skews[i], res.RetryAfter, chk, err)
		}
		checked++
	}
	for w, n := range perWindow {
		if n > rate {
			t.Errorf("window %s admitted %d; want at most %d", w, n, rate)
		}
	}
	for _, a := range admissions {
		start, end, _ := calendarWindow("day", la, a.at.Add(-maxSkew))
		if _, _, w := calendarWindow("day", la, a.at.Add(maxSkew)); w != a.window && start.Format("2006-01-02") != a.window {
			t.Errorf("an admission at %v (Redis) counted in %s, more than %v from it [%v, %v)", a.at.In(la), a.window, maxSkew, start, end)
		}
	}
	if len(perWindow) < 20 || checked < 15 {
		t.Errorf("only %d windows and %d denials: the walk tests nothing", len(perWindow), checked)
	}
	t.Logf("%d admissions in %d windows, %d denials whose RetryAfter was retried", len(admissions), len(perWindow), checked)
}

// On real Redis 7 and Valkey 8, on the real clock: the day's key carries
// its name and a TTL within its day and margin, a denial waits to the next
// UTC midnight.
func TestCalendarRealRedis(t *testing.T) {
	if testing.Short() {
		t.Skip("-short (make unit): no real server; make test runs it")
	}
	for _, bin := range []string{"redis-server", "valkey-server"} {
		t.Run(bin, func(t *testing.T) {
			if _, err := exec.LookPath(bin); err != nil {
				redisserver.Missing(t, "%s is not on PATH", bin)
			}
			srv, err := redisserver.Start(redisserver.Options{Bin: bin})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(srv.Stop)
			rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1})
			t.Cleanup(func() { _ = rdb.Close() })
			ctx := context.Background()
			l := testLimiter(rdb)
			lim := Limit{Algorithm: FixedWindow, Rate: 2, Calendar: "day"}
			if res, err := l.AllowN(ctx, "real", lim, 2); err != nil || !res.Allowed {
				t.Fatalf("%+v, %v", res, err)
			}
			before := time.Now()
			res, err := l.Allow(ctx, "real", lim)
			after := time.Now()
			_, end, name := calendarWindow("day", time.UTC, after)
			if err != nil || res.Allowed || res.RetryAfter > ceilMs(end.Sub(before)) || res.RetryAfter < end.Sub(after) {
				t.Fatalf("%+v, %v; want a wait to %v", res, err, end)
			}
			ttl, err := rdb.PTTL(ctx, "real:"+name).Result()
			if err != nil || ttl <= 0 || ttl > 24*time.Hour+calendarMargin {
				t.Errorf("real:%s: PTTL %v, %v", name, ttl, err)
			}
		})
	}
}
