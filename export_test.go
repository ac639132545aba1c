package redisrate

import (
	"time"

	"github.com/redis/go-redis/v9"
)

// RaceEnabled tells the external tests (package redisrate_test) whether the
// race detector is on, to size their randomized and repeated tables.
const RaceEnabled = raceEnabled

// testDecisionTimeout is the decision timeout of the Limiters the tests
// make: one that miniredis's Lua, under the race detector on a busy
// machine, always meets (200 ms, the default, is not: a slow call would be
// an outage). The tests of the timeout set theirs.
const testDecisionTimeout = 10 * time.Second

// testLimiter is NewLimiter as the tests make it: with testDecisionTimeout
// unless opts set another.
func testLimiter(rdb redis.Scripter, opts ...Option) *Limiter {
	return testLimiterOn(realClock{}, rdb, opts...)
}

// testLimiterOn is testLimiter on clk, the one clock of the Limiter's
// breaker, loader, deny cache and Wait (and of those of the options).
func testLimiterOn(clk clock, rdb redis.Scripter, opts ...Option) *Limiter {
	return newLimiter(rdb, clk, append([]Option{WithDecisionTimeout(testDecisionTimeout)}, opts...))
}
