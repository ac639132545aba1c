package httplimit_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"slices"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/redisrate/redisrate"
	"github.com/redisrate/redisrate/httplimit"
	"github.com/redisrate/redisrate/internal/exampleredis"
	"github.com/redisrate/redisrate/internal/readmetest"
)

// exampleRedis is an embedded Redis on a fixed clock, so that the examples
// print the same every time. In production, use your own client:
// redis.NewClient(&redis.Options{Addr: "localhost:6379"}).
func exampleRedis() (*redis.Client, func()) {
	return exampleredis.Start()
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
// hour, all or nothing. The key is stored in Redis only as an HMAC under a
// secret of the service's own.
func ExampleConfig_severalLimits() {
	rdb, done := exampleRedis()
	defer done()

	secret := []byte("example secret, 16+ bytes; load yours from a secret store")
	limit, err := httplimit.New(httplimit.Config{
		Limiter:     redisrate.NewLimiter(rdb),
		Limits:      []redisrate.Limit{redisrate.PerSecond(10), redisrate.PerHour(1000)},
		Key:         httplimit.Header("X-API-Key", secret),
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

// Limits by plan (free 10 per second, paid 100 per second) and a bulk
// endpoint that costs 10; the headers follow what was applied. A health
// check is exempt.
func ExampleConfig_plans() {
	rdb, done := exampleRedis()
	defer done()

	limit, err := httplimit.New(httplimit.Config{
		Limiter: redisrate.NewLimiter(rdb),
		Name:    "api",
		Plans: []httplimit.Plan{
			{Name: "free", Limits: []redisrate.Limit{redisrate.PerSecond(10)}},
			{Name: "paid", Limits: []redisrate.Limit{redisrate.PerSecond(100)}},
		},
		Plan: func(r *http.Request) (string, error) {
			if r.Header.Get("X-Account") == "acme" { // in real life: the account's plan
				return "paid", nil
			}
			return "free", nil
		},
		Cost: func(r *http.Request) (int64, error) {
			if r.URL.Path == "/bulk" {
				return 10, nil
			}
			return 1, nil
		},
		Key:    httplimit.KeyFunc(func(r *http.Request) (string, error) { return r.Header.Get("X-Account"), nil }),
		Exempt: func(r *http.Request) bool { return r.URL.Path == "/healthz" },
	})
	if err != nil {
		log.Fatal(err)
	}
	h := limit.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))

	for _, c := range []struct{ account, path string }{
		{"acme", "/bulk"}, {"bob", "/bulk"}, {"bob", "/one"}, {"bob", "/healthz"},
	} {
		r := httptest.NewRequest("GET", c.path, nil)
		r.Header.Set("X-Account", c.account)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		fmt.Printf("%s %s: %d %s | %s\n", c.account, c.path, w.Code, w.Header().Get("RateLimit-Policy"), w.Header().Get("RateLimit"))
	}
	// Output:
	// acme /bulk: 200 "paid";q=100;w=1 | "paid";r=90;t=1
	// bob /bulk: 200 "free";q=10;w=1 | "free";r=0;t=1
	// bob /one: 429 "free";q=10;w=1 | "free";r=0;t=1
	// bob /healthz: 200  |
}

// Limits that only smooth load can let requests through while Redis is
// down: log the error, then serve the request without a limit. The
// response then carries no RateLimit header: there is no quota to report.
func ExampleServeOnError() {
	rdb, done := exampleRedis()
	defer done()
	rdb.Close() // Redis is gone

	logger := log.New(os.Stdout, "", 0)
	serve := func(w http.ResponseWriter, r *http.Request, next http.Handler, err error) {
		logger.Printf("rate limiter: %v", err)
		httplimit.ServeOnError(w, r, next, err)
	}
	limit, err := httplimit.New(httplimit.Config{
		Limiter: redisrate.NewLimiter(rdb),
		Limits:  []redisrate.Limit{redisrate.PerSecond(10)},
		OnError: serve,
	})
	if err != nil {
		log.Fatal(err)
	}
	h := limit.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "served")
	}))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
	fmt.Println(w.Code, w.Body.String(), "RateLimit:", w.Header().Get("RateLimit"))
	// Output:
	// rate limiter: redisrate: gcra on key "default:ip:192.0.2.1": redis: client is closed
	// 200 served RateLimit:
}

// What RefuseOnError, the default, answers when Redis cannot decide and
// the Limiter has no failure policy.
func ExampleRefuseOnError() {
	rdb, done := exampleRedis()
	defer done()
	rdb.Close() // Redis is gone

	limit, err := httplimit.New(httplimit.Config{
		Limiter: redisrate.NewLimiter(rdb),
		Limits:  []redisrate.Limit{redisrate.PerSecond(10)},
		OnError: httplimit.RefuseOnError,
	})
	if err != nil {
		log.Fatal(err)
	}
	w := httptest.NewRecorder()
	limit.Handler(http.NotFoundHandler()).ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
	fmt.Println(w.Code, "Retry-After:", w.Header().Get("Retry-After"), "RateLimit:", w.Header().Get("RateLimit"))
	// Output:
	// 503 Retry-After: 1 RateLimit:
}

// Configuration mistakes are reported by New, not per request.
func ExampleAPIKey() {
	_, err := httplimit.New(httplimit.Config{
		Limiter: redisrate.NewLimiter(nil),
		Limits:  []redisrate.Limit{redisrate.PerSecond(10)},
		Key:     httplimit.APIKey{Header: "X-API-Key", Secret: []byte("hunter2")},
	})
	fmt.Println(err)
	// Output:
	// httplimit: Config.Key: httplimit: APIKey.Secret has 7 bytes: give at least 16 random bytes, kept out of the code
}

// A KeyFunc of one's own: per tenant. A request without the tenant header
// gets an empty key, which is refused (400), never let through unlimited.
func ExampleKeyFunc() {
	byTenant := httplimit.KeyFunc(func(r *http.Request) (string, error) {
		return r.Header.Get("X-Tenant"), nil
	})
	limit, err := httplimit.New(httplimit.Config{
		Limiter: redisrate.NewLimiter(nil),
		Limits:  []redisrate.Limit{redisrate.PerSecond(10)},
		Key:     byTenant,
	})
	if err != nil {
		log.Fatal(err)
	}
	w := httptest.NewRecorder()
	limit.Handler(http.NotFoundHandler()).ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
	fmt.Println(w.Code)
	// Output:
	// 400
}

// CORS preflights are counted like any request unless
// Config.ExemptPreflight is set; then the Middleware answers them itself.
func ExampleIsPreflight() {
	r := httptest.NewRequest("OPTIONS", "/things", nil)
	r.Header.Set("Origin", "https://app.example")
	r.Header.Set("Access-Control-Request-Method", "POST")
	fmt.Println(httplimit.IsPreflight(r))
	// Output:
	// true
}

// corsPassthrough stands for a CORS middleware that sets its headers and
// passes every request on, preflights too.
func corsPassthrough(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Access-Control-Allow-Origin", "https://app.example")
		if httplimit.IsPreflight(r) {
			w.Header().Set("Access-Control-Allow-Methods", "POST")
		}
		next.ServeHTTP(w, r)
	})
}

// The CORS middleware goes in front of the limiter. This one passes
// preflights on, so the limiter answers them (204, with its headers),
// without counting them and without running the route.
func ExampleConfig_exemptPreflight() {
	rdb, done := exampleRedis()
	defer done()
	limiter := redisrate.NewLimiter(rdb)
	mux := http.NewServeMux()
	mux.HandleFunc("/expensive", func(w http.ResponseWriter, r *http.Request) { fmt.Println("  the route ran") })

	// cors:start
	api, err := httplimit.New(httplimit.Config{
		Limiter:         limiter,
		Name:            "api",
		Limits:          []redisrate.Limit{redisrate.PerMinute(2)},
		ExemptPreflight: true, // the CORS middleware passes preflights on
	})
	if err != nil {
		log.Fatal(err)
	}
	handler := corsPassthrough(api.Handler(mux)) // CORS first, then the limit, then the routes
	// cors:end

	for _, method := range []string{"OPTIONS", "OPTIONS", "OPTIONS", "POST", "POST", "POST"} {
		r := httptest.NewRequest(method, "/expensive", nil)
		r.Header.Set("Origin", "https://app.example")
		if method == "OPTIONS" {
			r.Header.Set("Access-Control-Request-Method", "POST")
		}
		w := httptest.NewRecorder()
		handler.ServeHTTP(w, r)
		fmt.Println(method, w.Code, w.Header().Get("Access-Control-Allow-Origin"))
	}
	// Output:
	// OPTIONS 204 https://app.example
	// OPTIONS 204 https://app.example
	// OPTIONS 204 https://app.example
	//   the route ran
	// POST 200 https://app.example
	//   the route ran
	// POST 200 https://app.example
	// POST 429 https://app.example
}

// TestDocsHTTPCORSIsExample keeps docs/http.md's CORS block the same code
// as ExampleConfig_exemptPreflight.
func TestDocsHTTPCORSIsExample(t *testing.T) {
	readmetest.Check(t, "example_test.go", "../docs/http.md", "cors")
}

// Only the IETF fields, without the legacy X-RateLimit-* headers.
func ExampleHeaders() {
	rdb, done := exampleRedis()
	defer done()
	limit, err := httplimit.New(httplimit.Config{
		Limiter: redisrate.NewLimiter(rdb),
		Limits:  []redisrate.Limit{redisrate.PerSecond(10)},
		Omit:    httplimit.LegacyHeaders,
	})
	if err != nil {
		log.Fatal(err)
	}
	h := limit.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
	// The response's headers, spelled the way net/http keys them.
	fmt.Println(slices.Sorted(maps.Keys(w.Header())))
	// Output:
	// [Ratelimit Ratelimit-Policy]
}

// An allowlist: requests from the monitoring network are exempt, by an
// explicit choice; everyone else is limited by IP.
func ExampleConfig_allowlist() {
	rdb, done := exampleRedis()
	defer done()

	monitoring := netip.MustParsePrefix("10.9.0.0/16")
	limit, err := httplimit.New(httplimit.Config{
		Limiter: redisrate.NewLimiter(rdb),
		Limits:  []redisrate.Limit{redisrate.PerMinute(1)},
		Exempt: func(r *http.Request) bool {
			ap, err := netip.ParseAddrPort(r.RemoteAddr)
			return err == nil && monitoring.Contains(ap.Addr())
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	h := limit.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	for _, from := range []string{"10.9.0.5:4000", "10.9.0.5:4000", "203.0.113.7:4000", "203.0.113.7:4000"} {
		r := httptest.NewRequest("GET", "/status", nil)
		r.RemoteAddr = from
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		fmt.Println(from, w.Code)
	}
	// Output:
	// 10.9.0.5:4000 200
	// 10.9.0.5:4000 200
	// 203.0.113.7:4000 200
	// 203.0.113.7:4000 429
}

// accounts stands for the service's account store.
type accounts struct{ paid map[string]bool }

// PlanOf returns the plan of the account of an API key.
func (a accounts) PlanOf(apiKey string) (string, error) {
	if a.paid[apiKey] {
		return "paid", nil
	}
	return "free", nil
}

// The plans of docs/http.md: free and paid limits chosen per request, a
// bulk endpoint of cost 10, an exempt health check.
func ExamplePlan() {
	rdb, done := exampleRedis()
	defer done()
	limiter := redisrate.NewLimiter(rdb)
	secret := []byte("example secret, 16+ bytes; load yours from a secret store")
	accounts := accounts{paid: map[string]bool{"k-paid": true}}

	// plans:start
	api, err := httplimit.New(httplimit.Config{
		Limiter: limiter,
		Name:    "api",
		Plans: []httplimit.Plan{
			{Name: "free", Limits: []redisrate.Limit{redisrate.PerSecond(10)}},
			{Name: "paid", Limits: []redisrate.Limit{redisrate.PerSecond(100)}},
		},
		Plan: func(r *http.Request) (string, error) {
			return accounts.PlanOf(r.Header.Get("X-API-Key")) // "free" or "paid"
		},
		Cost: func(r *http.Request) (int64, error) {
			if r.URL.Path == "/api/bulk" {
				return 10, nil
			}
			return 1, nil
		},
		Key:    httplimit.APIKey{Header: "X-API-Key", Secret: secret},
		Exempt: func(r *http.Request) bool { return r.URL.Path == "/healthz" },
	})
	// plans:end
	if err != nil {
		log.Fatal(err)
	}
	h := api.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	for _, c := range []struct{ key, path string }{{"k-paid", "/api/bulk"}, {"k-free", "/api/bulk"}, {"k-free", "/api/one"}} {
		r := httptest.NewRequest("POST", c.path, nil)
		r.Header.Set("X-API-Key", c.key)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		fmt.Println(c.key, c.path, w.Code, w.Header().Get("RateLimit"))
	}
	// Output:
	// k-paid /api/bulk 200 "paid";r=90;t=1
	// k-free /api/bulk 200 "free";r=0;t=1
	// k-free /api/one 429 "free";r=0;t=1
}

// TestDocsHTTPIsExample keeps docs/http.md's Go block the same code as
// ExamplePlan.
func TestDocsHTTPIsExample(t *testing.T) {
	readmetest.Check(t, "example_test.go", "../docs/http.md", "plans")
}

// TestReadmeHTTPIsExample keeps the README's middleware example the same
// code as ExampleNew, which the test suite compiles and runs.
func TestReadmeHTTPIsExample(t *testing.T) {
	readmetest.Check(t, "example_test.go", "../README.md", "readme")
}

// Header is shorthand for an APIKey.
func ExampleHeader() {
	keyFunc, err := httplimit.Header("X-API-Key", []byte("example secret, 16+ bytes")).KeyFunc()
	if err != nil {
		log.Fatal(err)
	}
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("X-API-Key", "k-123")
	key, _ := keyFunc(r)
	fmt.Println(key[:4], len(key)) // "key:" and 32 hex digits of the HMAC
	_, err = keyFunc(httptest.NewRequest("GET", "/", nil))
	fmt.Println(errors.Is(err, httplimit.ErrNoKey))
	// Output:
	// key: 36
	// true
}

// ClientIP behind a load balancer: only the hop the balancer appended is
// believed.
func ExampleClientIP() {
	keyFunc, err := httplimit.ClientIP{Header: "X-Forwarded-For", TrustedProxies: []string{"10.0.0.0/8"}}.KeyFunc()
	if err != nil {
		log.Fatal(err)
	}
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "10.0.0.1:52000"
	r.Header.Set("X-Forwarded-For", "1.2.3.4, 203.0.113.9") // a forged entry, then the client
	key, _ := keyFunc(r)
	fmt.Println(key)
	// Output:
	// ip:203.0.113.9
}

// An ErrorHandler of one's own: a JSON error, whatever went wrong; 401 for
// a request without its API key (ErrNoKey), 503 for anything else, such
// as Redis being gone.
func ExampleErrorHandler() {
	rdb, done := exampleRedis()
	defer done()
	rdb.Close() // Redis is gone

	var onError httplimit.ErrorHandler = func(w http.ResponseWriter, r *http.Request, next http.Handler, err error) {
		status := http.StatusServiceUnavailable
		if errors.Is(err, httplimit.ErrNoKey) {
			status = http.StatusUnauthorized
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		fmt.Fprintln(w, `{"error":"rate limit undecided"}`)
	}
	limit, err := httplimit.New(httplimit.Config{
		Limiter: redisrate.NewLimiter(rdb),
		Limits:  []redisrate.Limit{redisrate.PerSecond(10)},
		Key:     httplimit.Header("X-API-Key", []byte("example secret, 16+ bytes; load yours from a secret store")),
		OnError: onError,
	})
	if err != nil {
		log.Fatal(err)
	}
	h := limit.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))

	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil)) // no API key
	fmt.Printf("without a key: %d %s", w.Code, w.Body.String())

	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("X-API-Key", "k-123") // a key, but no Redis to decide
	w = httptest.NewRecorder()
	h.ServeHTTP(w, r)
	fmt.Printf("with a key: %d %s", w.Code, w.Body.String())
	// Output:
	// without a key: 401 {"error":"rate limit undecided"}
	// with a key: 503 {"error":"rate limit undecided"}
}

// One Middleware for a group of routes that share a quota.
func ExampleMiddleware_Handler() {
	rdb, done := exampleRedis()
	defer done()
	limit, err := httplimit.New(httplimit.Config{Limiter: redisrate.NewLimiter(rdb), Limits: []redisrate.Limit{redisrate.PerSecond(1)}})
	if err != nil {
		log.Fatal(err)
	}
	api := http.NewServeMux()
	api.HandleFunc("GET /a", func(w http.ResponseWriter, r *http.Request) {})
	api.HandleFunc("GET /b", func(w http.ResponseWriter, r *http.Request) {})
	h := limit.Handler(api)
	for _, path := range []string{"/a", "/b"} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", path, nil))
		fmt.Println(path, w.Code)
	}
	// Output:
	// /a 200
	// /b 429
}
