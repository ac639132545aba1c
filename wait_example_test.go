package redisrate_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redisrate/redisrate"
)

// A worker calling a partner's API, which allows 10 requests per second
// across all the workers that share the key: each call waits its turn.
func ExampleLimiter_Wait() {
	rdb, done := exampleRedis()
	defer done()
	callPartnerAPI := func(job int) { fmt.Println("called the API for job", job) }

	limiter := redisrate.NewLimiter(rdb, redisrate.WithKeyPrefix("redisrate:"))
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
	// Output:
	// called the API for job 0
	// called the API for job 1
	// called the API for job 2
}

// Wait gives up at once, without sleeping, when the turn would come after
// the context's deadline.
func ExampleLimiter_Wait_deadline() {
	rdb, done := exampleRedis()
	defer done()
	// 10 s: this Example's Redis is embedded in the test, which a busy machine can starve past the 200 ms default.
	limiter := redisrate.NewLimiter(rdb, redisrate.WithDecisionTimeout(10*time.Second))
	limit := redisrate.PerMinute(1)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := limiter.Wait(ctx, "report", limit); err != nil {
		panic(err)
	}
	res, err := limiter.Wait(ctx, "report", limit) // the next turn is a minute away
	fmt.Println(errors.Is(err, context.DeadlineExceeded), res.RetryAfter)
	// Output:
	// true 1m0s
}

// A cost that is more than the capacity can never be admitted: WaitN says
// so at once instead of waiting forever.
func ExampleLimiter_WaitN() {
	rdb, done := exampleRedis()
	defer done()
	// 10 s: this Example's Redis is embedded in the test, which a busy machine can starve past the 200 ms default.
	limiter := redisrate.NewLimiter(rdb, redisrate.WithDecisionTimeout(10*time.Second))

	_, err := limiter.WaitN(context.Background(), "upload", redisrate.PerSecond(100), 250)
	fmt.Println(errors.Is(err, redisrate.ErrExceedsCapacity))
	fmt.Println(err)
	// Output:
	// true
	// redisrate: wait on key "upload": cost exceeds the capacity of the limit: it can never be admitted (cost 250, capacity 100)
}

// Decide with KindWait and several Limits waits until every limit admits:
// here a mail provider's 5 per second and 3 per hour. The per-hour limit
// binds first: the fourth mail's turn is 20 minutes away, after the
// context's deadline, so the wait gives up at once rather than sleep.
func ExampleLimiter_Decide_wait() {
	rdb, done := exampleRedis()
	defer done()
	// 10 s: this Example's Redis is embedded in the test, which a busy machine can starve past the 200 ms default.
	limiter := redisrate.NewLimiter(rdb, redisrate.WithDecisionTimeout(10*time.Second))
	perSecond, perHour := redisrate.PerSecond(5), redisrate.PerHour(3)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, to := range []string{"a@example.com", "b@example.com", "c@example.com", "d@example.com"} {
		res, err := limiter.Decide(ctx, redisrate.Request{Kind: redisrate.KindWait, Key: "mail-provider", Limits: []redisrate.Limit{perSecond, perHour}})
		if errors.Is(err, context.DeadlineExceeded) {
			fmt.Printf("not sending to %s: the %v limit's turn is in %v\n", to, res.Limit, res.RetryAfter)
			return
		}
		if err != nil {
			fmt.Println("giving up:", err)
			return
		}
		fmt.Println("sending to", to)
	}
	// Output:
	// sending to a@example.com
	// sending to b@example.com
	// sending to c@example.com
	// not sending to d@example.com: the 3/h limit's turn is in 20m0s
}
