package httplimit_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redisrate/redisrate"
	"github.com/redisrate/redisrate/httplimit"
	"github.com/redisrate/redisrate/internal/exampleredis"
	"github.com/redisrate/redisrate/internal/readmetest"
	"github.com/redisrate/redisrate/ratecore"
)

// exampleRedis is an embedded Redis on a fixed clock, so that the examples
// print the same every time. In production, use your own client:
// redis.NewClient(&redis.Options{Addr: "localhost:6379"}).
func exampleRedis() (*redis.Client, func()) {
	return exampleredis.Start()
}

// Limit an API to 2 requests per second per client IP, behind two load
// balancers, 10.0.0.1 and 10.0.0.2, that append to X-Forwarded-For.
func ExampleNew() {
	rdb, done := exampleRedis()
	defer done()

	// readme:start
	byIP, err := httplimit.ClientIP{
		Header:         "X-Forwarded-For",
		TrustedProxies: []string{"10.0.0.1", "10.0.0.2"}, // the balancers' own addresses
	}.KeyFunc()
	if err != nil {
		log.Fatal(err)
	}
	limit, err := httplimit.New(httplimit.Config{
		Limiter: redisrate.NewLimiter(rdb, redisrate.WithKeyPrefix("redisrate:")),
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
	// [redisrate:api:ip:203.0.113.9]
}

// Several limits on one route, keyed by API key: 10 per second and 1000 per
// hour, all or nothing. The key is stored in Redis only as an HMAC under a
// secret of the service's own.
func ExampleConfig_severalLimits() {
	rdb, done := exampleRedis()
	defer done()

	secret := []byte("example secret, 16+ bytes; load yours from a secret store")
	keys := issued{"k-123": true}
	limit, err := httplimit.New(httplimit.Config{
		// 10 s: this Example's Redis is embedded in the test, which a busy machine can starve past the 200 ms default.
		Limiter: redisrate.NewLimiter(rdb, redisrate.WithDecisionTimeout(10*time.Second)),
		Limits:  []redisrate.Limit{redisrate.PerSecond(10).WithName("burst"), redisrate.PerHour(1000).WithName("hourly")},
		Key:     httplimit.APIKey{Header: "X-API-Key", Secret: secret, Verify: keys.Issued},
		Name:    "search",
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
	// 400 {"type":"about:blank","title":"Bad Request","status":400,"detail":"no rate-limit key: no X-Api-Key header"}
}

// Limits by plan (free 10 per second, paid 100 per second) and a bulk
// endpoint that costs 10; the headers follow what was applied. A health
// check is exempt.
func ExampleConfig_plans() {
	rdb, done := exampleRedis()
	defer done()

	limit, err := httplimit.New(httplimit.Config{
		// 10 s: this Example's Redis is embedded in the test, which a busy machine can starve past the 200 ms default.
		Limiter: redisrate.NewLimiter(rdb, redisrate.WithDecisionTimeout(10*time.Second)),
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

// While Redis is down a limited route is served by default (FailOpen):
// an outage of the limiter must not become an outage of the service. The
// response carries no RateLimit header (there is no quota to report), and
// the Limiter says so: in its log line (WithLogger, once per outage) and
// in its metrics (Result.Source fail-open, which otelrate counts). OnError
// is told of what the Limiter does not log itself.
func ExampleConfig_failurePolicy() {
	rdb, done := exampleRedis()
	defer done()
	rdb.Close() // Redis is gone

	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{} // for a stable Output
			}
			return a
		},
	}))
	limit, err := httplimit.New(httplimit.Config{
		// 10 s: this Example's Redis is embedded in the test, which a busy machine can starve past the 200 ms default.
		Limiter: redisrate.NewLimiter(rdb, redisrate.WithDecisionTimeout(10*time.Second), redisrate.WithLogger(logger)),
		Limits:  []redisrate.Limit{redisrate.PerSecond(10)},
		OnError: func(r *http.Request, err error) {
			if !errors.Is(err, redisrate.ErrUnavailable) { // Redis's outages: the Limiter's WithLogger
				logger.Error("rate limit", "path", r.URL.Path, "error", err)
			}
		},
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
	// level=WARN msg="redisrate: Redis cannot decide; calls follow the fallback and the failure policy until it answers again" error="redis: client is closed" cause="redis: client is closed" script=gcra key=default:… policy=fail-open fallback=false probe_every=200ms
	// 200 served RateLimit:
}

// What a request gets when Redis cannot decide: served under the default
// (FailOpen); a limit that must hold through an outage, such as a login
// form's, says FailClosed, and gets 503 with a Retry-After for the outage,
// not the quota.
func ExampleConfig_redisDown() {
	rdb, done := exampleRedis()
	defer done()
	rdb.Close() // Redis is gone

	served := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "served") })
	for _, policy := range []redisrate.FailurePolicy{0, redisrate.FailClosed} {
		limit, err := httplimit.New(httplimit.Config{
			// 10 s: this Example's Redis is embedded in the test, which a busy machine can starve past the 200 ms default.
			Limiter:       redisrate.NewLimiter(rdb, redisrate.WithDecisionTimeout(10*time.Second)),
			Limits:        []redisrate.Limit{redisrate.PerDay(10)},
			FailurePolicy: policy, // 0: the default, FailOpen
		})
		if err != nil {
			log.Fatal(err)
		}
		w := httptest.NewRecorder()
		limit.Handler(served).ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
		fmt.Printf("%v %d Retry-After: %q RateLimit: %q\n", policy, w.Code, w.Header().Get("Retry-After"), w.Header().Get("RateLimit"))
	}
	// Output:
	// default 200 Retry-After: "" RateLimit: ""
	// fail-closed 503 Retry-After: "1" RateLimit: ""
}

// A quota the whole service shares (an upstream's 3 calls a minute, say),
// on top of each client's own limit: every process of the fleet takes the
// quota's units in leases of 2, one round trip per lease, and serves
// requests from them; what a lease does not spend goes back when its
// lifetime ends.
func ExampleConfig_quota() {
	rdb, done := exampleRedis()
	defer done()
	limit, err := httplimit.New(httplimit.Config{
		// 10 s: this Example's Redis is embedded in the test, which a busy machine can starve past the 200 ms default.
		Limiter: redisrate.NewLimiter(rdb, redisrate.WithDecisionTimeout(10*time.Second)),
		Limits:  []redisrate.Limit{redisrate.PerMinute(100)}, // each client's
		Quota:   &ratecore.Quota{Key: "upstream", Limit: redisrate.PerMinute(3), Lease: 2, Lifetime: time.Second},
	})
	if err != nil {
		log.Fatal(err)
	}
	h := limit.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "served") }))
	for _, client := range []string{"192.0.2.1", "192.0.2.2", "192.0.2.3", "192.0.2.4"} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = client + ":1234"
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		fmt.Printf("%s %d Retry-After: %q\n", client, w.Code, w.Header().Get("Retry-After"))
	}
	// Output:
	// 192.0.2.1 200 Retry-After: ""
	// 192.0.2.2 200 Retry-After: ""
	// 192.0.2.3 200 Retry-After: ""
	// 192.0.2.4 429 Retry-After: "20"
}

// A limit rolled out in shadow mode: every request is decided, recorded
// and served; the Limiter's Observer (otelrate) sees which ones it would
// have denied, and clients see no header until it is enforced.
func ExampleConfig_shadow() {
	rdb, done := exampleRedis()
	defer done()
	var wouldDeny int
	limit, err := httplimit.New(httplimit.Config{
		// 10 s: this Example's Redis is embedded in the test, which a busy machine can starve past the 200 ms default.
		Limiter: redisrate.NewLimiter(rdb, redisrate.WithDecisionTimeout(10*time.Second), redisrate.WithObserver(countWouldDeny{&wouldDeny})),
		Limits:  []redisrate.Limit{redisrate.PerMinute(2)},
		Name:    "search",
		Shadow:  true,
	})
	if err != nil {
		log.Fatal(err)
	}
	h := limit.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	for range 3 {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/search", nil))
		fmt.Printf("%d RateLimit: %q\n", w.Code, w.Header().Get("RateLimit"))
	}
	fmt.Println("would have denied:", wouldDeny)
	// Output:
	// 200 RateLimit: ""
	// 200 RateLimit: ""
	// 200 RateLimit: ""
	// would have denied: 1
}

// countWouldDeny is an Observer that counts what shadow mode admitted only
// because of it; otelrate reports it as the outcome would_deny.
type countWouldDeny struct{ n *int }

func (c countWouldDeny) Start(ctx context.Context, _ redisrate.Decision) context.Context { return ctx }
func (c countWouldDeny) End(_ context.Context, _ redisrate.Decision, res redisrate.Result, _ error) {
	if res.WouldDeny {
		*c.n++
	}
}

// A key the service never issued gets 400 and writes nothing to Redis:
// invented keys cannot each buy a quota of their own. An APIKey that
// cannot tell them apart is refused by New (unless it runs after
// authentication: Authenticated).
func ExampleAPIKey() {
	rdb, done := exampleRedis()
	defer done()
	secret := []byte("example secret, 16+ bytes; load yours from a secret store")
	_, err := httplimit.New(httplimit.Config{
		// 10 s: this Example's Redis is embedded in the test, which a busy machine can starve past the 200 ms default.
		Limiter: redisrate.NewLimiter(rdb, redisrate.WithDecisionTimeout(10*time.Second)),
		Limits:  []redisrate.Limit{redisrate.PerHour(2)},
		Key:     httplimit.APIKey{Header: "X-API-Key", Secret: secret},
	})
	fmt.Println(err != nil)

	keys := issued{"k-123": true}
	limit, err := httplimit.New(httplimit.Config{
		// 10 s: this Example's Redis is embedded in the test, which a busy machine can starve past the 200 ms default.
		Limiter: redisrate.NewLimiter(rdb, redisrate.WithDecisionTimeout(10*time.Second)),
		Limits:  []redisrate.Limit{redisrate.PerHour(2)},
		Key:     httplimit.APIKey{Header: "X-API-Key", Secret: secret, Verify: keys.Issued},
	})
	if err != nil {
		log.Fatal(err)
	}
	h := limit.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	for _, key := range []string{"k-123", "invented-1", "invented-2"} {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("X-API-Key", key)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		fmt.Println(key, w.Code)
	}
	fmt.Println(len(rdb.Keys(context.Background(), "*").Val()), "key in Redis")
	// Output:
	// true
	// k-123 200
	// invented-1 400
	// invented-2 400
	// 1 key in Redis
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

// corsPassthrough stands for a CORS middleware that sets its headers and
// passes every request on, preflights too.
func corsPassthrough(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Access-Control-Allow-Origin", "https://app.example")
		if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" { // a preflight
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
	// 10 s: this Example's Redis is embedded in the test, which a busy machine can starve past the 200 ms default.
	limiter := redisrate.NewLimiter(rdb, redisrate.WithDecisionTimeout(10*time.Second))
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
		// 10 s: this Example's Redis is embedded in the test, which a busy machine can starve past the 200 ms default.
		Limiter: redisrate.NewLimiter(rdb, redisrate.WithDecisionTimeout(10*time.Second)),
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
	var names []string
	for name := range w.Header() {
		names = append(names, name)
	}
	slices.Sort(names)
	fmt.Println(names)
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
		// 10 s: this Example's Redis is embedded in the test, which a busy machine can starve past the 200 ms default.
		Limiter: redisrate.NewLimiter(rdb, redisrate.WithDecisionTimeout(10*time.Second)),
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

// Issued reports whether the service issued apiKey: every key is, here.
func (a accounts) Issued(_ context.Context, apiKey string) (bool, error) {
	return strings.HasPrefix(apiKey, "k-"), nil
}

// issued stands for the service's store of the API keys it issued.
type issued map[string]bool

// Issued reports whether the service issued apiKey.
func (s issued) Issued(_ context.Context, apiKey string) (bool, error) { return s[apiKey], nil }

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
	// 10 s: this Example's Redis is embedded in the test, which a busy machine can starve past the 200 ms default.
	limiter := redisrate.NewLimiter(rdb, redisrate.WithDecisionTimeout(10*time.Second))
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
		Key:    httplimit.APIKey{Header: "X-API-Key", Secret: secret, Verify: accounts.Issued},
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

// ClientIP behind a load balancer: only the hop the balancer appended is
// believed.
func ExampleClientIP() {
	keyFunc, err := httplimit.ClientIP{Header: "X-Forwarded-For", TrustedProxies: []string{"10.0.0.1"}}.KeyFunc()
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

// One Middleware for a group of routes that share a quota.
func ExampleMiddleware_Handler() {
	rdb, done := exampleRedis()
	defer done()
	// 10 s: this Example's Redis is embedded in the test, which a busy machine can starve past the 200 ms default.
	limit, err := httplimit.New(httplimit.Config{Limiter: redisrate.NewLimiter(rdb, redisrate.WithDecisionTimeout(10*time.Second)), Limits: []redisrate.Limit{redisrate.PerSecond(1)}})
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
