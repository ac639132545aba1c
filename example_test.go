package redisrate_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/redisrate/redisrate"
)

// exampleRedis starts an embedded Redis with a fixed clock, so that the
// examples print the same every time. In production, use your own client:
// redis.NewClient(&redis.Options{Addr: "localhost:6379"}).
func exampleRedis() (*redis.Client, func()) {
	mr, err := miniredis.Run()
	if err != nil {
		panic(err)
	}
	mr.SetTime(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC))
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	return rdb, func() { rdb.Close(); mr.Close() }
}

// The quickstart of the README: 5 requests per second per user, with bursts
// of up to 10.
func Example() {
	rdb, done := exampleRedis()
	defer done()
	ctx := context.Background()

	// quickstart:start
	limiter := redisrate.NewLimiter(rdb, redisrate.WithKeyPrefix("rate:"))
	limit := redisrate.PerSecond(5).WithBurst(10)

	for i := 0; i < 12; i++ {
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

func ExampleLimiter_AllowN() {
	rdb, done := exampleRedis()
	defer done()
	limiter := redisrate.NewLimiter(rdb)

	// Spend limits: 100 (cents, say) per minute; this payment costs 30.5.
	res, err := limiter.AllowN(context.Background(), "spend:acct-7", redisrate.PerMinute(100), 30.5)
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Allowed, res.Remaining, res.ResetAfter)
	// Output: true 69 18.3s
}

func ExampleLimiter_Check() {
	rdb, done := exampleRedis()
	defer done()
	limiter := redisrate.NewLimiter(rdb)
	ctx := context.Background()
	limit := redisrate.PerMinute(3)

	// A check decides exactly as Allow would, and records nothing.
	for i := 0; i < 2; i++ {
		res, _ := limiter.Check(ctx, "login:alice", limit)
		fmt.Println(res.Allowed, res.Remaining)
	}
	// Output:
	// true 2
	// true 2
}

func ExampleLimiter_AllowMulti() {
	rdb, done := exampleRedis()
	defer done()
	limiter := redisrate.NewLimiter(rdb)
	ctx := context.Background()

	// 2 per second and 3 per hour, all or nothing: the hourly limit binds
	// after three requests even though the per-second one has room again.
	perSecond, perHour := redisrate.PerSecond(2), redisrate.PerHour(3)
	for i := 0; i < 4; i++ {
		res, _ := limiter.AllowMulti(ctx, "api:key-1", 1, perSecond, perHour)
		fmt.Printf("allowed=%v remaining=%d binding=%s\n", res.Allowed, res.Remaining, res.Limit)
	}
	// Output:
	// allowed=true remaining=1 binding=2/s
	// allowed=true remaining=0 binding=2/s
	// allowed=false remaining=0 binding=2/s
	// allowed=false remaining=0 binding=2/s
}

func ExampleLimiter_Reset() {
	rdb, done := exampleRedis()
	defer done()
	limiter := redisrate.NewLimiter(rdb)
	ctx := context.Background()
	limit := redisrate.PerHour(1)

	limiter.Allow(ctx, "invite:bob", limit)
	res, _ := limiter.Allow(ctx, "invite:bob", limit)
	fmt.Println("before reset:", res.Allowed)
	_ = limiter.Reset(ctx, "invite:bob")
	res, _ = limiter.Allow(ctx, "invite:bob", limit)
	fmt.Println("after reset:", res.Allowed)
	// Output:
	// before reset: false
	// after reset: true
}

func ExampleResult_Never() {
	rdb, done := exampleRedis()
	defer done()
	limiter := redisrate.NewLimiter(rdb)

	// A cost above the capacity can never be admitted: waiting does not help.
	res, _ := limiter.AllowN(context.Background(), "upload:u1", redisrate.PerSecond(10), 11)
	fmt.Println(res.Allowed, res.Never(), res.RetryAfter == redisrate.Never)
	// Output: false true true
}

func ExampleNewLimiter() {
	// Any go-redis v9 client works: Client, ClusterClient, Ring, the Sentinel
	// failover client, UniversalClient.
	rdb := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{"localhost:6379"}})
	defer rdb.Close()
	limiter := redisrate.NewLimiter(rdb, redisrate.WithKeyPrefix("rate:"), redisrate.WithReadOnlyCheck())
	_ = limiter
}

func ExamplePer() {
	fmt.Println(redisrate.Per(7, time.Minute))
	fmt.Println(redisrate.Per(100, 10*time.Second).WithBurst(150).WithAlgorithm(redisrate.TokenBucket))
	// Output:
	// 7/m
	// 100/10s burst 150 token_bucket
}

func ExampleParseLimit() {
	l, err := redisrate.ParseLimit("100/minute burst 20 sliding_window")
	fmt.Println(l, err)
	_, err = redisrate.ParseLimit("10/fortnight")
	fmt.Println(errors.Is(err, redisrate.ErrInvalid))
	// Output:
	// 100/m burst 20 sliding_window <nil>
	// true
}

func ExampleLimit_Validate() {
	err := redisrate.PerSecond(10).WithBurst(5).WithAlgorithm(redisrate.FixedWindow).Validate()
	fmt.Println(err)
	fmt.Println(errors.Is(err, redisrate.ErrInvalid))
	// Output:
	// redisrate: invalid burst '5': must be empty, 0 or equal to limit for fixed_window
	// true
}

func ExampleScripts() {
	// Write them out for another stack, or SCRIPT LOAD them in a deploy step.
	for _, s := range redisrate.Scripts() {
		fmt.Printf("%s.lua sha1 of %d hex digits\n", s.Name, len(s.SHA1))
	}
	// Output:
	// gcra.lua sha1 of 40 hex digits
	// token_bucket.lua sha1 of 40 hex digits
	// leaky_bucket.lua sha1 of 40 hex digits
	// sliding_window.lua sha1 of 40 hex digits
	// fixed_window.lua sha1 of 40 hex digits
	// sliding_log.lua sha1 of 40 hex digits
}

func ExampleArgs() {
	// The ARGV for 3 units under 10/s with burst 20, for a client in another
	// language or a pipeline of your own: EVALSHA <sha1> 1 <key> ARGV...
	args, _ := redisrate.Args(3, false, redisrate.PerSecond(10).WithBurst(20))
	fmt.Printf("%q\n", args)
	// Output: ["10" "1000" "20" "3" ""]
}

func ExampleParseAlgorithm() {
	a, _ := redisrate.ParseAlgorithm("token-bucket")
	fmt.Println(a == redisrate.TokenBucket, a)
	// Output: true token_bucket
}

func ExampleError() {
	rdb, done := exampleRedis()
	defer done()
	ctx := context.Background()
	rdb.Set(ctx, "order:42", "shipped", 0)

	_, err := redisrate.NewLimiter(rdb).Allow(ctx, "order:42", redisrate.PerSecond(1))
	fmt.Println(errors.Is(err, redisrate.ErrForeignKey))
	fmt.Println(rdb.Get(ctx, "order:42").Val())
	// Output:
	// true
	// shipped
}
