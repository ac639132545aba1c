package grpclimit_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/redisrate/redisrate"
	"github.com/redisrate/redisrate/grpclimit"
	"github.com/redisrate/redisrate/httplimit"
	"github.com/redisrate/redisrate/ratecore"
)

// metadataKey keys calls by the raw value of a metadata key: a client's
// choice, any text at all, as a careless KeyFunc would take it.
func metadataKey(name string) grpclimit.KeyFunc {
	return func(ctx context.Context, _ string) (string, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		if v := md.Get(name); len(v) == 1 && v[0] != "" {
			return v[0], nil
		}
		return "", fmt.Errorf("%w: no %s", ratecore.ErrNoKey, name)
	}
}

// accountConfig holds each API key (raw x-key metadata) to 2 per minute
// and its account (x-account) to 3 per minute.
func accountConfig(limiter *redisrate.Limiter) grpclimit.Config {
	return grpclimit.Config{
		Limiter: limiter,
		Name:    "api",
		Limits:  []redisrate.Limit{redisrate.PerMinute(2)},
		Key:     metadataKey("x-key"),
		Scopes:  []grpclimit.Scope{{Name: "account", Key: metadataKey("x-account"), Limit: redisrate.PerMinute(3)}},
	}
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
	slices.Sort(out)
	return out
}

// An API key's limit and its account's, in one call: a denial by either
// writes on neither key; the metadata list both policies and describe the
// binding one; the QuotaFailure names it and the RetryInfo is its wait.
func TestScopesAPIKeyAndAccount(t *testing.T) {
	e := newEnv(t)
	c := serve(t, accountConfig(testLimiter(e.rdb)))
	const policy = `"api";q=2;w=60, "account";q=3;w=60`
	const keyK1, keyK2, account = "{api:account:a}:api:k1", "{api:account:a}:api:k2", "{api:account:a}"
	for i, s := range []struct {
		key       string
		code      codes.Code
		rateLimit string
		wait      time.Duration
		written   []string
	}{
		{"k1", codes.OK, `"api";r=1;t=30`, -1, []string{account, keyK1}},
		{"k1", codes.OK, `"api";r=0;t=30`, -1, []string{account, keyK1}},
		{"k1", codes.ResourceExhausted, `"api";r=0;t=30`, 30 * time.Second, nil},
		{"k2", codes.OK, `"account";r=0;t=20`, -1, []string{account, keyK2}},
		{"k2", codes.ResourceExhausted, `"account";r=0;t=20`, 20 * time.Second, nil},
	} {
		before := e.snapshot(t)
		md, err := call(t, c, "x-key", s.key, "x-account", "a")
		if status.Code(err) != s.code || one(md, "ratelimit-policy") != policy || one(md, "ratelimit") != s.rateLimit {
			t.Fatalf("call %d (%s): %v, %v; want %v, ratelimit %s", i, s.key, err, md, s.code, s.rateLimit)
		}
		if err != nil {
			binding := strings.Trim(strings.Split(s.rateLimit, ";")[0], `"`)
			if wait, subject := details(t, err); wait != s.wait || subject != binding {
				t.Errorf("call %d: RetryInfo %v, QuotaFailure %q; want %v, %q", i, wait, subject, s.wait, binding)
			}
		}
		if got := changed(before, e.snapshot(t)); !slices.Equal(got, s.written) {
			t.Errorf("call %d (%s, %v): wrote %q; want %q", i, s.key, status.Code(err), got, s.written)
		}
	}
}

// A method with limits of its own keeps its key per method under the
// account's tag; one with only a cost shares the base key; the account is
// shared by all.
func TestScopesMethods(t *testing.T) {
	e := newEnv(t)
	cfg := accountConfig(testLimiter(e.rdb))
	cfg.Scopes[0].Limit = redisrate.PerMinute(10)
	cfg.Methods = map[string]grpclimit.Method{
		check: {Cost: 2},
		watch: {Limits: []redisrate.Limit{redisrate.PerMinute(5).WithName("watch")}},
	}
	c := serve(t, cfg)
	md, err := call(t, c, "x-key", "k", "x-account", "a")
	if err != nil || one(md, "ratelimit") != `"api";r=0;t=30` {
		t.Fatalf("Check of cost 2: %v, %v", err, md)
	}
	ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), "x-key", "k", "x-account", "a"), 10*time.Second)
	defer cancel()
	s, err := c.Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); err != nil {
		t.Fatal(err)
	}
	md, _ = s.Header()
	if one(md, "ratelimit-policy") != `"watch";q=5;w=60, "account";q=10;w=60` || one(md, "ratelimit") != `"watch";r=4;t=12` {
		t.Errorf("Watch metadata %v", md)
	}
	var got []string
	for k := range e.snapshot(t) {
		got = append(got, k)
	}
	slices.Sort(got)
	want := []string{"{api:account:a}", "{api:account:a}:/grpc.health.v1.Health/Watch:k", "{api:account:a}:api:k"}
	if !slices.Equal(got, want) {
		t.Errorf("keys %q; want %q", got, want)
	}
	res, err := testLimiter(e.rdb).Decide(context.Background(), redisrate.Request{Kind: redisrate.KindPeek, Key: "{api:account:a}", Limits: []redisrate.Limit{redisrate.PerMinute(10)}})
	if err != nil || res.Remaining != 7 {
		t.Errorf("the account alone: %v, %v; want 7 left (2 for Check, 1 for Watch)", res, err)
	}
}

// A client that chooses the text of the broadest key cannot move its keys
// out of their hash tag, nor reach another client's keys.
func TestScopesHostileKeysStayInTheirTag(t *testing.T) {
	e := newEnv(t)
	c := serve(t, accountConfig(testLimiter(e.rdb)))
	for _, account := range []string{"x}:api:k", "}", "{}", "%7D", "%"} {
		before := e.snapshot(t)
		if _, err := call(t, c, "x-key", "k", "x-account", account); err != nil {
			t.Fatalf("account %q: %v", account, err)
		}
		written := changed(before, e.snapshot(t))
		want := "{api:account:" + strings.NewReplacer("%", "%25", "}", "%7D").Replace(account) + "}"
		if !slices.Equal(written, []string{want, want + ":api:k"}) {
			t.Errorf("account %q: wrote %q; want %q and its API key's", account, written, want)
		}
	}
	// The attacker's account "y}:api:k" would otherwise be the key of the
	// API key "k}" of account "y".
	for i := range 3 {
		if _, err := call(t, c, "x-key", fmt.Sprint("z", i), "x-account", "y}:api:k"); err != nil {
			t.Fatalf("the attacker's call %d: %v", i, err)
		}
	}
	for i, want := range []codes.Code{codes.OK, codes.OK, codes.ResourceExhausted} {
		if _, err := call(t, c, "x-key", "k}", "x-account", "y"); status.Code(err) != want {
			t.Errorf("the victim's call %d: %v; want %v: its quota is its own", i, err, want)
		}
	}
}

// An HTTP API and a gRPC one of the same Name and scopes share an
// account's state: the same keys.
func TestScopesSharedWithHTTP(t *testing.T) {
	e := newEnv(t)
	limiter := testLimiter(e.rdb)
	c := serve(t, accountConfig(limiter))
	h, err := httplimit.New(httplimit.Config{
		Limiter: limiter,
		Name:    "api",
		Limits:  []redisrate.Limit{redisrate.PerMinute(2)},
		Key:     httplimit.KeyFunc(func(r *http.Request) (string, error) { return r.Header.Get("X-Key"), nil }),
		Scopes: []httplimit.Scope{{Name: "account", Limit: redisrate.PerMinute(3),
			Key: httplimit.KeyFunc(func(r *http.Request) (string, error) { return r.Header.Get("X-Account"), nil })}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("X-Key", "k")
		r.Header.Set("X-Account", "a")
		w := httptest.NewRecorder()
		h.Handler(http.NotFoundHandler()).ServeHTTP(w, r)
		if w.Code != 404 {
			t.Fatalf("HTTP: %d", w.Code)
		}
	}
	md, err := call(t, c, "x-key", "k2", "x-account", "a")
	if err != nil || one(md, "ratelimit") != `"account";r=0;t=20` {
		t.Errorf("gRPC after 2 HTTP requests of the account: %v, %v; want its last unit", err, md)
	}
	// The HTTP client's key has spent its own limit there: denied by it
	// (the longer wait), which a key of its own here would not be.
	if md, err := call(t, c, "x-key", "k", "x-account", "a"); status.Code(err) != codes.ResourceExhausted || !strings.HasPrefix(one(md, "ratelimit"), `"api";r=0`) {
		t.Errorf("gRPC with the HTTP client's key: %v, %v; want ResourceExhausted by the key's own limit, spent over HTTP", err, md)
	}
}

// A scope's key missing is the client's fault, failing it the server's;
// neither writes anything. In shadow mode the call goes through.
func TestScopesKeyErrorsAndShadow(t *testing.T) {
	e := newEnv(t)
	var told []error
	cfg := accountConfig(testLimiter(e.rdb))
	cfg.Scopes = append(cfg.Scopes, grpclimit.Scope{Name: "org", Limit: redisrate.PerMinute(9),
		Key: grpclimit.KeyFunc(func(ctx context.Context, _ string) (string, error) { return "", errors.New("directory down") })})
	cfg.OnError = func(_ context.Context, _ string, err error) { told = append(told, err) }
	c := serve(t, cfg)
	if _, err := call(t, c, "x-key", "k"); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "x-account") {
		t.Errorf("no account: %v; want InvalidArgument naming x-account", err)
	}
	if _, err := call(t, c, "x-key", "k", "x-account", "a"); status.Code(err) != codes.Internal || strings.Contains(err.Error(), "directory") {
		t.Errorf("a failing scope key: %v; want Internal, the error not shown", err)
	}
	if len(told) != 2 || !errors.Is(told[0], ratecore.ErrNoKey) || len(e.mr.Keys()) != 0 {
		t.Errorf("OnError told %v, keys %q; want 2 errors, nothing written", told, e.mr.Keys())
	}

	// In shadow mode, a call whose scope key is missing or fails goes
	// through too (OnError is told).
	told = nil
	cfg.Shadow = true
	c = serve(t, cfg)
	for _, kv := range [][]string{{"x-key", "k"}, {"x-key", "k", "x-account", "a"}} {
		if md, err := call(t, c, kv...); err != nil || one(md, "ratelimit") != "" {
			t.Errorf("shadow mode, %q: %v, %v; want through, no metadata", kv, err, md)
		}
	}
	if len(told) != 2 || len(e.mr.Keys()) != 0 {
		t.Errorf("shadow mode: OnError told %v, keys %q; want 2 errors, nothing written", told, e.mr.Keys())
	}

	shadow := accountConfig(testLimiter(e.rdb))
	shadow.Shadow = true
	c = serve(t, shadow)
	for i := range 4 {
		if md, err := call(t, c, "x-key", fmt.Sprint("k", i), "x-account", "a"); err != nil || one(md, "ratelimit") != "" {
			t.Errorf("shadow call %d: %v, %v; want through, no metadata", i, err, md)
		}
	}
	if _, err := call(t, serve(t, accountConfig(testLimiter(e.rdb))), "x-key", "k9", "x-account", "a"); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("enforced after the shadow's 3 admissions on the account: %v", err)
	}
}

// New refuses what scopes cannot do, with an error that says why.
func TestScopesNewErrors(t *testing.T) {
	limiter := testLimiter(newEnv(t).rdb)
	with := func(f func(*grpclimit.Config)) grpclimit.Config {
		c := accountConfig(limiter)
		f(&c)
		return c
	}
	for _, tc := range []struct {
		name string
		c    grpclimit.Config
		want string
	}{
		{"two limits on the key", with(func(c *grpclimit.Config) { c.Limits = append(c.Limits, redisrate.PerHour(100)) }),
			"Config.Limits: 2 limits with Config.Scopes: with scopes, each key holds one limit"},
		{"two limits on a method", with(func(c *grpclimit.Config) {
			c.Methods = map[string]grpclimit.Method{check: {Limits: []redisrate.Limit{redisrate.PerMinute(1), redisrate.PerHour(9)}}}
		}), `Config.Methods["/grpc.health.v1.Health/Check"]: 2 limits with Config.Scopes`},
		{"two algorithms", with(func(c *grpclimit.Config) { c.Scopes[0].Limit = c.Scopes[0].Limit.WithAlgorithm(redisrate.FixedWindow) }),
			`Config.Scopes[0] ("account") has a fixed_window limit, and the call's own is gcra`},
		{"a scope named as the interceptor", with(func(c *grpclimit.Config) { c.Scopes[0].Name = "api" }), `has the Name "api" of Config.Name`},
		{"a '}' in a scope name", with(func(c *grpclimit.Config) { c.Scopes[0].Name = "acc}" }), "'{' and '}' mark the Redis Cluster hash tag"},
		{"a '{' in Name", with(func(c *grpclimit.Config) { c.Name = "{api" }), `invalid Config.Name "{api": '{' and '}'`},
		// The segment of Config.Limits' keys is Name, a method's its name:
		// their keys would meet.
		{"Name, a method's name", with(func(c *grpclimit.Config) {
			c.Name = check
			c.Methods = map[string]grpclimit.Method{check: {Limits: []redisrate.Limit{redisrate.PerMinute(1)}}}
		}), `Config.Methods["/grpc.health.v1.Health/Check"]: the name "/grpc.health.v1.Health/Check" is that of Config.Name`},
		{"a scope without a key", with(func(c *grpclimit.Config) { c.Scopes[0].Key = nil }), `Config.Scopes[0] ("account") has no Key`},
		{"a scope's limit invalid", with(func(c *grpclimit.Config) { c.Scopes[0].Limit = redisrate.Limit{Period: time.Second} }), `Config.Scopes[0] ("account"): invalid Limit`},
	} {
		_, err := grpclimit.New(tc.c)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want an error with %q", tc.name, err, tc.want)
		}
	}
}
