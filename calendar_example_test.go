package redisrate_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redisrate/redisrate"
)

// A daily quota that resets at midnight Pacific time, and a monthly one in
// UTC: each calendar window has its own key, and a denial waits until the
// next window starts.
func ExampleLimit_calendar() {
	rdb, done := exampleRedis()
	defer done()
	ctx := context.Background()
	// 10 s: this Example's Redis is embedded in the test, which a busy machine can starve past the 200 ms default.
	limiter := redisrate.NewLimiter(rdb, redisrate.WithDecisionTimeout(10*time.Second), redisrate.WithKeyPrefix("redisrate:"))

	// 3 a day from midnight to midnight in Los Angeles (23 or 25 hours on
	// the days daylight saving time starts or ends), decided by fixed_window.
	daily := redisrate.Limit{Algorithm: redisrate.FixedWindow, Rate: 3, Calendar: "day America/Los_Angeles"}
	for range 4 {
		res, err := limiter.Allow(ctx, "user:42", daily)
		if err != nil {
			panic(err)
		}
		if !res.Allowed {
			la, _ := time.LoadLocation("America/Los_Angeles")
			next := time.Now().Add(res.RetryAfter).In(la)
			fmt.Println("denied until", next.Round(time.Minute).Format("15:04"), "in Los Angeles")
			continue
		}
		fmt.Println("allowed,", res.Remaining, "left today")
	}

	// The same from configuration: a billion tokens per calendar month.
	monthly, err := redisrate.ParseLimit("1000000000/month calendar UTC")
	fmt.Println(monthly.Algorithm, monthly.Rate, monthly.Calendar, err)
	// Output:
	// allowed, 2 left today
	// allowed, 1 left today
	// allowed, 0 left today
	// denied until 00:00 in Los Angeles
	// fixed_window 1000000000 month UTC <nil>
}
