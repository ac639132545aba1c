package readmetest_test

// The Go code of README.md and docs/go.md: each block between "// NAME:start"
// and "// NAME:end" below is shown there verbatim (TestDocsGoBlocks), and the
// Examples run, on an embedded Redis whose clock stands still, so that what
// the docs say they print is what they print.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/redisrate/redisrate"
)

// exampleRedis is an embedded Redis on a fixed clock. In production, use
// your own client: redis.NewClient(&redis.Options{Addr: "localhost:6379"}).
func exampleRedis() (*redis.Client, func()) {
	mr, err := miniredis.Run()
	if err != nil {
		panic(err)
	}
	mr.SetTime(time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC))
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	return rdb, func() { rdb.Close(); mr.Close() }
}

func Example_quickstart() {
	rdb, done := exampleRedis()
	defer done()
	ctx := context.Background()

	// quickstart:start
	limiter := redisrate.NewLimiter(rdb, redisrate.WithKeyPrefix("rate:"))
	limit := redisrate.PerSecond(5).WithBurst(10) // 5 per second, 10 at once

	for i := range 12 {
		res, err := limiter.Allow(ctx, "user:42", limit)
		if err != nil {
			panic(err) // Redis is down or the limit is invalid: see WithFailurePolicy
		}
		if !res.Allowed {
			fmt.Printf("request %d: denied, retry in %v\n", i, res.RetryAfter)
			continue
		}
		fmt.Printf("request %d: allowed, %d left\n", i, res.Remaining)
	}
	// quickstart:end

	// Output:
	// request 0: allowed, 9 left
	// request 1: allowed, 8 left
	// request 2: allowed, 7 left
	// request 3: allowed, 6 left
	// request 4: allowed, 5 left
	// request 5: allowed, 4 left
	// request 6: allowed, 3 left
	// request 7: allowed, 2 left
	// request 8: allowed, 1 left
	// request 9: allowed, 0 left
	// request 10: denied, retry in 200ms
	// request 11: denied, retry in 200ms
}

func Example_limits() {
	// limits:start
	fromConfig, err := redisrate.ParseLimit("2.5/s burst 10") // whole numbers only: 5 per 2s
	if err != nil {
		panic(err)
	}
	logins := redisrate.PerMinute(5).WithAlgorithm(redisrate.SlidingLog) // exact over any minute
	fmt.Println(fromConfig, "|", logins, "|", logins.Capacity())

	_, err = redisrate.ParseLimit("10/1us") // refused when parsed, never per request
	fmt.Println(errors.Is(err, redisrate.ErrInvalid), err)
	// limits:end

	// Output:
	// 5/2s burst 10 | 5/m sliding_log | 5
	// true redisrate: invalid limit "10/1us": period "1us" must be a whole number of milliseconds
}

func Example_severalLimits() {
	rdb, done := exampleRedis()
	defer done()
	ctx := context.Background()
	limiter := redisrate.NewLimiter(rdb)

	// multi:start
	perSecond, perHour := redisrate.PerSecond(10), redisrate.PerHour(1000)
	res, err := limiter.AllowMulti(ctx, "api:key-7", 3, perSecond, perHour) // cost 3
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Allowed, res.Remaining, "left of", res.Capacity, "under limit", res.Binding, res.Limit)

	res, _ = limiter.AllowMulti(ctx, "api:key-7", 2000, perSecond, perHour) // more than any capacity
	fmt.Println(res.Allowed, res.Never(), res.RetryAfter == redisrate.InfDuration)

	res, _ = limiter.Peek(ctx, "api:key-7", perSecond, perHour) // the state; takes nothing
	fmt.Println(res.Allowed, res.Remaining)
	// multi:end

	// Output:
	// true 7 left of 10 under limit 0 10/s
	// false true true
	// true 7
}

func Example_batch() {
	rdb, done := exampleRedis()
	defer done()
	ctx := context.Background()
	limit := redisrate.PerMinute(100)

	// batch:start
	// Denials answered in-process until their RetryAfter: a client hammering
	// a denied key costs Redis one call per RetryAfter, not one per request.
	limiter := redisrate.NewLimiter(rdb, redisrate.WithDenyCache(10000))

	// Many decisions, one round trip; a zero N means 1, never "do not limit".
	results, err := limiter.AllowBatch(ctx, []redisrate.Request{
		{Key: "user:1", Limits: []redisrate.Limit{limit}},
		{Key: "user:2", Limits: []redisrate.Limit{limit}, N: 5},
		{Key: "user:3", Limits: []redisrate.Limit{limit}, Peek: true},
	})
	if err != nil {
		panic(err) // a *redisrate.BatchError: its Errs[i] says which request failed
	}
	for _, r := range results {
		fmt.Println(r.Allowed, r.Remaining)
	}
	// batch:end

	// Output:
	// true 99
	// true 95
	// true 100
}

// The Wait calls sleep on the real clock: this Example is compiled, not run.
func Example_wait() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	callPartnerAPI := func(int) {}

	// wait:start
	limiter := redisrate.NewLimiter(rdb, redisrate.WithKeyPrefix("rate:"))
	partnerLimit := redisrate.PerSecond(10)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for job := range 3 {
		// Sleeps until the partner's limit admits one more call; fails at
		// once if that would be after the context's deadline.
		if _, err := limiter.Wait(ctx, "partner-api", partnerLimit); err != nil {
			fmt.Println("giving up:", err)
			return
		}
		callPartnerAPI(job)
	}
	// wait:end
}
