package httplimit_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/redisrate/redisrate"
	"github.com/redisrate/redisrate/httplimit"
	"github.com/redisrate/redisrate/internal/readmetest"
)

// exampleRedis is an embedded Redis on a fixed clock, so that the examples
// print the same every time. In production, use your own client:
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

// Limit an API to 2 requests per second per client IP, behind a load
// balancer at 10.0.0.0/8 that appends to X-Forwarded-For.
func ExampleNew() {
	rdb, done := exampleRedis()
	defer done()

	// readme:start
	byIP, err := httplimit.ClientIP{
		Header:         "X-Forwarded-For",
		TrustedProxies: []string{"10.0.0.0/8"},
	}.KeyFunc()
	if err != nil {
		log.Fatal(err)
	}
	limit, err := httplimit.New(httplimit.Config{
		Limiter: redisrate.NewLimiter(rdb, redisrate.WithKeyPrefix("rate:")),
		Limits:  []redisrate.Limit{redisrate.PerSecond(2)},
		Key:     byIP,
		Name:    "api",
	})
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/things", limit.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "things")
	})))
	// readme:end

	for range 3 {
		r := httptest.NewRequest("GET", "/things", nil)
		r.RemoteAddr = "10.0.0.1:52000"                         // the load balancer
		r.Header.Set("X-Forwarded-For", "1.2.3.4, 203.0.113.9") // a spoofed entry, then the client
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, r)
		fmt.Printf("%d RateLimit: %s Retry-After: %q\n", w.Code, w.Header().Get("RateLimit"), w.Header().Get("Retry-After"))
	}
	fmt.Println(rdb.Keys(context.Background(), "*").Val())
	// Output:
	// 200 RateLimit: "api";r=1;t=1 Retry-After: ""
	// 200 RateLimit: "api";r=0;t=1 Retry-After: ""
	// 429 RateLimit: "api";r=0;t=1 Retry-After: "1"
	// [rate:api:ip:203.0.113.9]
}

// Several limits on one route, keyed by API key: 10 per second and 1000 per
// hour, all or nothing.
func ExampleConfig_severalLimits() {
	rdb, done := exampleRedis()
	defer done()

	limit, err := httplimit.New(httplimit.Config{
		Limiter:     redisrate.NewLimiter(rdb),
		Limits:      []redisrate.Limit{redisrate.PerSecond(10), redisrate.PerHour(1000)},
		Key:         httplimit.Header("X-API-Key"),
		Name:        "search",
		PolicyNames: []string{"burst", "hourly"},
	})
	if err != nil {
		log.Fatal(err)
	}
	h := limit.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))

	r := httptest.NewRequest("GET", "/search", nil)
	r.Header.Set("X-API-Key", "k-123")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	fmt.Println(w.Header().Get("RateLimit-Policy"))
	fmt.Println(w.Header().Get("RateLimit"))

	w = httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/search", nil)) // no API key
	fmt.Println(w.Code, w.Body.String())
	// Output:
	// "burst";q=10;w=1, "hourly";q=1000;w=3600
	// "burst";r=9;t=1
	// 400 {"type":"about:blank","title":"Bad Request","status":400,"detail":"no rate-limit key: the request has no X-Api-Key header"}
}

// Log the errors of Redis, then serve the requests anyway.
func ExampleFailOpen() {
	failOpen := func(w http.ResponseWriter, r *http.Request, next http.Handler, err error) {
		log.Printf("rate limiter: %v", err)
		httplimit.FailOpen(w, r, next, err)
	}
	_ = httplimit.Config{OnError: failOpen}
}

// TestReadmeHTTPIsExample keeps the README's middleware example the same
// code as ExampleNew, which the test suite compiles and runs.
func TestReadmeHTTPIsExample(t *testing.T) {
	readmetest.Check(t, "example_test.go", "../README.md", "readme")
}
