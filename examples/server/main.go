// Command server is an example HTTP API limited with redisrate's httplimit
// middleware.
//
//	REDIS_ADDR=localhost:6379 RATE_KEY_SECRET=$(openssl rand -hex 32) \
//	PAID_API_KEYS=paid-key-1 go run ./examples/server -listen 127.0.0.1:8080
//
// Routes:
//
//	GET  /hello        per client IP: 5 per second, in bursts of up to 10
//	GET  /api/search   per API key (X-API-Key), by plan: free 10 per second
//	                   and 1000 per hour, paid 100 per second and 100000 per hour
//	POST /api/bulk     the same quota; each request costs 10
//	GET  /healthz      exempt: never limited, never counted
//
// API keys reach Redis only as an HMAC under RATE_KEY_SECRET (without it, a
// random secret is drawn at start: limits then restart with the process).
// Keys listed in PAID_API_KEYS (comma-separated) are on the paid plan.
//
// Behind a reverse proxy that appends to X-Forwarded-For, pass its
// addresses with -trusted-proxies 10.0.0.0/8,192.0.2.7; without it the
// header is ignored, as a client could forge it.
package main

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redisrate/redisrate"
	"github.com/redisrate/redisrate/httplimit"
	"github.com/redisrate/redisrate/ratecore"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:8080", "address to listen on")
	proxies := flag.String("trusted-proxies", "", "comma-separated addresses or CIDR prefixes of reverse proxies that append to X-Forwarded-For")
	flag.Parse()

	redisAddr := os.Getenv("REDIS_ADDR")
	if redisAddr == "" {
		redisAddr = "localhost:6379"
	}
	rdb := redis.NewClient(redisOptions(redisAddr))
	defer rdb.Close()

	secret := []byte(os.Getenv("RATE_KEY_SECRET"))
	if len(secret) == 0 {
		secret = make([]byte, 32)
		_, _ = rand.Read(secret)
		log.Printf("RATE_KEY_SECRET is not set: using a random secret, so API-key limits restart with the process")
	}
	c := config{Secret: secret, Logger: slog.New(slog.NewTextHandler(os.Stderr, nil))}
	if *proxies != "" {
		c.TrustedProxies = strings.Split(*proxies, ",")
	}
	if keys := os.Getenv("PAID_API_KEYS"); keys != "" {
		c.PaidKeys = strings.Split(keys, ",")
	}
	// Before serving: a peek runs the limiter's script and takes nothing. A
	// deployment Redis refuses (a wrong password, an ACL without the script
	// commands, no scripting) stops the server here, not at the first
	// request; a Redis that is down only warns: the routes serve without
	// limits meanwhile (the middleware's default, FailOpen).
	probe := redisrate.NewLimiter(rdb, redisrate.WithKeyPrefix("redisrate:"))
	_, err := probe.Decide(context.Background(), redisrate.Request{Kind: redisrate.KindPeek, Key: "start-up", Limits: []redisrate.Limit{redisrate.PerSecond(1)}})
	switch {
	case errors.Is(err, redisrate.ErrUnavailable):
		log.Printf("Redis at %s cannot decide yet: %v", redisAddr, err)
	case err != nil:
		log.Fatalf("Redis at %s refuses the rate limiter: %v", redisAddr, err)
	}
	h, err := newHandler(rdb, c)
	if err != nil {
		log.Fatal(err)
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("listening on http://%s, Redis at %s", ln.Addr(), redisAddr)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := serve(ctx, ln, h); err != nil {
		log.Fatal(err)
	}
}

// redisOptions are the go-redis settings recommended for a rate limiter:
// a decision is on every request's path, so a slow or absent Redis must
// cost milliseconds, not the default seconds, before the failure handling
// (here: 503 with Retry-After) answers.
func redisOptions(addr string) *redis.Options {
	return &redis.Options{
		Addr: addr,
		// Honour each request's context deadline and cancellation: a client
		// that hangs up stops waiting for Redis.
		ContextTimeoutEnabled: true,
		// One retry at most: a retried decision doubles the wait, and
		// scripts are safe to retry only because a failed one wrote nothing.
		MaxRetries: 1,
		// Short timeouts: a decision takes well under a millisecond when
		// Redis is healthy.
		DialTimeout:  250 * time.Millisecond,
		ReadTimeout:  100 * time.Millisecond,
		WriteTimeout: 100 * time.Millisecond,
		PoolTimeout:  200 * time.Millisecond,
	}
}

// config is what newHandler needs besides Redis.
type config struct {
	TrustedProxies []string // reverse proxies that append to X-Forwarded-For
	Secret         []byte   // keys the HMAC of API keys
	PaidKeys       []string // API keys on the paid plan
	Logger         *slog.Logger
}

// newHandler builds the API: its routes and their limits.
func newHandler(rdb redis.Scripter, c config) (http.Handler, error) {
	// The Limiter logs Redis failures once per burst (the first failure,
	// then the recovery with how many decisions were degraded), never once
	// per request. Its circuit breaker, on by default, answers at once while
	// Redis is down and probes it in the background.
	limiter := redisrate.NewLimiter(rdb, redisrate.WithKeyPrefix("redisrate:"), redisrate.WithLogger(c.Logger))

	ip := httplimit.ClientIP{}
	if len(c.TrustedProxies) > 0 {
		ip = httplimit.ClientIP{Header: "X-Forwarded-For", TrustedProxies: c.TrustedProxies}
	}
	hello, err := httplimit.New(httplimit.Config{
		Limiter: limiter,
		Limits:  []redisrate.Limit{redisrate.PerSecond(5).WithBurst(10)},
		Key:     ip,
		Name:    "hello",
	})
	if err != nil {
		return nil, err
	}

	paid := map[string]bool{}
	for _, k := range c.PaidKeys {
		paid[strings.TrimSpace(k)] = true
	}
	api, err := httplimit.New(httplimit.Config{
		Limiter: limiter,
		Name:    "api",
		Plans: []httplimit.Plan{
			{Name: "free", Limits: []redisrate.Limit{redisrate.PerSecond(10).WithName("free-burst"), redisrate.PerHour(1000).WithName("free-hourly")}},
			{Name: "paid", Limits: []redisrate.Limit{redisrate.PerSecond(100).WithName("paid-burst"), redisrate.PerHour(100000).WithName("paid-hourly")}},
		},
		// In a real API: the plan of the account the key belongs to.
		Plan: func(r *http.Request) (string, error) {
			if paid[r.Header.Get("X-API-Key")] {
				return "paid", nil
			}
			return "free", nil
		},
		Cost: func(r *http.Request) (int64, error) {
			if r.URL.Path == "/api/bulk" {
				return 10, nil
			}
			return 1, nil
		},
		// This demo keeps no key store: any key is a free account's, as if
		// an authentication layer in front had vouched for it. A real
		// service gives Verify (a lookup of the keys it issued) instead,
		// so that invented keys buy no quota of their own.
		Key: httplimit.APIKey{Header: "X-API-Key", Secret: c.Secret, Authenticated: true},
		// The health check is exempt by an explicit choice: not counted,
		// and no API key needed.
		Exempt: func(r *http.Request) bool { return r.URL.Path == "/healthz" },
		// Redis being down is logged by the Limiter; log what else goes
		// wrong (a bug: a key holding other data). The middleware answers.
		OnError: func(r *http.Request, err error) {
			if !errors.Is(err, ratecore.ErrNoKey) && !errors.Is(err, redisrate.ErrUnavailable) && c.Logger != nil {
				c.Logger.Error("rate limit not decided", "method", r.Method, "path", r.URL.Path, "err", err)
			}
		},
	})
	if err != nil {
		return nil, err
	}

	mux := http.NewServeMux()
	mux.Handle("GET /hello", hello.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "hello")
	})))
	apiMux := http.NewServeMux()
	apiMux.HandleFunc("GET /api/search", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, "{\"query\":%q,\"results\":[]}\n", r.URL.Query().Get("q"))
	})
	apiMux.HandleFunc("POST /api/bulk", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintln(w, `{"accepted":true}`)
	})
	apiMux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.Handle("/", api.Handler(apiMux))
	return mux, nil
}

// serve serves h on ln until ctx is done, then shuts down gracefully.
func serve(ctx context.Context, ln net.Listener, h http.Handler) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan error, 1)
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		done <- srv.Shutdown(shutdown)
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return <-done
}
