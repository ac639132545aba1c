package redistest

import (
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redisrate/redisrate"
)

// LoadTimeout is the decision timeout of the Limiters of the tests that
// are not about outages. A shared 2-core machine running the race
// detector and the other test packages can hold a call past the default
// 200 ms, and one such call opens the circuit breaker for every caller:
// the tests of outages keep the default (the outage, faults, failover and
// breaker tests).
const LoadTimeout = 5 * time.Second

// NewLimiter is redisrate.NewLimiter with LoadTimeout (opts may set
// another).
func NewLimiter(rdb redis.Scripter, opts ...redisrate.Option) *redisrate.Limiter {
	return redisrate.NewLimiter(rdb, append([]redisrate.Option{redisrate.WithDecisionTimeout(LoadTimeout)}, opts...)...)
}
