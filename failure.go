package redisrate

import (
	"fmt"

	"github.com/redisrate/redisrate/internal/policyof"
)

// The failure policy and the fallback: what a call answers when Redis
// cannot decide (its error matches ErrUnavailable), the same for every
// kind of call: the fallback Limiter if there is one, then the failure
// policy. The engine's failure stage (fail, in engine.go) applies them;
// the circuit breaker and the log of each burst of failures are in
// breaker.go.

// FailurePolicy decides what a call answers when Redis cannot decide (the
// call's error matches ErrUnavailable) and no fallback did. Argument errors
// (ErrInvalid), foreign keys (ErrForeignKey) and a deployment the server
// refuses (ErrMisconfigured: a wrong password, an ACL, no scripting) are
// not outages: they are always returned as errors, whatever the policy,
// since no wait cures them and a policy's answer would hide them.
//
// Every kind of call follows it alike: Allow, AllowN, Decide of every Kind
// but KindWait, and each request of DecideBatch answer the policy's Result
// with a nil error (FailOpen, FailClosed) or the error (FailError); nothing
// is recorded, and Result.Units is 0. Two calls cannot pretend: Wait, WaitN
// and Decide's KindWait return a
// FailOpen admission with a nil error, but end a FailClosed denial with
// the Result and an error matching ErrUnavailable (waiting out an outage
// is not waiting for a turn); Reset always returns the error.
//
// The zero FailurePolicy is no choice. A Limiter without one answers as
// FailError. The middleware (httplimit, grpclimit) follows one rule: an
// explicit FailClosed or FailError, on its Limiter or in its Config, is
// never served open. With no choice on either, it serves (FailOpen, its
// default: docs/reliability.md); with one choice, that one; with a
// refusing policy on one side and FailOpen on the other, its New returns
// an error rather than pick one.
type FailurePolicy int

const (
	// FailError returns the error, matching ErrUnavailable, with a zero
	// Result: the caller decides. It is the default.
	FailError FailurePolicy = iota + 1
	// FailClosed denies the request: a Result with Allowed false, Source
	// SourceFailClosed and a RetryAfter that reflects the outage, not the
	// quota: one second, or the circuit breaker's probe interval if that is
	// longer (see WithCircuitBreaker), since Redis's decisions can resume
	// within one probe interval of its return. (A quota's period would keep
	// well-behaved clients of a PerDay(1) limit away for a day after a
	// one-second outage.)
	FailClosed
	// FailOpen admits the request: a Result with Allowed true, Remaining 0
	// and Source SourceFailOpen. It keeps a service up while its limiter is
	// down, at the cost of not limiting.
	FailOpen
)

var policyNames = [...]string{"default", "fail-error", "fail-closed", "fail-open"}

// String returns the policy's name, e.g. "fail-open"; "default" for the
// zero FailurePolicy.
func (p FailurePolicy) String() string {
	if p >= 0 && int(p) < len(policyNames) {
		return policyNames[p]
	}
	return fmt.Sprintf("FailurePolicy(%d)", int(p))
}

// WithFailurePolicy sets what a call answers when Redis cannot decide: the
// error (FailError, the default), a denial (FailClosed) or an admission
// (FailOpen); 0 takes the choice back (the default, which the middleware
// may replace by its own: see FailurePolicy). With WithFallback too, the
// policy applies only when the fallback fails as well.
//
// A call waits for Redis at most the decision timeout
// (WithDecisionTimeout, 200 ms unless set), or until its
// context's deadline if that comes first; the circuit breaker
// (WithCircuitBreaker) makes every call after the first failure answer at
// once.
//
// Only the Limiter's own view of Redis is a Redis failure. A call whose
// context the caller cancelled, or whose deadline passed, before Redis
// decided is not decided by the policy or the fallback, and the breaker
// does not count it: it gets an error that matches the context's error
// (context.Canceled or context.DeadlineExceeded) and not ErrUnavailable.
// Otherwise a client that sets its own deadline (gRPC's grpc-timeout) could
// buy admissions under FailOpen, or open the breaker for everyone.
func WithFailurePolicy(p FailurePolicy) Option {
	return func(l *Limiter) { l.policy = p } // 0: no choice, which answers as FailError
}

func init() {
	policyof.Of = func(v any) int {
		if l, ok := v.(*Limiter); ok && l != nil {
			return int(l.policy)
		}
		return 0
	}
}

// failurePolicy is the policy l's calls follow: FailError when none was set.
func (l *Limiter) failurePolicy() FailurePolicy {
	if l.policy == 0 {
		return FailError
	}
	return l.policy
}

// WithFallback makes calls that Redis cannot decide go to fallback instead,
// with the same key and limits: typically a Limiter on an in-process Redis
// (localredis.Start), which runs the very same scripts, so callers still get
// real rate limiting, per process, while Redis is away. Such results have
// Source SourceFallback. The fallback's state is its own: when Redis is back,
// decisions return to Redis and its state. If the fallback fails too, the
// failure policy applies. A nil fallback removes it. Reset does not reach
// the fallback.
//
// The fallback decides under its own decision deadline, after this
// Limiter's: an in-process Redis answers in microseconds, but a fallback
// on another server adds up to its own timeout to a call's wait (and, in
// a DecideBatch, to each request Redis could not decide, one after the
// other). Keep a remote fallback's timeout short, and its breaker on.
func WithFallback(fallback *Limiter) Option {
	return func(l *Limiter) { l.fallback = fallback }
}

// inFallback marks the context of a fallback call, so that fallbacks that
// fall back on each other stop after one hop.
type inFallback struct{}
