// Package policyof lets the middleware's core (ratecore) read the failure
// policy set on a Limiter, which the root package keeps unexported (its
// public surface has a budget): the middleware resolves its own policy
// against it, so that an explicit FailClosed or FailError on the Limiter is
// never served open.
package policyof

// Of returns the FailurePolicy set on limiter, a *redisrate.Limiter, as an
// int; 0 when none was set (or limiter is not one). The root package sets
// it when it is initialised.
var Of func(limiter any) int
