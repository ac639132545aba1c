package redisrate_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redisrate/redisrate"
)

// One round trip decides for many keys: here the limits of every item in a
// shopping cart, and one request whose limit is invalid.
func ExampleLimiter_DecideBatch() {
	rdb, done := exampleRedis()
	defer done()
	ctx := context.Background()
	// 10 s: this Example's Redis is embedded in the test, which a busy machine can starve past the 200 ms default.
	limiter := redisrate.NewLimiter(rdb, redisrate.WithDecisionTimeout(10*time.Second), redisrate.WithKeyPrefix("redisrate:"))

	perItem := []redisrate.Limit{redisrate.PerMinute(2)}
	reqs := []redisrate.Request{
		{Key: "item:1", Limits: perItem, N: 1},
		{Key: "item:2", Limits: perItem, N: 2},
		{Key: "item:2", Limits: perItem, N: 1}, // decided after the one above
		{Key: "item:3", Limits: []redisrate.Limit{redisrate.PerMinute(-1)}, N: 1},
	}
	results, err := limiter.DecideBatch(ctx, reqs)
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

func ExampleRequest() {
	rdb, done := exampleRedis()
	defer done()
	// 10 s: this Example's Redis is embedded in the test, which a busy machine can starve past the 200 ms default.
	limiter := redisrate.NewLimiter(rdb, redisrate.WithDecisionTimeout(10*time.Second))
	perMinute := []redisrate.Limit{redisrate.PerMinute(5)}
	results, _ := limiter.DecideBatch(context.Background(), []redisrate.Request{
		{Key: "user:1", Limits: perMinute},                            // N 0 means 1: a zero value is never "do not limit"
		{Key: "user:1", Limits: perMinute, N: 3},                      // 3 units
		{Key: "user:1", Limits: perMinute, Kind: redisrate.KindCheck}, // would one more fit? records nothing
		{Key: "user:1", Limits: perMinute, Kind: redisrate.KindPeek},  // the state, nothing taken
	})
	for _, r := range results {
		fmt.Println(r.Allowed, r.Remaining)
	}
	// Output:
	// true 4
	// true 1
	// true 0
	// true 1
}

// Requests of several keys, each with its limit, all or nothing, among
// requests of one key, in one round trip.
func ExampleRequest_keys() {
	rdb, done := exampleRedis()
	defer done()
	// 10 s: this Example's Redis is embedded in the test, which a busy machine can starve past the 200 ms default.
	limiter := redisrate.NewLimiter(rdb, redisrate.WithDecisionTimeout(10*time.Second))
	user, org := redisrate.PerMinute(5), redisrate.PerMinute(6)
	userOrg := func(u string) []redisrate.KeyLimit {
		return []redisrate.KeyLimit{{Key: "{org:7}:user:" + u, Limit: user}, {Key: "{org:7}", Limit: org}}
	}
	results, _ := limiter.DecideBatch(context.Background(), []redisrate.Request{
		{Key: "{org:7}", Limits: []redisrate.Limit{org}, N: 2}, // the organisation's own work
		{Keys: userOrg("1"), N: 3},
		{Keys: userOrg("2"), N: 2}, // the organisation has 1 left: nothing taken from user 2
		{Keys: userOrg("2"), Kind: redisrate.KindPeek},
	})
	for _, r := range results {
		fmt.Println(r, "on", r.Key)
	}
	// Output:
	// allowed: 4 of 6 left, full in 20s on {org:7}
	// allowed: 1 of 6 left, full in 50s on {org:7}
	// denied: 1 of 6 left, retry in 10s on {org:7}
	// peek: 1 of 6 left, full in 50s on {org:7}
}

func ExampleBatchError() {
	rdb, done := exampleRedis()
	defer done()
	// 10 s: this Example's Redis is embedded in the test, which a busy machine can starve past the 200 ms default.
	limiter := redisrate.NewLimiter(rdb, redisrate.WithDecisionTimeout(10*time.Second))
	_, err := limiter.DecideBatch(context.Background(), []redisrate.Request{
		{Key: "ok", Limits: []redisrate.Limit{redisrate.PerSecond(1)}},
		{Key: "bad", Limits: []redisrate.Limit{redisrate.PerSecond(0)}},
	})
	var be *redisrate.BatchError
	if errors.As(err, &be) {
		for i, e := range be.Errs {
			fmt.Println(i, e)
		}
	}
	// Output:
	// 0 <nil>
	// 1 redisrate: invalid limit '0': must be a whole number from 1 to 10^12
}

func ExampleBatchError_Error() {
	err := &redisrate.BatchError{Errs: []error{nil, errors.New("first"), errors.New("second")}}
	fmt.Println(err.Error())
	// Output: redisrate: 2 of 3 requests failed; first: first
}

func ExampleBatchError_Unwrap() {
	rdb, done := exampleRedis()
	defer done()
	// 10 s: this Example's Redis is embedded in the test, which a busy machine can starve past the 200 ms default.
	limiter := redisrate.NewLimiter(rdb, redisrate.WithDecisionTimeout(10*time.Second))
	_, err := limiter.DecideBatch(context.Background(), []redisrate.Request{
		{Key: "a", Limits: []redisrate.Limit{redisrate.PerSecond(-1)}},
		{Key: "b", Limits: []redisrate.Limit{redisrate.PerSecond(1)}, N: -2},
	})
	// errors.Is and errors.As see every request's error through Unwrap.
	fmt.Println(len(err.(*redisrate.BatchError).Unwrap()), errors.Is(err, redisrate.ErrInvalid))
	// Output: 2 true
}
