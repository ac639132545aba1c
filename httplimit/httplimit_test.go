package httplimit

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/redisrate/redisrate"
)

// env is a miniredis on a clock that only moves when the test moves it.
type env struct {
	mr      *miniredis.Miniredis
	rdb     *redis.Client
	limiter *redisrate.Limiter
	now     time.Time
}

func newEnv(t *testing.T) *env {
	t.Helper()
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), Protocol: 2})
	t.Cleanup(func() { _ = rdb.Close() })
	e := &env{mr: mr, rdb: rdb, limiter: redisrate.NewLimiter(rdb), now: time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)}
	mr.SetTime(e.now)
	return e
}

func (e *env) advance(d time.Duration) {
	e.now = e.now.Add(d)
	e.mr.SetTime(e.now)
	e.mr.FastForward(d)
}

// served counts the requests that reach the limited handler.
type served struct{ n int }

func (s *served) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.n++
	_, _ = w.Write([]byte("ok"))
}

func mustNew(t *testing.T, c Config) *Middleware {
	t.Helper()
	m, err := New(c)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return m
}

func do(h http.Handler, remote string, hdr ...string) *httptest.ResponseRecorder {
	r := httptest.NewRequest("GET", "/things", nil)
	if remote != "" {
		r.RemoteAddr = remote
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Add(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func wantHeaders(t *testing.T, w *httptest.ResponseRecorder, want map[string]string) {
	t.Helper()
	for k, v := range want {
		got, ok := w.Header()[http.CanonicalHeaderKey(k)]
		switch {
		case v == "" && ok:
			t.Errorf("%s = %q; want no such header", k, got)
		case v != "" && (len(got) != 1 || got[0] != v):
			t.Errorf("%s = %q; want %q", k, got, v)
		}
	}
}

type problemBody struct {
	Type     string   `json:"type"`
	Title    string   `json:"title"`
	Status   int      `json:"status"`
	Detail   string   `json:"detail"`
	Violated []string `json:"violated-policies"`
}

func readProblem(t *testing.T, w *httptest.ResponseRecorder) problemBody {
	t.Helper()
	if ct := w.Header().Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("Content-Type = %q; want application/problem+json", ct)
	}
	var p problemBody
	if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
		t.Fatalf("body %q is not JSON: %v", w.Body.String(), err)
	}
	if p.Status != w.Code {
		t.Errorf("problem status %d differs from the response's %d", p.Status, w.Code)
	}
	return p
}

func TestHeadersAndDenial(t *testing.T) {
	e := newEnv(t)
	next := &served{}
	h := mustNew(t, Config{Limiter: e.limiter, Limits: []redisrate.Limit{redisrate.PerMinute(3)}}).Handler(next)

	for i, want := range []map[string]string{
		{"RateLimit": `"default";r=2;t=20`, "X-RateLimit-Remaining": "2", "X-RateLimit-Reset": "20"},
		{"RateLimit": `"default";r=1;t=40`, "X-RateLimit-Remaining": "1", "X-RateLimit-Reset": "40"},
		{"RateLimit": `"default";r=0;t=60`, "X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "60"},
	} {
		w := do(h, "192.0.2.1:1234")
		if w.Code != 200 || w.Body.String() != "ok" {
			t.Fatalf("request %d: %d %q; want 200 ok", i, w.Code, w.Body.String())
		}
		want["RateLimit-Policy"] = `"default";q=3;w=60`
		want["X-RateLimit-Limit"] = "3"
		want["Retry-After"] = ""
		wantHeaders(t, w, want)
	}

	w := do(h, "192.0.2.1:1234")
	if w.Code != http.StatusTooManyRequests {
		t.Fatalf("fourth request: %d; want 429", w.Code)
	}
	wantHeaders(t, w, map[string]string{
		"RateLimit-Policy":      `"default";q=3;w=60`,
		"RateLimit":             `"default";r=0;t=20`,
		"X-RateLimit-Limit":     "3",
		"X-RateLimit-Remaining": "0",
		"X-RateLimit-Reset":     "60",
		"Retry-After":           "20",
	})
	p := readProblem(t, w)
	if p.Type != "https://iana.org/assignments/http-problem-types#quota-exceeded" || p.Title != "Quota Exceeded" ||
		len(p.Violated) != 1 || p.Violated[0] != "default" || !strings.Contains(p.Detail, "20 s") {
		t.Errorf("problem = %+v", p)
	}
	if next.n != 3 {
		t.Errorf("handler served %d requests; want 3", next.n)
	}

	// Another client has its own quota.
	if w := do(h, "192.0.2.2:1234"); w.Code != 200 {
		t.Errorf("another client: %d; want 200", w.Code)
	}
	// The turn comes after Retry-After.
	e.advance(20 * time.Second)
	if w := do(h, "192.0.2.1:1234"); w.Code != 200 {
		t.Errorf("after Retry-After: %d; want 200", w.Code)
	}
}

// Sub-second waits round up: Retry-After is never 0 and never early.
func TestRoundingUp(t *testing.T) {
	e := newEnv(t)
	h := mustNew(t, Config{Limiter: e.limiter, Limits: []redisrate.Limit{redisrate.PerSecond(10)}}).Handler(&served{})
	for range 10 {
		do(h, "")
	}
	e.advance(50 * time.Millisecond)
	w := do(h, "")
	if w.Code != 429 {
		t.Fatalf("11th request: %d; want 429", w.Code)
	}
	// RetryAfter is 50ms, ResetAfter 950ms.
	wantHeaders(t, w, map[string]string{"Retry-After": "1", "RateLimit": `"default";r=0;t=1`, "X-RateLimit-Reset": "1"})
}

func TestOmitHeaders(t *testing.T) {
	for _, tc := range []struct {
		omit    Headers
		present []string
		absent  []string
	}{
		{0, []string{"RateLimit", "RateLimit-Policy", "X-RateLimit-Limit", "Retry-After"}, nil},
		{DraftHeaders, []string{"X-RateLimit-Limit", "Retry-After"}, []string{"RateLimit", "RateLimit-Policy"}},
		{LegacyHeaders, []string{"RateLimit", "Retry-After"}, []string{"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"}},
		{RetryAfterHeader, []string{"RateLimit", "X-RateLimit-Limit"}, []string{"Retry-After"}},
		{DraftHeaders | LegacyHeaders | RetryAfterHeader, nil, []string{"RateLimit", "RateLimit-Policy", "X-RateLimit-Reset", "Retry-After"}},
	} {
		e := newEnv(t)
		h := mustNew(t, Config{Limiter: e.limiter, Limits: []redisrate.Limit{redisrate.PerMinute(1)}, Omit: tc.omit}).Handler(&served{})
		do(h, "")
		w := do(h, "")
		if w.Code != 429 {
			t.Fatalf("omit %b: %d; want 429", tc.omit, w.Code)
		}
		for _, k := range tc.present {
			if w.Header().Get(k) == "" {
				t.Errorf("omit %b: %s missing", tc.omit, k)
			}
		}
		for _, k := range tc.absent {
			if v := w.Header().Get(k); v != "" {
				t.Errorf("omit %b: %s = %q; want it switched off", tc.omit, k, v)
			}
		}
	}
}

func TestSeveralLimits(t *testing.T) {
	e := newEnv(t)
	limits := []redisrate.Limit{redisrate.PerSecond(2), redisrate.PerMinute(3)}
	next := &served{}
	h := mustNew(t, Config{Limiter: e.limiter, Limits: limits, Name: "api"}).Handler(next)
	w := do(h, "")
	wantHeaders(t, w, map[string]string{
		"RateLimit-Policy": `"api-1";q=2;w=1, "api-2";q=3;w=60`,
		"RateLimit":        `"api-1";r=1;t=1`, // 1 of 2 left beats 2 of 3
	})
	do(h, "")
	w = do(h, "")
	if w.Code != 429 {
		t.Fatalf("third request in the same instant: %d; want 429", w.Code)
	}
	if p := readProblem(t, w); len(p.Violated) != 1 || p.Violated[0] != "api-1" {
		t.Errorf("violated = %v; want [api-1]", p.Violated)
	}
	e.advance(time.Second)
	if w := do(h, ""); w.Code != 200 {
		t.Fatalf("after a second: %d", w.Code)
	}
	e.advance(time.Second)
	w = do(h, "")
	if w.Code != 429 {
		t.Fatalf("fourth request in a minute: %d; want 429", w.Code)
	}
	wantHeaders(t, w, map[string]string{"RateLimit": `"api-2";r=0;t=18`, "Retry-After": "18", "X-RateLimit-Limit": "3"})
	if next.n != 3 {
		t.Errorf("served %d; want 3", next.n)
	}

	// Names of one's own, quoted as structured-field strings.
	h2 := mustNew(t, Config{Limiter: e.limiter, Limits: limits, Name: "other", PolicyNames: []string{"per \"second\"", `per\minute`}}).Handler(&served{})
	wantHeaders(t, do(h2, ""), map[string]string{"RateLimit-Policy": `"per \"second\"";q=2;w=1, "per\\minute";q=3;w=60`})
}

func TestPolicyWindow(t *testing.T) {
	for _, tc := range []struct {
		limit redisrate.Limit
		want  string
	}{
		{redisrate.PerSecond(10), `"default";q=10;w=1`},
		{redisrate.PerSecond(10).WithBurst(20), `"default";q=20;w=2`},
		{redisrate.Per(5, 250*time.Millisecond), `"default";q=5;w=1`},
		{redisrate.PerHour(7).WithBurst(2.5), `"default";q=2;w=1286`},
		{redisrate.PerSecond(10).WithBurst(25).WithAlgorithm(redisrate.TokenBucket), `"default";q=25;w=3`},
		{redisrate.PerMinute(100).WithAlgorithm(redisrate.SlidingWindow), `"default";q=100;w=60`},
		{redisrate.PerDay(1000).WithAlgorithm(redisrate.FixedWindow), `"default";q=1000;w=86400`},
	} {
		m := mustNew(t, Config{Limiter: redisrate.NewLimiter(nil), Limits: []redisrate.Limit{tc.limit}})
		if m.policy != tc.want {
			t.Errorf("%v: RateLimit-Policy %s; want %s", tc.limit, m.policy, tc.want)
		}
	}
}

func TestNamesKeepStateApart(t *testing.T) {
	e := newEnv(t)
	lim := []redisrate.Limit{redisrate.PerMinute(1)}
	a := mustNew(t, Config{Limiter: e.limiter, Limits: lim, Name: "login"}).Handler(&served{})
	b := mustNew(t, Config{Limiter: e.limiter, Limits: lim, Name: "search"}).Handler(&served{})
	if do(a, "").Code != 200 || do(b, "").Code != 200 {
		t.Fatal("first request of each route denied")
	}
	if do(a, "").Code != 429 {
		t.Error("second login request admitted")
	}
	keys := e.mr.Keys()
	if strings.Join(keys, " ") != "login:ip:192.0.2.1 search:ip:192.0.2.1" {
		t.Errorf("keys = %v", keys)
	}
}

func TestHeaderKey(t *testing.T) {
	e := newEnv(t)
	next := &served{}
	h := mustNew(t, Config{Limiter: e.limiter, Limits: []redisrate.Limit{redisrate.PerMinute(1)}, Key: Header("x-api-key")}).Handler(next)
	if w := do(h, "", "X-API-Key", "secret-1"); w.Code != 200 {
		t.Fatalf("first request: %d", w.Code)
	}
	if w := do(h, "", "X-API-Key", "secret-1"); w.Code != 429 {
		t.Errorf("same key again: %d; want 429", w.Code)
	}
	if w := do(h, "", "X-API-Key", "secret-2"); w.Code != 200 {
		t.Errorf("another key: %d; want 200", w.Code)
	}
	for _, k := range e.mr.Keys() {
		if strings.Contains(k, "secret") {
			t.Errorf("Redis key %q holds the API key in the clear", k)
		}
	}
	for name, hdr := range map[string][]string{
		"missing": nil,
		"empty":   {"X-API-Key", ""},
		"twice":   {"X-API-Key", "secret-3", "X-API-Key", "secret-4"},
	} {
		w := do(h, "", hdr...)
		if w.Code != 400 {
			t.Errorf("%s key: %d; want 400", name, w.Code)
			continue
		}
		if p := readProblem(t, w); !strings.Contains(p.Detail, "X-Api-Key") {
			t.Errorf("%s key: detail %q does not name the header", name, p.Detail)
		}
	}
	if next.n != 2 {
		t.Errorf("served %d; want 2", next.n)
	}
	if _, err := Header(" ")(httptest.NewRequest("GET", "/", nil)); err == nil || errors.Is(err, ErrNoKey) {
		t.Errorf("Header(\" \"): err = %v; want a server-side error", err)
	}
}

func TestCustomKeyAndExemption(t *testing.T) {
	e := newEnv(t)
	next := &served{}
	key := func(r *http.Request) (string, error) {
		if r.URL.Path == "/healthz" {
			return "", nil
		}
		return "tenant:" + r.Header.Get("X-Tenant"), nil
	}
	h := mustNew(t, Config{Limiter: e.limiter, Limits: []redisrate.Limit{redisrate.PerMinute(1)}, Key: key}).Handler(next)
	for range 3 {
		r := httptest.NewRequest("GET", "/healthz", nil)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != 200 || w.Header().Get("RateLimit") != "" {
			t.Fatalf("exempt request: %d, RateLimit %q", w.Code, w.Header().Get("RateLimit"))
		}
	}
	if do(h, "", "X-Tenant", "a").Code != 200 || do(h, "", "X-Tenant", "a").Code != 429 {
		t.Error("tenant a not limited")
	}
	if got := e.mr.Keys(); len(got) != 1 || got[0] != "default:tenant:a" {
		t.Errorf("keys = %v", got)
	}
}

func TestRedisErrors(t *testing.T) {
	lim := []redisrate.Limit{redisrate.PerMinute(10)}

	e := newEnv(t)
	e.mr.SetError("ERR injected failure")
	next := &served{}
	w := do(mustNew(t, Config{Limiter: e.limiter, Limits: lim}).Handler(next), "")
	if w.Code != 503 || next.n != 0 {
		t.Fatalf("fail closed: %d, served %d; want 503, 0", w.Code, next.n)
	}
	if p := readProblem(t, w); strings.Contains(p.Detail, "injected") || p.Title != "Service Unavailable" {
		t.Errorf("503 problem = %+v: must not leak the Redis error", p)
	}
	if w.Header().Get("RateLimit") != "" {
		t.Error("RateLimit header on an undecided request")
	}

	w = do(mustNew(t, Config{Limiter: e.limiter, Limits: lim, OnError: FailOpen}).Handler(next), "")
	if w.Code != 200 || next.n != 1 {
		t.Errorf("fail open: %d, served %d; want 200, 1", w.Code, next.n)
	}
	// Failing open never lets a request without its key through.
	w = do(mustNew(t, Config{Limiter: e.limiter, Limits: lim, OnError: FailOpen, Key: Header("X-API-Key")}).Handler(next), "")
	if w.Code != 400 || next.n != 1 {
		t.Errorf("fail open without a key: %d, served %d; want 400, 1", w.Code, next.n)
	}

	// A handler of one's own sees the Limiter's error.
	var seen error
	logging := func(w http.ResponseWriter, r *http.Request, next http.Handler, err error) {
		seen = err
		FailClosed(w, r, next, err)
	}
	w = do(mustNew(t, Config{Limiter: e.limiter, Limits: lim, OnError: logging}).Handler(next), "")
	var rerr *redisrate.Error
	if w.Code != 503 || !errors.As(seen, &rerr) || !strings.Contains(seen.Error(), "injected failure") {
		t.Errorf("custom OnError: %d, err %v", w.Code, seen)
	}

	// A key function that fails on the server's side is an error like Redis's.
	broken := func(*http.Request) (string, error) { return "", errors.New("tenant lookup failed") }
	w = do(mustNew(t, Config{Limiter: e.limiter, Limits: lim, OnError: logging, Key: broken}).Handler(next), "")
	if w.Code != 503 || seen == nil || seen.Error() != "tenant lookup failed" {
		t.Errorf("failing KeyFunc: %d, err %v; want 503", w.Code, seen)
	}

	// A key holding other data is refused by the script and reported, not overwritten.
	e2 := newEnv(t)
	if err := e2.rdb.Set(context.Background(), "default:ip:192.0.2.1", "order 42", 0).Err(); err != nil {
		t.Fatal(err)
	}
	w = do(mustNew(t, Config{Limiter: e2.limiter, Limits: lim, OnError: logging}).Handler(next), "")
	if w.Code != 503 || !errors.Is(seen, redisrate.ErrForeignKey) {
		t.Errorf("foreign key: %d, err %v", w.Code, seen)
	}
	if v, _ := e2.rdb.Get(context.Background(), "default:ip:192.0.2.1").Result(); v != "order 42" {
		t.Errorf("user's key now %q", v)
	}

	// Redis unreachable: no panic, 503.
	e3 := newEnv(t)
	addr := e3.mr.Addr()
	e3.mr.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	r := httptest.NewRequest("GET", "/", nil).WithContext(ctx)
	rec := httptest.NewRecorder()
	mustNew(t, Config{Limiter: redisrate.NewLimiter(redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 100 * time.Millisecond})), Limits: lim}).Handler(next).ServeHTTP(rec, r)
	if rec.Code != 503 {
		t.Errorf("Redis unreachable: %d; want 503", rec.Code)
	}
}

func TestCustomDenied(t *testing.T) {
	e := newEnv(t)
	var got redisrate.Result
	c := Config{
		Limiter: e.limiter, Limits: []redisrate.Limit{redisrate.PerMinute(1)},
		OnDenied: func(w http.ResponseWriter, r *http.Request, res redisrate.Result) {
			got = res
			http.Error(w, "slow down", http.StatusTooManyRequests)
		},
	}
	h := mustNew(t, c).Handler(&served{})
	do(h, "")
	w := do(h, "")
	if w.Code != 429 || w.Body.String() != "slow down\n" || got.RetryAfter != time.Minute || w.Header().Get("Retry-After") != "60" {
		t.Errorf("custom denial: %d %q, result %v, Retry-After %q", w.Code, w.Body.String(), got, w.Header().Get("Retry-After"))
	}
}

// A denial that waiting cannot help has no Retry-After and no t.
func TestNeverHeaders(t *testing.T) {
	m := mustNew(t, Config{Limiter: redisrate.NewLimiter(nil), Limits: []redisrate.Limit{redisrate.PerSecond(2)}})
	w := httptest.NewRecorder()
	res := redisrate.Result{RetryAfter: redisrate.Never, Capacity: 2, ResetAfter: 500 * time.Millisecond}
	m.setHeaders(w.Header(), res)
	m.deny(w, httptest.NewRequest("GET", "/", nil), res)
	wantHeaders(t, w, map[string]string{"Retry-After": "", "RateLimit": `"default";r=0`, "X-RateLimit-Reset": "1"})
	if p := readProblem(t, w); w.Code != 429 || !strings.Contains(p.Detail, "never") {
		t.Errorf("never: %d %+v", w.Code, p)
	}
}

func TestNewErrors(t *testing.T) {
	l := redisrate.NewLimiter(nil)
	one := []redisrate.Limit{redisrate.PerSecond(1)}
	for _, tc := range []struct {
		c    Config
		want string
	}{
		{Config{Limits: one}, "Limiter is nil"},
		{Config{Limiter: l}, "Limits is empty"},
		{Config{Limiter: l, Limits: []redisrate.Limit{redisrate.PerSecond(0)}}, "invalid"},
		{Config{Limiter: l, Limits: []redisrate.Limit{redisrate.PerSecond(1), redisrate.PerMinute(5).WithAlgorithm(redisrate.FixedWindow)}}, "algorithm"},
		{Config{Limiter: l, Limits: []redisrate.Limit{redisrate.PerSecond(0.5)}}, "capacity below 1"},
		{Config{Limiter: l, Limits: one, Name: "bad\nname"}, "printable ASCII"},
		{Config{Limiter: l, Limits: one, PolicyNames: []string{"a", "b"}}, "2 names for 1 limits"},
		{Config{Limiter: l, Limits: []redisrate.Limit{redisrate.PerSecond(1), redisrate.PerMinute(5)}, PolicyNames: []string{"a", "a"}}, `"a" twice`},
		{Config{Limiter: l, Limits: one, PolicyNames: []string{"é"}}, "printable ASCII"},
	} {
		_, err := New(tc.c)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v) = %v; want an error containing %q", tc.c, err, tc.want)
		}
	}
	if _, err := New(Config{Limiter: l, Limits: []redisrate.Limit{redisrate.PerSecond(0)}}); !errors.Is(err, redisrate.ErrInvalid) {
		t.Errorf("invalid limit: %v does not match ErrInvalid", err)
	}
}
