package redisrate_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redisrate/redisrate"
)

// A limit in shadow mode decides and records as usual, and admits every
// request: the third signup would have been denied, and says so.
func ExampleWithShadowMode() {
	rdb, done := exampleRedis()
	defer done()
	// 10 s: this Example's Redis is embedded in the test, which a busy machine can starve past the 200 ms default.
	limiter := redisrate.NewLimiter(rdb, redisrate.WithDecisionTimeout(10*time.Second), redisrate.WithShadowMode())
	for range 3 {
		res, err := limiter.Allow(context.Background(), "signup:10.0.0.7", redisrate.PerMinute(2))
		if err != nil {
			panic(err)
		}
		fmt.Println(res.Allowed, res.WouldDeny, res)
	}
	// Output:
	// true false allowed: 1 of 2 left, full in 30s
	// true false allowed: 0 of 2 left, full in 1m0s
	// true true allowed in shadow mode, would deny: 0 of 2 left, retry in 30s
}

// One Limiter for a service, and a stricter one for its login form: both
// on one Redis client, with one circuit breaker. While Redis is down, the
// API stays open and the login form closes.
func ExampleLimiter_With() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialerRetries: 1}) // down
	defer rdb.Close()
	api := redisrate.NewLimiter(rdb, redisrate.WithFailurePolicy(redisrate.FailOpen))
	login := api.With(redisrate.WithFailurePolicy(redisrate.FailClosed))

	res, _ := api.Allow(context.Background(), "api:user:42", redisrate.PerSecond(10))
	fmt.Println(res.Allowed, res.Source, errors.Is(res.Cause, redisrate.ErrCircuitOpen))
	// The breaker the API's call opened answers the login form at once.
	res, _ = login.Allow(context.Background(), "login:user:42", redisrate.PerMinute(5))
	fmt.Println(res.Allowed, res.Source, errors.Is(res.Cause, redisrate.ErrCircuitOpen))
	// Output:
	// true fail-open false
	// false fail-closed true
}

// A named limit: the name is what metrics and traces call it (otelrate's
// redisrate.limit), and Result.Limit carries it.
func ExampleLimit_WithName() {
	rdb, done := exampleRedis()
	defer done()
	// 10 s: this Example's Redis is embedded in the test, which a busy machine can starve past the 200 ms default.
	limiter := redisrate.NewLimiter(rdb, redisrate.WithDecisionTimeout(10*time.Second))
	perSecond := redisrate.PerSecond(10).WithName("api-burst")
	perHour := redisrate.PerHour(1000).WithName("api-hourly")

	res, _ := limiter.Decide(context.Background(), redisrate.Request{Key: "user:42", Limits: []redisrate.Limit{perSecond, perHour}, N: 10})
	fmt.Println(res.Limit.Name, res.Limit)
	// Output: api-burst 10/s
}
