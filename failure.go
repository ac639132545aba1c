package redisrate

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"
)

// ErrUnavailable is matched (errors.Is) by the error of a call that Redis
// could not decide: unreachable, timed out, loading, failing over, refusing
// writes, or any error reply other than the scripts' own argument and
// foreign-key errors. It is what a failure policy answers for.
var ErrUnavailable = errors.New("redis unavailable")

// FailurePolicy decides what a Limiter answers when Redis cannot decide (the
// call's error matches ErrUnavailable or ErrBadReply). Argument errors
// (ErrInvalid) and foreign keys (ErrForeignKey) are the caller's to fix and
// are always returned as errors, whatever the policy.
//
// The policy is applied call by call: every call asks Redis first, so
// decisions go back to Redis as soon as it answers again.
type FailurePolicy int

const (
	// FailError returns the error, matching ErrUnavailable: the caller
	// decides. It is the default.
	FailError FailurePolicy = iota
	// FailClosed denies the request: a Result with Allowed false, Source
	// SourceFailClosed and RetryAfter one emission interval (Period/Rate)
	// of the first limit, so that well-behaved callers back off.
	FailClosed
	// FailOpen admits the request: a Result with Allowed true, Remaining 0
	// and Source SourceFailOpen. It keeps a service up while its limiter is
	// down, at the cost of not limiting.
	FailOpen
)

func (p FailurePolicy) String() string {
	switch p {
	case FailError:
		return "fail-error"
	case FailClosed:
		return "fail-closed"
	case FailOpen:
		return "fail-open"
	}
	return fmt.Sprintf("FailurePolicy(%d)", int(p))
}

// Source says who made a decision. Anything but SourceRedis is a degraded
// decision, made because Redis failed; Result.Cause says how it failed.
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

func (s Source) String() string {
	switch s {
	case SourceRedis:
		return "redis"
	case SourceFallback:
		return "fallback"
	case SourceFailOpen:
		return "fail-open"
	case SourceFailClosed:
		return "fail-closed"
	case SourceDenyCache:
		return "deny-cache"
	}
	return fmt.Sprintf("Source(%d)", int(s))
}

// Degraded reports whether r was decided without Redis (Source is not
// SourceRedis). Services should log and alert on it; r.Cause says why.
func (r Result) Degraded() bool { return r.Source != SourceRedis && r.Source != SourceDenyCache }

// failure is a Limiter's failure handling, set by the options below.
type failure struct {
	policy   FailurePolicy
	fallback *Limiter
}

// WithFailurePolicy sets what a call answers when Redis cannot decide: the
// error (FailError, the default), a denial (FailClosed) or an admission
// (FailOpen). With WithFallback too, the policy applies only when the
// fallback fails as well.
//
// A call waits for Redis at most until its context's deadline only if the
// go-redis client honours deadlines (redis.Options.ContextTimeoutEnabled);
// otherwise the client's ReadTimeout (3 s by default) bounds it.
func WithFailurePolicy(p FailurePolicy) Option {
	return func(l *Limiter) { l.failure.policy = p }
}

// WithFallback makes calls that Redis cannot decide go to fallback instead,
// with the same key and limits: typically a Limiter on an in-process Redis
// (localredis.Start), which runs the very same scripts, so callers still get
// real rate limiting, per process, while Redis is away. Such results have
// Source SourceFallback. The fallback's state is its own: when Redis is back,
// decisions return to Redis and its state. If the fallback fails too, the
// failure policy applies. A nil fallback removes it.
func WithFallback(fallback *Limiter) Option {
	return func(l *Limiter) { l.failure.fallback = fallback }
}

// fallbackTimeout bounds a fallback call that outlives the caller's
// context: the caller's deadline has often passed already when Redis was
// slow, and the in-process decision is still worth having.
const fallbackTimeout = time.Second

// inFallback marks the context of a fallback call, so that fallbacks that
// fall back on each other stop after one hop.
type inFallback struct{}

// onFailure is Limiter.do's answer to a failed call e: the error itself,
// or the fallback's or the policy's decision.
func (l *Limiter) onFailure(ctx context.Context, e *Error, n float64, check bool, limits []Limit) (Result, error) {
	if e.kind == ErrInvalid || e.kind == ErrForeignKey {
		return Result{}, e
	}
	if e.kind == nil && !errors.Is(e.Err, ErrBadReply) {
		e.kind = ErrUnavailable
	}
	if fb := l.failure.fallback; fb != nil && fb != l && ctx.Value(inFallback{}) == nil {
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), fallbackTimeout)
		fctx = context.WithValue(fctx, inFallback{}, true)
		res, err := fb.do(fctx, e.Key, n, check, limits...)
		cancel()
		if err == nil {
			if res.Source == SourceRedis {
				res.Source, res.Cause = SourceFallback, e
			} else {
				// The fallback's own policy decided: both failures matter.
				res.Cause = errors.Join(e, res.Cause)
			}
			return res, nil
		}
		e = &Error{Script: e.Script, Key: e.Key, Err: fmt.Errorf("%w (and the fallback failed: %v)", e.Err, err), kind: e.kind}
	}
	lim := limits[0]
	switch l.failure.policy {
	case FailClosed:
		return Result{
			RetryAfter: emissionInterval(lim),
			Capacity:   int64(math.Floor(lim.Capacity())),
			Limit:      lim,
			Source:     SourceFailClosed,
			Cause:      e,
		}, nil
	case FailOpen:
		return Result{
			Allowed:  true,
			Capacity: int64(math.Floor(lim.Capacity())),
			Limit:    lim,
			Source:   SourceFailOpen,
			Cause:    e,
		}, nil
	}
	return Result{}, e
}

// emissionInterval is the time one unit of lim takes to come back,
// rounded up to the millisecond: a retry hint that does not invite a retry
// storm while Redis is away.
func emissionInterval(lim Limit) time.Duration {
	f := math.Ceil(float64(lim.Period) / lim.Rate)
	if !(f < 1<<62) { // a tiny rate over decades: past what a Duration holds
		return lim.Period
	}
	d := time.Duration(f)
	d = (d + time.Millisecond - 1).Truncate(time.Millisecond)
	return max(d, time.Millisecond)
}
