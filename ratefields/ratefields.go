// Package ratefields computes the values of the RateLimit-Policy and
// RateLimit fields of draft-ietf-httpapi-ratelimit-headers-10, of
// Retry-After and of the legacy X-RateLimit-Reset, from redisrate limits
// and results.
//
// The httplimit middleware sends them as HTTP headers and the grpclimit
// interceptors (a module of their own) as the gRPC metadata ratelimit-policy
// and ratelimit; both compute them here, so that they always say the same.
// Middleware for another framework or protocol can send the same values.
//
// A RateLimit-Policy item is a policy name with q, the quota, and w, the
// window in whole seconds: q units every w seconds is the limit's long-run
// rate. When the limit refills its whole capacity in a whole number of
// seconds, q is that capacity (the burst of a bucket, the limit of a
// window) and w that time; otherwise (a sub-second period, a refill time
// such as 1.5 s) w is the shortest whole number of seconds that holds a
// whole number of periods, and q what those periods replenish. A RateLimit
// item is the name of the binding limit with r, the units left, and t, the
// seconds until more quota comes (absent at full capacity).
//
// It also holds the rules that both middleware apply alike: the limits of
// a request and their names (Scopes.NewSet), the Redis keys (ScopedKeys)
// and the limits (NewScopes) of a request held to further keys, the names
// their keys may hold (CheckKeyName), and which errors mean that the caller
// gave up (CallerGaveUp).
package ratefields

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redisrate/redisrate"
)

// Set is one set of limits, applied together, with a policy name for each.
// The zero Set has no limits: its fields are empty.
type Set struct {
	// Limits are the limits New was given (a copy of them), in the order
	// of their names: pass them to the Limiter that decides. Read them,
	// never change them: the fields describe the limits as they were.
	Limits []redisrate.Limit
	names  []string // quoted sf-strings, one per limit
	policy string   // the RateLimit-Policy value
}

// New names limits for the fields: names[i] names limits[i]. It refuses
// what the fields cannot carry: no limits, a name for each missing, a name
// twice, or a name CheckName refuses.
func New(names []string, limits []redisrate.Limit) (*Set, error) {
	if len(limits) == 0 {
		return nil, errors.New("no limits")
	}
	if len(names) != len(limits) {
		return nil, fmt.Errorf("%d policy names for %d limits", len(names), len(limits))
	}
	s := &Set{Limits: append([]redisrate.Limit(nil), limits...)}
	seen := map[string]bool{}
	items := make([]string, 0, len(limits))
	for i, n := range names {
		if err := CheckName(n); err != nil {
			return nil, err
		}
		if seen[n] {
			return nil, fmt.Errorf("policy name %q twice", n)
		}
		seen[n] = true
		q, w := window(limits[i])
		s.names = append(s.names, sfString(n))
		items = append(items, fmt.Sprintf("%s;q=%d;w=%d", s.names[i], q, w))
	}
	s.policy = strings.Join(items, ", ")
	return s, nil
}

// Policy is the RateLimit-Policy value: every limit, with its quota q and
// window w.
func (s *Set) Policy() string { return s.policy }

// Name is the policy name of limit i, unquoted, or "" for an i out of
// range.
func (s *Set) Name(i int) string {
	if i < 0 || i >= len(s.names) {
		return ""
	}
	return unquote(s.names[i])
}

// RateLimit is the RateLimit value for res, a Result of these limits: the
// binding limit's name, r its units left and, when more quota is to come, t
// the seconds until it comes. Never send it for a degraded Result
// (res.Degraded()): that carries no quota to report. It is "" for a Set
// without limits.
func (s *Set) RateLimit(res redisrate.Result) string {
	if len(s.names) == 0 {
		return ""
	}
	b := min(max(res.Binding, 0), len(s.names)-1)
	item := s.names[b] + ";r=" + strconv.FormatInt(max(res.Remaining, 0), 10)
	if b >= len(s.Limits) {
		return item
	}
	if t, ok := next(s.Limits[b], res); ok {
		item += ";t=" + strconv.FormatInt(CeilSeconds(t), 10)
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

// CeilSeconds rounds d up to whole seconds, at least 1 for a positive d.
func CeilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d-1)/time.Second) + 1
}

// RetryAfter is the Retry-After of a denial in whole seconds, rounded up
// and at least 1, or false for one that waiting cannot help.
func RetryAfter(res redisrate.Result) (int64, bool) {
	if res.Never() {
		return 0, false
	}
	return max(CeilSeconds(res.RetryAfter), 1), true
}

// CheckName accepts what an sf-string can hold: printable ASCII, not empty.
func CheckName(s string) error {
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

// CheckKeyName accepts a name that middleware puts in its Redis keys (its
// own name, a plan's, a scope's) as ScopedKeys does: one without ':', which
// separates the names in a key, and without '{' or '}', which mark the hash
// tag of scoped keys. With them, the keys of two names could meet: Name
// "api:free" would share the keys of Name "api" with plan "free". Check the
// name with CheckName too.
func CheckKeyName(name string) error {
	if strings.Contains(name, ":") {
		return errors.New("':' separates the names in a client's Redis key, so with it the keys of two names could meet; use another character, such as '-'")
	}
	if strings.ContainsAny(name, "{}") {
		return errors.New("'{' and '}' mark the Redis Cluster hash tag of scoped keys, so with them the keys of two names could meet; use another character, such as '-'")
	}
	return nil
}

// sfString quotes s as a structured-field string (RFC 9651 section 3.3.3).
func sfString(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

func unquote(q string) string {
	return strings.NewReplacer(`\\`, `\`, `\"`, `"`).Replace(q[1 : len(q)-1])
}

// ScopedKeys returns the Redis keys of a request held to its own limit and
// to further scopes (httplimit's and grpclimit's Config.Scopes), in the
// order of their limits: the request's own key first, then each scope's.
// Every key starts with the hash tag of the broadest (last) scope's value,
// so that all share one Redis Cluster slot, and the broadest scope's key is
// the tag alone: "{name:account:42}" for the account, with scopes
// {"account"} and values {"42"}; "{name:account:42}:segment:key" for the
// request's own; "{name:account:42}:scope:value" for a scope in between.
// Both middleware build their keys here, so that an HTTP API and a gRPC
// one of the same name and scopes share an account's state.
//
// name, segment and the scope names are the middleware's own: not empty,
// without ':', '{' or '}', the scopes' all different from each other and
// from segment, or ScopedKeys returns an error (the keys of two scopes
// could meet); scopes and values have the same length, at least 1. key
// and values are a client's. In the tag, '%' and '}' of the value are
// percent-encoded: the tag ends where this ends it, whatever a client
// sent, and distinct values stay distinct. Past the tag each key is a name
// without ':' and then a client's value, so the keys of two requests never
// meet.
func ScopedKeys(name, segment, key string, scopes, values []string) ([]string, error) {
	if len(scopes) == 0 || len(values) != len(scopes) {
		return nil, fmt.Errorf("ratefields: %d scopes and %d values: want as many, at least 1", len(scopes), len(values))
	}
	seen := map[string]bool{segment: true}
	for i, n := range append([]string{name, segment}, scopes...) {
		if n == "" || strings.ContainsAny(n, ":{}") {
			return nil, fmt.Errorf("ratefields: invalid name %q: must not be empty nor hold ':', '{' or '}'", n)
		}
		if i >= 2 && seen[n] {
			return nil, fmt.Errorf("ratefields: the name %q is given twice among the segment and the scopes: their keys would meet", n)
		}
		seen[n] = true
	}
	last := len(scopes) - 1
	tag := "{" + name + ":" + scopes[last] + ":" + tagValue.Replace(values[last]) + "}"
	keys := make([]string, 0, len(scopes)+1)
	keys = append(keys, tag+":"+segment+":"+key)
	for i, s := range scopes[:last] {
		keys = append(keys, tag+":"+s+":"+values[i])
	}
	return append(keys, tag), nil
}

// tagValue percent-encodes '%' and '}' in a hash tag's value.
var tagValue = strings.NewReplacer("%", "%25", "}", "%7D")

// maxKeys is the most keys one call takes (CONTRACT.md, several keys): a
// request's own and up to 7 scopes'.
const maxKeys = 8

// Scopes are the further keys that middleware holds every request to, each
// with a limit of its own, in the same atomic call as the request's own key
// (contract v2.1, several keys): httplimit's and grpclimit's Config.Scopes,
// checked by NewScopes. The zero Scopes has none, and says "request".
type Scopes struct {
	unit   string // what the middleware limits, in errors: "request", "call"
	names  []string
	limits []redisrate.Limit
}

// NewScopes checks the scopes of middleware: names[i] and limits[i] are the
// name and the limit of scope i, the broadest last (see ScopedKeys). It
// refuses more scopes than one call takes with the request's own key (7);
// a name that CheckName or CheckKeyName refuses; a name given twice, or
// taken already: taken maps each name the middleware's keys use to what
// uses it, such as "Config.Name"; and an invalid limit (Limit.Validate;
// a valid limit has a capacity of at least 1). unit is what the middleware limits, "request"
// (when empty) or "call", say: the errors say it, and name scope i
// Config.Scopes[i], as httplimit's and grpclimit's do. NewScopes checks no
// scope's key: that is the middleware's own.
func NewScopes(unit string, names []string, limits []redisrate.Limit, taken map[string]string) (Scopes, error) {
	if len(names) != len(limits) {
		return Scopes{}, fmt.Errorf("%d scope names for %d limits", len(names), len(limits))
	}
	if unit == "" {
		unit = "request"
	}
	if len(names) == 0 {
		return Scopes{unit: unit}, nil
	}
	if len(names) > maxKeys-1 {
		return Scopes{}, fmt.Errorf("Config.Scopes has %d scopes: at most %d, for %d keys in one call with the %s's own", len(names), maxKeys-1, maxKeys, unit)
	}
	seen := maps.Clone(taken)
	if seen == nil {
		seen = map[string]string{}
	}
	for i, n := range names {
		what := fmt.Sprintf("Config.Scopes[%d]", i)
		if err := CheckName(n); err != nil {
			return Scopes{}, fmt.Errorf("%s: invalid Name: %w", what, err)
		}
		if err := CheckKeyName(n); err != nil {
			return Scopes{}, fmt.Errorf("invalid %s.Name %q: %w", what, n, err)
		}
		if other, ok := seen[n]; ok {
			// The name tells the scope's Redis keys apart from the
			// others' under one hash tag.
			return Scopes{}, fmt.Errorf("%s has the Name %q of %s: give each scope a name of its own", what, n, other)
		}
		seen[n] = what
		if err := limits[i].Validate(); err != nil {
			return Scopes{}, fmt.Errorf("%s (%q): invalid Limit: %w", what, n, err)
		}
	}
	return Scopes{unit: unit, names: slices.Clone(names), limits: slices.Clone(limits)}, nil
}

// NewSet returns the Set of the limits that middleware holds a request to
// under one of its rules (httplimit's Config.Limits or a plan, grpclimit's
// Config.Limits or a method's), followed by the scopes' limits, each
// limit's Name set to its policy name, so that metrics name it as the
// fields do. names are the policy names of limits; without them, name
// names a single limit, and name-1, name-2, ... several.
//
// It refuses what could never serve: no limits; with scopes, several
// limits or another algorithm than theirs (a key holds one limit in a call
// of several keys, and one call runs one algorithm's script); limits that
// one call cannot hold (redisrate.Args's errors, which match
// redisrate.ErrInvalid: an invalid limit, limits of several algorithms);
// and names that New refuses.
func (s Scopes) NewSet(name string, names []string, limits []redisrate.Limit) (*Set, error) {
	if len(limits) == 0 {
		return nil, errors.New("no limits: give at least one")
	}
	names, limits, err := s.add(name, names, limits)
	if err != nil {
		return nil, err
	}
	if _, err := redisrate.Args(redisrate.KindAllow, 1, limits...); err != nil {
		return nil, err
	}
	switch {
	case len(names) == 0 && len(limits) == 1:
		names = []string{name}
	case len(names) == 0:
		for i := range limits {
			names = append(names, name+"-"+strconv.Itoa(i+1))
		}
	case len(names) != len(limits):
		return nil, fmt.Errorf("PolicyNames has %d names for %d limits", len(names), len(limits))
	}
	f, err := New(names, limits)
	if err != nil {
		return nil, fmt.Errorf("PolicyNames: %w", err)
	}
	for i := range f.Limits {
		f.Limits[i].Name = f.Name(i)
	}
	return f, nil
}

// add returns the policy names and limits of a call of several keys: those
// of a request's own key, then each scope's, in the order of ScopedKeys'
// keys. names name limits, the own key's; when names is empty, name does.
// With scopes the own key holds one limit, as every key of such a call
// does, of the scopes' algorithm, as one call runs one algorithm's script.
// Without scopes, names and limits are returned as they are.
func (s Scopes) add(name string, names []string, limits []redisrate.Limit) ([]string, []redisrate.Limit, error) {
	if len(s.names) == 0 {
		return names, limits, nil
	}
	if len(limits) != 1 {
		return nil, nil, fmt.Errorf("%d limits with Config.Scopes: with scopes, each key holds one limit (a call of several keys, CONTRACT.md); hold the %s's key to a further limit with a Scope of the same Key", len(limits), s.unit)
	}
	if len(names) == 0 {
		names = []string{name}
	}
	if len(names) != 1 {
		return nil, nil, fmt.Errorf("PolicyNames has %d names for 1 limit", len(names))
	}
	own := limits[0]
	for i, l := range s.limits {
		if l.Algorithm != own.Algorithm {
			return nil, nil, fmt.Errorf("Config.Scopes[%d] (%q) has a %s limit, and the %s's own is %s: the limits of one call run one algorithm's script; give every limit the same algorithm", i, s.names[i], l.Algorithm, s.unit, own.Algorithm)
		}
	}
	return append([]string{names[0]}, s.names...), append([]redisrate.Limit{own}, s.limits...), nil
}

// CallerGaveUp reports whether err, an error of a Limiter's call, says that
// the caller's context ended (it was cancelled, or its deadline passed)
// before Redis decided. Answer such a request as ended, never by the
// failure policy or shadow mode: its deadline is the client's to set (gRPC's
// grpc-timeout), so it must not buy the client an admission. An error that
// matches redisrate.ErrUnavailable is Redis failing, not the caller.
func CallerGaveUp(err error) bool {
	return !errors.Is(err, redisrate.ErrUnavailable) &&
		(errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded))
}
