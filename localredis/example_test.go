package localredis_test

import (
	"context"
	"fmt"
	"log"

	"github.com/redis/go-redis/v9"

	"github.com/redisrate/redisrate"
	"github.com/redisrate/redisrate/localredis"
)

// A Limiter whose Redis is away decides on the in-process fallback, with the
// same limits, and says so in the Result.
func Example() {
	local, err := localredis.Start()
	if err != nil {
		log.Fatal(err)
	}
	defer local.Close()

	// Nothing listens on port 1: Redis is down.
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialerRetries: 1})
	defer rdb.Close()
	lim := redisrate.NewLimiter(rdb, redisrate.WithFallback(local.Limiter()))

	for range 3 {
		res, err := lim.Allow(context.Background(), "user:42", redisrate.PerMinute(2))
		if err != nil {
			log.Fatal(err)
		}
		if res.Degraded() {
			// A real service logs res.Cause and counts degraded decisions.
			fmt.Println(res.Source, res.Allowed, res.Remaining)
		}
	}
	// Output:
	// fallback true 1
	// fallback true 0
	// fallback false 0
}
