package redisrate

import (
	"context"
	"testing"
	"time"
)

// The quotas real services publish (issue 36, CONTRACT.md v4's range):
// each is parsed, validated and decided exactly by the five scripts other
// than sliding_log, through the Limiter. Until the scripts take v4's range
// these fail with the scripts' (and Validate's) "too large for exact
// arithmetic".
func TestRealQuotas(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		text string
		lim  Limit
	}{
		{"100000/day", PerDay(100_000)},
		{"2000000/d", PerDay(2_000_000)},
		{"150000000/minute", PerMinute(150_000_000)},
		{"1000000000/30d", Per(1_000_000_000, 30*24*time.Hour)},
		{"1000000000000/366d", Per(1_000_000_000_000, 366*24*time.Hour)},
	} {
		parsed, err := ParseLimit(c.text)
		if err != nil || parsed != c.lim {
			t.Errorf("ParseLimit(%q) = %+v, %v; want %+v", c.text, parsed, err, c.lim)
		}
		for _, a := range []Algorithm{GCRA, TokenBucket, LeakyBucket, SlidingWindow, FixedWindow} {
			lim := c.lim.WithAlgorithm(a)
			if err := lim.Validate(); err != nil {
				t.Errorf("%v: Validate: %v", lim, err)
				continue
			}
			f := newFakeRedis(t)
			l := testLimiterOn(&fakeClock{t: f.now}, f.rdb)
			half := lim.Rate / 2
			res, err := l.AllowN(ctx, "q", lim, half)
			if err != nil || !res.Allowed || res.Remaining != lim.Rate-half {
				t.Errorf("%v: %d of %d: %+v, %v; want %d left", lim, half, lim.Rate, res, err, lim.Rate-half)
				continue
			}
			res, err = l.AllowN(ctx, "q", lim, lim.Rate-half+1)
			if err != nil || res.Allowed || res.Remaining != lim.Rate-half {
				t.Errorf("%v: one more than remains: %+v, %v", lim, res, err)
			}
			// The wait for one unit past the capacity, exactly: GCRA and the
			// leaky bucket drain one unit in period/rate (rounded up to the
			// ms); the token bucket and the fixed window wait their period
			// from the first call; the sliding window weighs the previous
			// window, so its wait is checked by the scripts' own tests.
			want := time.Duration(0)
			switch a {
			case GCRA, LeakyBucket:
				want = ceilMs(time.Duration((int64(lim.Period)*1 + lim.Rate - 1) / lim.Rate))
			case TokenBucket, FixedWindow:
				want = lim.Period
			}
			if want != 0 && res.RetryAfter != want {
				t.Errorf("%v: RetryAfter %v; want %v", lim, res.RetryAfter, want)
			}
		}
	}
}
