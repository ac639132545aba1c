package redisrate

import (
	"fmt"
	"time"
)

// Never is Result.RetryAfter for a request that can never be admitted: its
// cost is more than the capacity of a limit. Waiting does not help.
const Never time.Duration = -1

// Result is a decision. Remaining, ResetAfter and Limit describe the binding
// limit: on a denial the denying limit with the longest wait, on an admission
// the limit with the fewest units left.
type Result struct {
	// Allowed reports whether the request was admitted (and, unless it was a
	// check, recorded).
	Allowed bool

	// Remaining is the whole units still available right after this call,
	// or, on a denial, now.
	Remaining int64

	// RetryAfter is 0 when allowed. Otherwise it is how long until the same
	// request would be admitted if nothing else consumed, rounded up to the
	// millisecond, or Never when it never can be.
	RetryAfter time.Duration

	// ResetAfter is how long until the key is back to full capacity if
	// nothing else consumed, rounded up to the millisecond.
	ResetAfter time.Duration

	// Capacity is the capacity of the binding limit, rounded down: Burst for
	// buckets, Rate for windows.
	Capacity int64

	// Binding is the index, among the limits of the call, of the limit the
	// fields above describe: always 0 for a single limit.
	Binding int

	// Limit is the binding limit itself.
	Limit Limit

	// Source says who decided: SourceRedis normally, or, when Redis failed
	// and a failure policy answered instead (WithFailurePolicy,
	// WithFallback), which one. Log and alert on Degraded results.
	Source Source

	// Cause is the Redis failure behind a degraded result (Source other than
	// SourceRedis); nil otherwise.
	Cause error
}

// Never reports whether the request can never be admitted under its limits
// (RetryAfter is Never), as opposed to being admitted later.
func (r Result) Never() bool { return !r.Allowed && r.RetryAfter == Never }

// String summarises r for logs, e.g. "denied: 0 of 10 left, retry in 100ms".
func (r Result) String() string {
	switch {
	case r.Allowed:
		return fmt.Sprintf("allowed: %d of %d left, full in %v", r.Remaining, r.Capacity, r.ResetAfter)
	case r.Never():
		return fmt.Sprintf("denied: cost exceeds capacity %d, never admitted", r.Capacity)
	default:
		return fmt.Sprintf("denied: %d of %d left, retry in %v", r.Remaining, r.Capacity, r.RetryAfter)
	}
}

// decodeReply reads the contract's six integers; later contract versions
// may append fields, which are ignored.
func decodeReply(v any, limits []Limit) (Result, error) {
	arr, ok := v.([]any)
	if !ok || len(arr) < 6 {
		return Result{}, fmt.Errorf("%w: want an array of 6 integers, got %T %v", ErrBadReply, v, v)
	}
	var n [6]int64
	for i := range n {
		x, ok := arr[i].(int64)
		if !ok {
			return Result{}, fmt.Errorf("%w: field %d is %T, not an integer", ErrBadReply, i+1, arr[i])
		}
		n[i] = x
	}
	if n[5] < 1 || int(n[5]) > len(limits) {
		return Result{}, fmt.Errorf("%w: binding limit %d out of range 1..%d", ErrBadReply, n[5], len(limits))
	}
	r := Result{
		Allowed:    n[0] == 1,
		Remaining:  n[1],
		RetryAfter: time.Duration(n[2]) * time.Millisecond,
		ResetAfter: time.Duration(n[3]) * time.Millisecond,
		Capacity:   n[4],
		Binding:    int(n[5]) - 1,
	}
	if n[2] < 0 {
		r.RetryAfter = Never
	}
	r.Limit = limits[r.Binding]
	return r, nil
}
