package httplimit

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redisrate/redisrate"
	"github.com/redisrate/redisrate/ratecore"
)

// headerKey keys requests by the raw value of a header: a client's
// choice, any text at all, as a careless KeyFunc would take it.
func headerKey(name string) KeyFunc {
	return func(r *http.Request) (string, error) {
		v := r.Header.Get(name)
		if v == "" {
			return "", fmt.Errorf("%w: no %s header", ratecore.ErrNoKey, name)
		}
		return v, nil
	}
}

// accountConfig holds each API key (the raw X-Key header) to 2 per minute
// and its account (the X-Account header) to 3 per minute.
func accountConfig(limiter *redisrate.Limiter) Config {
	return Config{
		Limiter: limiter,
		Name:    "api",
		Limits:  []redisrate.Limit{redisrate.PerMinute(2)},
		Key:     headerKey("X-Key"),
		Scopes:  []Scope{{Name: "account", Key: headerKey("X-Account"), Limit: redisrate.PerMinute(3)}},
	}
}

// hashTag is the part of key that Redis Cluster hashes: between the first
// '{' and the first '}' after it, when that is not empty.
func hashTag(key string) string {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			return key[i+1 : i+1+j]
		}
	}
	return key
}

// snapshot is every key of the miniredis and its value.
func (e *env) snapshot(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, k := range e.mr.Keys() {
		v, err := e.mr.Get(k)
		if err != nil {
			t.Fatalf("GET %s: %v", k, err)
		}
		out[k] = v
	}
	return out
}

// changed lists the keys whose value differs between two snapshots.
func changed(before, after map[string]string) []string {
	var out []string
	for k, v := range after {
		if before[k] != v {
			out = append(out, k)
		}
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// An API key's limit and its account's, in one call: a denial by either
// writes on neither key; the headers list both policies and describe the
// binding one by name; Retry-After is the binding limit's.
func TestScopesAPIKeyAndAccount(t *testing.T) {
	e := newEnv(t)
	next := &served{}
	h := mustNew(t, accountConfig(e.limiter)).Handler(next)
	const policy = `"api";q=2;w=60, "account";q=3;w=60`
	const keyK1, keyK2, account = "{api:account:a}:api:k1", "{api:account:a}:api:k2", "{api:account:a}"

	steps := []struct {
		key       string
		code      int
		rateLimit string
		retry     string
		written   []string // the keys the request writes
	}{
		{"k1", 200, `"api";r=1;t=30`, "", []string{account, keyK1}},
		{"k1", 200, `"api";r=0;t=30`, "", []string{account, keyK1}},
		{"k1", 429, `"api";r=0;t=30`, "30", nil},                        // k1's limit denies; a unit of the account's is left
		{"k2", 200, `"account";r=0;t=20`, "", []string{account, keyK2}}, // the account's last unit: fewest left
		{"k2", 429, `"account";r=0;t=20`, "20", nil},                    // the account's limit denies; k2 has a unit left
		{"k3", 429, `"account";r=0;t=20`, "20", nil},                    // so does a new key of the account
		{"k1", 429, `"api";r=0;t=30`, "30", nil},                        // both deny: the longest wait binds
	}
	for i, s := range steps {
		before := e.snapshot(t)
		w := do(h, "", "X-Key", s.key, "X-Account", "a")
		wantHeaders(t, w, map[string]string{"RateLimit-Policy": policy, "RateLimit": s.rateLimit, "Retry-After": s.retry})
		if w.Code != s.code {
			t.Fatalf("request %d (%s): %d; want %d", i, s.key, w.Code, s.code)
		}
		if s.code == 429 {
			binding := strings.Trim(strings.Split(s.rateLimit, ";")[0], `"`)
			if p := readProblem(t, w); !slices.Equal(p.Violated, []string{binding}) {
				t.Errorf("request %d: violated-policies %q; want %q", i, p.Violated, binding)
			}
		}
		if got := changed(before, e.snapshot(t)); !slices.Equal(got, s.written) {
			t.Errorf("request %d (%s, %d): wrote %q; want %q", i, s.key, w.Code, got, s.written)
		}
	}
	if next.n != 3 {
		t.Errorf("served %d; want 3", next.n)
	}
	// Another account is another quota.
	if w := do(h, "", "X-Key", "k1", "X-Account", "b"); w.Code != 200 {
		t.Errorf("k1 of account b: %d; want 200", w.Code)
	}
	// The account's key holds the state of a one-key call of its limit:
	// the Limiter can read it alone.
	res, err := e.limiter.Decide(context.Background(), redisrate.Request{Kind: redisrate.KindPeek, Key: account, Limits: []redisrate.Limit{redisrate.PerMinute(3)}})
	if err != nil || res.Remaining != 0 {
		t.Errorf("Peek of %s alone: %+v, %v; want 0 left", account, res, err)
	}
	e.advance(20 * time.Second) // one unit of the account's back; k2 still has one
	if w := do(h, "", "X-Key", "k2", "X-Account", "a"); w.Code != 200 || w.Header().Get("RateLimit") != `"account";r=0;t=20` {
		t.Errorf("k2 after 20s: %d, RateLimit %q; want 200, the account's", w.Code, w.Header().Get("RateLimit"))
	}
}

// Many API keys of one account share its limit: exactly the account's
// capacity is admitted, whichever keys ask, however concurrently.
func TestScopesManyKeysShareTheAccount(t *testing.T) {
	e := newEnv(t)
	c := accountConfig(e.limiter)
	c.Scopes[0].Limit = redisrate.PerMinute(25)
	var admitted, byAccount, byKey, served atomic.Int64
	h := mustNew(t, c).Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { served.Add(1) }))
	var wg sync.WaitGroup
	for g := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 3 {
				w := do(h, "", "X-Key", fmt.Sprintf("k%d", g), "X-Account", "shared")
				switch {
				case w.Code == 200:
					admitted.Add(1)
				case strings.HasPrefix(w.Header().Get("RateLimit"), `"account";r=0;`):
					byAccount.Add(1)
				case strings.HasPrefix(w.Header().Get("RateLimit"), `"api";`):
					byKey.Add(1)
				default:
					t.Errorf("%d %q", w.Code, w.Header().Get("RateLimit"))
				}
			}
		}()
	}
	wg.Wait()
	if admitted.Load() != 25 || served.Load() != 25 || byAccount.Load()+byKey.Load() != 95 {
		t.Errorf("admitted %d, denied by the account %d, by the key %d; want 25 admitted of 120", admitted.Load(), byAccount.Load(), byKey.Load())
	}
	// Every admission was recorded on its key too, and no denial was.
	used := int64(0)
	for g := range 40 {
		res, err := e.limiter.Decide(context.Background(), redisrate.Request{Kind: redisrate.KindPeek, Key: fmt.Sprintf("{api:account:shared}:api:k%d", g), Limits: []redisrate.Limit{redisrate.PerMinute(2)}})
		if err != nil {
			t.Fatal(err)
		}
		used += res.Capacity - res.Remaining
	}
	if used != 25 || len(e.mr.Keys()) > 41 {
		t.Errorf("the keys' states hold %d admissions in %d keys; want 25, at most 41", used, len(e.mr.Keys()))
	}
}

// A client that chooses the text of the broadest key (here a header) can
// neither move its keys out of their hash tag nor reach another client's
// keys: '%' and '}' are escaped in the tag.
func TestScopesHostileKeysStayInTheirTag(t *testing.T) {
	e := newEnv(t)
	h := mustNew(t, accountConfig(e.limiter)).Handler(&served{})
	for _, account := range []string{"x}:api:k", "}", "{", "{}", "a}b{c}", "%7D", "%", "x}", ":", "\x00}"} {
		before := e.snapshot(t)
		if w := do(h, "", "X-Key", "k", "X-Account", account); w.Code != 200 {
			t.Fatalf("account %q: %d; want 200", account, w.Code)
		}
		written := changed(before, e.snapshot(t))
		if len(written) != 2 {
			t.Fatalf("account %q: wrote %q; want its 2 keys, new", account, written)
		}
		want := "api:account:" + strings.NewReplacer("%", "%25", "}", "%7D").Replace(account)
		for _, k := range written {
			if _, ok := before[k]; ok {
				t.Errorf("account %q wrote on %q, another account's key", account, k)
			}
			if tag := hashTag(k); tag != want {
				t.Errorf("account %q: key %q hashes by %q; want %q", account, k, tag, want)
			}
		}
	}

	// Without the escape, the account "x}:api:k" of an attacker would have
	// as its own key the API key "k}" of account "x": its admissions would
	// take that key's quota.
	e = newEnv(t)
	h = mustNew(t, accountConfig(e.limiter)).Handler(&served{})
	for i := range 3 {
		if w := do(h, "", "X-Key", fmt.Sprintf("z%d", i), "X-Account", "x}:api:k"); w.Code != 200 {
			t.Fatalf("the attacker's request %d: %d", i, w.Code)
		}
	}
	for i, want := range []int{200, 200, 429} {
		if w := do(h, "", "X-Key", "k}", "X-Account", "x"); w.Code != want {
			t.Errorf("the victim's request %d: %d %q; want %d: its quota is its own", i, w.Code, w.Header().Get("RateLimit"), want)
		}
	}
}

// With Plans, the request's key is kept per plan, under the account's tag.
func TestScopesWithPlans(t *testing.T) {
	e := newEnv(t)
	h := mustNew(t, Config{
		Limiter: e.limiter,
		Name:    "api",
		Plans: []Plan{
			{Name: "free", Limits: []redisrate.Limit{redisrate.PerMinute(1)}},
			{Name: "paid", Limits: []redisrate.Limit{redisrate.PerMinute(5).WithName("paid-key")}},
		},
		Plan:   func(r *http.Request) (string, error) { return r.Header.Get("X-Plan"), nil },
		Key:    headerKey("X-Key"),
		Scopes: []Scope{{Name: "account", Key: headerKey("X-Account"), Limit: redisrate.PerMinute(4)}},
	}).Handler(&served{})
	w := do(h, "", "X-Key", "k", "X-Account", "a", "X-Plan", "free")
	wantHeaders(t, w, map[string]string{"RateLimit-Policy": `"free";q=1;w=60, "account";q=4;w=60`, "RateLimit": `"free";r=0;t=60`})
	w = do(h, "", "X-Key", "k", "X-Account", "a", "X-Plan", "paid")
	wantHeaders(t, w, map[string]string{"RateLimit-Policy": `"paid-key";q=5;w=60, "account";q=4;w=60`, "RateLimit": `"account";r=2;t=15`})
	var got []string
	for k := range e.snapshot(t) {
		got = append(got, k)
	}
	slices.Sort(got)
	if want := []string{"{api:account:a}", "{api:account:a}:free:k", "{api:account:a}:paid:k"}; !slices.Equal(got, want) {
		t.Errorf("keys %q; want %q", got, want)
	}
}

// A scope between the request's key and the broadest: three keys in one
// call, the middle one under its own name.
func TestScopesThreeKeys(t *testing.T) {
	e := newEnv(t)
	c := accountConfig(e.limiter)
	c.Scopes = append([]Scope{{Name: "project", Key: headerKey("X-Project"), Limit: redisrate.PerMinute(1)}}, c.Scopes...)
	h := mustNew(t, c).Handler(&served{})
	w := do(h, "", "X-Key", "k", "X-Project", "p", "X-Account", "a")
	wantHeaders(t, w, map[string]string{"RateLimit-Policy": `"api";q=2;w=60, "project";q=1;w=60, "account";q=3;w=60`, "RateLimit": `"project";r=0;t=60`})
	before := e.snapshot(t)
	w = do(h, "", "X-Key", "k2", "X-Project", "p", "X-Account", "a")
	if w.Code != 429 || w.Header().Get("RateLimit") != `"project";r=0;t=60` {
		t.Errorf("the project's second request: %d %q; want 429 by the project", w.Code, w.Header().Get("RateLimit"))
	}
	if got := changed(before, e.snapshot(t)); len(got) != 0 {
		t.Errorf("a denial by the project wrote %q", got)
	}
	if _, err := e.mr.Get("{api:account:a}:project:p"); err != nil {
		t.Errorf("the project's key: %v; keys %q", err, e.mr.Keys())
	}
}

// Shadow mode, the failure policy, OnError and Exempt work with scopes as
// without.
func TestScopesShadowFailuresAndExempt(t *testing.T) {
	t.Run("shadow", func(t *testing.T) {
		e := newEnv(t)
		var obs seen
		c := accountConfig(testLimiter(e.rdb, redisrate.WithObserver(&obs)))
		c.Shadow = true
		next := &served{}
		h := mustNew(t, c).Handler(next)
		for i := range 5 {
			if w := do(h, "", "X-Key", fmt.Sprintf("k%d", i), "X-Account", "a"); w.Code != 200 || w.Header().Get("RateLimit") != "" {
				t.Errorf("request %d: %d, RateLimit %q; want 200, no headers", i, w.Code, w.Header().Get("RateLimit"))
			}
		}
		if next.n != 5 || obs.wouldDeny != 2 || !slices.Equal(obs.names, []string{"api", "api", "account", "account", "account"}) {
			t.Errorf("served %d, would deny %d, binding %q; want 5, 2, the account's from the 3rd", next.n, obs.wouldDeny, obs.names)
		}
		// Enforced: the shadow's 3 admissions were recorded on the account.
		if w := do(mustNew(t, accountConfig(e.limiter)).Handler(next), "", "X-Key", "k9", "X-Account", "a"); w.Code != 429 {
			t.Errorf("enforced after the shadow: %d; want 429", w.Code)
		}
	})
	t.Run("Redis down", func(t *testing.T) {
		e := newEnv(t)
		e.mr.SetError("ERR injected failure")
		for _, policy := range []redisrate.FailurePolicy{redisrate.FailOpen, redisrate.FailClosed} {
			c := accountConfig(e.limiter)
			c.FailurePolicy = policy
			next := &served{}
			w := do(mustNew(t, c).Handler(next), "", "X-Key", "k", "X-Account", "a")
			want := map[redisrate.FailurePolicy]int{redisrate.FailOpen: 200, redisrate.FailClosed: 503}[policy]
			if w.Code != want || w.Header().Get("RateLimit") != "" || w.Header().Get("X-RateLimit-Remaining") != "" {
				t.Errorf("%v: %d, RateLimit %q; want %d, no quota", policy, w.Code, w.Header().Get("RateLimit"), want)
			}
		}
	})
	t.Run("a scope's key missing or failing", func(t *testing.T) {
		e := newEnv(t)
		var told []error
		c := accountConfig(e.limiter)
		c.Scopes = append(c.Scopes, Scope{Name: "org", Key: KeyFunc(func(r *http.Request) (string, error) {
			if r.Header.Get("X-Fail") != "" {
				return "", errors.New("directory down")
			}
			return r.Header.Get("X-Org"), nil
		}), Limit: redisrate.PerMinute(10)})
		c.OnError = func(r *http.Request, err error) { told = append(told, err) }
		next := &served{}
		h := mustNew(t, c).Handler(next)
		for _, tc := range []struct {
			hdr  []string
			code int
			err  error
		}{
			{[]string{"X-Key", "k", "X-Org", "o"}, 400, ratecore.ErrNoKey},      // no X-Account
			{[]string{"X-Key", "k", "X-Account", "a"}, 400, ratecore.ErrNoKey},  // an empty org
			{[]string{"X-Key", "k", "X-Account", "a", "X-Fail", "1"}, 500, nil}, // the server's fault
		} {
			told = nil
			w := do(h, "", tc.hdr...)
			if w.Code != tc.code || len(told) != 1 || (tc.err != nil && !errors.Is(told[0], tc.err)) {
				t.Errorf("%q: %d, OnError told %v; want %d", tc.hdr, w.Code, told, tc.code)
			}
			if tc.code == 500 && strings.Contains(w.Body.String(), "directory") {
				t.Errorf("the 500 shows the error: %s", w.Body.String())
			}
		}
		if next.n != 0 || len(e.mr.Keys()) != 0 {
			t.Errorf("served %d, keys %q; want nothing served or written", next.n, e.mr.Keys())
		}
	})
	t.Run("exempt", func(t *testing.T) {
		e := newEnv(t)
		c := accountConfig(e.limiter)
		c.Exempt = func(r *http.Request) bool { return r.URL.Path == "/things" }
		next := &served{}
		if w := do(mustNew(t, c).Handler(next), ""); w.Code != 200 || next.n != 1 || len(e.mr.Keys()) != 0 {
			t.Errorf("%d, served %d, keys %q; want served, nothing written", w.Code, next.n, e.mr.Keys())
		}
	})
}

// New refuses what scopes cannot do, with an error that says why.
func TestScopesNewErrors(t *testing.T) {
	limiter := newEnv(t).limiter
	scope := Scope{Name: "account", Key: headerKey("X-Account"), Limit: redisrate.PerMinute(3)}
	with := func(f func(*Config)) Config {
		c := accountConfig(limiter)
		f(&c)
		return c
	}
	for _, tc := range []struct {
		name string
		c    Config
		want string
	}{
		{"two limits on the key", with(func(c *Config) { c.Limits = append(c.Limits, redisrate.PerHour(100)) }),
			"2 limits with Config.Scopes: with scopes, each key holds one limit"},
		{"two limits in a plan", with(func(c *Config) {
			c.Limits = nil
			c.Plans = []Plan{{Name: "free", Limits: []redisrate.Limit{redisrate.PerMinute(1), redisrate.PerHour(9)}}}
			c.Plan = func(*http.Request) (string, error) { return "free", nil }
		}), `Config.Plans[0] ("free"): 2 limits with Config.Scopes`},
		{"two algorithms", with(func(c *Config) { c.Scopes[0].Limit = c.Scopes[0].Limit.WithAlgorithm(redisrate.TokenBucket) }),
			`Config.Scopes[0] ("account") has a token_bucket limit, and the request's own is gcra: the limits of one call run one algorithm's script`},
		{"a ':' in a scope name", with(func(c *Config) { c.Scopes[0].Name = "acc:ount" }), "invalid Config.Scopes[0].Name \"acc:ount\": ':'"},
		{"a '{' in a scope name", with(func(c *Config) { c.Scopes[0].Name = "{account" }), "'{' and '}' mark the Redis Cluster hash tag"},
		{"a '}' in Name", with(func(c *Config) { c.Name = "api}" }), "invalid Config.Name \"api}\": '{' and '}'"},
		{"an empty scope name", with(func(c *Config) { c.Scopes[0].Name = "" }), `invalid Config.Scopes[0].Name "": empty policy name`},
		{"a scope named as the middleware", with(func(c *Config) { c.Scopes[0].Name = "api" }), `Config.Scopes[0] has the Name "api" of Config.Name`},
		{"two scopes of one name", with(func(c *Config) { c.Scopes = append(c.Scopes, scope) }), `Config.Scopes[1] has the Name "account" of Config.Scopes[0]`},
		{"a scope named as a plan", with(func(c *Config) {
			c.Limits = nil
			c.Plans = []Plan{{Name: "account", Limits: []redisrate.Limit{redisrate.PerMinute(1)}}}
			c.Plan = func(*http.Request) (string, error) { return "account", nil }
		}), `Config.Plans[0] ("account"): the name "account" is that of Config.Scopes[0]`},
		{"a scope without a key", with(func(c *Config) { c.Scopes[0].Key = nil }), `Config.Scopes[0] ("account") has no Key`},
		{"a scope's key misconfigured", with(func(c *Config) { c.Scopes[0].Key = APIKey{Header: "X-Account"} }), `Config.Scopes[0] ("account").Key: APIKey.Secret has 0 bytes`},
		{"a scope's limit invalid", with(func(c *Config) { c.Scopes[0].Limit = redisrate.Limit{Rate: 0, Period: time.Second} }), `Config.Scopes[0] ("account"): invalid Limit`},
		{"eight scopes", with(func(c *Config) {
			for i := range 7 {
				c.Scopes = append(c.Scopes, Scope{Name: fmt.Sprint("s", i), Key: headerKey("X"), Limit: redisrate.PerMinute(1)})
			}
		}), "Config.Scopes has 8 scopes: at most 7"},
	} {
		_, err := New(tc.c)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want an error with %q", tc.name, err, tc.want)
		}
	}
}
