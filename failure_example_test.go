package redisrate_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/redisrate/redisrate"
)

// With FailClosed, a Limiter whose Redis is down denies, and says why in
// the Result; without a policy the caller gets an error matching
// ErrUnavailable.
func ExampleWithFailurePolicy() {
	// Nothing listens on port 1: Redis is down. ContextTimeoutEnabled lets
	// the caller's deadline bound every call.
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1})
	defer rdb.Close()
	ctx := context.Background()

	_, err := redisrate.NewLimiter(rdb).Allow(ctx, "user:42", redisrate.PerSecond(5))
	fmt.Println(errors.Is(err, redisrate.ErrUnavailable))

	lim := redisrate.NewLimiter(rdb, redisrate.WithFailurePolicy(redisrate.FailClosed))
	res, err := lim.Allow(ctx, "user:42", redisrate.PerSecond(5))
	if err != nil {
		panic(err) // only bad arguments or a foreign key get here
	}
	fmt.Println(res.Allowed, res.Source, res.RetryAfter, res.Degraded())
	// Output:
	// true
	// false fail-closed 200ms true
}
