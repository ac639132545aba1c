package httplimit_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/redisrate/redisrate"
	"github.com/redisrate/redisrate/httplimit"
	"github.com/redisrate/redisrate/internal/readmetest"
	"github.com/redisrate/redisrate/ratecore"
)

// directory maps the API keys to the accounts that own them.
type directory map[string]string

// Issued reports whether the service issued apiKey.
func (d directory) Issued(_ context.Context, apiKey string) (bool, error) {
	_, ok := d[apiKey]
	return ok, nil
}

// AccountOf returns the account that owns the request's API key.
func (d directory) AccountOf(r *http.Request) (string, error) {
	account, ok := d[r.Header.Get("X-API-Key")]
	if !ok {
		return "", fmt.Errorf("%w: unknown API key", ratecore.ErrNoKey)
	}
	return account, nil
}

// The user-and-organisation limits of docs/http.md: each API key at 10
// requests per second, and its account at 1000 per second across all its
// keys, decided in one atomic call.
func ExampleScope() {
	rdb, done := exampleRedis()
	defer done()
	// 10 s: this Example's Redis is embedded in the test, which a busy machine can starve past the 200 ms default.
	limiter := redisrate.NewLimiter(rdb, redisrate.WithDecisionTimeout(10*time.Second))
	secret := []byte("example secret, 16+ bytes; load yours from a secret store")
	accounts := directory{}
	for i := range 101 {
		accounts[fmt.Sprint("k", i)] = "acme"
	}

	// scopes:start
	api, err := httplimit.New(httplimit.Config{
		Limiter: limiter,
		Name:    "api",
		Limits:  []redisrate.Limit{redisrate.PerSecond(10)}, // each API key's
		Key:     httplimit.APIKey{Header: "X-API-Key", Secret: secret, Verify: accounts.Issued},
		Scopes: []httplimit.Scope{{
			Name:  "account", // its policy name in the headers
			Key:   httplimit.KeyFunc(accounts.AccountOf),
			Limit: redisrate.PerSecond(1000), // the account's, shared by its API keys
		}},
	})
	// scopes:end
	if err != nil {
		log.Fatal(err)
	}
	h := api.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	request := func(apiKey string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("GET", "/api/things", nil)
		r.Header.Set("X-API-Key", apiKey)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	w := request("k0")
	fmt.Println(w.Code, w.Header().Get("RateLimit-Policy"))
	fmt.Println(w.Code, w.Header().Get("RateLimit"))
	for range 10 {
		w = request("k0") // 9 more, then its own limit denies
	}
	fmt.Println(w.Code, w.Header().Get("RateLimit"))
	admitted := 0
	for i := 1; i < 100; i++ {
		for range 10 {
			if request(fmt.Sprint("k", i)).Code == http.StatusOK {
				admitted++
			}
		}
	}
	fmt.Println("99 more keys:", admitted, "admitted")
	w = request("k100") // a fresh key, but the account's 1000 are taken
	fmt.Println(w.Code, w.Header().Get("RateLimit"))
	// The account's state is a one-key call's, under the hash tag.
	res, err := limiter.Decide(context.Background(), redisrate.Request{Kind: redisrate.KindPeek, Key: "{api:account:acme}", Limits: []redisrate.Limit{redisrate.PerSecond(1000)}})
	fmt.Println(res.Remaining, err)
	// Output:
	// 200 "api";q=10;w=1, "account";q=1000;w=1
	// 200 "api";r=9;t=1
	// 429 "api";r=0;t=1
	// 99 more keys: 990 admitted
	// 429 "account";r=0;t=1
	// 0 <nil>
}

// TestDocsHTTPScopesIsExample keeps docs/http.md's Scopes block the same
// code as ExampleScope.
func TestDocsHTTPScopesIsExample(t *testing.T) {
	readmetest.Check(t, "scope_example_test.go", "../docs/http.md", "scopes")
}
