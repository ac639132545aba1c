package redisrate_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redisrate/redisrate"
)

// A user may make 2 requests a minute, and the users of organisation 7
// together 3: one atomic call holds a request to both. The hash tag {org:7}
// keeps the keys in one slot of a Redis Cluster.
func ExampleLimiter_Decide_severalKeys() {
	rdb, done := exampleRedis()
	defer done()
	// 10 s: this Example's Redis is embedded in the test, which a busy machine can starve past the 200 ms default.
	limiter := redisrate.NewLimiter(rdb, redisrate.WithDecisionTimeout(10*time.Second))
	ctx := context.Background()
	user, org := redisrate.PerMinute(2).WithName("user"), redisrate.PerMinute(3).WithName("org")

	for _, u := range []string{"alice", "alice", "alice", "bob", "bob"} {
		res, err := limiter.Decide(ctx, redisrate.Request{Keys: []redisrate.KeyLimit{
			{Key: "{org:7}:user:" + u, Limit: user},
			{Key: "{org:7}", Limit: org},
		}})
		if err != nil {
			panic(err)
		}
		fmt.Printf("%s: %v (binding %s on %s)\n", u, res, res.Limit.Name, res.Key)
	}
	// Output:
	// alice: allowed: 1 of 2 left, full in 30s (binding user on {org:7}:user:alice)
	// alice: allowed: 0 of 2 left, full in 1m0s (binding user on {org:7}:user:alice)
	// alice: denied: 0 of 2 left, retry in 30s (binding user on {org:7}:user:alice)
	// bob: allowed: 0 of 3 left, full in 1m0s (binding org on {org:7})
	// bob: denied: 0 of 3 left, retry in 20s (binding org on {org:7})
}

// A check of several keys decides as an allow would, and takes nothing.
func ExampleLimiter_Decide_checkSeveralKeys() {
	rdb, done := exampleRedis()
	defer done()
	// 10 s: this Example's Redis is embedded in the test, which a busy machine can starve past the 200 ms default.
	limiter := redisrate.NewLimiter(rdb, redisrate.WithDecisionTimeout(10*time.Second))
	ctx := context.Background()
	keys := []redisrate.KeyLimit{
		{Key: "{org:7}:user:42", Limit: redisrate.PerMinute(10)},
		{Key: "{org:7}", Limit: redisrate.PerMinute(100)},
	}
	for range 2 {
		res, err := limiter.Decide(ctx, redisrate.Request{Kind: redisrate.KindCheck, Keys: keys, N: 10})
		if err != nil {
			panic(err)
		}
		fmt.Println(res)
	}
	res, _ := limiter.Decide(ctx, redisrate.Request{Kind: redisrate.KindCheck, Keys: keys, N: 11})
	fmt.Println(res, "on", res.Key)
	// Output:
	// allowed: 0 of 10 left, full in 1m0s
	// allowed: 0 of 10 left, full in 1m0s
	// denied: cost exceeds capacity 10, never admitted on {org:7}:user:42
}

// Decide with KindPeek and Keys reads every key's state under its limit
// and describes the one with the fewest units left.
func ExampleLimiter_Decide_peekSeveralKeys() {
	rdb, done := exampleRedis()
	defer done()
	// 10 s: this Example's Redis is embedded in the test, which a busy machine can starve past the 200 ms default.
	limiter := redisrate.NewLimiter(rdb, redisrate.WithDecisionTimeout(10*time.Second))
	ctx := context.Background()
	user := redisrate.KeyLimit{Key: "{org:7}:user:42", Limit: redisrate.PerMinute(10)}
	org := redisrate.KeyLimit{Key: "{org:7}", Limit: redisrate.PerMinute(100)}

	if _, err := limiter.AllowN(ctx, org.Key, org.Limit, 95); err != nil { // the organisation called alone
		panic(err)
	}
	res, err := limiter.Decide(ctx, redisrate.Request{Kind: redisrate.KindPeek, Keys: []redisrate.KeyLimit{user, org}})
	if err != nil {
		panic(err)
	}
	fmt.Println(res, "on", res.Key)
	// Output:
	// peek: 5 of 100 left, full in 57s on {org:7}
}

// A KeyLimit names a key and the limit that guards it, in a Request's
// Keys.
func ExampleKeyLimit() {
	k := redisrate.KeyLimit{Key: "{org:7}:user:42", Limit: redisrate.PerSecond(10)}
	fmt.Println(k.Key, k.Limit)
	// Output:
	// {org:7}:user:42 10/s
}
