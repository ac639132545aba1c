package redisrate

import (
	"fmt"
	"math"
	"time"
)

// infDuration is Result.RetryAfter for a request that can never be admitted:
// its cost is more than the capacity of a limit. It is the longest
// Duration (math.MaxInt64, x/time/rate's InfDuration), so a sleep or timer
// on it never returns rather than spinning. Result.Never reports it: the
// one way to tell, so not an exported name of its own.
const infDuration = time.Duration(math.MaxInt64)

// Result is a decision. Remaining, ResetAfter, Capacity and Limit describe
// the binding limit: on a denial the denying limit with the longest wait, on
// an admission the limit with the fewest units left.
type Result struct {
	// Allowed reports whether the request was admitted (and, unless it was a
	// check or a peek, recorded). See Limiter.Decide for each Kind.
	Allowed bool

	// Units is how many units the call recorded on the binding limit:
	// taken (KindAllow: N or 0; KindUpTo: from 0 to N; KindForce) or given
	// back (KindRefund); for KindCheck, what KindAllow would take. It is 0
	// for a peek, and for an answer of the failure policy or the deny
	// cache, which record nothing.
	Units int64

	// Remaining is the whole units still available right after this call,
	// or, on a denial, now.
	Remaining int64

	// RetryAfter is 0 when allowed. Otherwise it is how long until the same
	// request would be admitted if nothing else consumed, rounded up to the
	// millisecond, or infDuration when it never can be.
	RetryAfter time.Duration

	// ResetAfter is how long until the key is back to full capacity if
	// nothing else consumed, rounded up to the millisecond.
	ResetAfter time.Duration

	// Capacity is the capacity of the binding limit: Burst for buckets,
	// Rate for windows.
	Capacity int64

	// Binding is the index, among the limits of the call, of the limit the
	// fields above describe: always 0 for a single limit. For a Request
	// with Keys it is also the index of the binding key (Key).
	Binding int

	// Limit is the binding limit itself.
	Limit Limit

	// Key is the key the binding limit guards, as the caller passed it
	// (without the Limiter's prefix): Keys[Binding].Key of a Request with Keys, and the
	// key of every one-key call.
	Key string

	// Source says who decided: SourceRedis normally, SourceDenyCache for a
	// denial answered again from the deny cache, or, when Redis failed, the
	// fallback or the failure policy. See Degraded.
	Source Source

	// Cause is the Redis failure behind a degraded result; nil otherwise.
	Cause error

	// Shadow reports a decision of a Limiter in shadow mode
	// (WithShadowMode): Allowed is always true.
	Shadow bool

	// WouldDeny reports, in shadow mode, a request that was admitted but
	// that the limit (or the failure policy) denied: RetryAfter, Remaining
	// and the rest are the denial's.
	WouldDeny bool

	peek bool // the answer to a KindPeek: a state, not an admission
}

// Never reports whether the request can never be admitted under its limits
// (RetryAfter is infDuration), as opposed to being admitted later.
func (r Result) Never() bool { return (!r.Allowed || r.WouldDeny) && r.RetryAfter == infDuration }

// Degraded reports whether r was decided without Redis: by the fallback or
// the failure policy (Source is neither SourceRedis nor SourceDenyCache).
// Services should log and alert on it (see WithLogger); r.Cause says why.
// The quota fields of a degraded result (Remaining, ResetAfter) vouch for
// nothing global.
func (r Result) Degraded() bool { return r.Source != SourceRedis && r.Source != SourceDenyCache }

// String summarises r for logs, e.g. "denied: 0 of 10 left, retry in
// 100ms"; the answer to a peek (KindPeek), which admits nothing, reads "peek: 7 of 10
// left, full in 300ms".
func (r Result) String() string {
	var s string
	switch {
	case r.peek && r.Degraded():
		s = "peek: state unknown"
	case r.peek:
		s = fmt.Sprintf("peek: %d of %d left, full in %v", r.Remaining, r.Capacity, r.ResetAfter)
	case r.WouldDeny && r.Never():
		s = fmt.Sprintf("allowed in shadow mode, would deny: cost exceeds capacity %d", r.Capacity)
	case r.WouldDeny:
		s = fmt.Sprintf("allowed in shadow mode, would deny: %d of %d left, retry in %v", r.Remaining, r.Capacity, r.RetryAfter)
	case r.Allowed:
		s = fmt.Sprintf("allowed: %d of %d left, full in %v", r.Remaining, r.Capacity, r.ResetAfter)
	case r.Never():
		s = fmt.Sprintf("denied: cost exceeds capacity %d, never admitted", r.Capacity)
	default:
		s = fmt.Sprintf("denied: %d of %d left, retry in %v", r.Remaining, r.Capacity, r.RetryAfter)
	}
	if r.Source != SourceRedis {
		s += " (" + r.Source.String() + ")"
	}
	return s
}

// Source says who made a decision.
type Source int

const (
	// SourceRedis: the scripts decided in Redis, as normal.
	SourceRedis Source = iota
	// SourceFallback: the fallback Limiter (WithFallback) decided, with the
	// same limits, on its own state: typically an in-process Redis (see the
	// localredis package), so the limits hold per process, not globally.
	SourceFallback
	// SourceFailOpen: nothing decided; the request was admitted by policy.
	SourceFailOpen
	// SourceFailClosed: nothing decided; the request was denied by policy.
	SourceFailClosed
	// SourceDenyCache: a denial Redis gave earlier, answered again from the
	// deny cache (WithDenyCache) without a round trip. Not degraded.
	SourceDenyCache
)

var sourceNames = [...]string{"redis", "fallback", "fail-open", "fail-closed", "deny-cache"}

// String returns the source's name, e.g. "fail-open", as metrics label it.
func (s Source) String() string {
	if s >= 0 && int(s) < len(sourceNames) {
		return sourceNames[s]
	}
	return fmt.Sprintf("Source(%d)", int(s))
}

// msDuration converts a reply's milliseconds; -1 (never), and anything past
// what a Duration holds, is infDuration.
func msDuration(ms int64) time.Duration {
	if ms < 0 || ms > math.MaxInt64/int64(time.Millisecond) {
		return infDuration
	}
	return time.Duration(ms) * time.Millisecond
}
