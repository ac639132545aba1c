// Command server is an example HTTP API limited with redisrate's httplimit
// middleware.
//
//	REDIS_ADDR=localhost:6379 go run ./examples/server -listen 127.0.0.1:8080
//
// Routes:
//
//	GET /hello        per client IP: 5 per second, in bursts of up to 10
//	GET /api/search   per API key (X-API-Key): 10 per second and 1000 per hour
//	GET /healthz      not limited
//
// Behind a reverse proxy that appends to X-Forwarded-For, pass its
// addresses with -trusted-proxies 10.0.0.0/8,192.0.2.7; without it the
// header is ignored, as a client could forge it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
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
)

func main() {
	listen := flag.String("listen", "127.0.0.1:8080", "address to listen on")
	proxies := flag.String("trusted-proxies", "", "comma-separated addresses or CIDR prefixes of reverse proxies that append to X-Forwarded-For")
	flag.Parse()

	redisAddr := os.Getenv("REDIS_ADDR")
	if redisAddr == "" {
		redisAddr = "localhost:6379"
	}
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()

	var trusted []string
	if *proxies != "" {
		trusted = strings.Split(*proxies, ",")
	}
	h, err := newHandler(rdb, trusted)
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

// newHandler builds the API: its routes and their limits.
func newHandler(rdb redisrate.Client, trustedProxies []string) (http.Handler, error) {
	limiter := redisrate.NewLimiter(rdb, redisrate.WithKeyPrefix("rate:"))

	ip := httplimit.ClientIP{}
	if len(trustedProxies) > 0 {
		ip = httplimit.ClientIP{Header: "X-Forwarded-For", TrustedProxies: trustedProxies}
	}
	byIP, err := ip.KeyFunc()
	if err != nil {
		return nil, err
	}
	hello, err := httplimit.New(httplimit.Config{
		Limiter: limiter,
		Limits:  []redisrate.Limit{redisrate.PerSecond(5).WithBurst(10)},
		Key:     byIP,
		Name:    "hello",
	})
	if err != nil {
		return nil, err
	}
	search, err := httplimit.New(httplimit.Config{
		Limiter:     limiter,
		Limits:      []redisrate.Limit{redisrate.PerSecond(10), redisrate.PerHour(1000)},
		Key:         httplimit.Header("X-API-Key"),
		Name:        "search",
		PolicyNames: []string{"search-burst", "search-hourly"},
		OnError: func(w http.ResponseWriter, r *http.Request, next http.Handler, err error) {
			log.Printf("rate limiter: %s %s: %v", r.Method, r.URL.Path, err)
			httplimit.FailClosed(w, r, next, err)
		},
	})
	if err != nil {
		return nil, err
	}

	mux := http.NewServeMux()
	mux.Handle("GET /hello", hello.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "hello")
	})))
	mux.Handle("GET /api/search", search.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, "{\"query\":%q,\"results\":[]}\n", r.URL.Query().Get("q"))
	})))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "ok")
	})
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
