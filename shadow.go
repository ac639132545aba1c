package redisrate

// WithShadowMode makes the Limiter decide every call as usual and admit it
// whatever the decision: the way to roll a limit out in production
// (envoy's shadow_mode), watching what it would do before it does it.
//
// Every call goes to Redis (or the deny cache, the fallback, the failure
// policy) and is recorded exactly as it would be: an admission takes its
// units, a denial takes none. Then a denial comes back with Allowed true
// and WouldDeny true, keeping Redis's RetryAfter and Remaining; every
// Result has Shadow true. A call Redis cannot decide is admitted too:
// FailOpen's admission as usual; under FailClosed and FailError (which
// would refuse it) FailClosed's denial, admitted, with WouldDeny; and so
// is a call whose context ends before Redis decides (a deadline shorter
// than Redis's stall): shadow mode fails no call for the limiter's sake.
// Argument errors, foreign keys and ACL refusals are still errors, and
// Reset still resets.
//
// Observers see the Result the caller gets, so metrics and spans say what
// would have been denied (otelrate: outcome would_deny). For one part of a
// service, use l.With(WithShadowMode()), or the middleware's Config.Shadow.
func WithShadowMode() Option {
	return func(l *Limiter) { l.shadow = true }
}
