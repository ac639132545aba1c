package redisrate

import (
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"strings"
	"time"
)

// Limit is one rate limit: Rate units per Period, at most Burst at once,
// decided by Algorithm. The numbers are whole, as the scripts take them: a
// rate that is not whole per period is written with a longer period (2.5 per
// second is 5 per 2 s; ParseLimit does it for you).
//
// A zero Burst means Burst = Rate. Window algorithms (SlidingWindow,
// FixedWindow, SlidingLog) only accept a zero Burst or Burst = Rate.
type Limit struct {
	Algorithm Algorithm     // GCRA (the zero value) or another script
	Rate      int64         // units replenished per Period (buckets) or allowed per window: 1 to 10^12 (SlidingLog: 10000)
	Period    time.Duration // whole milliseconds, 1 ms to 366 days; 0 for a Calendar limit
	Burst     int64         // capacity; 0 means Rate

	// Calendar, when set, makes the window a calendar one, in a time zone:
	// "day", "week" (ISO, from Monday) or "month", then optionally a space
	// and an IANA zone name (UTC when none): "day America/Los_Angeles"
	// allows Rate units from one midnight Pacific time to the next (23 or
	// 25 hours on the days daylight saving time starts or ends), "month"
	// Rate units per calendar month in UTC. A calendar limit is decided by
	// FixedWindow with Period left 0: each window has a key of its own,
	// the call's key with the window's name appended (":2026-12-07",
	// ":2026-W49", ":2026-12"; Reset that key to reset one window), chosen
	// on the Limiter's clock, and RetryAfter and ResetAfter run to the next
	// window's start. See docs/go.md, "Calendar quotas".
	Calendar string

	// Name names the limit in metrics and traces (Decision.Limits, and
	// otelrate's redisrate.limit, for the binding limit), e.g. "login";
	// in httplimit and grpclimit it is the limit's policy name too
	// (RateLimit-Policy, QuotaFailure), printable ASCII and one limit's
	// alone within a middleware. It is not sent to Redis and
	// is no part of the state. Make it a constant of the code or the
	// configuration, never a key, a user or an address: each name is a
	// series of its own.
	Name string

	calEnd int64 // as sent (planCalendar): the end of its key's calendar window, in Unix ms; 0: no calendar key
	calAt  int64 // a reservation's calendar limit: the instant, in Unix ms, whose window it settles in; 0: now
}

// Per returns a GCRA limit of rate units per period with Burst = rate.
func Per(rate int64, period time.Duration) Limit {
	return Limit{Rate: rate, Period: period}
}

// PerSecond returns a GCRA limit of rate units per second with Burst = rate.
func PerSecond(rate int64) Limit { return Per(rate, time.Second) }

// PerMinute returns a GCRA limit of rate units per minute with Burst = rate.
func PerMinute(rate int64) Limit { return Per(rate, time.Minute) }

// PerHour returns a GCRA limit of rate units per hour with Burst = rate.
func PerHour(rate int64) Limit { return Per(rate, time.Hour) }

// PerDay returns a GCRA limit of rate units per 24 hours with Burst = rate:
// PerDay(100_000), or 2 million tokens a day, PerDay(2_000_000). A day from
// midnight to midnight in a time zone is a calendar limit (Limit.Calendar).
func PerDay(rate int64) Limit { return Per(rate, 24*time.Hour) }

// WithBurst returns a copy of l with Burst set to burst.
func (l Limit) WithBurst(burst int64) Limit { l.Burst = burst; return l }

// WithAlgorithm returns a copy of l decided by a.
func (l Limit) WithAlgorithm(a Algorithm) Limit { l.Algorithm = a; return l }

// WithName returns a copy of l named name in metrics and traces (see
// Limit.Name).
func (l Limit) WithName(name string) Limit { l.Name = name; return l }

// Capacity returns the most units available at once: Burst, or Rate when
// Burst is 0.
func (l Limit) Capacity() int64 {
	if l.Burst == 0 {
		return l.Rate
	}
	return l.Burst
}

// String returns l as "10/s", "100/m", "5/250ms", "5/2s", with the burst
// when it differs from the rate and the algorithm when it is not GCRA:
// "10/s burst 20 token_bucket"; a calendar limit as "100000/day calendar
// America/Los_Angeles" (fixed_window is implied). ParseLimit reads it back.
func (l Limit) String() string {
	var b strings.Builder
	b.WriteString(strconv.FormatInt(l.Rate, 10))
	b.WriteByte('/')
	if l.Calendar != "" {
		unit, zone, _ := strings.Cut(strings.TrimSpace(l.Calendar), " ")
		b.WriteString(unit)
		b.WriteString(" calendar")
		if zone = strings.TrimSpace(zone); zone != "" {
			b.WriteByte(' ')
			b.WriteString(zone)
		}
		if l.Burst != 0 && l.Burst != l.Rate {
			b.WriteString(" burst ")
			b.WriteString(strconv.FormatInt(l.Burst, 10))
		}
		if l.Algorithm != FixedWindow {
			b.WriteByte(' ')
			b.WriteString(l.Algorithm.String())
		}
		return b.String()
	}
	b.WriteString(formatPeriod(l.Period))
	if l.Burst != 0 && l.Burst != l.Rate {
		b.WriteString(" burst ")
		b.WriteString(strconv.FormatInt(l.Burst, 10))
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
	case 7 * 24 * time.Hour:
		return "w"
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
	"w": 7 * 24 * time.Hour, "week": 7 * 24 * time.Hour,
}

// calendarPeriods are the periods ParseLimit takes with "calendar", as
// Limit.Calendar's units.
var calendarPeriods = map[string]string{"d": "day", "day": "day", "w": "week", "week": "week", "mo": "month", "month": "month"}

// ParseLimit reads a limit written as Limit.String writes it: a rate, a
// slash and a period ("10/s", "100/minute", "5/250ms", "1000/1h30m",
// "100000/day", "1000000000/30d", "5000/week"), optionally followed by
// "burst N" and an algorithm name, in any order, each at most once. The
// limit is validated as the scripts would (Validate), so a limit
// ParseLimit returns is one every call accepts.
//
// "calendar", optionally followed by an IANA time zone (UTC when none),
// makes it a calendar limit (Limit.Calendar) of a day, a week or a month:
// "100000/day calendar America/Los_Angeles" resets at midnight Pacific
// time, "1000000000/month calendar" on the first of each month in UTC. A
// calendar limit is decided by fixed_window. "month" alone is refused: a
// month has no fixed length (write 30d, or a calendar month).
//
// The rate may have decimals. The scripts take whole numbers only, so a
// fractional rate is made exact with the shortest longer period that makes
// it whole: the period is multiplied by the smallest factor f for which
// rate × f is a whole number. "2.5/s" is 5 per 2 s, "0.1/s" is 1 per 10 s,
// "1.5/m" is 3 per 2 min, "0.25/s" is 1 per 4 s. The decision is exactly the
// same rate; the default burst is the scaled rate (5 for "2.5/s"), so pass
// "burst N" to choose another. A rate that cannot be made exact within the
// scripts' ranges (a period past 10^12 ms, a rate past 10^15) is refused, as
// are a zero rate, a period that is not whole milliseconds ("10/1us") or
// has a sign ("10/+5s"), a burst or an algorithm given twice, a fractional
// burst, and anything that is not plain decimal digits ("NaN/s",
// "1e3/s", "-1/s").
func ParseLimit(s string) (Limit, error) {
	fields := strings.Fields(s)
	bad := func(why string) (Limit, error) {
		return Limit{}, invalidf("invalid limit %q: %s", s, why)
	}
	if len(fields) == 0 {
		return bad("want RATE/PERIOD, e.g. 10/s")
	}
	rateStr, periodStr, ok := strings.Cut(fields[0], "/")
	if !ok {
		return bad("want RATE/PERIOD, e.g. 10/s")
	}
	num, den, ok := parseDecimal(rateStr)
	if !ok {
		return bad(fmt.Sprintf("rate %q must be a number of plain decimal digits, e.g. 10 or 2.5", rateStr))
	}
	if num == 0 {
		return bad("the rate must be more than 0")
	}
	calendar, zone := false, ""
	for i := 1; i < len(fields); i++ {
		if fields[i] != "calendar" {
			continue
		}
		if calendar {
			return bad("calendar given twice: give it once, with its time zone")
		}
		calendar = true
		if i+1 < len(fields) && fields[i+1] != "burst" && fields[i+1] != "calendar" {
			if _, err := ParseAlgorithm(fields[i+1]); err != nil {
				zone = fields[i+1] // not an option: the zone
			}
		}
		n := 1
		if zone != "" {
			n = 2
		}
		fields = append(fields[:i:i], fields[i+n:]...)
		i--
	}
	if calendar {
		return parseCalendarLimit(s, rateStr, periodStr, zone, num, den, fields[1:])
	}
	if m := strings.ToLower(periodStr); m == "month" || m == "mo" {
		return bad("a month has no fixed length: write 30d for 30 days, or add \"calendar ZONE\" for the calendar month, e.g. \"" + rateStr + "/month calendar UTC\"")
	}
	period, err := parsePeriod(periodStr)
	if err != nil {
		return bad(err.Error())
	}
	// rate = num/den per period: scale the period by den/gcd(num, den).
	f := den / gcd(num, den)
	if period > time.Duration(maxPeriodMs)*time.Millisecond/time.Duration(f) {
		return bad(fmt.Sprintf("rate %s per %s is not a whole number per any period up to 10^12 ms", rateStr, periodStr))
	}
	l := Limit{Rate: num / (den / f), Period: period * time.Duration(f)}
	// Each option once: with two, one would be silently dropped.
	burst, algo := "", ""
	for i := 1; i < len(fields); i++ {
		if fields[i] == "burst" && i+1 < len(fields) {
			if burst != "" {
				return bad(fmt.Sprintf("burst given twice (%s, then %s): give one", burst, fields[i+1]))
			}
			burst = fields[i+1]
			if l.Burst, err = strconv.ParseInt(burst, 10, 64); err != nil || !isDigits(burst) {
				return bad(fmt.Sprintf("burst %q must be a whole number", burst))
			}
			i++
			continue
		}
		if l.Algorithm, err = ParseAlgorithm(fields[i]); err != nil {
			return bad(fmt.Sprintf("%q is neither \"burst N\" nor an algorithm", fields[i]))
		}
		if algo != "" {
			return bad(fmt.Sprintf("algorithm given twice (%s, then %s): give one", algo, fields[i]))
		}
		algo = fields[i]
	}
	if err := l.Validate(); err != nil {
		msg := err.(*invalidError).msg
		return Limit{}, invalidf("limit %q: %s%s", s, msg, rangeHint(l, msg))
	}
	return l, nil
}

// rangeHint is the way out of a limit the scripts refuse for its size:
// the accepted range in real quotas (CONTRACT.md v4), and the calendar
// month for a quota longer than a year.
func rangeHint(l Limit, msg string) string {
	if !strings.Contains(msg, "too large") && !strings.Contains(msg, "must be a whole number") {
		return "" // not a matter of size
	}
	if l.Period > 366*24*time.Hour {
		return " (periods up to 366 days are exact; a quota per calendar month is \"N/month calendar ZONE\")"
	}
	return " (every limit and burst up to 10^12 per period up to 366 days is exact, e.g. 100000/day or 1000000000/30d, " +
		"if the bucket drains in 10^12 ms: burst * period_ms / limit; sliding_log: up to 10000)"
}

// parseCalendarLimit is ParseLimit of a calendar limit: rate/unit, the
// zone that followed "calendar", and the other options (opts).
func parseCalendarLimit(s, rateStr, periodStr, zone string, num, den int64, opts []string) (Limit, error) {
	bad := func(why string) (Limit, error) {
		return Limit{}, invalidf("invalid limit %q: %s", s, why)
	}
	unit, ok := calendarPeriods[strings.ToLower(periodStr)]
	if !ok {
		return bad(fmt.Sprintf("a calendar limit's period %q must be day, week or month (e.g. 100000/day calendar America/Los_Angeles)", periodStr))
	}
	if den != 1 {
		return bad(fmt.Sprintf("a calendar limit's rate %q must be whole: its window cannot be lengthened to make it so", rateStr))
	}
	l := Limit{Algorithm: FixedWindow, Rate: num, Calendar: unit}
	if zone != "" {
		l.Calendar += " " + zone
	}
	for i := 0; i < len(opts); i++ {
		if opts[i] == "burst" && i+1 < len(opts) {
			if l.Burst != 0 {
				return bad(fmt.Sprintf("burst given twice (%d, then %s): give one", l.Burst, opts[i+1]))
			}
			b, err := strconv.ParseInt(opts[i+1], 10, 64)
			if err != nil || !isDigits(opts[i+1]) {
				return bad(fmt.Sprintf("burst %q must be a whole number", opts[i+1]))
			}
			l.Burst = b
			i++
			continue
		}
		a, err := ParseAlgorithm(opts[i])
		if err != nil {
			return bad(fmt.Sprintf("%q is neither \"burst N\" nor an algorithm", opts[i]))
		}
		if a != FixedWindow {
			return bad(fmt.Sprintf("a calendar limit is decided by fixed_window, not %s: leave the algorithm out", a))
		}
	}
	if err := l.validateCalendar(); err != nil {
		return Limit{}, invalidf("limit %q: %s", s, err.(*invalidError).msg)
	}
	return l, nil
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// parseDecimal reads digits with an optional fraction ("2.5") as num/den,
// den a power of ten; false for anything else or past 10^15 either way.
func parseDecimal(s string) (num, den int64, ok bool) {
	intPart, frac, hasFrac := strings.Cut(s, ".")
	if !isDigits(intPart) || (hasFrac && !isDigits(frac)) {
		return 0, 0, false
	}
	frac = strings.TrimRight(frac, "0")
	digits := strings.TrimLeft(intPart+frac, "0")
	if len(digits) > 16 || len(frac) > 15 {
		return 0, 0, false
	}
	den = 1
	for range len(frac) {
		den *= 10
	}
	if digits == "" {
		return 0, den, true
	}
	num, err := strconv.ParseInt(digits, 10, 64)
	return num, den, err == nil
}

func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

func parsePeriod(s string) (time.Duration, error) {
	if d, ok := periodUnits[strings.ToLower(s)]; ok {
		return d, nil
	}
	// "2d": days are not a unit of time.ParseDuration
	if n, ok := strings.CutSuffix(s, "d"); ok && isDigits(n) {
		if v, err := strconv.ParseInt(n, 10, 64); err == nil && v <= maxPeriodMs/86400000 {
			return time.Duration(v) * 24 * time.Hour, nil
		}
	}
	if strings.HasPrefix(s, "+") || strings.HasPrefix(s, "-") {
		return 0, fmt.Errorf("period %q must not have a sign", s)
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("period %q must be a unit (ms, s, m, h, d, second, minute, hour, day) or a duration like 500ms or 1h30m", s)
	}
	if d%time.Millisecond != 0 {
		return 0, fmt.Errorf("period %q must be a whole number of milliseconds", s)
	}
	return d, nil
}

// The scripts' ranges.
const (
	maxNumber   = 1_000_000_000_000_000 // 10^15: limit, burst, cost
	maxPeriodMs = 1_000_000_000_000     // 10^12
	maxLimits   = 8
)

// Validate reports whether the scripts accept l, with the words of their
// error replies (without "ERR ", and matching ErrInvalid), without a round
// trip to Redis: the ranges, the window rule for Burst, and the rule that
// keeps the arithmetic of extreme combinations exact.
func (l Limit) Validate() error {
	if l.Calendar != "" {
		return l.validateCalendar()
	}
	return l.validate(0)
}

// validate checks the i-th limit (from 0) of a call in the scripts' order:
// limit, period_ms, burst, then its range rule.
func (l Limit) validate(i int) error {
	if !l.Algorithm.valid() {
		return invalidf("invalid algorithm%s %d: must be from 0 to %d (gcra to sliding_log)", argSuffix(i), int(l.Algorithm), numAlgorithms-1)
	}
	sp := &specs[l.Algorithm]
	if l.Rate < 1 || l.Rate > sp.MaxLimit {
		return invalidf("invalid limit%s '%d': must be a whole number from 1 to %s", argSuffix(i), l.Rate, power10(sp.MaxLimit))
	}
	if l.Period < time.Millisecond || l.Period%time.Millisecond != 0 || l.Period > maxPeriodMs*time.Millisecond {
		return invalidf("invalid period_ms%s '%s': must be a whole number from 1 to 10^12", argSuffix(i), periodMs(l.Period))
	}
	if sp.Window {
		if l.Burst != 0 && l.Burst != l.Rate {
			return invalidf("invalid burst%s '%d': must be empty, 0 or equal to limit for %s", argSuffix(i), l.Burst, sp.Name)
		}
	} else if l.Burst < 0 || l.Burst > sp.MaxLimit {
		return invalidf("invalid burst%s '%d': must be a whole number up to %s, or 0 or empty for limit", argSuffix(i), l.Burst, power10(sp.MaxLimit))
	}
	if fault := l.rangeFault(sp.Range); fault != "" {
		return l.rangeError(i, fault, sp.Window)
	}
	return nil
}

// rangeError is the scripts' error for a limit past their range, naming
// the argument at fault (never one the caller left out), and (on the Go
// side only) the way out: a shorter period for the same rate, or a burst
// the limit refills within 10^12 ms.
func (l Limit) rangeError(i int, fault string, window bool) error {
	ms := int64(l.Period / time.Millisecond)
	if fault == "period_ms" {
		with := fmt.Sprintf("with limit %d", l.Rate)
		if l.Burst > 0 && !window {
			with += fmt.Sprintf(" and burst %d", l.Burst)
		}
		return invalidf("invalid period_ms%s '%d': must be at most 31622400000 (366 days) %s (hint: write the same rate with a period of at most 366 days)", argSuffix(i), ms, with)
	}
	return invalidf("invalid burst%s '%d': must be at most 10^12 * limit / period_ms (a full drain within 10^12 ms) with limit %d and period_ms %d (hint: a burst of at most %d, or a larger limit per period)",
		argSuffix(i), l.Burst, l.Rate, ms, maxDrainBurst(l.Rate, ms))
}

// maxDrainBurst is the largest burst whose full drain, burst * period_ms /
// limit, is at most 10^12 ms.
func maxDrainBurst(limit, ms int64) uint64 {
	hi, lo := bits.Mul64(uint64(limit), 1e12)
	if hi >= uint64(ms) {
		return math.MaxUint64
	}
	q, _ := bits.Div64(hi, lo, uint64(ms))
	return q
}

// argSuffix is how the scripts name the arguments of the i-th limit (from
// 0): "" for the first, " #2" for the second. Only errors need it.
func argSuffix(i int) string {
	if i == 0 {
		return ""
	}
	return " #" + strconv.Itoa(i+1)
}

// maxRangePeriodMs is 366 days in ms: the longest period of the accepted range.
const maxRangePeriodMs = 31_622_400_000

// rangeFault is the script's range rule (manifest.Spec.Range), in
// integers, as the scripts apply it: "" when they accept l, else the
// argument their error names. Every limit and burst up to 10^12 (checked
// before) with a period up to 366 days whose full drain, burst * period_ms
// / limit, is at most 10^12 ms is accepted, and so is every call within
// the rule's exact case, whatever its period: "continuous", 2 * burst *
// period_us <= 2^53; "refill", that or ceil(2 * burst / limit) *
// period_us <= 2^53; "weighted", 2 * limit * period_us <= 2^53.
// l's fields are already within their ranges.
func (l Limit) rangeFault(rule string) string {
	periodMs := uint64(l.Period / time.Millisecond)
	periodUs := periodMs * 1000
	limit, burst := uint64(l.Rate), uint64(l.Capacity())
	switch rule {
	case "continuous":
		if fitsProduct(2*burst, periodUs, 1<<53) {
			return ""
		}
	case "refill":
		if fitsProduct(2*burst, periodUs, 1<<53) || fitsProduct((2*burst+limit-1)/limit, periodUs, 1<<53) {
			return ""
		}
	case "weighted":
		if fitsProduct(2*limit, periodUs, 1<<53) {
			return ""
		}
	default:
		return ""
	}
	if periodMs > maxRangePeriodMs {
		return "period_ms"
	}
	bh, bl := bits.Mul64(burst, periodMs)
	lh, ll := bits.Mul64(limit, 1e12)
	if bh > lh || bh == lh && bl > ll {
		return "burst"
	}
	return ""
}

// fitsProduct reports whether a*b <= bound without overflow.
func fitsProduct(a, b, bound uint64) bool {
	hi, lo := bits.Mul64(a, b)
	return hi == 0 && lo <= bound
}

// power10 writes 10^15 and 10^12 as the scripts' error texts do; other caps as digits.
func power10(v int64) string {
	switch v {
	case maxNumber:
		return "10^15"
	case 1_000_000_000_000:
		return "10^12"
	}
	return strconv.FormatInt(v, 10)
}

// periodMs writes a period as the ARGV period_ms would carry it: whole
// milliseconds as digits, anything else as a decimal, for error texts.
func periodMs(d time.Duration) string {
	if d%time.Millisecond == 0 {
		return strconv.FormatInt(int64(d/time.Millisecond), 10)
	}
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', -1, 64)
}
