package grpclimit_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/redisrate/redisrate"
	"github.com/redisrate/redisrate/grpclimit"
	"github.com/redisrate/redisrate/httplimit"
	"github.com/redisrate/redisrate/ratecore"
)

const (
	check = "/grpc.health.v1.Health/Check"
	watch = "/grpc.health.v1.Health/Watch"
)

var secret = []byte("0123456789abcdef-test-secret")

// env is a miniredis on a fixed clock.
type env struct {
	mr  *miniredis.Miniredis
	rdb *redis.Client
}

func newEnv(t *testing.T) *env {
	t.Helper()
	mr := miniredis.RunT(t)
	mr.SetTime(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC))
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	return &env{mr: mr, rdb: rdb}
}

// serve starts a gRPC server with the health service behind c's
// interceptors on 127.0.0.1, and returns a client connected to it.
func serve(t *testing.T, c grpclimit.Config) healthpb.HealthClient {
	t.Helper()
	in, err := grpclimit.New(c)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.UnaryInterceptor(in.Unary()), grpc.StreamInterceptor(in.Stream()))
	hs := health.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = conn.Close()
		hs.Shutdown()
		srv.Stop()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return healthpb.NewHealthClient(conn)
}

// call makes a unary Check and returns its error and response metadata.
func call(t *testing.T, c healthpb.HealthClient, kv ...string) (metadata.MD, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, kv...)
	var md metadata.MD
	_, err := c.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Header(&md))
	return md, err
}

func one(md metadata.MD, k string) string {
	if v := md.Get(k); len(v) == 1 {
		return v[0]
	}
	return strings.Join(md.Get(k), "|")
}

// details returns the RetryInfo delay (or -1) and the QuotaFailure subject.
func details(t *testing.T, err error) (time.Duration, string) {
	t.Helper()
	st, _ := status.FromError(err)
	wait, subject := time.Duration(-1), ""
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.RetryInfo:
			wait = d.RetryDelay.AsDuration()
		case *errdetails.QuotaFailure:
			subject = d.Violations[0].Subject
		case error:
			t.Errorf("undecodable detail: %v", d)
		}
	}
	return wait, subject
}

func TestUnaryLimit(t *testing.T) {
	e := newEnv(t)
	c := serve(t, grpclimit.Config{Limiter: testLimiter(e.rdb), Limits: []redisrate.Limit{redisrate.PerMinute(2)}, Name: "api"})
	for i, want := range []string{`"api";r=1;t=30`, `"api";r=0;t=30`} {
		md, err := call(t, c)
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if one(md, "ratelimit-policy") != `"api";q=2;w=60` || one(md, "ratelimit") != want {
			t.Errorf("call %d: metadata %v; want ratelimit %s", i, md, want)
		}
	}
	md, err := call(t, c)
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("third call: %v; want ResourceExhausted", err)
	}
	wait, subject := details(t, err)
	if wait != 30*time.Second || subject != "api" {
		t.Errorf("RetryInfo %v, QuotaFailure %q; want 30s, api", wait, subject)
	}
	if one(md, "ratelimit") != `"api";r=0;t=30` || one(md, "ratelimit-policy") != `"api";q=2;w=60` {
		t.Errorf("denial metadata %v", md)
	}
	// The key is the peer's address.
	if keys := e.mr.Keys(); len(keys) != 1 || keys[0] != "api:ip:127.0.0.1" {
		t.Errorf("keys %v", keys)
	}
	// After the wait, admitted again.
	e.mr.SetTime(time.Date(2026, 11, 22, 12, 0, 30, 0, time.UTC))
	if _, err := call(t, c); err != nil {
		t.Errorf("after RetryInfo's wait: %v", err)
	}
}

// Per-method limits and costs, a stream, API keys in metadata, exemption.
func TestMethodsAndStreams(t *testing.T) {
	e := newEnv(t)
	c := serve(t, grpclimit.Config{
		Limiter: testLimiter(e.rdb),
		Limits:  []redisrate.Limit{redisrate.PerMinute(10)},
		Methods: map[string]grpclimit.Method{
			check: {Cost: 4},
			watch: {Limits: []redisrate.Limit{redisrate.PerMinute(1).WithName("watch")}},
		},
		Key:    grpclimit.APIKey{Header: "x-api-key", Secret: secret, Authenticated: true},
		Exempt: func(ctx context.Context, method string) bool { return strings.HasPrefix(method, "/grpc.reflection.") },
	})
	// Check costs 4 of the shared 10.
	md, err := call(t, c, "x-api-key", "k1")
	if err != nil || one(md, "ratelimit") != `"grpc";r=6;t=6` {
		t.Fatalf("Check: %v, %v", err, md)
	}
	call(t, c, "x-api-key", "k1")
	_, err = call(t, c, "x-api-key", "k1")
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("third Check of cost 4 in 10: %v", err)
	}
	if wait, _ := details(t, err); wait != 12*time.Second {
		t.Errorf("RetryInfo %v; want 12s (2 units of 6 s)", wait)
	}
	// Another key, its own quota; no key: InvalidArgument.
	if _, err := call(t, c, "x-api-key", "k2"); err != nil {
		t.Errorf("another key: %v", err)
	}
	if _, err := call(t, c); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "x-api-key") {
		t.Errorf("no key: %v; want InvalidArgument naming x-api-key", err)
	}

	// Watch, a stream, has its own limit: one per minute.
	openWatch := func() (metadata.MD, error) {
		ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), "x-api-key", "k1"), 10*time.Second)
		defer cancel()
		s, err := c.Watch(ctx, &healthpb.HealthCheckRequest{})
		if err != nil {
			return nil, err
		}
		_, err = s.Recv()
		md, _ := s.Header()
		if errors.Is(err, io.EOF) {
			err = nil
		}
		return md, err
	}
	md, err = openWatch()
	if err != nil || one(md, "ratelimit-policy") != `"watch";q=1;w=60` || one(md, "ratelimit") != `"watch";r=0;t=60` {
		t.Fatalf("Watch: %v, %v", err, md)
	}
	md, err = openWatch()
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("second Watch: %v; want ResourceExhausted", err)
	}
	if wait, subject := details(t, err); wait != time.Minute || subject != "watch" {
		t.Errorf("second Watch: RetryInfo %v, subject %q", wait, subject)
	}
	if one(md, "ratelimit") != `"watch";r=0;t=60` {
		t.Errorf("second Watch metadata %v", md)
	}
	for _, k := range e.mr.Keys() {
		if strings.Contains(k, "k1") {
			t.Errorf("key %q holds the API key", k)
		}
	}
	if n := len(e.mr.Keys()); n != 3 { // k1 and k2 on grpc, k1 on Watch
		t.Errorf("keys %v", e.mr.Keys())
	}
}

// With the deny cache, a costlier call after a cheaper one was denied got
// the cheaper one's RetryInfo from the cache, and a client that waited it
// was denied again. The RetryInfo of a costlier call is now the wait Redis
// gives its cost, and Redis admits the call once it has passed. Redis's
// clock moves only when the test moves it, so the waits are exact and
// nothing sleeps. Watch costs 1 and Check 2, on the same key.
func TestDenyCacheRetryInfoIsHonestForEveryCost(t *testing.T) {
	for a := redisrate.GCRA; a <= redisrate.SlidingLog; a++ {
		t.Run(a.String(), func(t *testing.T) {
			e := newEnv(t)
			limit := redisrate.Per(2, 2*time.Second).WithAlgorithm(a)
			c := serve(t, grpclimit.Config{
				Limiter: testLimiter(e.rdb, redisrate.WithDenyCache(100)),
				Limits:  []redisrate.Limit{limit},
				Methods: map[string]grpclimit.Method{check: {Cost: 2}, watch: {Cost: 1}},
				Key:     metadataKey("x-key"),
			})
			watchOnce := func() error {
				ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), "x-key", "client"), 10*time.Second)
				defer cancel()
				s, err := c.Watch(ctx, &healthpb.HealthCheckRequest{})
				if err != nil {
					return err
				}
				_, err = s.Recv()
				return err
			}
			for i, want := range []codes.Code{codes.OK, codes.OK, codes.ResourceExhausted} { // the denial of cost 1 is cached
				if err := watchOnce(); status.Code(err) != want {
					t.Fatalf("Watch %d, of cost 1: %v; want %v", i, err, want)
				}
			}
			_, err := call(t, c, "x-key", "client")
			wait, _ := details(t, err)
			truth, cerr := testLimiter(e.rdb).Decide(context.Background(), redisrate.Request{Kind: redisrate.KindCheck, Key: "grpc:client", Limits: []redisrate.Limit{limit}, N: 2})
			if cerr != nil || truth.Allowed {
				t.Fatalf("Redis's answer to cost 2: %v, %v; want a denial", truth, cerr)
			}
			if status.Code(err) != codes.ResourceExhausted || wait != truth.RetryAfter {
				t.Errorf("Check, of cost 2: %v, RetryInfo %v; want ResourceExhausted, Redis's wait %v", err, wait, truth.RetryAfter)
			}
			// A client that waits its RetryInfo is admitted.
			e.mr.SetTime(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC).Add(wait))
			if res, err := testLimiter(e.rdb).Decide(context.Background(), redisrate.Request{Kind: redisrate.KindCheck, Key: "grpc:client", Limits: []redisrate.Limit{limit}, N: 2}); err != nil || !res.Allowed {
				t.Errorf("cost 2 after its RetryInfo of %v: %v, %v; want admitted", wait, res, err)
			}
		})
	}
}

// Redis down: what each failure policy tells the client.
func TestRedisDown(t *testing.T) {
	lim := []redisrate.Limit{redisrate.PerMinute(10)}
	down := func(t *testing.T, opts ...redisrate.Option) *redisrate.Limiter {
		e := newEnv(t)
		e.mr.SetError("ERR injected failure")
		return testLimiter(e.rdb, opts...)
	}
	t.Run("default: through, no quota", func(t *testing.T) {
		md, err := call(t, serve(t, grpclimit.Config{Limiter: down(t), Limits: lim}))
		if err != nil || len(md.Get("ratelimit")) != 0 {
			t.Errorf("%v, %v; want the call through, without ratelimit", err, md)
		}
	})
	t.Run("FailError: Unavailable with RetryInfo", func(t *testing.T) {
		md, err := call(t, serve(t, grpclimit.Config{Limiter: down(t), Limits: lim, FailurePolicy: redisrate.FailError}))
		if status.Code(err) != codes.Unavailable || strings.Contains(err.Error(), "injected") {
			t.Fatalf("%v; want Unavailable without the Redis error", err)
		}
		if wait, _ := details(t, err); wait != time.Second {
			t.Errorf("RetryInfo %v; want 1s", wait)
		}
		if len(md.Get("ratelimit")) != 0 {
			t.Errorf("ratelimit metadata %v without a decision", md)
		}
	})
	t.Run("Config.FailurePolicy FailOpen over a Limiter without a policy: through", func(t *testing.T) {
		if md, err := call(t, serve(t, grpclimit.Config{Limiter: down(t), Limits: lim, FailurePolicy: redisrate.FailOpen})); err != nil || len(md.Get("ratelimit")) != 0 {
			t.Errorf("%v, %v", err, md)
		}
	})
	// Issue 38, finding 1: an explicit FailClosed or FailError on the
	// Limiter is never served open by a Config without a policy of its
	// own, and a FailOpen Config cannot overrule it (New refuses).
	t.Run("the Limiter's FailClosed or FailError: Unavailable", func(t *testing.T) {
		for _, p := range []redisrate.FailurePolicy{redisrate.FailClosed, redisrate.FailError} {
			_, err := call(t, serve(t, grpclimit.Config{Limiter: down(t, redisrate.WithFailurePolicy(p)), Limits: lim}))
			if status.Code(err) != codes.Unavailable {
				t.Errorf("%v: %v; want Unavailable", p, err)
			}
			_, err = grpclimit.New(grpclimit.Config{Limiter: down(t, redisrate.WithFailurePolicy(p)), Limits: lim, FailurePolicy: redisrate.FailOpen})
			if err == nil || !strings.Contains(err.Error(), "Config.FailurePolicy is FailOpen") {
				t.Errorf("a FailOpen Config over a %v Limiter: %v; want New to refuse it", p, err)
			}
		}
	})
	t.Run("Config.FailurePolicy FailClosed over the Limiter's FailOpen: Unavailable", func(t *testing.T) {
		_, err := call(t, serve(t, grpclimit.Config{Limiter: down(t, redisrate.WithFailurePolicy(redisrate.FailOpen)), Limits: lim, FailurePolicy: redisrate.FailClosed}))
		if wait, _ := details(t, err); status.Code(err) != codes.Unavailable || wait != time.Second {
			t.Errorf("%v, RetryInfo %v; want Unavailable, 1s", err, wait)
		}
	})
	t.Run("FailOpen: through, no quota", func(t *testing.T) {
		md, err := call(t, serve(t, grpclimit.Config{Limiter: down(t, redisrate.WithFailurePolicy(redisrate.FailOpen)), Limits: lim}))
		if err != nil || len(md.Get("ratelimit")) != 0 || one(md, "ratelimit-policy") != `"grpc";q=10;w=60` {
			t.Errorf("%v, %v", err, md)
		}
	})
	t.Run("FailClosed: Unavailable, not ResourceExhausted", func(t *testing.T) {
		md, err := call(t, serve(t, grpclimit.Config{Limiter: down(t), Limits: lim, FailurePolicy: redisrate.FailClosed}))
		if status.Code(err) != codes.Unavailable {
			t.Fatalf("%v; want Unavailable", err)
		}
		if wait, _ := details(t, err); wait != time.Second {
			t.Errorf("RetryInfo %v; want 1s (the outage's hint, not the quota's)", wait)
		}
		// Not a day for a daily quota (issue 24 item 4).
		_, err = call(t, serve(t, grpclimit.Config{Limiter: down(t), Limits: []redisrate.Limit{redisrate.PerDay(1)}, FailurePolicy: redisrate.FailClosed}))
		if wait, _ := details(t, err); status.Code(err) != codes.Unavailable || wait != time.Second {
			t.Errorf("PerDay(1): %v, RetryInfo %v; want Unavailable, 1s", err, wait)
		}
		if len(md.Get("ratelimit")) != 0 {
			t.Errorf("ratelimit metadata %v on a policy's denial", md)
		}
	})
	t.Run("a key holding other data: Internal", func(t *testing.T) {
		e := newEnv(t)
		if err := e.rdb.Set(context.Background(), "grpc:ip:127.0.0.1", "order 42", 0).Err(); err != nil {
			t.Fatal(err)
		}
		var seen error
		onError := func(ctx context.Context, method string, err error) { seen = err }
		_, err := call(t, serve(t, grpclimit.Config{Limiter: testLimiter(e.rdb), Limits: lim, OnError: onError}))
		if status.Code(err) != codes.Internal || !errors.Is(seen, redisrate.ErrForeignKey) || seen == nil {
			t.Errorf("%v (seen %v); want Internal and ErrForeignKey", err, seen)
		}
	})
}

func TestNewErrors(t *testing.T) {
	l := testLimiter(nil)
	one := []redisrate.Limit{redisrate.PerSecond(1)}
	for _, tc := range []struct {
		c    grpclimit.Config
		want string
	}{
		{grpclimit.Config{Limits: one}, "Limiter is nil"},
		{grpclimit.Config{Limiter: l}, "no limits"},
		{grpclimit.Config{Limiter: l, Limits: []redisrate.Limit{redisrate.PerSecond(0)}}, "invalid"},
		{grpclimit.Config{Limiter: l, Limits: one, Name: "a\nb"}, "printable ASCII"},
		{grpclimit.Config{Limiter: l, Methods: map[string]grpclimit.Method{check: {Cost: 2}}}, "no Limits, and there are no Config.Limits"},
		{grpclimit.Config{Limiter: l, Limits: one, Methods: map[string]grpclimit.Method{"Check": {Cost: 2}}}, "not a full method name"},
		{grpclimit.Config{Limiter: l, Limits: one, Methods: map[string]grpclimit.Method{check: {Cost: -1}}}, "negative Cost"},
		{grpclimit.Config{Limiter: l, Limits: one, Key: grpclimit.APIKey{Secret: secret}}, "APIKey has no Header"},
		{grpclimit.Config{Limiter: l, Limits: one, Key: grpclimit.APIKey{Header: "x-api-key", Secret: []byte("short")}}, "at least 16"},
		{grpclimit.Config{Limiter: l, Limits: one, Key: grpclimit.KeyFunc(nil)}, "nil KeyFunc"},
		// Without the check, every call panicked on the nil function.
		{grpclimit.Config{Limiter: l, Limits: one, Key: nilKeyer{}}, "Config.Key gives a nil KeyFunc"},
		{grpclimit.Config{Limiter: l, Limits: []redisrate.Limit{redisrate.PerSecond(1).WithName("a"), redisrate.PerMinute(5).WithName("a")}}, `"a" twice`},
		// ':' ends each name in a client's key: "grpc:/grpc.health.v1.Health/Check"
		// would share the keys of "grpc" with Check's own limits.
		{grpclimit.Config{Limiter: l, Limits: one, Name: "grpc:" + check}, `invalid Config.Name "grpc:/grpc.health.v1.Health/Check": ':' separates`},
		{grpclimit.Config{Limiter: l, Limits: one, Methods: map[string]grpclimit.Method{"/a:b.S/M": {Limits: one}}}, "':' separates"},
		// '{' and '}' mark the hash tag of scoped keys: with Scopes, every
		// call of such a method failed with Internal.
		{grpclimit.Config{Limiter: l, Limits: one, Methods: map[string]grpclimit.Method{"/a{b}.S/M": {Limits: one}},
			Scopes: []grpclimit.Scope{{Name: "account", Key: grpclimit.PeerIP{}, Limit: redisrate.PerMinute(3)}}}, `Config.Methods["/a{b}.S/M"]: '{' and '}'`},
	} {
		if _, err := grpclimit.New(tc.c); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v) = %v; want an error containing %q", tc.c, err, tc.want)
		}
	}
}

// nilKeyer is a Keyer of one's own with a bug: it gives no KeyFunc and no
// error.
type nilKeyer struct{}

func (nilKeyer) KeyFunc() (grpclimit.KeyFunc, error) { return nil, nil }

// A key function that returns an empty key refuses the call: it never
// means "no limit".
func TestEmptyKey(t *testing.T) {
	e := newEnv(t)
	empty := grpclimit.KeyFunc(func(ctx context.Context, method string) (string, error) { return "", nil })
	c := serve(t, grpclimit.Config{Limiter: testLimiter(e.rdb), Limits: []redisrate.Limit{redisrate.PerMinute(1)}, Key: empty})
	for range 3 {
		if _, err := call(t, c); status.Code(err) != codes.InvalidArgument {
			t.Fatalf("%v; want InvalidArgument", err)
		}
	}
}

// A client sets its calls' deadlines (grpc-timeout). Calls whose deadline
// passes before the limit is decided must not run the handler, nor open the
// breaker for the other clients, under FailOpen (150 µs deadlines once ran
// the handler 3,497 times in 2 s at 3/min). In shadow mode, which fails no
// call for the limiter's sake, they go through as without the middleware:
// an admission buys nothing there.
func TestTinyDeadlinesBuyNothing(t *testing.T) {
	for name, shadow := range map[string]bool{"enforcing": false, "shadow": true} {
		e := newEnv(t)
		in, err := grpclimit.New(grpclimit.Config{
			Limiter: testLimiter(e.rdb, redisrate.WithFailurePolicy(redisrate.FailOpen)),
			Limits:  []redisrate.Limit{redisrate.PerMinute(3)},
			Key:     grpclimit.APIKey{Header: "x-api-key", Secret: secret, Authenticated: true},
			Shadow:  shadow,
		})
		if err != nil {
			t.Fatal(err)
		}
		// The network between them: a call arrives when its deadline has
		// (nearly) passed, as 150 µs deadlines do.
		late := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
			if md, _ := metadata.FromIncomingContext(ctx); len(md.Get("x-late")) > 0 {
				<-ctx.Done()
			}
			return handler(ctx, req)
		}
		var ran atomic.Int64
		count := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
			ran.Add(1)
			return handler(ctx, req)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv := grpc.NewServer(grpc.ChainUnaryInterceptor(late, in.Unary(), count))
		healthpb.RegisterHealthServer(srv, health.NewServer())
		go func() { _ = srv.Serve(ln) }()
		conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		client := healthpb.NewHealthClient(conn)
		check := func(key string, timeout time.Duration, kv ...string) error {
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			ctx = metadata.AppendToOutgoingContext(ctx, append([]string{"x-api-key", key}, kv...)...)
			_, err := client.Check(ctx, &healthpb.HealthCheckRequest{})
			return err
		}
		for i := range 3 {
			if err := check("victim", 10*time.Second); err != nil {
				t.Fatalf("%s: victim call %d: %v", name, i, err)
			}
		}
		for range 30 {
			err := check("attacker", 5*time.Millisecond, "x-late", "1")
			if status.Code(err) != codes.DeadlineExceeded && (!shadow || err != nil) {
				t.Errorf("%s: a late call: %v; want DeadlineExceeded", name, err)
			}
		}
		if shadow { // shadow mode fails no call for the limiter's sake: the late ones go through as they would without it
			if n := ran.Load(); n < 3 {
				t.Errorf("%s: the handler ran %d times; want the victim's 3 at least", name, n)
			}
			_ = conn.Close()
			srv.Stop()
			continue
		}
		for i := range 5 {
			if err := check("victim", 10*time.Second); status.Code(err) != codes.ResourceExhausted {
				t.Errorf("%s: victim call %d after the late calls: %v; want ResourceExhausted", name, i, err)
			}
		}
		// Handlers that ran: the victim's 3, nothing for the late calls.
		if n := ran.Load(); n != 3 {
			t.Errorf("%s: the handler ran %d times; want 3 (the limit)", name, n)
		}
		_ = conn.Close()
		srv.Stop()
	}
}

// wouldDeny is an Observer that counts the calls shadow mode admitted only
// because of itself.
type wouldDeny struct{ n atomic.Int64 }

func (w *wouldDeny) Start(ctx context.Context, _ redisrate.Decision) context.Context { return ctx }
func (w *wouldDeny) End(_ context.Context, _ redisrate.Decision, res redisrate.Result, _ error) {
	if res.WouldDeny {
		w.n.Add(1)
	}
}

// Shadow mode: every call decided, recorded and let through; never
// ResourceExhausted, no metadata unless asked for; the observer sees what
// would have been denied; Redis down lets calls through too.
func TestShadow(t *testing.T) {
	for _, headers := range []bool{false, true} {
		e := newEnv(t)
		var obs wouldDeny
		c := serve(t, grpclimit.Config{
			Limiter:       testLimiter(e.rdb, redisrate.WithObserver(&obs)),
			Limits:        []redisrate.Limit{redisrate.PerMinute(2)},
			Shadow:        true,
			ShadowHeaders: headers,
		})
		for i := range 5 {
			md, err := call(t, c)
			if err != nil {
				t.Errorf("headers %v, call %d: %v; want it through", headers, i, err)
			}
			if got := len(md.Get("ratelimit")) > 0; got != headers {
				t.Errorf("headers %v, call %d: metadata %v", headers, i, md)
			}
		}
		if n := obs.n.Load(); n != 3 {
			t.Errorf("headers %v: %d would have been denied; want 3", headers, n)
		}
		// Enforced, the same key: the shadow's admissions were recorded.
		if _, err := call(t, serve(t, grpclimit.Config{Limiter: testLimiter(e.rdb), Limits: []redisrate.Limit{redisrate.PerMinute(2)}})); status.Code(err) != codes.ResourceExhausted {
			t.Errorf("enforced after the shadow's 2 admissions: %v; want ResourceExhausted", err)
		}
	}
	e := newEnv(t)
	e.mr.SetError("ERR injected failure")
	if _, err := call(t, serve(t, grpclimit.Config{Limiter: testLimiter(e.rdb), Limits: []redisrate.Limit{redisrate.PerMinute(2)}, Shadow: true})); err != nil {
		t.Errorf("shadow mode, Redis down: %v; want the call through", err)
	}
}

// One vocabulary: the failure policy, in the Limiter's words, decides
// HTTP and gRPC alike, and so does the default, FailOpen (issue 22:
// switching HTTP to serve on error left gRPC refusing).
func TestOneSettingForHTTPAndGRPC(t *testing.T) {
	lim := []redisrate.Limit{redisrate.PerMinute(1)}
	for _, c := range []struct {
		policy redisrate.FailurePolicy
		code   codes.Code
		status int
	}{
		{0, codes.OK, 200},
		{redisrate.FailError, codes.Unavailable, 503},
		{redisrate.FailClosed, codes.Unavailable, 503},
		{redisrate.FailOpen, codes.OK, 200},
	} {
		e := newEnv(t)
		e.mr.SetError("ERR injected failure")
		limiter := testLimiter(e.rdb)
		_, err := call(t, serve(t, grpclimit.Config{Limiter: limiter, Limits: lim, FailurePolicy: c.policy}))
		h, herr := httplimit.New(httplimit.Config{Limiter: limiter, Limits: lim, FailurePolicy: c.policy})
		if herr != nil {
			t.Fatal(herr)
		}
		w := httptest.NewRecorder()
		h.Handler(http.NotFoundHandler()).ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
		if w.Code == 404 {
			w.Code = 200 // served
		}
		if status.Code(err) != c.code || w.Code != c.status {
			t.Errorf("Redis down: gRPC %v, HTTP %d; want %v, %d", status.Code(err), w.Code, c.code, c.status)
		}
	}
}

// The keys of Config.Limits (Name:key) and those of a method with limits
// of its own (Name:method:key) share their start: a client whose key
// starts with a method's name cannot reach another client's keys of that
// method. Here keys are raw metadata, as a username would be: the
// attacker "/s.S/Own:alice" spent alice's quota of /s.S/Own with calls of
// another method.
func TestBaseKeysNeverMeetAMethodsKeys(t *testing.T) {
	e := newEnv(t)
	in, err := grpclimit.New(grpclimit.Config{
		Limiter: testLimiter(e.rdb),
		Limits:  []redisrate.Limit{redisrate.PerMinute(10)},
		Methods: map[string]grpclimit.Method{"/s.S/Own": {Limits: []redisrate.Limit{redisrate.PerMinute(1)}}},
		Key:     metadataKey("x-key"),
	})
	if err != nil {
		t.Fatal(err)
	}
	unary := in.Unary()
	callAs := func(key, method string) error {
		ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("x-key", key))
		_, err := unary(ctx, nil, &grpc.UnaryServerInfo{FullMethod: method}, func(context.Context, any) (any, error) { return nil, nil })
		return err
	}
	for _, key := range []string{"/s.S/Own:alice", "%/s.S/Own:alice", "/x", "%x", "%%x"} {
		if err := callAs(key, "/s.S/Other"); err != nil {
			t.Fatalf("%q on /s.S/Other: %v", key, err)
		}
	}
	if err := callAs("alice", "/s.S/Own"); err != nil {
		t.Errorf("alice's first call of /s.S/Own: %v; want it admitted: her quota is her own", err)
	}
	// The escaped keys are all different: each of the five above wrote its own.
	if n := len(e.mr.Keys()); n != 6 {
		t.Errorf("%d keys %q; want 6", n, e.mr.Keys())
	}
}

// TestQuota: a quota every client shares (Config.Quota) serves its units
// across clients, each under its own limit, and refuses the rest with
// ResourceExhausted.
func TestQuota(t *testing.T) {
	e := newEnv(t)
	c := serve(t, grpclimit.Config{
		Limiter: testLimiter(e.rdb), Limits: []redisrate.Limit{redisrate.PerMinute(100)},
		Key:   grpclimit.APIKey{Header: "x-api-key", Secret: []byte("a secret of sixteen bytes or more"), Authenticated: true},
		Quota: &ratecore.Quota{Key: "upstream", Limit: redisrate.PerMinute(2), Lease: 1},
	})
	for i, want := range []codes.Code{codes.OK, codes.OK, codes.ResourceExhausted} {
		_, err := call(t, c, "x-api-key", string(rune('a'+i)))
		if status.Code(err) != want {
			t.Errorf("client %d: %v; want %v", i, err, want)
		}
		if wait, subject := details(t, err); want == codes.ResourceExhausted && (subject != "upstream" || wait <= 0) {
			t.Errorf("the quota's refusal: RetryInfo %v, QuotaFailure subject %q; want a wait, upstream", wait, subject)
		}
	}
}

// TestQuotaAloneAndClose: a quota alone holds every call and names itself
// in the QuotaFailure; after Close a call fails with Unavailable and a
// RetryInfo.
func TestQuotaAloneAndClose(t *testing.T) {
	e := newEnv(t)
	in, err := grpclimit.New(grpclimit.Config{Limiter: testLimiter(e.rdb), Quota: &ratecore.Quota{Key: "upstream", Limit: redisrate.PerMinute(2)}})
	if err != nil {
		t.Fatalf("New with a quota alone: %v", err)
	}
	handler := func(ctx context.Context, req any) (any, error) { return nil, nil }
	unary := func() error {
		_, err := in.Unary()(context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: "/pkg.Svc/Get"}, handler)
		return err
	}
	for i, want := range []codes.Code{codes.OK, codes.OK, codes.ResourceExhausted} {
		if err := unary(); status.Code(err) != want {
			t.Fatalf("call %d: %v; want %v", i, err, want)
		}
	}
	if wait, subject := details(t, unary()); subject != "upstream" || wait <= 0 {
		t.Errorf("the quota's refusal: RetryInfo %v, QuotaFailure %q; want a wait, upstream", wait, subject)
	}
	if err := in.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := unary(); status.Code(err) != codes.Unavailable {
		t.Errorf("a call after Close: %v; want Unavailable", err)
	}
}

// TestMisconfiguredRedis (issue 38, finding 2): a wrong password is a
// configuration error, not an outage: under the default policy every call
// fails with Internal (never through, never ResourceExhausted), and
// OnError is told of each with an error matching ErrMisconfigured.
func TestMisconfiguredRedis(t *testing.T) {
	mr := miniredis.RunT(t)
	mr.RequireAuth("sekret")
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), Password: "wrong", MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	var told atomic.Int32
	var misconfigured atomic.Bool
	c := serve(t, grpclimit.Config{Limiter: testLimiter(rdb, redisrate.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))),
		Limits: []redisrate.Limit{redisrate.PerSecond(1)},
		OnError: func(_ context.Context, _ string, err error) {
			told.Add(1)
			misconfigured.Store(errors.Is(err, redisrate.ErrMisconfigured) && !errors.Is(err, redisrate.ErrUnavailable))
		}})
	for i := range 5 {
		if _, err := call(t, c); status.Code(err) != codes.Internal {
			t.Errorf("call %d: %v; want Internal", i, err)
		}
	}
	if told.Load() != 5 || !misconfigured.Load() {
		t.Errorf("OnError told %d times (ErrMisconfigured: %v); want 5", told.Load(), misconfigured.Load())
	}
}
