package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// TestServerEndToEnd starts the example server on 127.0.0.1, backed by
// miniredis on a fixed clock, and drives it over TCP with a real client.
func TestServerEndToEnd(t *testing.T) {
	mr := miniredis.RunT(t)
	mr.SetTime(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC))
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), MaxRetries: -1})
	var logs syncBuffer
	t.Cleanup(func() { _ = rdb.Close() })

	// The test's client connects from 127.0.0.1: trusting it as a proxy
	// lets the test play clients behind a load balancer.
	h, err := newHandler(rdb, config{
		TrustedProxies: []string{"127.0.0.1"},
		Secret:         []byte("test secret of at least 16 bytes"),
		PaidKeys:       []string{"paid-1"},
		Logger:         slog.New(slog.NewTextHandler(&logs, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- serve(ctx, ln, h) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	base := "http://" + ln.Addr().String()
	client := &http.Client{Timeout: 5 * time.Second}

	get := func(path string, hdr ...string) (*http.Response, string) {
		t.Helper()
		method := "GET"
		if strings.HasPrefix(path, "/api/bulk") {
			method = "POST"
		}
		req, err := http.NewRequest(method, base+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Add(hdr[i], hdr[i+1])
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, string(body)
	}

	// Health checks are exempt: not limited, no API key needed.
	for range 20 {
		if resp, _ := get("/healthz"); resp.StatusCode != 200 || resp.Header.Get("RateLimit") != "" {
			t.Fatalf("/healthz: %d, RateLimit %q", resp.StatusCode, resp.Header.Get("RateLimit"))
		}
	}
	if keys := mr.Keys(); len(keys) != 0 {
		t.Errorf("health checks were counted: %v", keys)
	}

	// /hello: a burst of 10 per client, then 429.
	for i := range 10 {
		resp, body := get("/hello", "X-Forwarded-For", "203.0.113.1")
		if resp.StatusCode != 200 || body != "hello\n" {
			t.Fatalf("/hello #%d: %d %q", i, resp.StatusCode, body)
		}
		if got := resp.Header.Get("X-RateLimit-Remaining"); got != strconv.Itoa(9-i) {
			t.Errorf("/hello #%d: X-RateLimit-Remaining %s; want %d", i, got, 9-i)
		}
	}
	resp, body := get("/hello", "X-Forwarded-For", "203.0.113.1")
	if resp.StatusCode != 429 {
		t.Fatalf("11th /hello: %d; want 429", resp.StatusCode)
	}
	for k, want := range map[string]string{
		"Content-Type":      "application/problem+json",
		"Retry-After":       "1",
		"RateLimit-Policy":  `"hello";q=10;w=2`,
		"RateLimit":         `"hello";r=0;t=1`, // one more unit in 200 ms
		"X-RateLimit-Limit": "10",
		"X-RateLimit-Reset": "2",
	} {
		if got := resp.Header.Get(k); got != want {
			t.Errorf("429 %s = %q; want %q", k, got, want)
		}
	}
	var p struct {
		Type     string   `json:"type"`
		Status   int      `json:"status"`
		Violated []string `json:"violated-policies"`
	}
	if err := json.Unmarshal([]byte(body), &p); err != nil || p.Status != 429 || len(p.Violated) != 1 || p.Violated[0] != "hello" {
		t.Errorf("429 body %q: %+v, %v", body, p, err)
	}

	// A spoofed entry to the left of the proxy's is ignored: same client.
	if resp, _ := get("/hello", "X-Forwarded-For", "198.51.100.1, 203.0.113.1"); resp.StatusCode != 429 {
		t.Errorf("spoofed X-Forwarded-For got through: %d", resp.StatusCode)
	}
	// Another client has its own quota.
	if resp, _ := get("/hello", "X-Forwarded-For", "203.0.113.2"); resp.StatusCode != 200 {
		t.Errorf("another client: %d; want 200", resp.StatusCode)
	}

	// /api/search: by API key, by plan, two limits each.
	if resp, body := get("/api/search?q=x"); resp.StatusCode != 400 {
		t.Errorf("/api/search without a key: %d %s; want 400", resp.StatusCode, body)
	}
	for i := range 10 {
		if resp, _ := get("/api/search?q=x", "X-API-Key", "key-1"); resp.StatusCode != 200 {
			t.Fatalf("/api/search #%d: %d", i, resp.StatusCode)
		}
	}
	resp, _ = get("/api/search?q=x", "X-API-Key", "key-1")
	if resp.StatusCode != 429 || resp.Header.Get("RateLimit") != `"free-burst";r=0;t=1` ||
		resp.Header.Get("RateLimit-Policy") != `"free-burst";q=10;w=1, "free-hourly";q=1000;w=3600` {
		t.Errorf("11th search: %d, RateLimit %q, policy %q", resp.StatusCode, resp.Header.Get("RateLimit"), resp.Header.Get("RateLimit-Policy"))
	}
	// A paid key: its plan's limits, in the headers too.
	resp, _ = get("/api/search?q=x", "X-API-Key", "paid-1")
	if resp.StatusCode != 200 || resp.Header.Get("RateLimit") != `"paid-burst";r=99;t=1` ||
		resp.Header.Get("RateLimit-Policy") != `"paid-burst";q=100;w=1, "paid-hourly";q=100000;w=3600` {
		t.Errorf("paid search: %d, RateLimit %q, policy %q", resp.StatusCode, resp.Header.Get("RateLimit"), resp.Header.Get("RateLimit-Policy"))
	}
	// The bulk endpoint costs 10: the paid key has 89 left after it; a
	// free key's whole second.
	resp, _ = get("/api/bulk", "X-API-Key", "paid-1")
	if resp.StatusCode != 200 || resp.Header.Get("X-RateLimit-Remaining") != "89" {
		t.Errorf("paid bulk: %d, remaining %q; want 200, 89", resp.StatusCode, resp.Header.Get("X-RateLimit-Remaining"))
	}
	if resp, _ := get("/api/bulk", "X-API-Key", "key-2"); resp.StatusCode != 200 || resp.Header.Get("X-RateLimit-Remaining") != "0" {
		t.Errorf("free bulk: %d, remaining %q; want 200, 0", resp.StatusCode, resp.Header.Get("X-RateLimit-Remaining"))
	}
	if resp, _ := get("/api/bulk", "X-API-Key", "key-2"); resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "1" {
		t.Errorf("second free bulk: %d, Retry-After %q; want 429, 1", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	// API keys are in Redis only as HMACs.
	for _, k := range mr.Keys() {
		if strings.Contains(k, "key-1") || strings.Contains(k, "paid-1") {
			t.Errorf("Redis key %q holds an API key", k)
		}
	}

	// Time passes (on Redis's clock): the client is admitted again.
	mr.SetTime(time.Date(2026, 11, 22, 12, 0, 1, 0, time.UTC))
	if resp, _ := get("/hello", "X-Forwarded-For", "203.0.113.1"); resp.StatusCode != 200 {
		t.Errorf("/hello a second later: %d; want 200", resp.StatusCode)
	}

	// Redis fails: the server keeps serving under the middleware's default
	// (FailOpen), without quota headers, and keeps serving health checks.
	mr.SetError("ERR injected failure")
	if resp, _ := get("/hello", "X-Forwarded-For", "203.0.113.3"); resp.StatusCode != 200 || resp.Header.Get("Retry-After") != "" || resp.Header.Get("RateLimit") != "" {
		t.Errorf("/hello with Redis failing: %d, Retry-After %q, RateLimit %q; want 200, none, none", resp.StatusCode, resp.Header.Get("Retry-After"), resp.Header.Get("RateLimit"))
	}
	if resp, _ := get("/healthz"); resp.StatusCode != 200 {
		t.Errorf("/healthz with Redis failing: %d", resp.StatusCode)
	}
	mr.SetError("")
	// Back: the Limiter's circuit breaker probes Redis in the background
	// (every 200 ms, on its own clock) and closes at its first answer.
	var code int
	for range 100 {
		resp, _ := get("/hello", "X-Forwarded-For", "203.0.113.3")
		if code = resp.StatusCode; code != 503 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if code != 200 {
		t.Errorf("/hello with Redis back: %d; want 200", code)
	}
	// The Limiter logged the outage once, not once per request.
	if n := strings.Count(logs.String(), "level=WARN"); n != 1 {
		t.Errorf("%d warnings logged; want 1:\n%s", n, logs.String())
	}
}

// The go-redis settings the example recommends: deadlines honoured, one
// retry, timeouts in milliseconds.
func TestRedisOptions(t *testing.T) {
	o := redisOptions("localhost:6379")
	if !o.ContextTimeoutEnabled || o.MaxRetries != 1 || o.ReadTimeout > 200*time.Millisecond ||
		o.WriteTimeout > 200*time.Millisecond || o.DialTimeout > time.Second || o.PoolTimeout > time.Second {
		t.Errorf("redisOptions = %+v", o)
	}
}

// syncBuffer is a bytes.Buffer for a logger used from several goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
