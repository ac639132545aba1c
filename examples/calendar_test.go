package examples

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/redisrate/redisrate"
	"github.com/redisrate/redisrate/httplimit"
)

var calendarLineRE = regexp.MustCompile(`^key=(\S+) period_ms=(\d+) allowed=([01]) remaining=(\d+) retry_after_ms=(\d+)$`)

// TestCalendarSnippet runs examples/python/calendarquota.py against a real
// Redis after the Go client took one unit of the same calendar quota (3 a
// day, midnight Pacific time): the snippet names the key the Go client
// wrote, sends the period the Go client sent (the key's TTL), sees the
// Go client's unit, and waits as long as the Go client does, to the next
// midnight. docs/other-languages.md shows it verbatim.
func TestCalendarSnippet(t *testing.T) {
	s := snippets(t)[1] // python
	s.need(t)
	addr := startRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := context.Background()
	l := redisrate.NewLimiter(rdb, redisrate.WithDecisionTimeout(time.Minute)) // a busy machine may keep redis-server from answering within 200 ms
	lim := redisrate.Limit{Algorithm: redisrate.FixedWindow, Rate: 3, Calendar: "day America/Los_Angeles"}
	if res, err := l.Allow(ctx, "cal:test", lim); err != nil || !res.Allowed {
		t.Fatalf("the Go client: %+v, %v", res, err)
	}
	keys, err := rdb.Keys(ctx, "cal:test:*").Result()
	if err != nil || len(keys) != 1 {
		t.Fatalf("the Go client's keys: %v, %v", keys, err)
	}
	ttl, err := rdb.PTTL(ctx, keys[0]).Result()
	if err != nil {
		t.Fatal(err)
	}
	out, err := runSnippet(addr, s.runIn("python/calendarquota.py"), "RATE_KEY=cal:test")
	if err != nil {
		t.Fatalf("calendarquota.py: %v\n%s", err, out)
	}
	goRes, err := l.Allow(ctx, "cal:test", lim)
	if err != nil || goRes.Allowed {
		t.Fatalf("the Go client after the snippet: %+v, %v", goRes, err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	want := []struct{ allowed, remaining string }{{"1", "1"}, {"1", "0"}, {"0", "0"}, {"0", "0"}}
	if len(lines) != len(want) {
		t.Fatalf("calendarquota.py printed:\n%s", out)
	}
	for i, line := range lines {
		m := calendarLineRE.FindStringSubmatch(line)
		if m == nil || m[1] != keys[0] || m[3] != want[i].allowed || m[4] != want[i].remaining {
			t.Fatalf("line %d %q; want key %s, allowed=%s remaining=%s", i+1, line, keys[0], want[i].allowed, want[i].remaining)
		}
		period, _ := strconv.ParseInt(m[2], 10, 64)
		if p := time.Duration(period) * time.Millisecond; ttl > p || ttl < p-10*time.Second {
			t.Errorf("line %d: period_ms %d, but the Go client's key expires in %v: not the period it sent", i+1, period, ttl)
		}
		retry, _ := strconv.ParseInt(m[5], 10, 64)
		if d := time.Duration(retry)*time.Millisecond - goRes.RetryAfter; m[3] == "0" && (d < 0 || d > 10*time.Second) {
			t.Errorf("line %d: retry_after_ms %d; the Go client, later, waits %v", i+1, retry, goRes.RetryAfter)
		}
	}
	doc, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("python/calendarquota.py")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), "```python\n"+string(src)+"```\n") {
		t.Errorf("%s lacks examples/python/calendarquota.py verbatim", docPath)
	}
}

// runIn is s's command on another file of its language.
func (s snippet) runIn(file string) []string {
	return append(append([]string(nil), s.run[:len(s.run)-1]...), file)
}

// The HTTP middleware takes a calendar limit as any other: its policy is
// the quota per day, and a 429's Retry-After runs to midnight in the
// limit's zone, when the next day's key starts.
func TestCalendarMiddleware(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	lim := redisrate.Limit{Algorithm: redisrate.FixedWindow, Rate: 2, Calendar: "day America/Los_Angeles"}
	// A minute, not 200 ms: this miniredis shares the test's CPU, and a busy
	// machine's late answer would be admitted by the middleware's policy.
	limiter := redisrate.NewLimiter(rdb, redisrate.WithDecisionTimeout(time.Minute))
	m, err := httplimit.New(httplimit.Config{Limiter: limiter, Limits: []redisrate.Limit{lim},
		Key: httplimit.KeyFunc(func(*http.Request) (string, error) { return "u", nil }), Name: "daily"})
	if err != nil {
		t.Fatal(err)
	}
	h := m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	la, err := time.LoadLocation("America/Los_Angeles")
	if err != nil {
		t.Fatal(err)
	}
	var w *httptest.ResponseRecorder
	before := time.Now()
	for range 3 {
		w = httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
	}
	after := time.Now()
	y, mo, d := after.In(la).Date()
	midnight := time.Date(y, mo, d+1, 0, 0, 0, 0, la)
	retry, _ := strconv.ParseInt(w.Header().Get("Retry-After"), 10, 64)
	if w.Code != http.StatusTooManyRequests || retry < int64(midnight.Sub(after)/time.Second) || retry > int64(midnight.Sub(before)/time.Second)+1 {
		t.Errorf("the third request: %d, Retry-After %d s; want 429 and the seconds to midnight in Los Angeles, %v", w.Code, retry, midnight.Sub(after))
	}
	if p := w.Header().Get("RateLimit-Policy"); p != `"daily";q=2;w=86400` {
		t.Errorf("RateLimit-Policy %q", p)
	}
	if keys := mr.Keys(); len(keys) != 1 || keys[0] != "daily:u:"+after.In(la).Format("2006-01-02") {
		t.Errorf("keys %v", keys)
	}
}
