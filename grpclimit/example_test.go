package grpclimit_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"os"
	"slices"
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
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/redisrate/redisrate"
	"github.com/redisrate/redisrate/grpclimit"
	"github.com/redisrate/redisrate/internal/exampleredis"
	"github.com/redisrate/redisrate/internal/readmetest"
	"github.com/redisrate/redisrate/ratecore"
)

// exampleRedis is an embedded Redis with a fixed clock, so that the
// examples print the same every time. In production, use your own client:
// redis.NewClient(&redis.Options{Addr: "localhost:6379"}).
func exampleRedis() (*redis.Client, func()) {
	return exampleredis.Start()
}

// exampleCall makes a call to method through limit's unary interceptor, as
// a gRPC server does for a client at 192.0.2.1, and returns its status
// code: OK when the call reached its handler.
func exampleCall(limit *grpclimit.Interceptor, method string) codes.Code {
	ctx := peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{IP: net.ParseIP("192.0.2.1"), Port: 4000}})
	handler := func(ctx context.Context, req any) (any, error) { return nil, nil }
	_, err := limit.Unary()(ctx, nil, &grpc.UnaryServerInfo{FullMethod: method}, handler)
	return status.Code(err)
}

// A gRPC server limited to 2 calls per minute per API key, its costly
// method at a cost of 2, and a client that reads the denial's RetryInfo.
func ExampleNew() {
	mr := miniredis.NewMiniRedis() // in production: your Redis
	if err := mr.Start(); err != nil {
		log.Fatal(err)
	}
	defer mr.Close()
	mr.SetTime(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC))
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()

	limit, err := grpclimit.New(grpclimit.Config{
		// 10 s: this Example's Redis is embedded in the test, which a busy machine can starve past the 200 ms default.
		Limiter: redisrate.NewLimiter(rdb, redisrate.WithDecisionTimeout(10*time.Second)),
		Limits:  []redisrate.Limit{redisrate.PerMinute(2)},
		Methods: map[string]grpclimit.Method{"/grpc.health.v1.Health/Watch": {Cost: 2}},
		Key:     grpclimit.APIKey{Header: "x-api-key", Secret: []byte("example secret, 16+ bytes; keep yours out of the code"), Authenticated: true},
	})
	if err != nil {
		log.Fatal(err)
	}
	srv := grpc.NewServer(grpc.UnaryInterceptor(limit.Unary()), grpc.StreamInterceptor(limit.Stream()))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Stop()

	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	client := healthpb.NewHealthClient(conn)
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-api-key", "k-123")
	for range 3 {
		var md metadata.MD
		_, err = client.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Header(&md))
		fmt.Println(status.Code(err), md.Get("ratelimit"))
	}
	// client:start
	for _, d := range status.Convert(err).Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			fmt.Println("retry in", ri.RetryDelay.AsDuration())
		}
	}
	// client:end

	// Output:
	// OK ["grpc";r=1;t=30]
	// OK ["grpc";r=0;t=30]
	// ResourceExhausted ["grpc";r=0;t=30]
	// retry in 30s
}

// The setup of docs/grpc.md: a quota shared by the service's methods, a
// method with a quota of its own, a method that costs 10.
func ExampleConfig() {
	limiter := redisrate.NewLimiter(redis.NewClient(&redis.Options{Addr: "localhost:6379"}))
	secret := []byte("example secret, 16+ bytes; keep yours out of the code")
	keys := issued{"k-123": true}

	// setup:start
	limit, err := grpclimit.New(grpclimit.Config{
		Limiter: limiter,
		Limits:  []redisrate.Limit{redisrate.PerSecond(10)},
		Methods: map[string]grpclimit.Method{
			"/shop.Orders/Export": {Limits: []redisrate.Limit{redisrate.PerMinute(2)}}, // its own quota
			"/shop.Orders/Batch":  {Cost: 10},                                          // the shared quota, 10 units
		},
		Key: grpclimit.APIKey{Header: "x-api-key", Secret: secret, Verify: keys.Issued},
	})
	if err != nil {
		log.Fatal(err)
	}
	srv := grpc.NewServer(grpc.UnaryInterceptor(limit.Unary()), grpc.StreamInterceptor(limit.Stream()))
	// setup:end
	srv.Stop()
	// Output:
}

// TestDocsIsExample keeps docs/grpc.md's Go blocks the same code as
// ExampleConfig and ExampleNew.
func TestDocsIsExample(t *testing.T) {
	readmetest.Check(t, "example_test.go", "../docs/grpc.md", "setup")
	readmetest.Check(t, "example_test.go", "../docs/grpc.md", "client")
}

// Key by the peer's address and the method: each method its own quota.
// Such a key starts with '/', as the name of a method in Config.Methods
// does after Name: it gets a '%' in front, so that it never is the key of
// a method with limits of its own.
func ExampleKeyFunc() {
	rdb, done := exampleRedis()
	defer done()

	ip, err := grpclimit.PeerIP{}.KeyFunc()
	if err != nil {
		log.Fatal(err)
	}
	perMethod := grpclimit.KeyFunc(func(ctx context.Context, method string) (string, error) {
		k, err := ip(ctx, method)
		return method + ":" + k, err
	})
	limit, err := grpclimit.New(grpclimit.Config{
		// 10 s: this Example's Redis is embedded in the test, which a busy machine can starve past the 200 ms default.
		Limiter: redisrate.NewLimiter(rdb, redisrate.WithDecisionTimeout(10*time.Second)),
		Limits:  []redisrate.Limit{redisrate.PerMinute(1)},
		Key:     perMethod,
	})
	if err != nil {
		log.Fatal(err)
	}
	for _, method := range []string{"/pkg.Svc/Get", "/pkg.Svc/Get", "/pkg.Svc/List"} {
		fmt.Println(method, exampleCall(limit, method))
	}
	keys := rdb.Keys(context.Background(), "*").Val()
	slices.Sort(keys)
	fmt.Println(keys)
	// Output:
	// /pkg.Svc/Get OK
	// /pkg.Svc/Get ResourceExhausted
	// /pkg.Svc/List OK
	// [grpc:%/pkg.Svc/Get:ip:192.0.2.1 grpc:%/pkg.Svc/List:ip:192.0.2.1]
}

// Let calls through while Redis is down: the failure policy, in the
// Limiter's words, for these interceptors only (zero: the Limiter's own).
// OnError is told of what the Limiter does not log itself.
func ExampleConfig_failurePolicy() {
	rdb, done := exampleRedis()
	defer done()
	rdb.Close() // Redis is gone

	logger := log.New(os.Stdout, "", 0)
	limit, err := grpclimit.New(grpclimit.Config{
		Limiter:       redisrate.NewLimiter(rdb), // FailError: Unavailable while Redis is down
		Limits:        []redisrate.Limit{redisrate.PerSecond(10)},
		FailurePolicy: redisrate.FailOpen, // but these let calls through
		OnError: func(ctx context.Context, method string, err error) {
			if !errors.Is(err, redisrate.ErrUnavailable) { // Redis's outages: the Limiter's WithLogger
				logger.Printf("rate limit of %s: %v", method, err)
			}
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("/pkg.Svc/Get", exampleCall(limit, "/pkg.Svc/Get"))
	// Output:
	// /pkg.Svc/Get OK
}

// While Redis is down a call goes through by default (FailOpen): an outage
// of the limiter must not become an outage of the service. A limit that
// must hold through it says FailClosed: the call fails with a status the
// client can act on, and a RetryInfo for the outage, not the quota.
func ExampleConfig_redisDown() {
	rdb, done := exampleRedis()
	defer done()
	rdb.Close() // Redis is gone

	open, err := grpclimit.New(grpclimit.Config{Limiter: redisrate.NewLimiter(rdb), Limits: []redisrate.Limit{redisrate.PerDay(10)}})
	if err != nil {
		log.Fatal(err)
	}
	closed, err := grpclimit.New(grpclimit.Config{Limiter: redisrate.NewLimiter(rdb), Limits: []redisrate.Limit{redisrate.PerDay(10)}, FailurePolicy: redisrate.FailClosed})
	if err != nil {
		log.Fatal(err)
	}
	ctx := peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{IP: net.ParseIP("192.0.2.1"), Port: 4000}})
	ok := func(ctx context.Context, req any) (any, error) { return nil, nil }
	for name, in := range map[string]*grpclimit.Interceptor{"default": open, "fail-closed": closed} {
		_, err = in.Unary()(ctx, nil, &grpc.UnaryServerInfo{FullMethod: "/pkg.Svc/" + name}, ok)
		st := status.Convert(err)
		if len(st.Details()) == 0 {
			fmt.Println(name, st.Code())
			continue
		}
		fmt.Println(name, st.Code(), "retry in", st.Details()[0].(*errdetails.RetryInfo).RetryDelay.AsDuration())
	}
	// Unordered output:
	// default OK
	// fail-closed Unavailable retry in 1s
}

// issued stands for the service's store of the API keys it issued.
type issued map[string]bool

// Issued reports whether the service issued apiKey.
func (s issued) Issued(_ context.Context, apiKey string) (bool, error) { return s[apiKey], nil }

// APIKey reads the key from the call's metadata; Redis sees only its HMAC.
func ExampleAPIKey() {
	keys := issued{"k-123": true}
	keyFunc, err := grpclimit.APIKey{Header: "x-api-key", Secret: []byte("example secret, 16+ bytes"), Verify: keys.Issued}.KeyFunc()
	if err != nil {
		log.Fatal(err)
	}
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("x-api-key", "k-123"))
	key, _ := keyFunc(ctx, "/pkg.Svc/Get")
	fmt.Println(key[:4], len(key))
	_, err = keyFunc(context.Background(), "/pkg.Svc/Get") // no x-api-key: the interceptors answer InvalidArgument
	fmt.Println(errors.Is(err, ratecore.ErrNoKey))
	// Output:
	// key: 36
	// true
}

// PeerIP keys by the connection's address.
func ExamplePeerIP() {
	keyFunc, _ := grpclimit.PeerIP{}.KeyFunc()
	ctx := peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{IP: net.ParseIP("2001:db8:1:2:3::4"), Port: 4000}})
	key, _ := keyFunc(ctx, "/pkg.Svc/Get")
	fmt.Println(key)
	// Output:
	// ip:2001:db8:1:2::/64
}

// A method with a cost of its own, in the shared quota, and one with a
// quota of its own.
func ExampleMethod() {
	rdb, done := exampleRedis()
	defer done()
	limit, err := grpclimit.New(grpclimit.Config{
		// 10 s: this Example's Redis is embedded in the test, which a busy machine can starve past the 200 ms default.
		Limiter: redisrate.NewLimiter(rdb, redisrate.WithDecisionTimeout(10*time.Second)),
		Limits:  []redisrate.Limit{redisrate.PerSecond(20)},
		Methods: map[string]grpclimit.Method{
			"/shop.Orders/Batch":  {Cost: 10},
			"/shop.Orders/Export": {Limits: []redisrate.Limit{redisrate.PerHour(10).WithName("export")}},
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	// Two batches spend the shared quota of 20; Export draws on its own.
	for _, method := range []string{"/shop.Orders/Batch", "/shop.Orders/Batch", "/shop.Orders/Get", "/shop.Orders/Export"} {
		fmt.Println(method, exampleCall(limit, method))
	}
	// Output:
	// /shop.Orders/Batch OK
	// /shop.Orders/Batch OK
	// /shop.Orders/Get ResourceExhausted
	// /shop.Orders/Export OK
}

// The interceptors go on the server; chain them with others of yours.
func ExampleInterceptor_Unary() {
	limit, err := grpclimit.New(grpclimit.Config{
		Limiter: redisrate.NewLimiter(redis.NewClient(&redis.Options{Addr: "localhost:6379"})),
		Limits:  []redisrate.Limit{redisrate.PerSecond(100)},
	})
	if err != nil {
		log.Fatal(err)
	}
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(limit.Unary()), grpc.ChainStreamInterceptor(limit.Stream()))
	srv.Stop()
	// Output:
}

// A limit rolled out in shadow mode: every call is decided, recorded and
// let through; the Limiter's Observer (otelrate) sees which ones it would
// have denied, and clients see no ratelimit metadata until it is enforced.
func ExampleConfig_shadow() {
	rdb, done := exampleRedis()
	defer done()
	var wouldDeny int
	limit, err := grpclimit.New(grpclimit.Config{
		// 10 s: this Example's Redis is embedded in the test, which a busy machine can starve past the 200 ms default.
		Limiter: redisrate.NewLimiter(rdb, redisrate.WithDecisionTimeout(10*time.Second), redisrate.WithObserver(countWouldDeny{&wouldDeny})),
		Limits:  []redisrate.Limit{redisrate.PerMinute(2)},
		Shadow:  true,
	})
	if err != nil {
		log.Fatal(err)
	}
	for range 3 {
		fmt.Println("/shop.Catalog/Browse", exampleCall(limit, "/shop.Catalog/Browse"))
	}
	fmt.Println("would have denied:", wouldDeny)
	// Output:
	// /shop.Catalog/Browse OK
	// /shop.Catalog/Browse OK
	// /shop.Catalog/Browse OK
	// would have denied: 1
}

// countWouldDeny is an Observer that counts what shadow mode admitted only
// because of it; otelrate reports it as the outcome would_deny.
type countWouldDeny struct{ n *int }

func (c countWouldDeny) Start(ctx context.Context, _ redisrate.Decision) context.Context { return ctx }
func (c countWouldDeny) End(_ context.Context, _ redisrate.Decision, res redisrate.Result, _ error) {
	if res.WouldDeny {
		*c.n++
	}
}
