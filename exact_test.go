package redisrate

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestRangeChecksMatchScripts shows that Args refuses exactly what the scripts
// refuse for the combinations that would leave a double's exact range, with
// the same words, and accepts what they accept.
func TestRangeChecksMatchScripts(t *testing.T) {
	cases := []struct {
		name    string
		refused bool // by the script, and so by Args
		cost    float64
		limits  []Limit
	}{
		{"gcra 1e6 per day", false, 1, []Limit{PerDay(1e6)}},
		{"gcra burst 1e15 per day", true, 1, []Limit{PerDay(7).WithBurst(1e15)}},
		{"gcra 16 decimals", true, 1, []Limit{PerSecond(1.0 / 3)}},
		{"gcra 15 decimals", true, 1, []Limit{PerSecond(0.333333333333333)}},
		{"gcra scaled past 10^22", true, 1, []Limit{PerSecond(1e15).WithBurst(0.000000000000001)}},
		{"gcra fractional rate and cost", false, 0.25, []Limit{PerSecond(2.5).WithBurst(7.5)}},
		{"gcra cost past capacity is never, not a range error", false, 1e15, []Limit{Per(1, 1e12*time.Millisecond)}},
		{"gcra second limit too large", true, 1, []Limit{PerSecond(10), PerDay(3).WithBurst(1e14)}},
		{"leaky 1e15 per hour (b = 9: 9e15 > 2^52)", true, 1, []Limit{PerHour(1e15).WithAlgorithm(LeakyBucket)}},
		{"token tiny rate huge burst", true, 1, []Limit{Per(0.001, 1e12*time.Millisecond).WithBurst(1e12).WithAlgorithm(TokenBucket)}},
		{"token fine", false, 1, []Limit{PerDay(1e9).WithAlgorithm(TokenBucket)}},
		{"sliding window 1e9 per day", true, 1, []Limit{PerDay(1e9).WithAlgorithm(SlidingWindow)}},
		{"sliding window 1e5 per day", false, 1, []Limit{PerDay(1e5).WithAlgorithm(SlidingWindow)}},
		{"sliding window 1000.5 per 1e12 ms", true, 1, []Limit{Per(1000.5, 1e12*time.Millisecond).WithAlgorithm(SlidingWindow)}},
		{"sliding log cost 100001 that fits", true, 100001, []Limit{PerHour(200000).WithAlgorithm(SlidingLog)}},
		{"sliding log cost 100001 over the limit is never", false, 100001, []Limit{PerHour(1000).WithAlgorithm(SlidingLog)}},
		{"sliding log cost 100000", false, 100000, []Limit{PerHour(200000).WithAlgorithm(SlidingLog)}},
		{"fixed window 1e15 per 1e12 ms", false, 1, []Limit{Per(1e15, 1e12*time.Millisecond).WithAlgorithm(FixedWindow)}},
	}
	f := newFakeRedis(t)
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, goErr := Args(c.cost, true, c.limits...)
			// the script's side gets the arguments as Args would format them
			raw := []any{}
			for j, l := range c.limits {
				burst := ""
				if l.Burst != 0 {
					burst = formatNumber(l.Burst)
				}
				raw = append(raw, formatNumber(l.Rate), formatPeriodMs(l.Period), burst)
				if j == 0 {
					raw = append(raw, formatNumber(c.cost), "check")
				}
			}
			_, luaErr := f.eval(c.limits[0].Algorithm, fmt.Sprintf("range:%d", i), raw...)
			if (luaErr != nil) != c.refused {
				t.Fatalf("script: refused=%v, want %v (%v)", luaErr != nil, c.refused, luaErr)
			}
			switch {
			case goErr == nil && luaErr == nil:
			case goErr == nil || luaErr == nil:
				t.Fatalf("Args: %v; script: %v", goErr, luaErr)
			default:
				goMsg := strings.TrimPrefix(goErr.Error(), "redisrate: ")
				luaMsg := strings.TrimPrefix(luaErr.Error(), "ERR ")
				if goMsg != luaMsg {
					t.Fatalf("wording differs:\n  Args:   %s\n  script: %s", goMsg, luaMsg)
				}
			}
			if len(c.limits) == 1 {
				if vErr := c.limits[0].Validate(); (vErr == nil) != (luaErr == nil || strings.Contains(luaErr.Error(), "cost")) {
					t.Fatalf("Validate: %v; script: %v", vErr, luaErr)
				}
			}
		})
	}
}
