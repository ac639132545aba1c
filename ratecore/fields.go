package ratecore

// The rate-limit fields of draft-ietf-httpapi-ratelimit-headers-10, and
// Retry-After, computed from limits and results: httplimit sends them as
// HTTP headers and grpclimit as the metadata ratelimit-policy and
// ratelimit, so that both always say the same. The package documentation
// says what q, w, r and t are.

import (
	"errors"
	"fmt"
	"math/bits"
	"strconv"
	"strings"
	"time"

	"github.com/redisrate/redisrate"
)

// fieldSet is one set of limits, applied together, with a policy name for
// each. The zero fieldSet has no limits: its fields are empty.
type fieldSet struct {
	// limits are the limits newFieldSet was given (a copy of them), each
	// named (Limit.Name) by its policy name, so that metrics name it as
	// the fields do: the limits the Limiter decides. Never changed: the
	// fields describe them.
	limits []redisrate.Limit
	names  []string // quoted sf-strings, one per limit
	policy string   // the RateLimit-Policy value
}

// newFieldSet names limits for the fields: names[i] names limits[i]. It
// refuses what the fields cannot carry: no limits, a name for each
// missing, a name twice, or a name checkPolicyName refuses.
func newFieldSet(names []string, limits []redisrate.Limit) (*fieldSet, error) {
	if len(limits) == 0 {
		return nil, errors.New("no limits")
	}
	if len(names) != len(limits) {
		return nil, fmt.Errorf("%d policy names for %d limits", len(names), len(limits))
	}
	s := &fieldSet{limits: append([]redisrate.Limit(nil), limits...)}
	seen := map[string]bool{}
	items := make([]string, 0, len(limits))
	for i, n := range names {
		if err := checkPolicyName(n); err != nil {
			return nil, err
		}
		if seen[n] {
			return nil, fmt.Errorf("policy name %q twice", n)
		}
		seen[n] = true
		q, w := window(limits[i])
		s.names = append(s.names, sfString(n))
		items = append(items, fmt.Sprintf("%s;q=%d;w=%d", s.names[i], q, w))
		s.limits[i].Name = n
	}
	s.policy = strings.Join(items, ", ")
	return s, nil
}

// name is the policy name of limit i, unquoted, or "" for an i out of
// range.
func (s *fieldSet) name(i int) string {
	if i < 0 || i >= len(s.names) {
		return ""
	}
	return unquoteSF(s.names[i])
}

// rateLimit is the RateLimit value for res, a Result of these limits: the
// binding limit's name, r its units left and, when more quota is to come, t
// the seconds until it comes. Never send it for a degraded Result
// (res.Degraded()): that carries no quota to report. It is "" for a set
// without limits.
func (s *fieldSet) rateLimit(res redisrate.Result) string {
	if len(s.names) == 0 {
		return ""
	}
	b := min(max(res.Binding, 0), len(s.names)-1)
	item := s.names[b] + ";r=" + strconv.FormatInt(max(res.Remaining, 0), 10)
	if b >= len(s.limits) {
		return item
	}
	if t, ok := next(s.limits[b], res); ok {
		item += ";t=" + strconv.FormatInt(ceilSeconds(t), 10)
	}
	return item
}

// next is the draft's t: how long until additional quota of limit l (the
// binding limit of res) is made available, as far as res tells. It is
// false when l is at full capacity, with nothing more to come.
//
// For the continuous buckets (GCRA, leaky bucket) that is when the level
// has drained by one more whole unit; for the token bucket, its next
// refill; for the windows, whose state the reply does not describe, the
// time until full capacity (ResetAfter), the latest moment at which more
// quota is certain. On a denial it is at most the RetryAfter, so that it
// never points past Retry-After.
func next(l redisrate.Limit, res redisrate.Result) (time.Duration, bool) {
	missing := res.Capacity - max(res.Remaining, 0)
	if missing <= 0 || res.ResetAfter <= 0 {
		return 0, false
	}
	d := res.ResetAfter
	rate, period := uint64(max(int64(l.Rate), 1)), uint64(max(l.Period, 1))
	switch l.Algorithm {
	case redisrate.GCRA, redisrate.LeakyBucket:
		// The level is above missing-1 units and at most missing: one
		// more unit drains in ResetAfter less what missing-1 units take.
		if t, ok := mulDiv(uint64(missing-1), period, rate); ok && t < uint64(d) {
			d -= time.Duration(t)
		} else {
			d = time.Millisecond
		}
	case redisrate.TokenBucket:
		// Refills of Rate every Period: full after k more refills.
		k := (uint64(missing) + rate - 1) / rate
		if t, ok := mulDiv(k-1, period, 1); ok && t < uint64(d) {
			d -= time.Duration(t)
		} else {
			d = time.Millisecond
		}
	}
	if !res.Allowed && !res.Never() && res.RetryAfter > 0 && d > res.RetryAfter {
		d = res.RetryAfter
	}
	return max(d, time.Millisecond), true
}

// window is the q and w of limit l in RateLimit-Policy: q units in w
// seconds, w whole and at least 1, with q/w the limit's long-run rate (the
// package documentation says which q and w).
func window(l redisrate.Limit) (q, w int64) {
	if l.Calendar != "" {
		// A calendar window's length varies (DST days, months): w is its
		// long-run average, so that q/w is the quota's long-run rate.
		unit, _, _ := strings.Cut(strings.TrimSpace(l.Calendar), " ")
		if s, ok := calendarSeconds[unit]; ok {
			return max(l.Rate, 1), s
		}
	}
	capacity, rate := uint64(max(int64(l.Capacity()), 1)), uint64(max(int64(l.Rate), 1))
	periodMs := uint64(max(l.Period/time.Millisecond, 1))
	var refillMs uint64
	var whole bool
	switch l.Algorithm {
	case redisrate.SlidingWindow, redisrate.FixedWindow, redisrate.SlidingLog:
		refillMs, whole = periodMs, true
	case redisrate.TokenBucket: // whole refills of Rate: q/w is the rate only for a multiple
		if capacity%rate == 0 {
			refillMs, whole = mulDiv(capacity/rate, periodMs, 1)
		}
	default: // capacity * period / rate, exact only when it divides
		hi, lo := bits.Mul64(capacity, periodMs)
		if hi < rate {
			var rem uint64
			refillMs, rem = bits.Div64(hi, lo, rate)
			whole = rem == 0
		}
	}
	if whole && refillMs%1000 == 0 && refillMs > 0 && refillMs/1000 <= 1<<62 {
		return int64(capacity), int64(refillMs / 1000)
	}
	base := periodMs / gcd(periodMs, 1000) * 1000 // lcm(period_ms, 1000)
	return int64(rate * (base / periodMs)), int64(base / 1000)
}

// calendarSeconds is the average length of a calendar window
// (redisrate.Limit.Calendar) in seconds: a Gregorian month is 365.2425 / 12
// days.
var calendarSeconds = map[string]int64{"day": 86400, "week": 7 * 86400, "month": 2629746}

// mulDiv is a*b/c, and whether it fits in an int64.
func mulDiv(a, b, c uint64) (uint64, bool) {
	hi, lo := bits.Mul64(a, b)
	if hi >= c {
		return 0, false
	}
	q, _ := bits.Div64(hi, lo, c)
	return q, q <= 1<<63-1
}

func gcd(a, b uint64) uint64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// ceilSeconds rounds d up to whole seconds, at least 1 for a positive d.
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d-1)/time.Second) + 1
}

// checkPolicyName accepts what an sf-string can hold: printable ASCII, not
// empty.
func checkPolicyName(s string) error {
	if s == "" {
		return errors.New("empty policy name")
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return fmt.Errorf("policy name %q: must be printable ASCII", s)
		}
	}
	return nil
}

// sfString quotes s as a structured-field string (RFC 9651 section 3.3.3).
func sfString(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

func unquoteSF(q string) string {
	return strings.NewReplacer(`\\`, `\`, `\"`, `"`).Replace(q[1 : len(q)-1])
}
