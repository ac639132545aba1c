package ratecore_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"strings"
	"time"

	"github.com/redisrate/redisrate"
	"github.com/redisrate/redisrate/internal/exampleredis"
	"github.com/redisrate/redisrate/ratecore"
)

// A transport of its own: a job queue that limits each tenant's jobs. The
// core decides; the transport turns a job into a key and the Answer into
// what the queue does.
func Example() {
	rdb, done := exampleredis.Start() // a real service passes its Redis client to NewLimiter
	defer done()

	type job struct{ tenant string }
	rules, err := ratecore.New(ratecore.Config[job]{
		Limiter: redisrate.NewLimiter(rdb, redisrate.WithDecisionTimeout(10*time.Second)), // generous: a loaded test machine
		Name:    "jobs",
		Key:     func(j job) (string, error) { return j.tenant, nil },
	})
	if err != nil {
		log.Fatal(err)
	}
	every, err := rules.Rule("", "", []redisrate.Limit{redisrate.PerMinute(2)}) // the rule of every job
	if err != nil {
		log.Fatal(err)
	}
	for range 3 {
		a := rules.Decide(context.Background(), job{tenant: "acme"}, every, 1)
		wait, _ := a.RetryAfter()
		fmt.Println(a.Verdict == ratecore.Serve, a.RateLimit(), wait)
	}
	a := rules.Decide(context.Background(), job{}, every, 1)
	fmt.Println(a.Verdict == ratecore.NoKey, errors.Is(a.Err, ratecore.ErrNoKey))
	// Output:
	// true "jobs";r=1;t=30 0s
	// true "jobs";r=0;t=30 0s
	// false "jobs";r=0;t=30 30s
	// true true
}

// A scope holds every job to a further key in the same atomic call: a
// tenant's jobs and its organisation's. The fields list both limits.
func ExampleScope() {
	rdb, done := exampleredis.Start()
	defer done()

	type job struct{ tenant, org string }
	rules, err := ratecore.New(ratecore.Config[job]{
		Limiter: redisrate.NewLimiter(rdb, redisrate.WithDecisionTimeout(10*time.Second)), // generous: a loaded test machine
		Name:    "jobs",
		Key:     func(j job) (string, error) { return j.tenant, nil },
		Scopes: []ratecore.Scope[func(job) (string, error)]{{
			Name:  "org",
			Key:   func(j job) (string, error) { return j.org, nil },
			Limit: redisrate.PerMinute(100),
		}},
	})
	if err != nil {
		log.Fatal(err)
	}
	every, err := rules.Rule("", "", []redisrate.Limit{redisrate.PerMinute(10)})
	if err != nil {
		log.Fatal(err)
	}
	a := rules.Decide(context.Background(), job{tenant: "t1", org: "acme"}, every, 1)
	fmt.Println(a.Policy())
	name, limit := a.Binding()
	fmt.Println(name, limit)
	// Output:
	// "jobs";q=10;w=60, "org";q=100;w=60
	// jobs 10/m
}

// The client behind trusted proxies: the header is read from the right,
// and what the client wrote itself is never reached.
func ExampleIP() {
	key, err := ratecore.IP{Header: "x-forwarded-for", TrustedProxies: []string{"10.0.0.1"}}.KeyFunc()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(key("10.0.0.1:443", []string{"1.2.3.4, 203.0.113.9"}))
	fmt.Println(key("[64:ff9b::c000:221]:443", nil)) // NAT64: the IPv4 client
	_, err = ratecore.IP{Header: "x-forwarded-for", TrustedProxies: []string{"10.0.0.0/8"}}.KeyFunc()
	fmt.Println(strings.Contains(fmt.Sprint(err), "spans more than a /24"))
	// Output:
	// ip:203.0.113.9 <nil>
	// ip:192.0.2.33 <nil>
	// true
}

// An API key reaches Redis only as its HMAC, and only if the service
// issued it.
func ExampleAPIKey() {
	key, err := ratecore.APIKey{
		Header: "X-Api-Key",
		Secret: []byte("example secret, 16+ bytes"),
		Verify: func(_ context.Context, k string) (bool, error) { return k == "k-123", nil },
	}.KeyFunc()
	if err != nil {
		log.Fatal(err)
	}
	k, _ := key(context.Background(), "X-Api-Key header", []string{"k-123"})
	fmt.Println(k[:4], len(k))
	_, err = key(context.Background(), "X-Api-Key header", []string{"invented"})
	fmt.Println(err)
	// Output:
	// key: 36
	// no rate-limit key: the X-Api-Key header is not a key this service issued
}

// A failure the transport meets itself (a plan that cannot be chosen) is
// answered as the core answers its own.
func ExampleRules_Fail() {
	rules, err := ratecore.New(ratecore.Config[string]{
		Limiter: redisrate.NewLimiter(nil),
		Name:    "api",
		Key:     func(s string) (string, error) { return s, nil },
		Shadow:  true,
	})
	if err != nil {
		log.Fatal(err)
	}
	a := rules.Fail(errors.New("plan lookup failed"))
	fmt.Println(a.Verdict == ratecore.Serve) // shadow mode serves
	a = rules.Fail(fmt.Errorf("decide: %w", context.Canceled))
	fmt.Println(a.Verdict == ratecore.Ended) // but never a request that ended
	// Output:
	// true
	// true
}
