package ratefields_test

import (
	"context"
	"errors"
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

// ScopedKeys lays out the keys of a request held to its API key's limit
// and to its account's, in one call: every key in the account's hash tag.
func ExampleScopedKeys() {
	keys, err := ratefields.ScopedKeys("api", "free", "key-1", []string{"account"}, []string{"42"})
	if err != nil {
		log.Fatal(err)
	}
	for _, k := range keys {
		fmt.Println(k)
	}
	// A client's value cannot end the tag early.
	fmt.Println(ratefields.ScopedKeys("api", "free", "k", []string{"account"}, []string{"x}:free:k"}))
	// Output:
	// {api:account:42}:free:key-1
	// {api:account:42}
	// [{api:account:x%7D:free:k}:free:k {api:account:x%7D:free:k}] <nil>
}

// CallerGaveUp tells a request whose client went away, or whose deadline
// passed, before Redis decided from one that Redis could not decide: the
// first is answered as ended, never by the failure policy (an admission,
// under FailOpen).
func ExampleCallerGaveUp() {
	local, err := localredis.Start()
	if err != nil {
		log.Fatal(err)
	}
	defer local.Close()
	limiter := local.Limiter()

	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the client went away
	_, err = limiter.Allow(ctx, "client:42", redisrate.PerMinute(3))
	fmt.Println(ratefields.CallerGaveUp(err), errors.Is(err, context.Canceled))

	local.Close() // Redis is gone
	_, err = limiter.Allow(context.Background(), "client:42", redisrate.PerMinute(3))
	fmt.Println(ratefields.CallerGaveUp(err), errors.Is(err, redisrate.ErrUnavailable))
	// Output:
	// true true
	// false true
}

// NewScopes checks, once, the scopes that middleware holds every request to;
// NewSet gives each of its rules the limits and policy names of its calls:
// here an API key's 10 per second and its account's 1000 per minute, all or
// nothing in one call (Limiter.AllowKeys on the keys of ScopedKeys).
func ExampleNewScopes() {
	scopes, err := ratefields.NewScopes("request", []string{"account"},
		[]redisrate.Limit{redisrate.PerMinute(1000)}, map[string]string{"api": "Config.Name"})
	if err != nil {
		log.Fatal(err)
	}
	fields, err := scopes.NewSet("api", nil, []redisrate.Limit{redisrate.PerSecond(10)})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(fields.Policy())

	// What one call cannot hold is refused at start-up, with why.
	_, err = scopes.NewSet("api", nil, []redisrate.Limit{redisrate.PerSecond(10), redisrate.PerDay(10000)})
	fmt.Println(err)
	_, err = ratefields.NewScopes("request", []string{"api"},
		[]redisrate.Limit{redisrate.PerMinute(1000)}, map[string]string{"api": "Config.Name"})
	fmt.Println(err)
	// Output:
	// "api";q=10;w=1, "account";q=1000;w=60
	// 2 limits with Config.Scopes: with scopes, each key holds one limit (a call of several keys, CONTRACT.md); hold the request's key to a further limit with a Scope of the same Key
	// Config.Scopes[0] has the Name "api" of Config.Name: give each scope a name of its own
}

// NewSet names the limits of a rule without scopes: by the rule's name for
// one limit, name-1, name-2, ... for several, or by the policy names
// given; the limits carry their names to metrics (Limit.Name).
func ExampleScopes_NewSet() {
	fields, err := ratefields.Scopes{}.NewSet("api", nil, []redisrate.Limit{redisrate.PerSecond(10), redisrate.PerDay(10000)})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(fields.Policy())
	fmt.Println(fields.Limits[1].Name)
	// Output:
	// "api-1";q=10;w=1, "api-2";q=10000;w=86400
	// api-2
}

// CheckKeyName refuses the names that would let the Redis keys of two
// names meet.
func ExampleCheckKeyName() {
	fmt.Println(ratefields.CheckKeyName("api-free"))
	fmt.Println(ratefields.CheckKeyName("api:free"))
	// Output:
	// <nil>
	// ':' separates the names in a client's Redis key, so with it the keys of two names could meet; use another character, such as '-'
}
