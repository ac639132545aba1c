package redisrate

import (
	"math"
	"strconv"
	"strings"
	"time"
)

// The scripts compute in integers and refuse a combination whose arithmetic
// would leave the exact range of a double (2^53). These are the same checks,
// in the same order and words, so that Validate and Args refuse before any
// round trip what the scripts would refuse.

const exactMax = 1 << 53

// scaledLimit is a limit in the scripts' integer units: unit is 10^decimals
// of limit and burst, and a/b the rate per microsecond in lowest terms.
type scaledLimit struct {
	unit, limitU, burstU, a, b float64
	decimals                   int
	burstShown                 string // the burst as the scripts name it in errors
}

// decimalParts reads a number as formatNumber writes it as m * 10^e, m an
// integer without trailing zeros, as the scripts' parse_number does.
func decimalParts(s string) (m float64, e int) {
	mant, exp, _ := strings.Cut(strings.ToLower(s), "e")
	if exp != "" {
		e, _ = strconv.Atoi(exp)
	}
	intPart, frac, _ := strings.Cut(mant, ".")
	digits := strings.TrimLeft(intPart+frac, "0")
	trimmed := strings.TrimRight(digits, "0")
	if trimmed == "" {
		return 0, 0
	}
	e += len(digits) - len(trimmed) - len(frac)
	m, _ = strconv.ParseFloat(trimmed, 64)
	return m, e
}

func scaleBy(m float64, e int) float64 {
	if e > 22 {
		if m == 0 {
			return 0
		}
		return math.Inf(1)
	}
	return m * math.Pow10(e)
}

func gcdFloat(x, y float64) float64 {
	for y != 0 {
		x, y = y, math.Mod(x, y)
	}
	return x
}

// ceilRatio is the scripts' ceil_ratio: exact for integers.
func ceilRatio(n, d float64) float64 {
	if n == math.Trunc(n) && d == math.Trunc(d) {
		q := (n - math.Mod(n, d)) / d
		if math.Mod(n, d) != 0 {
			q++
		}
		return q
	}
	return math.Ceil(n / d)
}

// scale checks that l is exact in whole units (the scripts' parse_args) and
// returns it scaled; l has passed the basic checks of validate.
func (l Limit) scale(suffix string) (scaledLimit, error) {
	limitStr := formatNumber(l.Rate)
	lm, le := decimalParts(limitStr)
	bm, be := lm, le
	s := scaledLimit{burstShown: limitStr}
	if l.Burst != 0 && !specs[l.Algorithm].window {
		s.burstShown = formatNumber(l.Burst)
		bm, be = decimalParts(s.burstShown)
	}
	decimals := max(0, -le, -be)
	if decimals > 15 {
		return s, invalidf("invalid limit%s '%s': must be given with at most 15 decimals (burst too)", suffix, limitStr)
	}
	s.decimals, s.unit = decimals, math.Pow10(decimals)
	s.limitU, s.burstU = scaleBy(lm, le+decimals), scaleBy(bm, be+decimals)
	if s.limitU > exactMax || s.burstU > exactMax {
		return s, invalidf("invalid limit%s '%s': must be exact in whole units: limit and burst need fewer significant digits", suffix, limitStr)
	}
	periodUs := float64(l.Period/time.Millisecond) * 1000
	g := gcdFloat(s.limitU, periodUs)
	s.a, s.b = s.limitU/g, periodUs/g
	return s, nil
}

// checkRange is the algorithm-specific range check of the scripts.
func (l Limit) checkRange(suffix string, s scaledLimit) error {
	bound := "2^53"
	if l.Algorithm == GCRA || l.Algorithm == LeakyBucket {
		bound = "2^52"
	}
	tooLarge := func() error {
		return invalidf("invalid burst%s '%s': must be small enough for exact arithmetic with this limit and period_ms (burst * period_ms / limit, in microseconds, at most %s)", suffix, s.burstShown, bound)
	}
	periodMs := float64(l.Period / time.Millisecond)
	switch l.Algorithm {
	case GCRA, LeakyBucket:
		// at most 2^52, so that a level and a cost that each fit add up exactly
		if s.burstU*s.b > exactMax/2 {
			return tooLarge()
		}
	case TokenBucket:
		if ceilRatio(l.Capacity(), l.Rate)*periodMs*1000 > exactMax {
			return tooLarge()
		}
	case SlidingWindow:
		if 3*s.limitU*periodMs > exactMax {
			return invalidf("invalid limit%s '%s': must be small enough for exact arithmetic with this period_ms (3 * limit * period_ms, in units of its last decimal, at most 2^53)", suffix, formatNumber(l.Rate))
		}
	}
	return nil
}

// maxLogCost is the largest cost the sliding log admits in one call: it adds
// one sorted-set entry per unit, and a larger batch would stall Redis.
const maxLogCost = 100000

// checkLogCost refuses, as the sliding log script does, a cost that could be
// admitted (it fits every limit) but is too large to record entry by entry.
func checkLogCost(n float64, limits []Limit) error {
	if limits[0].Algorithm != SlidingLog || n <= maxLogCost {
		return nil
	}
	for _, l := range limits {
		if n > l.Rate {
			return nil // never admitted: answered with retry_after -1, nothing added
		}
	}
	return invalidf("invalid cost '%s': must be at most 100000 for sliding_log, which keeps one entry per unit", formatNumber(n))
}
