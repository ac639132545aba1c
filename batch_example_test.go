package redisrate_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/redisrate/redisrate"
)

// One round trip decides for many keys: here the limits of every item in a
// shopping cart, and one request whose limit is invalid.
func ExampleLimiter_AllowBatch() {
	rdb, done := exampleRedis()
	defer done()
	ctx := context.Background()
	limiter := redisrate.NewLimiter(rdb, redisrate.WithKeyPrefix("rate:"))

	perItem := []redisrate.Limit{redisrate.PerMinute(2)}
	reqs := []redisrate.Request{
		{Key: "item:1", Limits: perItem, N: 1},
		{Key: "item:2", Limits: perItem, N: 2},
		{Key: "item:2", Limits: perItem, N: 1}, // decided after the one above
		{Key: "item:3", Limits: []redisrate.Limit{redisrate.PerMinute(-1)}, N: 1},
	}
	results, err := limiter.AllowBatch(ctx, reqs)
	var batchErr *redisrate.BatchError
	if err != nil && !errors.As(err, &batchErr) {
		panic(err)
	}
	for i, res := range results {
		if batchErr != nil && batchErr.Errs[i] != nil {
			fmt.Printf("%s: error, invalid: %v\n", reqs[i].Key, errors.Is(batchErr.Errs[i], redisrate.ErrInvalid))
			continue
		}
		fmt.Printf("%s: %v\n", reqs[i].Key, res)
	}
	// Output:
	// item:1: allowed: 1 of 2 left, full in 30s
	// item:2: allowed: 0 of 2 left, full in 1m0s
	// item:2: denied: 0 of 2 left, retry in 30s
	// item:3: error, invalid: true
}

// With a deny cache, once Redis has denied a key, the same requests are
// denied in this process until RetryAfter has passed: a client hammering a
// limit costs Redis one call per RetryAfter, not one per request.
func ExampleWithDenyCache() {
	rdb, done := exampleRedis()
	defer done()
	ctx := context.Background()
	limiter := redisrate.NewLimiter(rdb, redisrate.WithDenyCache(10000))
	limit := redisrate.PerHour(1)

	for i := 0; i < 4; i++ {
		res, err := limiter.Allow(ctx, "login:alice", limit)
		if err != nil {
			panic(err)
		}
		fmt.Println(res.Allowed)
	}
	// Output:
	// true
	// false
	// false
	// false
}
