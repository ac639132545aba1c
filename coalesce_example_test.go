package redisrate_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redisrate/redisrate"
)

// One quota shared by every request of a service (an upstream API's 50 per
// hour), called by 64 goroutines at once: the calls that find another in
// flight on the key are decided together, in one script call, each as it
// would be alone. Turned off, each call is a script call of its own: the
// same decisions.
func ExampleWithCoalescing() {
	rdb, done := exampleRedis()
	defer done()
	ctx := context.Background()

	limiter := redisrate.NewLimiter(rdb) // coalescing is on by default
	upstream := redisrate.PerHour(50)
	hammer := func(l *redisrate.Limiter, key string) int64 {
		var admitted atomic.Int64
		var wg sync.WaitGroup
		for range 64 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if res, err := l.Allow(ctx, key, upstream); err == nil && res.Allowed {
					admitted.Add(1)
				}
			}()
		}
		wg.Wait()
		return admitted.Load()
	}
	fmt.Println(hammer(limiter, "upstream:a"), "of 64 admitted")

	// Alone, the 64 calls are 64 script calls, which this Example's
	// embedded Redis runs one after another: a longer decision timeout
	// than the 200 ms default keeps a loaded machine from failing them.
	alone := limiter.With(redisrate.WithCoalescing(false), redisrate.WithDecisionTimeout(10*time.Second))
	fmt.Println(hammer(alone, "upstream:b"), "of 64 admitted, each call alone")
	// Output:
	// 50 of 64 admitted
	// 50 of 64 admitted, each call alone
}
