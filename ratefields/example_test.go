package ratefields_test

import (
	"context"
	"fmt"
	"log"
	"net/http"

	"github.com/redisrate/redisrate"
	"github.com/redisrate/redisrate/localredis"
	"github.com/redisrate/redisrate/ratefields"
)

// Middleware of your own sends the fields that httplimit and grpclimit send:
// the policy on every decided request, the binding limit's quota left, and
// Retry-After on a denial.
func Example() {
	local, err := localredis.Start() // a real service passes its Redis client to NewLimiter
	if err != nil {
		log.Fatal(err)
	}
	defer local.Close()
	limiter := local.Limiter()

	fields, err := ratefields.New([]string{"api"}, []redisrate.Limit{redisrate.PerMinute(3)})
	if err != nil {
		log.Fatal(err)
	}
	for range 4 {
		res, err := limiter.Decide(context.Background(), redisrate.Request{Key: "client:42", Limits: fields.Limits})
		if err != nil {
			log.Fatal(err)
		}
		h := http.Header{}
		h.Set("RateLimit-Policy", fields.Policy())
		if !res.Degraded() { // a decision without Redis has no quota to report
			h.Set("RateLimit", fields.RateLimit(res))
		}
		status := http.StatusOK
		if !res.Allowed {
			status = http.StatusTooManyRequests
			if s, ok := ratefields.RetryAfter(res); ok { // none when waiting cannot help
				h.Set("Retry-After", fmt.Sprint(s))
			}
		}
		fmt.Println(status, h)
	}
	// Output:
	// 200 map[Ratelimit:["api";r=2;t=20] Ratelimit-Policy:["api";q=3;w=60]]
	// 200 map[Ratelimit:["api";r=1;t=20] Ratelimit-Policy:["api";q=3;w=60]]
	// 200 map[Ratelimit:["api";r=0;t=20] Ratelimit-Policy:["api";q=3;w=60]]
	// 429 map[Ratelimit:["api";r=0;t=20] Ratelimit-Policy:["api";q=3;w=60] Retry-After:[20]]
}
