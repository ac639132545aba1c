package otelrate_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/redisrate/redisrate"
	"github.com/redisrate/redisrate/httplimit"
)

// httpRig is one Limiter, reported by an Observer, shared by middleware.
func httpRig(t *testing.T) (*telemetry, *redisrate.Limiter) {
	t.Helper()
	tel := newTelemetry(t)
	mr := miniredis.RunT(t)
	mr.SetTime(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC))
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	return tel, testLimiter(rdb, redisrate.WithObserver(tel.observer(t)))
}

func handler(t *testing.T, c httplimit.Config) http.Handler {
	t.Helper()
	m, err := httplimit.New(c)
	if err != nil {
		t.Fatal(err)
	}
	return m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
}

func get(h http.Handler, n int) (codes []int) {
	for range n {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
		codes = append(codes, w.Code)
	}
	return codes
}

// Middlewares on one Limiter are series of their own, named by the limit
// that decided (issue 22: /login and /api landed in one series); a plan of
// two limits is counted under the binding one, the first or the second.
func TestMiddlewareSeries(t *testing.T) {
	tel, limiter := httpRig(t)
	get(handler(t, httplimit.Config{Limiter: limiter, Limits: []redisrate.Limit{redisrate.PerMinute(1)}, Name: "login"}), 2)
	get(handler(t, httplimit.Config{Limiter: limiter, Limits: []redisrate.Limit{redisrate.PerSecond(1), redisrate.PerHour(100)}, Name: "api"}), 3)
	get(handler(t, httplimit.Config{Limiter: limiter, Limits: []redisrate.Limit{redisrate.PerHour(100), redisrate.PerSecond(1)}, Name: "bulk"}), 2)
	// A direct call names its limit itself.
	_, _ = limiter.Allow(context.Background(), "export:u1", redisrate.PerHour(10).WithName("export"))

	base := "redisrate.algorithm=gcra,redisrate.kind=allow,"
	wantCounters(t, filter(tel.counters(t), "redisrate.decisions{"), map[string]int64{
		"redisrate.decisions{" + base + "redisrate.limit=login,redisrate.outcome=allowed,redisrate.source=redis}":  1,
		"redisrate.decisions{" + base + "redisrate.limit=login,redisrate.outcome=denied,redisrate.source=redis}":   1,
		"redisrate.decisions{" + base + "redisrate.limit=api-1,redisrate.outcome=allowed,redisrate.source=redis}":  1,
		"redisrate.decisions{" + base + "redisrate.limit=api-1,redisrate.outcome=denied,redisrate.source=redis}":   2,
		"redisrate.decisions{" + base + "redisrate.limit=bulk-2,redisrate.outcome=allowed,redisrate.source=redis}": 1,
		"redisrate.decisions{" + base + "redisrate.limit=bulk-2,redisrate.outcome=denied,redisrate.source=redis}":  1,
		"redisrate.decisions{" + base + "redisrate.limit=export,redisrate.outcome=allowed,redisrate.source=redis}": 1,
	})
	for _, s := range tel.spans.GetSpans() {
		if a := spanAttrs(s.Snapshot()); a["redisrate.limit"] == "" {
			t.Errorf("span %s without redisrate.limit: %v", s.Name, a)
		}
	}
}

// Shadow mode over HTTP: no 429, and the metrics and spans say what would
// have been denied.
func TestShadowMetrics(t *testing.T) {
	tel, limiter := httpRig(t)
	codes := get(handler(t, httplimit.Config{Limiter: limiter, Limits: []redisrate.Limit{redisrate.PerMinute(2)}, Name: "search", Shadow: true}), 5)
	for i, c := range codes {
		if c != 200 {
			t.Errorf("request %d: %d; want 200 in shadow mode", i, c)
		}
	}
	base := "redisrate.algorithm=gcra,redisrate.kind=allow,redisrate.limit=search,"
	wantCounters(t, filter(tel.counters(t), "redisrate.decisions{"), map[string]int64{
		"redisrate.decisions{" + base + "redisrate.outcome=allowed,redisrate.source=redis}":    2,
		"redisrate.decisions{" + base + "redisrate.outcome=would_deny,redisrate.source=redis}": 3,
	})
	var shadow, wouldDeny int
	for _, s := range tel.spans.GetSpans() {
		a := spanAttrs(s.Snapshot())
		if a["redisrate.shadow"] == "true" {
			shadow++
		}
		if a["redisrate.outcome"] == "would_deny" && a["redisrate.retry_after_ms"] != "" {
			wouldDeny++
		}
	}
	if shadow != 5 || wouldDeny != 3 {
		t.Errorf("%d spans in shadow mode, %d would deny with their wait; want 5, 3", shadow, wouldDeny)
	}
}

// filter keeps the counters whose name starts with prefix.
func filter(all map[string]int64, prefix string) map[string]int64 {
	out := map[string]int64{}
	for k, v := range all {
		if len(k) >= len(prefix) && k[:len(prefix)] == prefix {
			out[k] = v
		}
	}
	return out
}
