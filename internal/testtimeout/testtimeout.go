// Package testtimeout holds the decision deadline that redisrate.NewLimiter
// takes by default, so that the tests of the packages built on it (the
// middleware, the OpenTelemetry reporter) can raise it: their in-process
// Redis (miniredis, a Lua interpreter in Go, under the race detector, on a
// loaded machine) can take longer than 200 ms for a call that a real Redis
// answers in well under one, and the limit would then be an outage. Only
// tests set it.
package testtimeout

import "time"

// DecisionTimeout is what NewLimiter takes unless WithDecisionTimeout says
// otherwise: redisrate.DefaultDecisionTimeout, which a test checks.
var DecisionTimeout = 200 * time.Millisecond
