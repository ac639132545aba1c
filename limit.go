package redisrate

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Algorithm selects the script that decides. The zero value is GCRA.
type Algorithm int

// The algorithms, one script each. See the README for how they compare.
const (
	GCRA          Algorithm = iota // smooth continuous bucket, one number of state
	TokenBucket                    // discrete refills of Rate every Period
	LeakyBucket                    // continuous bucket kept as a level (decides like GCRA)
	SlidingWindow                  // two aligned window counters, the previous one weighted
	FixedWindow                    // a window that starts at the first request
	SlidingLog                     // one entry per admitted unit: exact, for small limits
	numAlgorithms
)

// String returns the script name of a, e.g. "token_bucket".
func (a Algorithm) String() string {
	if a < 0 || a >= numAlgorithms {
		return "Algorithm(" + strconv.Itoa(int(a)) + ")"
	}
	return algoNames[a]
}

// Script returns the script that implements a.
func (a Algorithm) Script() (Script, error) {
	if a < 0 || a >= numAlgorithms {
		return Script{}, fmt.Errorf("redisrate: %w: unknown algorithm %d", ErrInvalid, int(a))
	}
	return scripts[a], nil
}

// ParseAlgorithm returns the algorithm named s, as String prints it ("gcra",
// "token_bucket", ...; "-" may stand for "_").
func ParseAlgorithm(s string) (Algorithm, error) {
	name := strings.ReplaceAll(strings.ToLower(strings.TrimSpace(s)), "-", "_")
	for a, n := range algoNames {
		if n == name {
			return Algorithm(a), nil
		}
	}
	return 0, fmt.Errorf("redisrate: %w: unknown algorithm %q: must be one of %s", ErrInvalid, s, strings.Join(algoNames[:], ", "))
}

// Limit is one rate limit: Rate units per Period, at most Burst at once,
// decided by Algorithm. The zero Burst means Burst = Rate. Window algorithms
// only accept a zero Burst or Burst = Rate.
type Limit struct {
	Algorithm Algorithm
	Rate      float64       // units replenished per Period (buckets) or allowed per window
	Period    time.Duration // whole milliseconds, at most 1e12 ms
	Burst     float64       // capacity; 0 means Rate
}

// Per returns a GCRA limit of rate units per period with Burst = rate.
func Per(rate float64, period time.Duration) Limit {
	return Limit{Rate: rate, Period: period}
}

// PerSecond returns a GCRA limit of rate units per second with Burst = rate.
func PerSecond(rate float64) Limit { return Per(rate, time.Second) }

// PerMinute returns a GCRA limit of rate units per minute with Burst = rate.
func PerMinute(rate float64) Limit { return Per(rate, time.Minute) }

// PerHour returns a GCRA limit of rate units per hour with Burst = rate.
func PerHour(rate float64) Limit { return Per(rate, time.Hour) }

// PerDay returns a GCRA limit of rate units per 24 hours with Burst = rate.
func PerDay(rate float64) Limit { return Per(rate, 24*time.Hour) }

// WithBurst returns a copy of l with Burst set to burst.
func (l Limit) WithBurst(burst float64) Limit { l.Burst = burst; return l }

// WithAlgorithm returns a copy of l decided by a.
func (l Limit) WithAlgorithm(a Algorithm) Limit { l.Algorithm = a; return l }

// Capacity returns the most units available at once: Burst, or Rate when
// Burst is 0.
func (l Limit) Capacity() float64 {
	if l.Burst == 0 {
		return l.Rate
	}
	return l.Burst
}

// String returns l as "10/s", "100/1m", "5/250ms", with the burst when it
// differs from the rate and the algorithm when it is not GCRA:
// "10/s burst 20 token_bucket". ParseLimit reads it back.
func (l Limit) String() string {
	var b strings.Builder
	b.WriteString(formatNumber(l.Rate))
	b.WriteByte('/')
	b.WriteString(formatPeriod(l.Period))
	if l.Burst != 0 && l.Burst != l.Rate {
		b.WriteString(" burst ")
		b.WriteString(formatNumber(l.Burst))
	}
	if l.Algorithm != GCRA {
		b.WriteByte(' ')
		b.WriteString(l.Algorithm.String())
	}
	return b.String()
}

func formatPeriod(d time.Duration) string {
	switch d {
	case time.Second:
		return "s"
	case time.Minute:
		return "m"
	case time.Hour:
		return "h"
	case 24 * time.Hour:
		return "d"
	}
	if d > 0 && d%(24*time.Hour) == 0 {
		return strconv.FormatInt(int64(d/(24*time.Hour)), 10) + "d"
	}
	// time.Duration prints "1h30m0s": drop the zero seconds and minutes
	s := d.String()
	if d >= time.Minute && d%time.Minute == 0 {
		s = strings.TrimSuffix(s, "0s")
	}
	if d >= time.Hour && d%time.Hour == 0 {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

var periodUnits = map[string]time.Duration{
	"ms": time.Millisecond, "s": time.Second, "sec": time.Second, "second": time.Second,
	"m": time.Minute, "min": time.Minute, "minute": time.Minute,
	"h": time.Hour, "hour": time.Hour, "d": 24 * time.Hour, "day": 24 * time.Hour,
}

// ParseLimit reads a limit written as Limit.String writes it: a rate, a slash
// and a period ("10/s", "100/minute", "5/250ms", "1000/1h30m", "3/2d"),
// optionally followed by "burst N" and an algorithm name, in any order.
func ParseLimit(s string) (Limit, error) {
	fields := strings.Fields(s)
	bad := func(why string) (Limit, error) {
		return Limit{}, fmt.Errorf("redisrate: %w: limit %q: %s", ErrInvalid, s, why)
	}
	if len(fields) == 0 {
		return bad("want RATE/PERIOD, e.g. 10/s")
	}
	rateStr, periodStr, ok := strings.Cut(fields[0], "/")
	if !ok {
		return bad("want RATE/PERIOD, e.g. 10/s")
	}
	rate, err := strconv.ParseFloat(rateStr, 64)
	if err != nil {
		return bad(fmt.Sprintf("rate %q is not a number", rateStr))
	}
	period, err := parsePeriod(periodStr)
	if err != nil {
		return bad(err.Error())
	}
	l := Limit{Rate: rate, Period: period}
	for i := 1; i < len(fields); i++ {
		if fields[i] == "burst" && i+1 < len(fields) {
			if l.Burst, err = strconv.ParseFloat(fields[i+1], 64); err != nil {
				return bad(fmt.Sprintf("burst %q is not a number", fields[i+1]))
			}
			i++
			continue
		}
		if l.Algorithm, err = ParseAlgorithm(fields[i]); err != nil {
			return bad(fmt.Sprintf("%q is neither \"burst N\" nor an algorithm", fields[i]))
		}
	}
	return l, nil
}

func parsePeriod(s string) (time.Duration, error) {
	if d, ok := periodUnits[strings.ToLower(s)]; ok {
		return d, nil
	}
	// "2d" and "1.5d": days are not a unit of time.ParseDuration
	if n, ok := strings.CutSuffix(s, "d"); ok {
		if f, err := strconv.ParseFloat(n, 64); err == nil && f > 0 {
			return time.Duration(f * float64(24*time.Hour)), nil
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("period %q must be a unit (ms, s, m, h, d, second, minute, hour, day) or a duration like 500ms or 1h30m", s)
	}
	return d, nil
}

// formatNumber writes v as the contract's number syntax wherever v is valid;
// invalid values (negative, NaN, Inf) come out recognisably and are refused.
func formatNumber(v float64) string {
	// Whole numbers as plain digits ("1000000", not "1e+06"): the scripts'
	// fast paths take only those.
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return strconv.FormatInt(int64(v), 10)
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

func formatPeriodMs(d time.Duration) string {
	if d%time.Millisecond == 0 {
		return strconv.FormatInt(int64(d/time.Millisecond), 10)
	}
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', -1, 64)
}

// Validate reports whether the scripts accept l, with the same words as
// their error replies, without a round trip to Redis: including the range
// checks that keep extreme combinations (e.g. burst 1e15 over a day) exact.
func (l Limit) Validate() error {
	if err := l.validate(""); err != nil {
		return err
	}
	s, err := l.scale("")
	if err != nil {
		return err
	}
	return l.checkRange("", s)
}

const maxNumber, maxPeriodMs = 1e15, 1e12

func (l Limit) validate(suffix string) error {
	if l.Algorithm < 0 || l.Algorithm >= numAlgorithms {
		return invalidf("invalid algorithm%s '%d': must be one of %s", suffix, int(l.Algorithm), strings.Join(algoNames[:], ", "))
	}
	sp := specs[l.Algorithm]
	whole := ""
	if sp.whole {
		whole = "whole "
	}
	if !(l.Rate > 0) || l.Rate > maxNumber || (sp.whole && l.Rate != math.Trunc(l.Rate)) {
		return invalidf("invalid limit%s '%s': must be a positive %snumber, at most 1e15", suffix, formatNumber(l.Rate), whole)
	}
	if l.Period <= 0 || l.Period%time.Millisecond != 0 || l.Period > maxPeriodMs*time.Millisecond {
		return invalidf("invalid period_ms%s '%s': must be a positive integer, at most 1e12", suffix, formatPeriodMs(l.Period))
	}
	if l.Burst != 0 {
		if sp.window && l.Burst != l.Rate {
			return invalidf("invalid burst%s '%s': must be empty, 0 or equal to limit for %s", suffix, formatNumber(l.Burst), l.Algorithm)
		}
		if !(l.Burst > 0) || l.Burst > maxNumber {
			return invalidf("invalid burst%s '%s': must be a positive number, at most 1e15, or 0 or empty for limit", suffix, formatNumber(l.Burst))
		}
	}
	return nil
}

func validateCost(a Algorithm, n float64) error {
	what := "a number"
	if a >= 0 && a < numAlgorithms && specs[a].whole {
		what = "a whole number"
	}
	if !(n >= 0) || n > maxNumber || (what == "a whole number" && n != math.Trunc(n)) {
		return invalidf("invalid cost '%s': must be %s >= 0, at most 1e15", formatNumber(n), what)
	}
	return nil
}
