package otelrate_test

import (
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redisrate/redisrate"
)

// testLimiter is redisrate.NewLimiter with a decision timeout that
// miniredis's Lua, under the race detector on a busy machine, always meets
// (200 ms, the default, is not: a slow call would be an outage), unless
// opts set another.
func testLimiter(rdb redis.Scripter, opts ...redisrate.Option) *redisrate.Limiter {
	return redisrate.NewLimiter(rdb, append([]redisrate.Option{redisrate.WithDecisionTimeout(10 * time.Second)}, opts...)...)
}
