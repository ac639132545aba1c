package grpclimit_test

import (
	"context"
	"fmt"
	"log"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/redisrate/redisrate"
	"github.com/redisrate/redisrate/grpclimit"
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

// AccountOf returns the account of the call's API key.
func (d directory) AccountOf(ctx context.Context, _ string) (string, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	if keys := md.Get("x-api-key"); len(keys) == 1 {
		if account, ok := d[keys[0]]; ok {
			return account, nil
		}
	}
	return "", fmt.Errorf("%w: unknown API key", ratecore.ErrNoKey)
}

// The user-and-organisation limits of docs/grpc.md: each API key at 10
// calls per second, and its account at 1000 per second across all its
// keys, decided in one atomic call.
func ExampleScope() {
	rdb, done := exampleRedis()
	defer done()
	limiter := redisrate.NewLimiter(rdb)
	secret := []byte("example secret, 16+ bytes; keep yours out of the code")
	accounts := directory{}
	for i := range 101 {
		accounts[fmt.Sprint("k", i)] = "acme"
	}

	// scopes:start
	limit, err := grpclimit.New(grpclimit.Config{
		Limiter: limiter,
		Name:    "api",
		Limits:  []redisrate.Limit{redisrate.PerSecond(10)}, // each API key's
		Key:     grpclimit.APIKey{Header: "x-api-key", Secret: secret, Verify: accounts.Issued},
		Scopes: []grpclimit.Scope{{
			Name:  "account", // its policy name in the metadata
			Key:   grpclimit.KeyFunc(accounts.AccountOf),
			Limit: redisrate.PerSecond(1000), // the account's, shared by its API keys
		}},
	})
	// scopes:end
	if err != nil {
		log.Fatal(err)
	}
	// call runs the unary interceptor as a server does, and returns the
	// policy that denied the call, or "".
	call := func(apiKey string) string {
		ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("x-api-key", apiKey))
		handler := func(ctx context.Context, req any) (any, error) { return nil, nil }
		_, err := limit.Unary()(ctx, nil, &grpc.UnaryServerInfo{FullMethod: "/shop.Orders/Get"}, handler)
		for _, d := range status.Convert(err).Details() {
			if qf, ok := d.(*errdetails.QuotaFailure); ok {
				return qf.Violations[0].Subject
			}
		}
		return ""
	}
	for range 10 {
		call("k0")
	}
	fmt.Printf("k0's 11th call: denied by %q\n", call("k0"))
	admitted := 0
	for i := 1; i < 100; i++ {
		for range 10 {
			if call(fmt.Sprint("k", i)) == "" {
				admitted++
			}
		}
	}
	fmt.Println("99 more keys:", admitted, "admitted")
	fmt.Printf("a fresh key: denied by %q\n", call("k100"))
	// Output:
	// k0's 11th call: denied by "api"
	// 99 more keys: 990 admitted
	// a fresh key: denied by "account"
}

// TestDocsScopesIsExample keeps docs/grpc.md's Scopes block the same code
// as ExampleScope.
func TestDocsScopesIsExample(t *testing.T) {
	readmetest.Check(t, "scope_example_test.go", "../docs/grpc.md", "scopes")
}
