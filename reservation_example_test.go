package redisrate_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redisrate/redisrate"
)

// Reserve an estimate, then settle what was really used: the difference
// goes back. Settle(ctx, 0) cancels the reservation.
func ExampleLimiter_Reserve() {
	rdb, done := exampleRedis()
	defer done()
	// 10 s: this Example's Redis is embedded in the test, which a busy machine can starve past the 200 ms default.
	limiter := redisrate.NewLimiter(rdb, redisrate.WithDecisionTimeout(10*time.Second))
	ctx := context.Background()
	limit := []redisrate.Limit{redisrate.PerMinute(100)}

	r, _ := limiter.Reserve(ctx, redisrate.Request{Key: "export:acme", Limits: limit, N: 40})
	fmt.Println("reserved", r.Result.Units, "of 40, allowed:", r.Result.Allowed)
	res, _ := r.Settle(ctx, 25) // 25 rows were exported
	fmt.Println("gave back", res.Units, "now", res.Remaining, "left")
	_, err := r.Settle(ctx, 25)
	fmt.Println(err)
	// Output:
	// reserved 40 of 40, allowed: true
	// gave back 15 now 75 left
	// redisrate: gcra on key "export:acme": reservation already settled: a reservation is settled once
}

// An LLM gateway: before it calls a model, it reserves the request's
// max_tokens per user, per organisation and per model (the organisation's
// use of it), in one atomic call on three keys, then settles from the
// reply's usage. The keys share the organisation's hash tag, so that one
// call may hold them on Redis Cluster.
func ExampleLimiter_Reserve_llmGateway() {
	rdb, done := exampleRedis()
	defer done()
	// 10 s: this Example's Redis is embedded in the test, which a busy machine can starve past the 200 ms default.
	limiter := redisrate.NewLimiter(rdb, redisrate.WithDecisionTimeout(10*time.Second), redisrate.WithFailurePolicy(redisrate.FailClosed))
	ctx := context.Background()

	perUser := redisrate.PerMinute(10_000).WithName("user")
	perOrg := redisrate.PerMinute(50_000).WithName("org")
	perModel := redisrate.PerMinute(12_000).WithName("model")
	tokens := func(org, user, model string) []redisrate.KeyLimit {
		tag := "{tokens:" + org + "}"
		return []redisrate.KeyLimit{
			{Key: tag + ":user:" + user, Limit: perUser},
			{Key: tag, Limit: perOrg},
			{Key: tag + ":model:" + model, Limit: perModel},
		}
	}
	complete := func(org, user, model string, maxTokens int64, usage int64) {
		r, err := limiter.Reserve(ctx, redisrate.Request{Keys: tokens(org, user, model), N: maxTokens})
		switch {
		case err != nil: // a bad request (ErrInvalid), or a deployment to fix (ErrMisconfigured)
			fmt.Println(err) // answer 500
			return
		case !r.Result.Allowed && r.Result.Degraded():
			// Redis could not decide, and FailClosed refused: an outage,
			// not the user's quota. Answer 503, never 429.
			fmt.Printf("%s: rate limiter unavailable, retry in %v\n", user, r.Result.RetryAfter)
			return
		case !r.Result.Allowed: // answer 429
			fmt.Printf("%s: %d tokens denied by %s, retry in %v\n", user, maxTokens, r.Result.Limit.Name, r.Result.RetryAfter)
			return
		}
		// ... call the model; its reply says how many tokens it used. A
		// use above the estimate (the prompt's tokens) is forced: a debt.
		res, err := r.Settle(ctx, usage)
		if err != nil {
			return // the reservation keeps its estimate
		}
		fmt.Printf("%s: reserved %d, used %d, gave back %d; %s has %d left\n", user, maxTokens, usage, res.Units, res.Limit.Name, res.Remaining)
	}
	complete("acme", "ada", "large", 4096, 1200)
	complete("acme", "ada", "large", 9000, 0)
	complete("acme", "bob", "large", 8000, 7900)
	complete("acme", "cy", "large", 4000, 0)
	_ = rdb.Close() // Redis goes away
	complete("acme", "dee", "large", 100, 0)
	// Output:
	// ada: reserved 4096, used 1200, gave back 2896; user has 8800 left
	// ada: 9000 tokens denied by user, retry in 1.2s
	// bob: reserved 8000, used 7900, gave back 100; user has 2100 left
	// cy: 4000 tokens denied by model, retry in 5.5s
	// dee: rate limiter unavailable, retry in 1s
}

// A lease: take up to 50 units of a shared quota at once, spend them one by
// one with no round trip, and close it, which gives back what was not
// spent. Its lifetime bounds how long it may spend: when it ends, the rest
// goes back by itself.
func ExampleReservation_Take() {
	rdb, done := exampleRedis()
	defer done()
	// 10 s: this Example's Redis is embedded in the test, which a busy machine can starve past the 200 ms default.
	limiter := redisrate.NewLimiter(rdb, redisrate.WithDecisionTimeout(10*time.Second))
	ctx := context.Background()
	quota := []redisrate.Limit{redisrate.PerSecond(100)}
	_, _ = limiter.AllowN(ctx, "upstream", quota[0], 60) // other workers

	lease, _ := limiter.Reserve(ctx, redisrate.Request{Kind: redisrate.KindUpTo, Key: "upstream", Limits: quota, N: 50, Lease: time.Second})
	fmt.Println("leased", lease.Result.Units)
	jobs := 0
	for jobs < 30 && lease.Take(1) {
		jobs++ // call the upstream
	}
	res, _ := lease.Close(ctx) // what Take did not spend goes back
	fmt.Println("ran", jobs, "jobs, gave back", res.Units)
	// Output:
	// leased 40
	// ran 30 jobs, gave back 10
}

// Settling past the reservation records the rest with force, whatever the
// limit says: a debt, which the next calls wait for.
func ExampleReservation_Settle() {
	rdb, done := exampleRedis()
	defer done()
	// 10 s: this Example's Redis is embedded in the test, which a busy machine can starve past the 200 ms default.
	limiter := redisrate.NewLimiter(rdb, redisrate.WithDecisionTimeout(10*time.Second))
	ctx := context.Background()
	limit := redisrate.PerMinute(100)

	r, _ := limiter.Reserve(ctx, redisrate.Request{Key: "rows:acme", Limits: []redisrate.Limit{limit}, N: 100})
	res, _ := r.Settle(ctx, 130) // the job wrote 130 rows
	fmt.Println("forced", res.Units, "more; allow would have:", res.Allowed)
	res, _ = limiter.Allow(ctx, "rows:acme", limit)
	fmt.Println(res.Allowed, "retry in", res.RetryAfter)
	// Output:
	// forced 30 more; allow would have: false
	// false retry in 18.6s
}
