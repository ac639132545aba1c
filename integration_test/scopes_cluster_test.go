package integration_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/redisrate/redisrate"
	"github.com/redisrate/redisrate/httplimit"
	"github.com/redisrate/redisrate/integration_test/internal/redistest"
)

// httplimit's Scopes on a real Redis Cluster: the keys of each request
// (an API key's and its account's) share the account's hash tag, so no
// call gets CROSSSLOT, whatever text a client puts in its account, and
// each account's limit holds on whichever node serves its slot (the
// accounts are spread over every primary).
func TestClusterHTTPScopes(t *testing.T) {
	c := startCluster(t)
	lim := redistest.NewLimiter(c.client(t, nil), redisrate.WithKeyPrefix("rl:"))
	var mu sync.Mutex
	var errs []error
	header := func(name string) httplimit.KeyFunc {
		return func(r *http.Request) (string, error) { return r.Header.Get(name), nil }
	}
	m, err := httplimit.New(httplimit.Config{
		Limiter: lim,
		Name:    "api",
		Limits:  []redisrate.Limit{redisrate.PerMinute(2)},
		Key:     header("X-Key"),
		Scopes:  []httplimit.Scope{{Name: "account", Key: header("X-Account"), Limit: redisrate.PerMinute(3)}},
		OnError: func(r *http.Request, err error) {
			mu.Lock()
			defer mu.Unlock()
			errs = append(errs, err)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	h := m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))

	accounts := []string{"x}y", "{a}", "}{", "%7D", "{", "}", "a:b}:api:k"}
	for i := range 57 {
		accounts = append(accounts, fmt.Sprint("acct-", i))
	}
	slots := map[int]bool{}
	for _, a := range accounts {
		// httplimit's layout (ratecore): the account's key is its hash tag,
		// '%' and '}' percent-encoded.
		slots[slot("{api:account:"+strings.NewReplacer("%", "%25", "}", "%7D").Replace(a)+"}")] = true
	}
	owners := map[*redistest.Server]bool{}
	for sl := range slots {
		owner, err := c.Owner(context.Background(), sl)
		if err != nil {
			t.Fatal(err)
		}
		owners[owner] = true
	}
	if len(slots) < 32 || len(owners) != len(c.Primaries) {
		t.Fatalf("the accounts hash to %d slots on %d of the %d primaries; the test wants them spread over all", len(slots), len(owners), len(c.Primaries))
	}
	var wg sync.WaitGroup
	for _, account := range accounts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// The user's limit denies k1's third, the account's k2's second.
			for i, s := range []struct {
				key  string
				code int
			}{{"k1", 200}, {"k1", 200}, {"k1", 429}, {"k2", 200}, {"k2", 429}} {
				r := httptest.NewRequest("GET", "/", nil)
				r.Header.Set("X-Key", s.key)
				r.Header.Set("X-Account", account)
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				if w.Code != s.code {
					t.Errorf("account %q, request %d (%s): %d %q; want %d", account, i, s.key, w.Code, w.Header().Get("RateLimit"), s.code)
					return
				}
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		t.Errorf("OnError: %v", err)
	}
}
