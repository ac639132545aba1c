package redisrate_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redisrate/redisrate"
	"github.com/redisrate/redisrate/internal/exampleredis"
	"github.com/redisrate/redisrate/scripts"
)

// exampleRedis starts an embedded Redis with a fixed clock, so that the
// examples print the same every time. In production, use your own client:
// redis.NewClient(&redis.Options{Addr: "localhost:6379"}).
func exampleRedis() (*redis.Client, func()) {
	return exampleredis.Start()
}

// The quickstart of the README: 5 requests per second per user, with bursts
// of up to 10.
func Example() {
	rdb, done := exampleRedis()
	defer done()
	ctx := context.Background()

	limiter := redisrate.NewLimiter(rdb, redisrate.WithKeyPrefix("redisrate:"))
	limit := redisrate.PerSecond(5).WithBurst(10) // 5 per second, 10 at once

	// At start-up: a peek takes nothing; a bad password or ACL, or Redis down, fails here.
	if _, err := limiter.Decide(ctx, redisrate.Request{Kind: redisrate.KindPeek, Key: "start-up", Limits: []redisrate.Limit{limit}}); err != nil {
		panic(err) // ErrMisconfigured, or ErrUnavailable
	}
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

func ExampleLimiter_Allow() {
	rdb, done := exampleRedis()
	defer done()
	// 10 s: this Example's Redis is embedded in the test, which a busy machine can starve past the 200 ms default.
	limiter := redisrate.NewLimiter(rdb, redisrate.WithDecisionTimeout(10*time.Second))
	ctx := context.Background()

	for range 3 {
		res, err := limiter.Allow(ctx, "signup:10.0.0.7", redisrate.PerMinute(2))
		if err != nil {
			panic(err)
		}
		fmt.Println(res)
	}
	// Output:
	// allowed: 1 of 2 left, full in 30s
	// allowed: 0 of 2 left, full in 1m0s
	// denied: 0 of 2 left, retry in 30s
}

func ExampleLimiter_AllowN() {
	rdb, done := exampleRedis()
	defer done()
	// 10 s: this Example's Redis is embedded in the test, which a busy machine can starve past the 200 ms default.
	limiter := redisrate.NewLimiter(rdb, redisrate.WithDecisionTimeout(10*time.Second))

	// Spend limits: 100 (cents, say) per minute; this payment costs 30.
	res, err := limiter.AllowN(context.Background(), "spend:acct-7", redisrate.PerMinute(100), 30)
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Allowed, res.Remaining, res.ResetAfter)

	// A cost of 0 is refused: peeking is asked for by name (Peek).
	_, err = limiter.AllowN(context.Background(), "spend:acct-7", redisrate.PerMinute(100), 0)
	fmt.Println(errors.Is(err, redisrate.ErrInvalid))
	// Output:
	// true 70 18s
	// true
}

func ExampleLimiter_Decide_check() {
	rdb, done := exampleRedis()
	defer done()
	// 10 s: this Example's Redis is embedded in the test, which a busy machine can starve past the 200 ms default.
	limiter := redisrate.NewLimiter(rdb, redisrate.WithDecisionTimeout(10*time.Second))
	ctx := context.Background()
	limit := redisrate.PerMinute(3)

	// A check decides exactly as Allow would, and records nothing.
	for range 2 {
		res, _ := limiter.Decide(ctx, redisrate.Request{Kind: redisrate.KindCheck, Key: "login:alice", Limits: []redisrate.Limit{limit}})
		fmt.Println(res.Allowed, res.Remaining)
	}
	// Output:
	// true 2
	// true 2
}

func ExampleLimiter_Decide_checkN() {
	rdb, done := exampleRedis()
	defer done()
	// 10 s: this Example's Redis is embedded in the test, which a busy machine can starve past the 200 ms default.
	limiter := redisrate.NewLimiter(rdb, redisrate.WithDecisionTimeout(10*time.Second))
	ctx := context.Background()
	limit := redisrate.PerMinute(10)

	// Would an export of 12 rows fit? Of 8? Nothing is taken either way.
	for _, rows := range []int64{12, 8} {
		res, _ := limiter.Decide(ctx, redisrate.Request{Kind: redisrate.KindCheck, Key: "export:acct-7", Limits: []redisrate.Limit{limit}, N: rows})
		fmt.Println(rows, res.Allowed, res.Never())
	}
	// Output:
	// 12 false true
	// 8 true false
}

func ExampleLimiter_Decide_peek() {
	rdb, done := exampleRedis()
	defer done()
	// 10 s: this Example's Redis is embedded in the test, which a busy machine can starve past the 200 ms default.
	limiter := redisrate.NewLimiter(rdb, redisrate.WithDecisionTimeout(10*time.Second))
	ctx := context.Background()
	limit := redisrate.PerMinute(10)

	_, _ = limiter.AllowN(ctx, "user:42", limit, 4)
	// What is left, for a dashboard or a header, without taking anything.
	res, _ := limiter.Decide(ctx, redisrate.Request{Kind: redisrate.KindPeek, Key: "user:42", Limits: []redisrate.Limit{limit}})
	fmt.Println(res.Remaining, "of", res.Capacity, "left; full in", res.ResetAfter)
	fmt.Println(res) // a state, not an admission
	// Output:
	// 6 of 10 left; full in 24s
	// peek: 6 of 10 left, full in 24s
}

func ExampleLimiter_Decide() {
	rdb, done := exampleRedis()
	defer done()
	// 10 s: this Example's Redis is embedded in the test, which a busy machine can starve past the 200 ms default.
	limiter := redisrate.NewLimiter(rdb, redisrate.WithDecisionTimeout(10*time.Second))
	ctx := context.Background()

	// 2 per second and 3 per hour, all or nothing. Call the key with the
	// same limits every time: its state is kept position by position.
	perSecond, perHour := redisrate.PerSecond(2), redisrate.PerHour(3)
	for range 4 {
		res, _ := limiter.Decide(ctx, redisrate.Request{Key: "api:key-1", Limits: []redisrate.Limit{perSecond, perHour}})
		fmt.Printf("allowed=%v remaining=%d binding=%s\n", res.Allowed, res.Remaining, res.Limit)
	}
	// Output:
	// allowed=true remaining=1 binding=2/s
	// allowed=true remaining=0 binding=2/s
	// allowed=false remaining=0 binding=2/s
	// allowed=false remaining=0 binding=2/s
}

func ExampleLimiter_Decide_checkSeveralLimits() {
	rdb, done := exampleRedis()
	defer done()
	// 10 s: this Example's Redis is embedded in the test, which a busy machine can starve past the 200 ms default.
	limiter := redisrate.NewLimiter(rdb, redisrate.WithDecisionTimeout(10*time.Second))
	ctx := context.Background()
	perSecond, perDay := redisrate.PerSecond(5), redisrate.PerDay(3)

	_, _ = limiter.Decide(ctx, redisrate.Request{Key: "sms:+15550100", Limits: []redisrate.Limit{perSecond, perDay}, N: 3})
	res, _ := limiter.Decide(ctx, redisrate.Request{Kind: redisrate.KindCheck, Key: "sms:+15550100", Limits: []redisrate.Limit{perSecond, perDay}})
	fmt.Println(res.Allowed, "bound by", res.Limit, "retry in", res.RetryAfter)
	// Output: false bound by 3/d retry in 8h0m0s
}

// A gateway reserves a reply's max_tokens before calling a model, then
// gives back what the reply did not use: an up-to takes what there is (at
// most the reservation), a refund returns the rest.
func ExampleLimiter_Decide_upToAndRefund() {
	rdb, done := exampleRedis()
	defer done()
	// 10 s: this Example's Redis is embedded in the test, which a busy machine can starve past the 200 ms default.
	limiter := redisrate.NewLimiter(rdb, redisrate.WithDecisionTimeout(10*time.Second))
	ctx := context.Background()
	tokens := []redisrate.Limit{redisrate.PerMinute(1000)}

	_, _ = limiter.AllowN(ctx, "tokens:org-7", tokens[0], 700)
	res, _ := limiter.Decide(ctx, redisrate.Request{Kind: redisrate.KindUpTo, Key: "tokens:org-7", Limits: tokens, N: 512})
	fmt.Println("reserved", res.Units, "of 512")
	used := int64(120) // from the model's reply
	res, _ = limiter.Decide(ctx, redisrate.Request{Kind: redisrate.KindRefund, Key: "tokens:org-7", Limits: tokens, N: res.Units - used})
	fmt.Println("gave back", res.Units, "now", res.Remaining, "left")
	// Output:
	// reserved 300 of 512
	// gave back 180 now 180 left
}

// A failed login costs 5, whatever the limit says: force records it, and
// the debt holds off the next attempts.
func ExampleLimiter_Decide_force() {
	rdb, done := exampleRedis()
	defer done()
	// 10 s: this Example's Redis is embedded in the test, which a busy machine can starve past the 200 ms default.
	limiter := redisrate.NewLimiter(rdb, redisrate.WithDecisionTimeout(10*time.Second))
	ctx := context.Background()
	limit := redisrate.PerHour(6)

	_, _ = limiter.AllowN(ctx, "login:alice", limit, 4)
	res, _ := limiter.Decide(ctx, redisrate.Request{Kind: redisrate.KindForce, Key: "login:alice", Limits: []redisrate.Limit{limit}, N: 5})
	fmt.Println(res.Allowed, res.Units, res.Remaining)
	res, _ = limiter.Allow(ctx, "login:alice", limit)
	fmt.Println(res.Allowed, res.RetryAfter)
	// Output:
	// false 5 0
	// false 40m0s
}

func ExampleLimiter_Reset() {
	rdb, done := exampleRedis()
	defer done()
	// 10 s: this Example's Redis is embedded in the test, which a busy machine can starve past the 200 ms default.
	limiter := redisrate.NewLimiter(rdb, redisrate.WithDecisionTimeout(10*time.Second))
	ctx := context.Background()
	limit := redisrate.PerHour(1)

	_, _ = limiter.Allow(ctx, "invite:bob", limit)
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
	// 10 s: this Example's Redis is embedded in the test, which a busy machine can starve past the 200 ms default.
	limiter := redisrate.NewLimiter(rdb, redisrate.WithDecisionTimeout(10*time.Second))

	// A cost above the capacity can never be admitted: waiting does not
	// help, and RetryAfter is the longest Duration, which no sleep loops on.
	res, _ := limiter.AllowN(context.Background(), "upload:u1", redisrate.PerSecond(10), 11)
	fmt.Println(res.Allowed, res.Never(), res.RetryAfter == math.MaxInt64)
	// Output: false true true
}

func ExampleResult_String() {
	fmt.Println(redisrate.Result{Allowed: true, Remaining: 4, Capacity: 5, ResetAfter: 200 * time.Millisecond})
	fmt.Println(redisrate.Result{Capacity: 5, RetryAfter: 200 * time.Millisecond, ResetAfter: time.Second})
	fmt.Println(redisrate.Result{Capacity: 5, RetryAfter: math.MaxInt64})
	fmt.Println(redisrate.Result{Allowed: true, Capacity: 5, Source: redisrate.SourceFailOpen})
	// Output:
	// allowed: 4 of 5 left, full in 200ms
	// denied: 0 of 5 left, retry in 200ms
	// denied: cost exceeds capacity 5, never admitted
	// allowed: 0 of 5 left, full in 0s (fail-open)
}

func ExampleResult_Degraded() {
	// A result decided without Redis: by the failure policy, or the fallback.
	res := redisrate.Result{Allowed: true, Source: redisrate.SourceFailOpen}
	fmt.Println(res.Degraded())
	// A denial the deny cache answered again is Redis's own: not degraded.
	res = redisrate.Result{Source: redisrate.SourceDenyCache, RetryAfter: time.Second}
	fmt.Println(res.Degraded())
	// Output:
	// true
	// false
}

func ExampleSource_String() {
	for _, s := range []redisrate.Source{redisrate.SourceRedis, redisrate.SourceDenyCache, redisrate.SourceFallback, redisrate.SourceFailOpen, redisrate.SourceFailClosed} {
		fmt.Println(s)
	}
	// Output:
	// redis
	// deny-cache
	// fallback
	// fail-open
	// fail-closed
}

func ExampleNewLimiter() {
	// Any go-redis v9 client works: Client, ClusterClient, Ring, the Sentinel
	// failover client, UniversalClient. Let the caller's deadline bound
	// each call, and fail fast rather than retry a Redis that is down.
	rdb := redis.NewUniversalClient(&redis.UniversalOptions{
		Addrs:                 []string{"localhost:6379"},
		ContextTimeoutEnabled: true,
		MaxRetries:            -1,
	})
	defer rdb.Close()
	// 10 s: this Example's Redis is embedded in the test, which a busy machine can starve past the 200 ms default.
	limiter := redisrate.NewLimiter(rdb, redisrate.WithDecisionTimeout(10*time.Second), redisrate.WithKeyPrefix("redisrate:"), redisrate.WithFailurePolicy(redisrate.FailOpen))
	_ = limiter
}

func ExampleWithKeyPrefix() {
	rdb, done := exampleRedis()
	defer done()
	ctx := context.Background()
	// 10 s: this Example's Redis is embedded in the test, which a busy machine can starve past the 200 ms default.
	limiter := redisrate.NewLimiter(rdb, redisrate.WithDecisionTimeout(10*time.Second), redisrate.WithKeyPrefix("redisrate:"))
	_, _ = limiter.Allow(ctx, "user:42", redisrate.PerSecond(5))
	fmt.Println(rdb.Keys(ctx, "*").Val())
	// Output: [redisrate:user:42]
}

func ExampleWithReadOnlyCheck() {
	// Checks and peeks may be served by replicas: EVALSHA_RO or FCALL_RO
	// (Redis 7), routed by the client's ReadOnly / RouteByLatency options.
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"localhost:7000"}, RouteByLatency: true})
	defer rdb.Close()
	// 10 s: this Example's Redis is embedded in the test, which a busy machine can starve past the 200 ms default.
	limiter := redisrate.NewLimiter(rdb, redisrate.WithDecisionTimeout(10*time.Second), redisrate.WithReadOnlyCheck())
	_ = limiter
}

func ExamplePer() {
	fmt.Println(redisrate.Per(7, time.Minute))
	fmt.Println(redisrate.Per(100, 10*time.Second).WithBurst(150).WithAlgorithm(redisrate.TokenBucket))
	// Output:
	// 7/m
	// 100/10s burst 150 token_bucket
}

func ExamplePerSecond() {
	fmt.Println(redisrate.PerSecond(10), redisrate.PerMinute(100), redisrate.PerHour(1000), redisrate.PerDay(5000))
	// Output: 10/s 100/m 1000/h 5000/d
}

func ExamplePerMinute() {
	l := redisrate.PerMinute(60)
	fmt.Println(l.Rate, l.Period, l.Capacity())
	// Output: 60 1m0s 60
}

func ExamplePerHour() {
	// 1000 per hour, taken at most 50 at a time.
	fmt.Println(redisrate.PerHour(1000).WithBurst(50))
	// Output: 1000/h burst 50
}

func ExamplePerDay() {
	fmt.Println(redisrate.PerDay(3).WithAlgorithm(redisrate.SlidingLog))
	// Output: 3/d sliding_log
}

func ExampleLimit_WithBurst() {
	// 10 per second on average, up to 30 at once after a quiet spell.
	l := redisrate.PerSecond(10).WithBurst(30)
	fmt.Println(l, l.Capacity())
	// Output: 10/s burst 30 30
}

func ExampleLimit_WithAlgorithm() {
	l := redisrate.PerMinute(100).WithAlgorithm(redisrate.SlidingWindow)
	fmt.Println(l, l.Algorithm)
	// Output: 100/m sliding_window sliding_window
}

func ExampleLimit_Capacity() {
	fmt.Println(redisrate.PerSecond(5).Capacity(), redisrate.PerSecond(5).WithBurst(8).Capacity())
	// Output: 5 8
}

func ExampleLimit_String() {
	l := redisrate.Limit{Rate: 5, Period: 2 * time.Second, Burst: 10, Algorithm: redisrate.LeakyBucket}
	fmt.Println(l.String())
	// Output: 5/2s burst 10 leaky_bucket
}

func ExampleParseLimit() {
	l, err := redisrate.ParseLimit("100/minute burst 20 token_bucket")
	fmt.Println(l, err)

	// A rate that is not whole per period gets the shortest longer period
	// that makes it whole: the very same rate, in whole numbers.
	for _, s := range []string{"2.5/s", "0.1/s", "1.5/m"} {
		l, _ := redisrate.ParseLimit(s)
		fmt.Printf("%s is %d per %v\n", s, l.Rate, l.Period)
	}

	// Refused at parse time, with the reason.
	for _, s := range []string{"0/s", "NaN/s", "10/1us"} {
		_, err := redisrate.ParseLimit(s)
		fmt.Println(errors.Is(err, redisrate.ErrInvalid), err)
	}
	// Output:
	// 100/m burst 20 token_bucket <nil>
	// 2.5/s is 5 per 2s
	// 0.1/s is 1 per 10s
	// 1.5/m is 3 per 2m0s
	// true redisrate: invalid limit "0/s": the rate must be more than 0
	// true redisrate: invalid limit "NaN/s": rate "NaN" must be a number of plain decimal digits, e.g. 10 or 2.5
	// true redisrate: invalid limit "10/1us": period "1us" must be a whole number of milliseconds
}

func ExampleLimit_Validate() {
	err := redisrate.PerSecond(10).WithBurst(5).WithAlgorithm(redisrate.FixedWindow).Validate()
	fmt.Println(err)
	fmt.Println(errors.Is(err, redisrate.ErrInvalid))
	// The same words as the script's error reply, without "ERR ".
	err = redisrate.Per(7, 1e12*time.Millisecond).Validate()
	fmt.Println(err)
	// Output:
	// redisrate: invalid burst '5': must be empty, 0 or equal to limit for fixed_window
	// true
	// redisrate: invalid period_ms '1000000000000': must be at most 31622400000 (366 days) with limit 7 (hint: write the same rate with a period of at most 366 days)
}

func ExampleArgs() {
	// The ARGV for 3 units under 10/s with burst 20, for a client in another
	// language or a pipeline of your own: EVALSHA <sha1> 1 <key> ARGV...
	args, _ := redisrate.Args(redisrate.KindAllow, 3, redisrate.PerSecond(10).WithBurst(20))
	fmt.Println(args...)
	// Only what the call needs: defaults are left out.
	args, _ = redisrate.Args(redisrate.KindAllow, 1, redisrate.PerSecond(10))
	fmt.Println(args...)
	// A mode of contract v3: take up to 50 units, as many as there are.
	args, _ = redisrate.Args(redisrate.KindUpTo, 50, redisrate.PerSecond(10))
	fmt.Println(args...)
	// Output:
	// 10 1000 20 3
	// 10 1000
	// 10 1000  50 upto
}

func ExampleAlgorithm() {
	for a := redisrate.GCRA; a <= redisrate.SlidingLog; a++ {
		fmt.Println(int(a), a)
	}
	// Output:
	// 0 gcra
	// 1 token_bucket
	// 2 leaky_bucket
	// 3 sliding_window
	// 4 fixed_window
	// 5 sliding_log
}

func ExampleAlgorithm_String() {
	fmt.Println(redisrate.TokenBucket.String())
	// Output: token_bucket
}

func ExampleAlgorithm_String_script() {
	// The script behind an algorithm, by its name: to SCRIPT LOAD in a
	// deploy step or copy into another stack.
	sp, _ := scripts.Lookup(redisrate.SlidingLog.String())
	fmt.Println(sp.Name+".lua", len(sp.SHA1), sp.Function)
	// Output: sliding_log.lua 40 redisrate_sliding_log
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

	// 10 s: this Example's Redis is embedded in the test, which a busy machine can starve past the 200 ms default.
	_, err := redisrate.NewLimiter(rdb, redisrate.WithDecisionTimeout(10*time.Second)).Allow(ctx, "order:42", redisrate.PerSecond(1))
	var e *redisrate.Error
	fmt.Println(errors.As(err, &e), e.Script, e.Key)
	fmt.Println(errors.Is(err, redisrate.ErrForeignKey), errors.Is(err, redisrate.ErrUnavailable))
	fmt.Println(rdb.Get(ctx, "order:42").Val())
	// Output:
	// true gcra order:42
	// true false
	// shipped
}

func ExampleError_Error() {
	rdb, done := exampleRedis()
	defer done()
	ctx := context.Background()
	rdb.Set(ctx, "order:42", "shipped", 0)
	// 10 s: this Example's Redis is embedded in the test, which a busy machine can starve past the 200 ms default.
	_, err := redisrate.NewLimiter(rdb, redisrate.WithDecisionTimeout(10*time.Second)).Allow(ctx, "order:42", redisrate.PerSecond(1))
	fmt.Println(err)
	// Output: redisrate: gcra on key "order:42": ERR key holds a value that is not gcra state: left untouched
}

func ExampleError_Unwrap() {
	rdb, done := exampleRedis()
	defer done()
	ctx := context.Background()
	rdb.RPush(ctx, "queue", "job")
	// 10 s: this Example's Redis is embedded in the test, which a busy machine can starve past the 200 ms default.
	_, err := redisrate.NewLimiter(rdb, redisrate.WithDecisionTimeout(10*time.Second)).Allow(ctx, "queue", redisrate.PerSecond(1))
	var e *redisrate.Error
	errors.As(err, &e)
	// The classification, then the server's own error.
	for _, u := range e.Unwrap() {
		fmt.Println(u)
	}
	// Output:
	// key holds other data
	// ERR key holds a value of another type, not gcra state: left untouched
}

// A Limiter is made once per Redis client and shared by every goroutine.
func ExampleLimiter() {
	rdb, done := exampleRedis()
	defer done()
	// 10 s: this Example's Redis is embedded in the test, which a busy machine can starve past the 200 ms default.
	limiter := redisrate.NewLimiter(rdb, redisrate.WithDecisionTimeout(10*time.Second), redisrate.WithKeyPrefix("redisrate:"))
	var wg sync.WaitGroup
	var admitted atomic.Int64
	for range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if res, err := limiter.Allow(context.Background(), "shared", redisrate.PerMinute(4)); err == nil && res.Allowed {
				admitted.Add(1)
			}
		}()
	}
	wg.Wait()
	fmt.Println(admitted.Load(), "of 10 admitted")
	// Output: 4 of 10 admitted
}

// Options configure a Limiter when it is made.
func ExampleOption() {
	rdb, done := exampleRedis()
	defer done()
	opts := []redisrate.Option{
		redisrate.WithKeyPrefix("redisrate:"),
		redisrate.WithDenyCache(10000),
		redisrate.WithFailurePolicy(redisrate.FailOpen),
		redisrate.WithCircuitBreaker(time.Second),
	}
	limiter := redisrate.NewLimiter(rdb, opts...)
	res, _ := limiter.Allow(context.Background(), "k", redisrate.PerSecond(1))
	fmt.Println(res.Allowed)
	// Output: true
}

// Any go-redis v9 client runs the scripts; so does anything with its
// scripting commands (a wrapper that adds tracing, say).
func ExampleNewLimiter_clients() {
	var clients []redis.Scripter = []redis.Scripter{
		redis.NewClient(&redis.Options{Addr: "localhost:6379"}),
		redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"localhost:7000"}}),
		redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "mymaster", SentinelAddrs: []string{"localhost:26379"}}),
	}
	for _, c := range clients {
		_ = redisrate.NewLimiter(c)
	}
	fmt.Println(len(clients))
	// Output: 3
}

// A Limit is a plain value: compare it, use it as a map key, write it in
// configuration.
func ExampleLimit() {
	plans := map[string]redisrate.Limit{
		"free": redisrate.PerSecond(10),
		"paid": redisrate.PerSecond(100).WithBurst(200),
	}
	fmt.Println(plans["free"], "|", plans["paid"], "|", plans["paid"] == redisrate.Limit{Rate: 100, Period: time.Second, Burst: 200})
	// Output: 10/s | 100/s burst 200 | true
}

func ExampleResult() {
	rdb, done := exampleRedis()
	defer done()
	// 10 s: this Example's Redis is embedded in the test, which a busy machine can starve past the 200 ms default.
	limiter := redisrate.NewLimiter(rdb, redisrate.WithDecisionTimeout(10*time.Second))
	res, _ := limiter.Decide(context.Background(), redisrate.Request{Key: "user:42", Limits: []redisrate.Limit{redisrate.PerSecond(5), redisrate.PerMinute(20)}, N: 2})
	fmt.Printf("allowed=%v remaining=%d capacity=%d binding=%d (%v) reset=%v source=%s\n",
		res.Allowed, res.Remaining, res.Capacity, res.Binding, res.Limit, res.ResetAfter, res.Source)
	// Output: allowed=true remaining=3 capacity=5 binding=0 (5/s) reset=400ms source=redis
}

func ExampleSource() {
	rdb, done := exampleRedis()
	defer done()
	// 10 s: this Example's Redis is embedded in the test, which a busy machine can starve past the 200 ms default.
	limiter := redisrate.NewLimiter(rdb, redisrate.WithDecisionTimeout(10*time.Second), redisrate.WithDenyCache(10))
	ctx := context.Background()
	for range 3 {
		res, _ := limiter.Allow(ctx, "k", redisrate.PerHour(1))
		fmt.Println(res.Allowed, res.Source)
	}
	// Output:
	// true redis
	// false redis
	// false deny-cache
}
