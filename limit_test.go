package redisrate

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redisrate/redisrate/scripts"
)

// badLimits are limits the scripts refuse, one per rule.
func badLimits() []Limit {
	ms := time.Millisecond
	return []Limit{
		{Rate: 0, Period: time.Second},
		{Rate: -1, Period: time.Second},
		{Rate: maxNumber + 1, Period: time.Second},
		{Rate: 10001, Period: time.Second, Algorithm: SlidingLog},
		{Rate: 10, Period: 0},
		{Rate: 10, Period: -time.Second},
		{Rate: 10, Period: 1500 * time.Microsecond},
		{Rate: 10, Period: 2e12 * ms},
		{Rate: 10, Period: time.Second, Burst: -1},
		{Rate: 10, Period: time.Second, Burst: maxNumber + 1},
		{Rate: 10, Period: time.Second, Burst: 5, Algorithm: SlidingWindow},
		{Rate: 10, Period: time.Second, Burst: 11, Algorithm: FixedWindow},
		{Rate: 10, Period: time.Second, Burst: 11, Algorithm: SlidingLog},
		{Rate: 10, Period: time.Second, Burst: -1, Algorithm: FixedWindow},
		{Rate: 7, Period: 1e12 * ms},                                                   // continuous, period past 366 days
		{Rate: 7, Period: 1e12 * ms, Burst: 10},                                        // continuous, period past 366 days, with the burst given
		{Rate: 7, Period: 1e12 * ms, Burst: 10, Algorithm: LeakyBucket},                // continuous
		{Rate: 1, Period: 86_400_000 * ms, Burst: 200_000},                             // continuous, a drain past 10^12 ms
		{Rate: 2e12, Period: time.Second},                                              // a limit past 10^12
		{Rate: 1, Period: 1e12 * ms, Burst: 1e15, Algorithm: TokenBucket},              // refill, a burst past 10^12
		{Rate: 1, Period: 1e12 * ms, Burst: 10, Algorithm: TokenBucket},                // refill, period past 366 days
		{Rate: 3, Period: 31_622_400_000 * ms, Burst: 100_000, Algorithm: TokenBucket}, // refill, a drain past 10^12 ms
		{Rate: 1e15, Period: 1e12 * ms, Algorithm: SlidingWindow},                      // weighted, a limit past 10^12
		{Rate: 10_000, Period: 1e12 * ms, Algorithm: SlidingWindow},                    // weighted, period past 366 days
		{Rate: 1e15, Period: 1e12 * ms, Burst: 1e15, Algorithm: SlidingWindow},         // weighted, named burst
	}
}

// rawArgs formats l as any client would, without validating it.
func rawArgs(l Limit) []any {
	burst := ""
	if l.Burst != 0 {
		burst = strconv.FormatInt(l.Burst, 10)
	}
	return []any{strconv.FormatInt(l.Rate, 10), periodMs(l.Period), burst}
}

func scriptWords(err error) string { return strings.TrimPrefix(err.Error(), "ERR ") }
func goWords(err error) string     { return strings.TrimPrefix(err.Error(), "redisrate: ") }

// TestValidateWordsAsScripts: Limit.Validate refuses what the scripts
// refuse, with the same words ("redisrate: " for "ERR "), and Allow refuses
// it before any round trip.
func TestValidateWordsAsScripts(t *testing.T) {
	ctx := context.Background()
	f := newFakeRedis(t)
	log := &cmdLog{}
	f.rdb.AddHook(log)
	l := testLimiter(f.rdb)
	for _, lim := range badLimits() {
		verr := lim.Validate()
		_, serr := f.eval(lim.Algorithm, "k", append(rawArgs(lim), "1")...)
		if verr == nil || serr == nil {
			t.Errorf("%+v: Validate %v, script %v: want both to refuse", lim, verr, serr)
			continue
		}
		if !errors.Is(verr, ErrInvalid) {
			t.Errorf("%+v: %v does not match ErrInvalid", lim, verr)
		}
		// the same words, and on the Go side only a hint at the way out
		if got, want := goWords(verr), scriptWords(serr); !strings.HasPrefix(got, want) || got != want && !strings.HasPrefix(got[len(want):], " (hint: ") {
			t.Errorf("%+v:\n  Validate %q\n  script   %q", lim, got, want)
		}
		log.take()
		if _, err := l.Allow(ctx, "k", lim); !errors.Is(err, ErrInvalid) || err.Error() != verr.Error() {
			t.Errorf("%+v: Allow %v, want %v", lim, err, verr)
		}
		if cmds := log.take(); len(cmds) != 0 {
			t.Errorf("%+v: Allow sent %v, want no round trip", lim, cmds)
		}
	}
	if f.rdb.Exists(ctx, "k").Val() != 0 {
		t.Errorf("refused calls created the key")
	}
	for _, good := range []Limit{
		PerSecond(3), PerMinute(7), PerHour(1), PerDay(46_000), PerDay(1e6).WithAlgorithm(TokenBucket), Per(5, 250*time.Millisecond).WithBurst(4),
		PerSecond(10).WithBurst(10).WithAlgorithm(SlidingWindow), PerSecond(10000).WithAlgorithm(SlidingLog),
		Per(3, 1e12*time.Millisecond), PerHour(1_000_000).WithAlgorithm(TokenBucket), PerDay(46_000).WithAlgorithm(SlidingWindow),
		// v4's range: the quotas real services publish, in every algorithm but the log
		PerDay(100_000), PerDay(2_000_000), PerMinute(150_000_000), Per(1e9, 30*24*time.Hour), Per(1e12, 366*24*time.Hour),
		PerDay(100_000).WithAlgorithm(LeakyBucket), PerDay(2_000_000).WithAlgorithm(TokenBucket), Per(1e9, 30*24*time.Hour).WithAlgorithm(SlidingWindow),
		PerDay(1).WithBurst(11_574), PerDay(1).WithBurst(52_124), Per(1e12, time.Millisecond).WithBurst(1e12),
	} {
		if err := good.Validate(); err != nil {
			t.Errorf("%v: %v", good, err)
		}
		if _, err := f.eval(good.Algorithm, "ok", append(rawArgs(good), "0")...); err != nil {
			t.Errorf("%v: the script refuses what Validate accepts: %v", good, err)
		}
	}
}

// TestArgsWordsAsScripts: Args checks a whole call in the scripts' order
// (the first limit, the cost, the further limits) with their words.
func TestArgsWordsAsScripts(t *testing.T) {
	f := newFakeRedis(t)
	ok := PerSecond(5)
	for _, c := range []struct {
		cost   int64
		limits []Limit
		raw    []any
	}{
		{-1, []Limit{ok}, []any{"5", "1000", "", "-1"}},
		{maxNumber + 1, []Limit{ok}, []any{"5", "1000", "", "1000000000000001"}},
		{-1, []Limit{{Rate: 0, Period: time.Second}}, []any{"0", "1000", "", "-1"}},                          // the limit comes first
		{-1, []Limit{ok, {Rate: 0, Period: time.Second}}, []any{"5", "1000", "", "-1", "", "0", "1000", ""}}, // the cost before limit #2
		{1, []Limit{ok, {Rate: 3, Period: 0}}, []any{"5", "1000", "", "1", "", "3", "0", ""}},                // limit #2 named so
		{1, []Limit{ok, ok, {Rate: 3, Period: time.Second, Burst: -2}}, []any{"5", "1000", "", "1", "", "5", "1000", "", "3", "1000", "-2"}},
		{1, []Limit{ok, ok, ok, ok, ok, ok, ok, ok, ok}, nil},
	} {
		_, aerr := Args(KindAllow, c.cost, c.limits...)
		if aerr == nil || !errors.Is(aerr, ErrInvalid) {
			t.Errorf("Args(%d, %v): %v, want ErrInvalid", c.cost, c.limits, aerr)
			continue
		}
		raw := c.raw
		if raw == nil {
			for i, lim := range c.limits {
				raw = append(raw, rawArgs(lim)...)
				if i == 0 {
					raw = append(raw, "1", "")
				}
			}
		}
		_, serr := f.eval(GCRA, "k", raw...)
		if serr == nil || goWords(aerr) != scriptWords(serr) {
			t.Errorf("Args(%d, %v):\n  Args   %v\n  script %v", c.cost, c.limits, aerr, serr)
		}
	}
	if _, err := Args(KindAllow, 1); !errors.Is(err, ErrInvalid) {
		t.Errorf("no limits: %v, want ErrInvalid", err)
	}
	if _, err := Args(KindAllow, 1, PerSecond(1), PerSecond(2).WithAlgorithm(TokenBucket)); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "#2") {
		t.Errorf("two algorithms: %v, want ErrInvalid naming limit #2", err)
	}
}

// TestArgsSendsOnlyWhatIsNeeded: defaults are left out at the end and
// written "" in the middle; further triples are always whole.
func TestArgsSendsOnlyWhatIsNeeded(t *testing.T) {
	for _, c := range []struct {
		cost   int64
		kind   Kind
		limits []Limit
		want   string
	}{
		{1, KindAllow, []Limit{PerSecond(10)}, "[10 1000]"},
		{1, KindAllow, []Limit{PerSecond(10).WithBurst(10)}, "[10 1000]"},
		{1, KindAllow, []Limit{PerSecond(10).WithBurst(20)}, "[10 1000 20]"},
		{3, KindAllow, []Limit{PerSecond(10)}, "[10 1000  3]"},
		{0, KindPeek, []Limit{PerSecond(10)}, "[10 1000  0]"},
		{1, KindCheck, []Limit{PerSecond(10)}, "[10 1000   check]"},
		{2, KindCheck, []Limit{PerSecond(10).WithBurst(30)}, "[10 1000 30 2 check]"},
		{1, KindAllow, []Limit{PerSecond(10), PerHour(1000)}, "[10 1000    1000 3600000 ]"},
		{1, KindAllow, []Limit{PerSecond(10), PerHour(1000).WithBurst(5)}, "[10 1000    1000 3600000 5]"},
		{1, KindAllow, []Limit{PerSecond(10).WithAlgorithm(FixedWindow).WithBurst(10)}, "[10 1000]"},
		{5, KindUpTo, []Limit{PerSecond(10)}, "[10 1000  5 upto]"},
		{1, KindRefund, []Limit{PerSecond(10)}, "[10 1000   refund]"},
		{4, KindForce, []Limit{PerSecond(10), PerHour(1000)}, "[10 1000  4 force 1000 3600000 ]"},
	} {
		args, err := Args(c.kind, c.cost, c.limits...)
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(args); got != c.want {
			t.Errorf("Args(%v, %d, %v) = %q, want %q", c.kind, c.cost, c.limits, got, c.want)
		}
	}
}

// TestLimiterSendsOnlyWhatIsNeeded: the Limiter's own calls carry the
// same short ARGV, as the server sees it.
func TestLimiterSendsOnlyWhatIsNeeded(t *testing.T) {
	ctx := context.Background()
	f := newFakeRedis(t)
	log := &argLog{}
	f.rdb.AddHook(log)
	l := testLimiter(f.rdb)
	_, _ = l.Allow(ctx, "k", PerSecond(10))
	_, _ = l.Decide(ctx, Request{Kind: KindCheck, Key: "k", Limits: []Limit{PerSecond(10)}})
	_, _ = l.Decide(ctx, Request{Kind: KindPeek, Key: "k", Limits: []Limit{PerSecond(10)}})
	_, _ = l.AllowN(ctx, "k", PerSecond(10), 4)
	want := []string{
		"evalsha " + specs[GCRA].SHA1 + " 1 k 10 1000",
		"evalsha " + specs[GCRA].SHA1 + " 1 k 10 1000   check",
		"evalsha " + specs[GCRA].SHA1 + " 1 k 10 1000  0",
		"evalsha " + specs[GCRA].SHA1 + " 1 k 10 1000  4",
	}
	var got []string
	for _, c := range log.take() {
		if strings.HasPrefix(c, "evalsha ") { // not HELLO, not the FCALL_RO that asks for the library, not EVAL after NOSCRIPT
			got = append(got, c)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("sent\n  %q\nwant\n  %q", got, want)
	}
}

func TestParseLimitExact(t *testing.T) {
	for s, want := range map[string]Limit{
		"10/s":                          PerSecond(10),
		"100/minute":                    PerMinute(100),
		"5/250ms burst 10 token_bucket": Per(5, 250*time.Millisecond).WithBurst(10).WithAlgorithm(TokenBucket),
		"3/1h30m":                       Per(3, 90*time.Minute),
		"2/2d":                          Per(2, 48*time.Hour),
		"2.5/s":                         Per(5, 2*time.Second),
		"0.1/s":                         Per(1, 10*time.Second),
		"1.5/m":                         Per(3, 2*time.Minute),
		"0.25/s":                        Per(1, 4*time.Second),
		"2.50/s burst 7":                Per(5, 2*time.Second).WithBurst(7),
		"1.000/h":                       PerHour(1),
		"0.001/ms":                      Per(1, time.Second),
		"010/s":                         PerSecond(10),
		"1000000000000/s token_bucket":  PerSecond(1e12).WithAlgorithm(TokenBucket),
	} {
		got, err := ParseLimit(s)
		if err != nil || got != want {
			t.Errorf("ParseLimit(%q) = %+v, %v; want %+v", s, got, err, want)
		}
	}
	for _, s := range []string{
		"", "10", "x/s", "10/fortnight", "10/s burst", "10/s burst x", "10/s foo", "/s", "10/", "sliding-window 3/h",
		"0/s", "0.0/s", "NaN/s", "nan/s", "Inf/s", "-1/s", "+1/s", "1e3/s", "0x10/s", "1,5/s", " 1 /s",
		"10/1us", "10/1500us", "10/0s", "10/-1s", "10/s burst -1", "10/s burst 2.5", "10/s burst 1e3",
		"1000000000000001/s", "0.0000000000000001/s", "1/1000000000001ms", "0.3/1000000000000ms",
		"10/s burst 5 sliding_window", "10001/s sliding_log", "7/1000000000000ms burst 10",
	} {
		if l, err := ParseLimit(s); !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseLimit(%q) = %+v, %v; want ErrInvalid", s, l, err)
		}
	}
}

// An option given twice, or a signed period, was accepted with the last
// value winning: each is refused, naming the problem.
func TestParseLimitRefusesContradictions(t *testing.T) {
	for s, want := range map[string]string{
		"10/s gcra sliding_log":          "algorithm given twice (gcra, then sliding_log)",
		"10/s token_bucket token_bucket": "algorithm given twice (token_bucket, then token_bucket)",
		"10/s burst 5 burst 6":           "burst given twice (5, then 6)",
		"10/s burst 5 gcra burst 5":      "burst given twice (5, then 5)",
		"10/+5s":                         `period "+5s" must not have a sign`,
		"10/-5s":                         `period "-5s" must not have a sign`,
		"10/+1h30m burst 3":              `period "+1h30m" must not have a sign`,
	} {
		l, err := ParseLimit(s)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseLimit(%q) = %+v, %v; want ErrInvalid saying %q", s, l, err, want)
		}
	}
}

func TestParseLimitRoundTrip(t *testing.T) {
	for _, l := range []Limit{
		PerSecond(10), PerMinute(100), PerHour(1), PerDay(5000), Per(5, 250*time.Millisecond),
		Per(3, 90*time.Minute), Per(2, 48*time.Hour), Per(1000, 10*time.Second),
		Per(5, 2*time.Second).WithBurst(4), PerSecond(10).WithBurst(20).WithAlgorithm(TokenBucket),
		PerMinute(7).WithAlgorithm(SlidingWindow), PerHour(3).WithAlgorithm(SlidingLog),
		Per(1, 4*time.Second).WithAlgorithm(LeakyBucket), Per(1, 1500*time.Millisecond).WithAlgorithm(FixedWindow),
		PerSecond(1e15).WithAlgorithm(FixedWindow), Per(1, 1e12*time.Millisecond),
	} {
		s := l.String()
		got, err := ParseLimit(s)
		if err != nil || got != l {
			t.Errorf("%+v -> %q -> %+v, %v", l, s, got, err)
		}
	}
}

func TestParseAlgorithm(t *testing.T) {
	for a := Algorithm(0); a < numAlgorithms; a++ {
		for _, s := range []string{a.String(), strings.ToUpper(a.String()), strings.ReplaceAll(a.String(), "_", "-"), " " + a.String() + " "} {
			if got, err := ParseAlgorithm(s); err != nil || got != a {
				t.Errorf("ParseAlgorithm(%q) = %v, %v; want %v", s, got, err, a)
			}
		}
		// An algorithm's name is how a user finds its script.
		sp, ok := scripts.Lookup(a.String())
		if !ok || sp.Name != a.String() || sp.SHA1 == "" || sp.Function != "redisrate_"+a.String() {
			t.Errorf("scripts.Lookup(%v.String()) = %+v, %v", a, sp.Name, ok)
		}
	}
	for _, s := range []string{"", "leaky", "token bucket", "gcra2"} {
		if _, err := ParseAlgorithm(s); !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseAlgorithm(%q): %v, want ErrInvalid", s, err)
		}
	}
	if s := Algorithm(99).String(); s != "Algorithm(99)" {
		t.Errorf("Algorithm(99).String() = %q", s)
	}
	if err := (Limit{Algorithm: 99, Rate: 1, Period: time.Second}).Validate(); !errors.Is(err, ErrInvalid) {
		t.Errorf("unknown algorithm: %v", err)
	}
}

func TestCapacity(t *testing.T) {
	if c := PerSecond(5).Capacity(); c != 5 {
		t.Errorf("PerSecond(5).Capacity() = %d", c)
	}
	if c := PerSecond(5).WithBurst(9).Capacity(); c != 9 {
		t.Errorf("burst 9: Capacity() = %d", c)
	}
}

// TestArgsCache: the Limiter's ARGV are formatted once per distinct call
// and shared; the cache is bounded.
func TestArgsCache(t *testing.T) {
	a := cachedArgs(1, "", []Limit{PerSecond(10)})
	b := cachedArgs(1, "", []Limit{PerSecond(10)})
	if &a[0] != &b[0] {
		t.Error("the same call formatted twice")
	}
	if c := cachedArgs(1, "check", []Limit{PerSecond(10)}); fmt.Sprint(c) == fmt.Sprint(a) {
		t.Errorf("a check shares a real call's ARGV: %v", c)
	}
	for i := range 2 * maxCachedArgs {
		cachedArgs(int64(i), "", []Limit{PerSecond(10)})
	}
	argsCache.RLock()
	n := len(argsCache.m)
	argsCache.RUnlock()
	if n > maxCachedArgs {
		t.Errorf("%d cached ARGV, want at most %d", n, maxCachedArgs)
	}
}
