package httplimit

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/redisrate/redisrate"
	"github.com/redisrate/redisrate/ratecore"
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
	e := &env{mr: mr, rdb: rdb, limiter: testLimiter(rdb), now: time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)}
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

var secret = []byte("0123456789abcdef-test-secret")

func TestHeadersAndDenial(t *testing.T) {
	e := newEnv(t)
	next := &served{}
	h := mustNew(t, Config{Limiter: e.limiter, Limits: []redisrate.Limit{redisrate.PerMinute(3)}}).Handler(next)

	// t is the time until more quota comes (one unit every 20 s), not the
	// time until full, which X-RateLimit-Reset keeps.
	for i, want := range []map[string]string{
		{"RateLimit": `"default";r=2;t=20`, "X-RateLimit-Remaining": "2", "X-RateLimit-Reset": "20"},
		{"RateLimit": `"default";r=1;t=20`, "X-RateLimit-Remaining": "1", "X-RateLimit-Reset": "40"},
		{"RateLimit": `"default";r=0;t=20`, "X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "60"},
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

// A limit over a sub-second period keeps q/w its rate: 10 per 100 ms is
// 100 per second, not 10.
func TestSubSecondPeriod(t *testing.T) {
	e := newEnv(t)
	h := mustNew(t, Config{Limiter: e.limiter, Limits: []redisrate.Limit{redisrate.Per(10, 100*time.Millisecond)}}).Handler(&served{})
	w := do(h, "")
	wantHeaders(t, w, map[string]string{
		"RateLimit-Policy":  `"default";q=100;w=1`,
		"RateLimit":         `"default";r=9;t=1`,
		"X-RateLimit-Limit": "10",
	})
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
	named := []redisrate.Limit{limits[0].WithName(`per "second"`), limits[1].WithName(`per\minute`)}
	h2 := mustNew(t, Config{Limiter: e.limiter, Limits: named, Name: "other"}).Handler(&served{})
	wantHeaders(t, do(h2, ""), map[string]string{"RateLimit-Policy": `"per \"second\"";q=2;w=1, "per\\minute";q=3;w=60`})
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

// Name "api" with plan "free" and Name "api:free" both keyed a client as
// api:free:ip:..., and the second Middleware's first request got 429. A
// name with ':' is now refused by New; names without one never share keys.
func TestNamesCannotShareKeys(t *testing.T) {
	e := newEnv(t)
	one := []redisrate.Limit{redisrate.PerMinute(1)}
	free := func(*http.Request) (string, error) { return "free", nil }
	planned := mustNew(t, Config{Limiter: e.limiter, Name: "api", Plans: []Plan{{Name: "free", Limits: one}}, Plan: free}).Handler(&served{})
	for _, c := range []struct {
		c    Config
		want string
	}{
		{Config{Limiter: e.limiter, Name: "api:free", Limits: one}, `invalid Config.Name "api:free": ':' separates`},
		{Config{Limiter: e.limiter, Name: "api", Plans: []Plan{{Name: "x", Limits: one}, {Name: "free:ip", Limits: one}}, Plan: free}, `Config.Plans[1] ("free:ip"): ':' separates`},
		{Config{Limiter: e.limiter, Name: ":", Limits: one}, `invalid Config.Name ":"`},
	} {
		if _, err := New(c.c); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New(Name %q, plans %v): %v; want an error containing %q", c.c.Name, c.c.Plans, err, c.want)
		}
	}
	// The names that can be given keep apart.
	other := mustNew(t, Config{Limiter: e.limiter, Name: "api-free", Limits: one}).Handler(&served{})
	if a, b := do(planned, "").Code, do(planned, "").Code; a != 200 || b != 429 {
		t.Fatalf("api, plan free: %d then %d; want 200 then 429", a, b)
	}
	if c := do(other, "").Code; c != 200 {
		t.Errorf("api-free after api/free was exhausted: %d; want 200 (keys %v)", c, e.mr.Keys())
	}
}

// issued is the Verify of the tests' API keys: the service issued every
// key that starts with "k".
func issued(_ context.Context, key string) (bool, error) { return strings.HasPrefix(key, "k"), nil }

func TestAPIKey(t *testing.T) {
	e := newEnv(t)
	next := &served{}
	h := mustNew(t, Config{Limiter: e.limiter, Limits: []redisrate.Limit{redisrate.PerMinute(1)}, Key: APIKey{Header: "x-api-key", Secret: secret, Verify: issued}}).Handler(next)
	if w := do(h, "", "X-API-Key", "k1"); w.Code != 200 {
		t.Fatalf("first request: %d", w.Code)
	}
	if w := do(h, "", "X-API-Key", "k1"); w.Code != 429 {
		t.Errorf("same key again: %d; want 429", w.Code)
	}
	if w := do(h, "", "X-API-Key", "k2"); w.Code != 200 {
		t.Errorf("another key: %d; want 200", w.Code)
	}
	// The Redis key is the HMAC of the API key under the secret: not the
	// key, and not its plain SHA-256, which a short key could be found from.
	plain := sha256.Sum256([]byte("k1"))
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte("k1"))
	want := "default:key:" + hex.EncodeToString(mac.Sum(nil)[:16])
	keys := e.mr.Keys()
	if !slices.Contains(keys, want) {
		t.Errorf("keys %v; want %s among them", keys, want)
	}
	for _, k := range keys {
		if strings.Contains(k, "k1") || strings.Contains(k, hex.EncodeToString(plain[:16])) {
			t.Errorf("Redis key %q reveals the API key", k)
		}
	}
	// Another secret, other keys.
	f1, _ := APIKey{Header: "X-API-Key", Secret: secret, Verify: issued}.KeyFunc()
	f2, _ := APIKey{Header: "X-API-Key", Secret: []byte("another secret of 16+ bytes"), Authenticated: true}.KeyFunc()
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("X-API-Key", "k1")
	k1, _ := f1(r)
	k2, _ := f2(r)
	if k1 == k2 || !strings.HasPrefix(k1, "key:") || len(k1) != 4+32 {
		t.Errorf("keys under two secrets: %q, %q", k1, k2)
	}

	for name, hdr := range map[string][]string{
		"missing": nil,
		"empty":   {"X-API-Key", ""},
		"twice":   {"X-API-Key", "k3", "X-API-Key", "k4"},
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
}

// Exemption is explicit; an empty key is the client's missing identity,
// refused, never a way around the limit.
func TestExemptAndEmptyKey(t *testing.T) {
	e := newEnv(t)
	next := &served{}
	key := KeyFunc(func(r *http.Request) (string, error) { return r.Header.Get("X-User"), nil })
	h := mustNew(t, Config{
		Limiter: e.limiter, Limits: []redisrate.Limit{redisrate.PerMinute(1)}, Key: key,
		Exempt: func(r *http.Request) bool { return r.URL.Path == "/healthz" },
	}).Handler(next)
	for range 3 {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/healthz", nil))
		if w.Code != 200 || w.Header().Get("RateLimit") != "" || w.Header().Get("RateLimit-Policy") != "" {
			t.Fatalf("exempt request: %d, headers %v", w.Code, w.Header())
		}
	}
	// 20 requests without X-User: none gets through.
	for i := range 20 {
		w := do(h, "")
		if w.Code != 400 {
			t.Fatalf("request %d without a key: %d; want 400", i, w.Code)
		}
		if i == 0 {
			if p := readProblem(t, w); !strings.Contains(p.Detail, "empty") {
				t.Errorf("detail %q", p.Detail)
			}
		}
	}
	if do(h, "", "X-User", "a").Code != 200 || do(h, "", "X-User", "a").Code != 429 {
		t.Error("user a not limited")
	}
	if next.n != 4 {
		t.Errorf("served %d; want 4 (3 health checks, 1 of user a)", next.n)
	}
	if got := e.mr.Keys(); len(got) != 1 || got[0] != "default:a" {
		t.Errorf("keys = %v", got)
	}
}

// Any client can send Access-Control-Request-Method: 50 "preflights" to a
// limit of 2 per minute ran the handler 50 times. Preflights are now
// counted by default; with ExemptPreflight they are answered here, 204
// with the headers a CORS middleware in front set, uncounted, and never
// reach the handler.
func TestPreflight(t *testing.T) {
	e := newEnv(t)
	preflight := func(h http.Handler) *httptest.ResponseRecorder {
		r := httptest.NewRequest("OPTIONS", "/expensive", nil)
		r.Header.Set("Origin", "https://app.example")
		r.Header.Set("Access-Control-Request-Method", "POST")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	lim := []redisrate.Limit{redisrate.PerMinute(2)}
	next := &served{}
	h := mustNew(t, Config{Limiter: e.limiter, Limits: lim, Name: "a"}).Handler(next)
	codes := map[int]int{}
	for range 50 {
		codes[preflight(h).Code]++
	}
	if next.n != 2 || codes[200] != 2 || codes[429] != 48 {
		t.Errorf("50 preflights to 2 per minute: the handler ran %d times, codes %v; want 2 (200) and 48 429s", next.n, codes)
	}
	// A plain OPTIONS is a request like any other.
	r := httptest.NewRequest("OPTIONS", "/expensive", nil)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != 429 {
		t.Errorf("OPTIONS without Access-Control-Request-Method: %d; want 429", w.Code)
	}

	// ExemptPreflight, behind a CORS middleware that sets its headers and
	// passes preflights on.
	next = &served{}
	m := mustNew(t, Config{Limiter: e.limiter, Limits: lim, Name: "b", ExemptPreflight: true})
	cors := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Access-Control-Allow-Origin", "https://app.example")
			w.Header().Set("Access-Control-Allow-Methods", "POST")
			h.ServeHTTP(w, r)
		})
	}
	h = cors(m.Handler(next))
	for i := range 50 {
		w := preflight(h)
		if w.Code != http.StatusNoContent || w.Header().Get("Access-Control-Allow-Methods") != "POST" || w.Body.Len() != 0 {
			t.Fatalf("preflight %d with ExemptPreflight: %d %v %q; want 204 with the CORS headers", i, w.Code, w.Header(), w.Body.String())
		}
	}
	if next.n != 0 {
		t.Errorf("with ExemptPreflight the handler ran %d times for preflights; want 0", next.n)
	}
	for _, k := range e.mr.Keys() {
		if strings.HasPrefix(k, "b:") {
			t.Errorf("preflights were counted: key %s", k)
		}
	}
	if c1, c2, c3 := do(h, "").Code, do(h, "").Code, do(h, "").Code; c1 != 200 || c2 != 200 || c3 != 429 || next.n != 2 {
		t.Errorf("requests after the exempt preflights: %d %d %d, handler ran %d times; want the full quota of 2", c1, c2, c3, next.n)
	}
}

func TestPlansAndCost(t *testing.T) {
	e := newEnv(t)
	next := &served{}
	var seen error
	m := mustNew(t, Config{
		Limiter: e.limiter,
		Name:    "api",
		OnError: func(r *http.Request, err error) { seen = err },
		Plans: []Plan{
			{Name: "free", Limits: []redisrate.Limit{redisrate.PerMinute(10)}},
			{Name: "paid", Limits: []redisrate.Limit{redisrate.PerSecond(100).WithName("paid-burst"), redisrate.PerHour(100000).WithName("paid-hourly")}},
		},
		Plan: func(r *http.Request) (string, error) {
			switch p := r.Header.Get("X-Plan"); p {
			case "":
				return "free", nil
			case "broken":
				return "", errors.New("account lookup failed")
			default:
				return p, nil
			}
		},
		Cost: func(r *http.Request) (int64, error) {
			switch r.URL.Query().Get("n") {
			case "":
				return 1, nil
			case "bad":
				return 0, errors.New("cannot count")
			case "0":
				return 0, nil
			case "11":
				return 11, nil
			}
			return 4, nil
		},
		Key: KeyFunc(func(r *http.Request) (string, error) { return "u1", nil }),
	})
	h := m.Handler(next)
	get := func(target string, hdr ...string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("GET", target, nil)
		for i := 0; i+1 < len(hdr); i += 2 {
			r.Header.Set(hdr[i], hdr[i+1])
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}

	// The free plan: a bulk request of cost 4, then the headers of free.
	w := get("/bulk?n=4")
	wantHeaders(t, w, map[string]string{"RateLimit-Policy": `"free";q=10;w=60`, "RateLimit": `"free";r=6;t=6`, "X-RateLimit-Remaining": "6"})
	w = get("/one")
	wantHeaders(t, w, map[string]string{"RateLimit": `"free";r=5;t=6`})
	// The paid plan: its own limits, its own headers, its own state.
	w = get("/bulk?n=4", "X-Plan", "paid")
	wantHeaders(t, w, map[string]string{
		"RateLimit-Policy": `"paid-burst";q=100;w=1, "paid-hourly";q=100000;w=3600`,
		"RateLimit":        `"paid-burst";r=96;t=1`,
	})
	if keys := e.mr.Keys(); strings.Join(keys, " ") != "api:free:u1 api:paid:u1" {
		t.Errorf("keys = %v", keys)
	}
	// Past the capacity: denied, and no Retry-After, as waiting cannot help.
	w = get("/bulk?n=11")
	if w.Code != 429 || w.Header().Get("Retry-After") != "" {
		t.Errorf("cost 11 of 10: %d, Retry-After %q", w.Code, w.Header().Get("Retry-After"))
	}
	if p := readProblem(t, w); !strings.Contains(p.Detail, "never") {
		t.Errorf("detail %q", p.Detail)
	}
	// Server-side failures of Plan and Cost: 500, and the handler sees why.
	for _, tc := range []struct{ target, plan, want string }{
		{"/", "broken", "account lookup failed"},
		{"/", "gold", `"gold", which is not in Config.Plans`},
		{"/?n=bad", "", "cannot count"},
		{"/?n=0", "", "returned 0"},
	} {
		if w := get(tc.target, "X-Plan", tc.plan); w.Code != 500 || seen == nil || !strings.Contains(seen.Error(), tc.want) {
			t.Errorf("%s plan %q: %d, err %v; want 500 and %q", tc.target, tc.plan, w.Code, seen, tc.want)
		}
	}
	if next.n != 3 {
		t.Errorf("served %d; want 3", next.n)
	}
}

// What Redis down looks like from the client, for each way of deciding.
func TestRedisDown(t *testing.T) {
	lim := []redisrate.Limit{redisrate.PerMinute(10)}
	quota := []string{"RateLimit", "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"}
	noQuota := func(t *testing.T, w *httptest.ResponseRecorder) {
		t.Helper()
		for _, k := range quota {
			if v := w.Header().Get(k); v != "" {
				t.Errorf("%s: %q on a decision made without Redis", k, v)
			}
		}
	}
	down := func(t *testing.T, opts ...redisrate.Option) *redisrate.Limiter {
		e := newEnv(t)
		e.mr.SetError("ERR injected failure")
		return testLimiter(e.rdb, opts...)
	}

	t.Run("default: served without quota, and the Limiter says so", func(t *testing.T) {
		next := &served{}
		var sources []redisrate.Source
		obs := observeEnd(func(res redisrate.Result, err error) { sources = append(sources, res.Source) })
		w := do(mustNew(t, Config{Limiter: down(t, redisrate.WithObserver(obs)), Limits: lim}).Handler(next), "")
		if w.Code != 200 || next.n != 1 {
			t.Errorf("%d, served %d; want 200, 1: an outage of the limiter is no outage of the route", w.Code, next.n)
		}
		if !slices.Equal(sources, []redisrate.Source{redisrate.SourceFailOpen}) {
			t.Errorf("the Limiter's decisions: %v; want one, fail-open (its metrics' source)", sources)
		}
		noQuota(t, w)
	})
	t.Run("FailError: 503 with Retry-After", func(t *testing.T) {
		next := &served{}
		w := do(mustNew(t, Config{Limiter: down(t), Limits: lim, FailurePolicy: redisrate.FailError}).Handler(next), "")
		if w.Code != 503 || next.n != 0 || w.Header().Get("Retry-After") != "1" {
			t.Fatalf("%d, served %d, Retry-After %q; want 503, 0, 1", w.Code, next.n, w.Header().Get("Retry-After"))
		}
		if p := readProblem(t, w); strings.Contains(p.Detail, "injected") || p.Title != "Service Unavailable" {
			t.Errorf("problem %+v: must not leak the Redis error", p)
		}
		noQuota(t, w)
	})
	t.Run("Omit RetryAfterHeader: 503 without it, by policy or by error", func(t *testing.T) {
		for _, policy := range []redisrate.FailurePolicy{redisrate.FailError, redisrate.FailClosed} {
			w := do(mustNew(t, Config{Limiter: down(t), Limits: lim, FailurePolicy: policy, Omit: RetryAfterHeader}).Handler(&served{}), "")
			if w.Code != 503 || w.Header().Get("Retry-After") != "" {
				t.Errorf("%v: %d, Retry-After %q; want 503 without it", policy, w.Code, w.Header().Get("Retry-After"))
			}
		}
	})
	t.Run("Config.FailurePolicy FailOpen: served without quota", func(t *testing.T) {
		next := &served{}
		w := do(mustNew(t, Config{Limiter: down(t), Limits: lim, FailurePolicy: redisrate.FailOpen}).Handler(next), "")
		if w.Code != 200 || next.n != 1 {
			t.Errorf("%d, served %d; want 200, 1", w.Code, next.n)
		}
		noQuota(t, w)
		// ... but never a request without its key.
		w = do(mustNew(t, Config{Limiter: down(t), Limits: lim, FailurePolicy: redisrate.FailOpen, Key: APIKey{Header: "X-API-Key", Secret: secret, Verify: issued}}).Handler(next), "")
		if w.Code != 400 || next.n != 1 {
			t.Errorf("without a key: %d, served %d; want 400, 1", w.Code, next.n)
		}
	})
	t.Run("Config.FailurePolicy FailClosed over the Limiter's FailOpen: 503", func(t *testing.T) {
		next := &served{}
		w := do(mustNew(t, Config{Limiter: down(t, redisrate.WithFailurePolicy(redisrate.FailOpen)), Limits: lim, FailurePolicy: redisrate.FailClosed}).Handler(next), "")
		if w.Code != 503 || next.n != 0 || w.Header().Get("Retry-After") != "1" {
			t.Errorf("%d, served %d, Retry-After %q; want 503, 0, 1", w.Code, next.n, w.Header().Get("Retry-After"))
		}
	})
	t.Run("the Limiter's FailClosed reaches the middleware: 503 without quota", func(t *testing.T) {
		next := &served{}
		w := do(mustNew(t, Config{Limiter: down(t, redisrate.WithFailurePolicy(redisrate.FailClosed)), Limits: lim}).Handler(next), "")
		if w.Code != 503 || next.n != 0 {
			t.Errorf("%d, served %d; want 503, 0: an explicit FailClosed is never served open", w.Code, next.n)
		}
		noQuota(t, w)
		wantHeaders(t, w, map[string]string{"RateLimit-Policy": `"default";q=10;w=60`, "Retry-After": "1"})
	})
	t.Run("FailClosed: 503 with Retry-After, not 429", func(t *testing.T) {
		next := &served{}
		w := do(mustNew(t, Config{Limiter: down(t), Limits: lim, FailurePolicy: redisrate.FailClosed}).Handler(next), "")
		if w.Code != 503 || next.n != 0 {
			t.Errorf("%d, served %d; want 503, 0", w.Code, next.n)
		}
		if ra := w.Header().Get("Retry-After"); ra != "1" { // the outage's hint, not the quota's
			t.Errorf("Retry-After %q; want 1", ra)
		}
		// Not a day for a daily quota (issue 24 item 4).
		w = do(mustNew(t, Config{Limiter: down(t), Limits: []redisrate.Limit{redisrate.PerDay(1)}, FailurePolicy: redisrate.FailClosed}).Handler(next), "")
		if ra := w.Header().Get("Retry-After"); w.Code != 503 || ra != "1" {
			t.Errorf("PerDay(1): %d, Retry-After %q; want 503, 1", w.Code, ra)
		}
		if p := readProblem(t, w); p.Type == "https://iana.org/assignments/http-problem-types#quota-exceeded" {
			t.Errorf("problem %+v: a policy's denial is no spent quota", p)
		}
		noQuota(t, w)
	})
	t.Run("fallback: its decisions, without quota", func(t *testing.T) {
		fb := newEnv(t)
		next := &served{}
		h := mustNew(t, Config{Limiter: down(t, redisrate.WithFallback(fb.limiter)), Limits: []redisrate.Limit{redisrate.PerMinute(1)}}).Handler(next)
		w := do(h, "")
		if w.Code != 200 {
			t.Fatalf("first: %d", w.Code)
		}
		noQuota(t, w)
		w = do(h, "")
		if w.Code != 429 || w.Header().Get("Retry-After") != "60" {
			t.Errorf("second: %d, Retry-After %q; want 429, 60", w.Code, w.Header().Get("Retry-After"))
		}
		noQuota(t, w)
	})
	t.Run("a key holding other data: 500, left alone", func(t *testing.T) {
		e := newEnv(t)
		if err := e.rdb.Set(context.Background(), "default:ip:192.0.2.1", "order 42", 0).Err(); err != nil {
			t.Fatal(err)
		}
		var seen error
		logging := func(r *http.Request, err error) { seen = err }
		w := do(mustNew(t, Config{Limiter: e.limiter, Limits: lim, OnError: logging}).Handler(&served{}), "")
		if w.Code != 500 || !errors.Is(seen, redisrate.ErrForeignKey) {
			t.Errorf("%d, err %v; want 500, ErrForeignKey", w.Code, seen)
		}
		if v, _ := e.rdb.Get(context.Background(), "default:ip:192.0.2.1").Result(); v != "order 42" {
			t.Errorf("user's key now %q", v)
		}
		// A key function that fails on the server's side: 500 too.
		broken := KeyFunc(func(*http.Request) (string, error) { return "", errors.New("tenant lookup failed") })
		w = do(mustNew(t, Config{Limiter: e.limiter, Limits: lim, OnError: logging, Key: broken}).Handler(&served{}), "")
		if w.Code != 500 || seen == nil || seen.Error() != "tenant lookup failed" {
			t.Errorf("failing KeyFunc: %d, err %v; want 500", w.Code, seen)
		}
	})
	t.Run("unreachable, FailClosed: 503", func(t *testing.T) {
		e := newEnv(t)
		addr := e.mr.Addr()
		e.mr.Close()
		rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
		t.Cleanup(func() { _ = rdb.Close() })
		rec := httptest.NewRecorder()
		mustNew(t, Config{Limiter: testLimiter(rdb), Limits: lim, FailurePolicy: redisrate.FailClosed}).Handler(&served{}).ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
		if rec.Code != 503 {
			t.Errorf("%d; want 503", rec.Code)
		}
	})
}

// A denial answered again from the deny cache is Redis's own: full headers.
func TestDenyCacheHeaders(t *testing.T) {
	e := newEnv(t)
	h := mustNew(t, Config{Limiter: testLimiter(e.rdb, redisrate.WithDenyCache(16)), Limits: []redisrate.Limit{redisrate.PerMinute(1)}}).Handler(&served{})
	do(h, "")
	first := do(h, "")
	second := do(h, "")
	for _, w := range []*httptest.ResponseRecorder{first, second} {
		if w.Code != 429 {
			t.Fatalf("%d; want 429", w.Code)
		}
		wantHeaders(t, w, map[string]string{"RateLimit": `"default";r=0;t=60`, "Retry-After": "60", "X-RateLimit-Remaining": "0"})
	}
}

// With the deny cache, a costlier request after a cheaper one was denied
// got the cheaper one's Retry-After, from the cache: clients that waited it
// were denied again (gcra, leaky_bucket, sliding_window). The Retry-After
// of each cost is now the wait Redis gives that cost, rounded up, and Redis
// admits the request once it has passed. Redis's clock moves only when the
// test moves it, so the waits are exact and nothing sleeps; the deny cache
// keeps the process's clock, on which the test takes milliseconds.
func TestDenyCacheRetryAfterIsHonestForEveryCost(t *testing.T) {
	for a := redisrate.GCRA; a <= redisrate.SlidingLog; a++ {
		t.Run(a.String(), func(t *testing.T) {
			e := newEnv(t)
			limit := redisrate.Per(2, 2*time.Second).WithAlgorithm(a)
			h := mustNew(t, Config{
				Limiter: testLimiter(e.rdb, redisrate.WithDenyCache(100)),
				Limits:  []redisrate.Limit{limit},
				Cost: func(r *http.Request) (int64, error) {
					return strconv.ParseInt(r.Header.Get("X-Cost"), 10, 64)
				},
			}).Handler(&served{})
			const ip, key = "192.0.2.1:1234", "default:ip:192.0.2.1"
			// wait is what Redis says cost waits now, without the cache.
			wait := func(cost int64) time.Duration {
				t.Helper()
				res, err := e.limiter.Decide(context.Background(), redisrate.Request{Kind: redisrate.KindCheck, Key: key, Limits: []redisrate.Limit{limit}, N: cost})
				if err != nil || res.Allowed {
					t.Fatalf("cost %d: %v, %v; want a denial", cost, res, err)
				}
				return res.RetryAfter
			}
			for i, want := range []int{200, 200, 429} { // the denial of cost 1 is cached
				if w := do(h, ip, "X-Cost", "1"); w.Code != want {
					t.Fatalf("request %d of cost 1: %d; want %d", i, w.Code, want)
				}
			}
			for _, cost := range []int64{2, 1} {
				w := do(h, ip, "X-Cost", strconv.FormatInt(cost, 10))
				truth := wait(cost)
				if want := strconv.FormatInt(ceilSeconds(truth), 10); w.Code != 429 || w.Header().Get("Retry-After") != want {
					t.Errorf("cost %d: %d, Retry-After %q; want 429, %s: Redis's wait %v, rounded up", cost, w.Code, w.Header().Get("Retry-After"), want, truth)
				}
			}
			// A client of cost 2 that waits its Retry-After is admitted.
			ra, _ := strconv.Atoi(do(h, ip, "X-Cost", "2").Header().Get("Retry-After"))
			e.advance(time.Duration(ra) * time.Second)
			if res, err := e.limiter.Decide(context.Background(), redisrate.Request{Kind: redisrate.KindCheck, Key: key, Limits: []redisrate.Limit{limit}, N: 2}); err != nil || !res.Allowed {
				t.Errorf("cost 2 after its Retry-After of %d s: %v, %v; want admitted", ra, res, err)
			}
		})
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

// A denial that waiting cannot help has no Retry-After, and a full limit
// no t: nothing more is to come.
func TestNeverHeaders(t *testing.T) {
	e := newEnv(t)
	m := mustNew(t, Config{Limiter: e.limiter, Limits: []redisrate.Limit{redisrate.PerSecond(2)},
		Cost: func(*http.Request) (int64, error) { return 3, nil }})
	w := do(m.Handler(&served{}), "")
	wantHeaders(t, w, map[string]string{"Retry-After": "", "RateLimit": `"default";r=2`, "X-RateLimit-Reset": "0"})
	if p := readProblem(t, w); w.Code != 429 || !strings.Contains(p.Detail, "never") {
		t.Errorf("never: %d %+v", w.Code, p)
	}
}

func TestNewErrors(t *testing.T) {
	l := testLimiter(nil)
	one := []redisrate.Limit{redisrate.PerSecond(1)}
	plans := []Plan{{Name: "free", Limits: one}}
	choose := func(*http.Request) (string, error) { return "free", nil }
	for _, tc := range []struct {
		c    Config
		want string
	}{
		{Config{Limits: one}, "Limiter is nil"},
		{Config{Limiter: l}, "Limits is empty"},
		{Config{Limiter: l, Limits: []redisrate.Limit{redisrate.PerSecond(0)}}, "invalid"},
		{Config{Limiter: l, Limits: []redisrate.Limit{redisrate.PerSecond(1), redisrate.PerMinute(5).WithAlgorithm(redisrate.FixedWindow)}}, "algorithm"},
		{Config{Limiter: l, Limits: one, Name: "bad\nname"}, "printable ASCII"},
		{Config{Limiter: l, Limits: []redisrate.Limit{redisrate.PerSecond(1).WithName("a"), redisrate.PerMinute(5).WithName("a")}}, `"a" twice`},
		{Config{Limiter: l, Limits: []redisrate.Limit{redisrate.PerSecond(1).WithName("é")}}, "printable ASCII"},
		{Config{Limiter: l, Limits: one, Key: APIKey{Header: "", Secret: secret, Verify: issued}}, "APIKey has no Header"},
		{Config{Limiter: l, Limits: one, Key: APIKey{Header: " ", Secret: secret, Verify: issued}}, "APIKey has no Header"},
		{Config{Limiter: l, Limits: one, Key: APIKey{Header: "X-API-Key", Secret: nil, Verify: issued}}, "Secret has 0 bytes"},
		{Config{Limiter: l, Limits: one, Key: APIKey{Header: "X-API-Key", Secret: []byte("short"), Verify: issued}}, "at least 16"},
		{Config{Limiter: l, Limits: one, Key: KeyFunc(nil)}, "nil KeyFunc"},
		{Config{Limiter: l, Limits: one, Key: ClientIP{Header: "X-Forwarded-For"}}, "no TrustedProxies"},
		{Config{Limiter: l, Plans: plans}, "needs Config.Plan"},
		{Config{Limiter: l, Limits: one, Plan: choose}, "Plans is empty"},
		{Config{Limiter: l, Limits: one, Plans: plans, Plan: choose}, "both Limits and Plans"},
		{Config{Limiter: l, Plans: append(plans, plans...), Plan: choose}, `"free" twice`},
		{Config{Limiter: l, Plans: []Plan{{Name: "", Limits: one}}, Plan: choose}, "Plans[0]: invalid Name"},
		{Config{Limiter: l, Plans: []Plan{{Name: "x"}}, Plan: choose}, `Plans[0] ("x"): no limits`},
		{Config{Limiter: l, Plans: []Plan{{Name: "x", Limits: []redisrate.Limit{redisrate.PerSecond(0)}}}, Plan: choose}, `Plans[0] ("x")`},
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

// A request whose context ended before its limit was decided (a client
// that went away, a server-side deadline that passed) is not a Redis
// failure: under FailOpen it is not admitted, and it does not open the
// breaker so that an exhausted client is served after it. In shadow mode,
// which fails no request for the limiter's sake, it is served, as it would
// be without the middleware: an admission buys nothing there.
func TestCallerGaveUpNotServed(t *testing.T) {
	for name, shadow := range map[string]bool{"enforcing": false, "shadow": true} {
		e := newEnv(t)
		next := &served{}
		h := mustNew(t, Config{
			Limiter: testLimiter(e.rdb, redisrate.WithFailurePolicy(redisrate.FailOpen)),
			Limits:  []redisrate.Limit{redisrate.PerMinute(1)},
			Key:     KeyFunc(func(r *http.Request) (string, error) { return r.Header.Get("X-Who"), nil }),
			Shadow:  shadow,
		}).Handler(next)
		if w := do(h, "", "X-Who", "victim"); w.Code != 200 {
			t.Fatalf("%s: the victim's first request: %d", name, w.Code)
		}
		expired, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Millisecond))
		defer cancel()
		for range 20 {
			r := httptest.NewRequest("GET", "/things", nil).WithContext(expired)
			r.Header.Set("X-Who", "attacker")
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			want := 503
			if shadow {
				want = 200
			}
			if w.Code != want || w.Header().Get("Retry-After") != "" {
				t.Errorf("%s: expired request: %d, Retry-After %q; want %d without Retry-After", name, w.Code, w.Header().Get("Retry-After"), want)
			}
		}
		if want := map[bool]int{false: 1, true: 21}[shadow]; next.n != want {
			t.Errorf("%s: served %d requests; want %d", name, next.n, want)
		}
		if w := do(h, "", "X-Who", "victim"); !shadow && w.Code != 429 {
			t.Errorf("%s: the victim after the expired requests: %d; want 429", name, w.Code)
		}
	}
}

// seen is an Observer that keeps each decision's binding limit name and
// whether shadow mode admitted it only because of itself.
type seen struct {
	names     []string
	wouldDeny int
}

func (s *seen) Start(ctx context.Context, _ redisrate.Decision) context.Context { return ctx }
func (s *seen) End(_ context.Context, d redisrate.Decision, res redisrate.Result, err error) {
	if err == nil && res.Binding < len(d.Limits) {
		s.names = append(s.names, d.Limits[res.Binding].Name)
	}
	if res.WouldDeny {
		s.wouldDeny++
	}
}

// Shadow mode: every request decided, recorded and served; no 429, no
// header unless asked for (never Retry-After); the observer sees what
// would have been denied; and no refusal for anything else either: Redis
// down, a request without its key.
func TestShadow(t *testing.T) {
	for _, headers := range []bool{false, true} {
		e := newEnv(t)
		var obs seen
		next := &served{}
		h := mustNew(t, Config{
			Limiter:       testLimiter(e.rdb, redisrate.WithObserver(&obs)),
			Limits:        []redisrate.Limit{redisrate.PerMinute(2)},
			Name:          "search",
			Shadow:        true,
			ShadowHeaders: headers,
		}).Handler(next)
		for i := range 5 {
			w := do(h, "")
			if w.Code != 200 || w.Header().Get("Retry-After") != "" {
				t.Errorf("headers %v, request %d: %d, Retry-After %q; want 200 without", headers, i, w.Code, w.Header().Get("Retry-After"))
			}
			if got := w.Header().Get("RateLimit") != ""; got != headers {
				t.Errorf("headers %v, request %d: RateLimit %q", headers, i, w.Header().Get("RateLimit"))
			}
		}
		if next.n != 5 || obs.wouldDeny != 3 {
			t.Errorf("headers %v: served %d, would deny %d; want 5, 3", headers, next.n, obs.wouldDeny)
		}
		// The same key, enforced: the shadow's admissions were recorded.
		if w := do(mustNew(t, Config{Limiter: e.limiter, Limits: []redisrate.Limit{redisrate.PerMinute(2)}, Name: "search"}).Handler(next), ""); w.Code != 429 {
			t.Errorf("enforced after the shadow's 2 admissions: %d; want 429", w.Code)
		}
	}
	t.Run("Redis down, no key", func(t *testing.T) {
		e := newEnv(t)
		e.mr.SetError("ERR injected failure")
		var told []error
		next := &served{}
		for _, key := range []Keyer{nil, APIKey{Header: "X-API-Key", Secret: secret, Verify: issued}} {
			h := mustNew(t, Config{
				Limiter: e.limiter, Limits: []redisrate.Limit{redisrate.PerMinute(2)},
				Shadow: true, Key: key, OnError: func(r *http.Request, err error) { told = append(told, err) },
			}).Handler(next)
			if w := do(h, ""); w.Code != 200 || w.Header().Get("RateLimit") != "" {
				t.Errorf("key %T: %d, RateLimit %q; want served, no header", key, w.Code, w.Header().Get("RateLimit"))
			}
		}
		if next.n != 2 || len(told) != 1 || !errors.Is(told[0], ratecore.ErrNoKey) {
			t.Errorf("served %d, OnError told %v; want 2, and the missing key (Redis down is the Limiter's to log)", next.n, told)
		}
	})
}

// The limit is named in metrics by its policy name: the binding one of a
// plan's limits, whichever it is, each middleware its own.
func TestLimitNames(t *testing.T) {
	e := newEnv(t)
	var obs seen
	limiter := testLimiter(e.rdb, redisrate.WithObserver(&obs))
	login := mustNew(t, Config{Limiter: limiter, Limits: []redisrate.Limit{redisrate.PerMinute(5)}, Name: "login"}).Handler(&served{})
	api := mustNew(t, Config{Limiter: limiter, Limits: []redisrate.Limit{redisrate.PerSecond(1), redisrate.PerHour(100)}, Name: "api"}).Handler(&served{})
	bulk := mustNew(t, Config{Limiter: limiter, Limits: []redisrate.Limit{redisrate.PerHour(100), redisrate.PerSecond(1)}, Name: "bulk"}).Handler(&served{})
	do(login, "")
	do(api, "")  // 0 of 1 left per second: binding
	do(bulk, "") // the same, second
	if got := strings.Join(obs.names, " "); got != "login api-1 bulk-2" {
		t.Errorf("names %q; want \"login api-1 bulk-2\"", got)
	}
}

// observeEnd is an Observer that hands each decision's outcome to f.
type observeEnd func(res redisrate.Result, err error)

func (o observeEnd) Start(ctx context.Context, _ redisrate.Decision) context.Context { return ctx }
func (o observeEnd) End(_ context.Context, _ redisrate.Decision, res redisrate.Result, err error) {
	o(res, err)
}

// Two middlewares on one route (per address in front of per API key) both
// report: RateLimit-Policy and RateLimit list both limits, the outer's
// first, as the draft's lists allow; X-RateLimit-* describe the one with
// the fewest units left; a denial by the inner keeps the outer's items.
func TestStackedMiddlewareHeaders(t *testing.T) {
	e := newEnv(t)
	outer := mustNew(t, Config{Limiter: e.limiter, Name: "per-ip", Limits: []redisrate.Limit{redisrate.PerMinute(10)}})
	inner := mustNew(t, Config{Limiter: e.limiter, Name: "per-key", Limits: []redisrate.Limit{redisrate.PerMinute(2)},
		Key: KeyFunc(func(*http.Request) (string, error) { return "k1", nil })})
	h := outer.Handler(inner.Handler(&served{}))
	w := do(h, "")
	wantHeaders(t, w, map[string]string{
		"RateLimit-Policy":      `"per-ip";q=10;w=60, "per-key";q=2;w=60`,
		"RateLimit":             `"per-ip";r=9;t=6, "per-key";r=1;t=30`,
		"X-RateLimit-Limit":     "2",
		"X-RateLimit-Remaining": "1",
	})
	if n := len(w.Header().Values("RateLimit-Policy")); n != 1 {
		t.Errorf("RateLimit-Policy in %d field lines; want one list", n)
	}
	do(h, "")
	w = do(h, "")
	if w.Code != 429 {
		t.Fatalf("third request: %d; want 429 by per-key", w.Code)
	}
	wantHeaders(t, w, map[string]string{
		"RateLimit-Policy": `"per-ip";q=10;w=60, "per-key";q=2;w=60`,
		"RateLimit":        `"per-ip";r=7;t=6, "per-key";r=0;t=30`,
	})
}

// TestQuota: a quota every client shares (Config.Quota) serves its units
// across clients, each under its own limit, and refuses the rest with 429
// and an honest Retry-After; with Settle it is refused at New.
func TestQuota(t *testing.T) {
	e := newEnv(t)
	quota := &ratecore.Quota{Key: "upstream", Limit: redisrate.PerMinute(2), Lease: 1}
	h := mustNew(t, Config{
		Limiter: e.limiter, Limits: []redisrate.Limit{redisrate.PerMinute(100)}, Quota: quota,
		Key: KeyFunc(func(r *http.Request) (string, error) { return r.Header.Get("X-Who"), nil }),
	}).Handler(&served{})
	for i, want := range []int{200, 200, 429} {
		w := do(h, "", "X-Who", string(rune('a'+i)))
		if w.Code != want || (want == 429 && w.Header().Get("Retry-After") == "") {
			t.Errorf("client %d: %d, Retry-After %q; want %d", i, w.Code, w.Header().Get("Retry-After"), want)
		}
		if want == 429 && (!strings.Contains(w.Body.String(), `"violated-policies":["upstream"]`) || !strings.HasPrefix(w.Header().Get("RateLimit"), `"upstream";r=0`)) {
			t.Errorf("the quota's refusal names another policy: %s, RateLimit %q; want upstream", w.Body, w.Header().Get("RateLimit"))
		}
	}
	if _, err := New(Config{Limiter: e.limiter, Limits: []redisrate.Limit{redisrate.PerMinute(1)}, Quota: quota, Settle: true}); err == nil {
		t.Error("New accepted Quota with Settle")
	}
}

// TestOnePolicyTruth (issue 38, finding 1): an explicit FailClosed or
// FailError, on the Limiter or in the Config, is never served open: a
// FailClosed Limiter handed to a Config without a policy of its own
// answered 200 while Redis was down. A FailOpen Config with a refusing
// Limiter is refused by New, which says how to choose.
func TestOnePolicyTruth(t *testing.T) {
	lim := []redisrate.Limit{redisrate.PerMinute(10)}
	down := func(t *testing.T, p redisrate.FailurePolicy) *redisrate.Limiter {
		e := newEnv(t)
		e.mr.SetError("ERR injected failure")
		return testLimiter(e.rdb, redisrate.WithFailurePolicy(p))
	}
	for _, c := range []struct {
		limiter, config redisrate.FailurePolicy
		want            int
	}{
		{0, 0, 200},
		{redisrate.FailOpen, 0, 200},
		{0, redisrate.FailOpen, 200},
		{redisrate.FailOpen, redisrate.FailOpen, 200},
		{redisrate.FailClosed, 0, 503},
		{redisrate.FailError, 0, 503},
		{0, redisrate.FailClosed, 503},
		{0, redisrate.FailError, 503},
		{redisrate.FailOpen, redisrate.FailClosed, 503},
		{redisrate.FailOpen, redisrate.FailError, 503},
		{redisrate.FailClosed, redisrate.FailError, 503},
		{redisrate.FailError, redisrate.FailClosed, 503},
	} {
		next := &served{}
		w := do(mustNew(t, Config{Limiter: down(t, c.limiter), Limits: lim, FailurePolicy: c.config}).Handler(next), "")
		if w.Code != c.want || (next.n == 1) != (c.want == 200) {
			t.Errorf("Limiter %v, Config %v: %d, served %d; want %d", c.limiter, c.config, w.Code, next.n, c.want)
		}
	}
	for _, p := range []redisrate.FailurePolicy{redisrate.FailClosed, redisrate.FailError} {
		_, err := New(Config{Limiter: down(t, p), Limits: lim, FailurePolicy: redisrate.FailOpen})
		if err == nil || !strings.Contains(err.Error(), "Config.FailurePolicy is FailOpen") || !strings.Contains(err.Error(), p.String()) {
			t.Errorf("a FailOpen Config with a %v Limiter: %v; want New to refuse it, naming both", p, err)
		}
	}
}

// TestMisconfiguredRedis (issue 38, finding 2): a wrong password was an
// outage: the default policy served 5 of 5 requests under a limit of 1 per
// second and never told OnError. It is a configuration error now: every
// request is refused with 500 (no policy answers it), never a 429, and
// OnError is told of each, with an error matching ErrMisconfigured.
func TestMisconfiguredRedis(t *testing.T) {
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(io.Discard, nil))) // the Limiter's line at level Error
	t.Cleanup(func() { slog.SetDefault(old) })
	for _, policy := range []redisrate.FailurePolicy{0, redisrate.FailOpen, redisrate.FailClosed} {
		mr := miniredis.RunT(t)
		mr.RequireAuth("sekret")
		rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), Password: "wrong", Protocol: 2})
		t.Cleanup(func() { _ = rdb.Close() })
		var told []error
		next := &served{}
		h := mustNew(t, Config{Limiter: testLimiter(rdb), Limits: []redisrate.Limit{redisrate.PerSecond(1)}, FailurePolicy: policy,
			OnError: func(_ *http.Request, err error) { told = append(told, err) }}).Handler(next)
		for i := range 5 {
			if w := do(h, ""); w.Code != 500 {
				t.Errorf("%v, request %d: %d; want 500", policy, i, w.Code)
			}
		}
		if next.n != 0 || len(told) != 5 || !errors.Is(told[4], redisrate.ErrMisconfigured) || errors.Is(told[4], redisrate.ErrUnavailable) {
			t.Errorf("%v: served %d, OnError told %d times (%v); want 0 served, 5 told of ErrMisconfigured", policy, next.n, len(told), told)
		}
	}
}

// TestQuotaClose: Close gives back what the quota's lease holds, and a
// request after it gets 503 with a Retry-After (another instance can
// serve it); Config.Limiter stays open.
func TestQuotaClose(t *testing.T) {
	e := newEnv(t)
	shared := redisrate.PerHour(100)
	m := mustNew(t, Config{Limiter: e.limiter, Quota: &ratecore.Quota{Key: "upstream", Limit: shared, Lease: 10, Lifetime: time.Hour}})
	h := m.Handler(&served{})
	if w := do(h, "192.0.2.1:1"); w.Code != 200 {
		t.Fatalf("the quota alone: %d", w.Code)
	}
	if err := m.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	res, err := e.limiter.Decide(context.Background(), redisrate.Request{Kind: redisrate.KindPeek, Key: "{default:quota}:upstream", Limits: []redisrate.Limit{shared}})
	if err != nil || res.Remaining != 99 {
		t.Errorf("after Close: %+v %v; want the lease's 9 unspent units back, 99 left", res, err)
	}
	if w := do(h, "192.0.2.1:1"); w.Code != 503 || w.Header().Get("Retry-After") == "" {
		t.Errorf("a request after Close: %d, Retry-After %q; want 503 with one", w.Code, w.Header().Get("Retry-After"))
	}
}
