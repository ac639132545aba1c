package grpclimit_test

import (
	"context"
	"fmt"
	"log"
	"net"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/redisrate/redisrate"
	"github.com/redisrate/redisrate/grpclimit"
	"github.com/redisrate/redisrate/ratecore"
)

// One quota for every call of every client, and every process of the
// service: an upstream that allows the whole service 40 calls an hour.
// With no Limits, the quota alone holds each call (no client key is
// needed); a call it refuses fails with ResourceExhausted, a RetryInfo of
// the quota's wait and a QuotaFailure naming it. On shutdown, Close gives
// back what the process's lease has not spent. One interceptor, not two
// chained: the quota counts only the calls it lets through.
func ExampleConfig_quotaAlone() {
	rdb, done := exampleRedis()
	defer done()
	// 10 s: this Example's Redis is embedded in the test, which a busy machine can starve past the 200 ms default.
	limiter := redisrate.NewLimiter(rdb, redisrate.WithDecisionTimeout(10*time.Second))
	upstream, err := grpclimit.New(grpclimit.Config{
		Limiter: limiter,
		Quota:   &ratecore.Quota{Key: "upstream", Limit: redisrate.PerHour(40)},
	})
	if err != nil {
		log.Fatal(err)
	}
	results := map[codes.Code]int{}
	var refusal error
	for range 50 {
		err := quotaCall(upstream, "/pkg.Svc/Get")
		results[status.Code(err)]++
		if err != nil {
			refusal = err
		}
	}
	fmt.Println("OK", results[codes.OK], "ResourceExhausted", results[codes.ResourceExhausted])
	for _, d := range status.Convert(refusal).Details() {
		switch d := d.(type) {
		case *errdetails.RetryInfo:
			fmt.Println("retry in", d.RetryDelay.AsDuration().Round(1e9))
		case *errdetails.QuotaFailure:
			fmt.Println("quota", d.Violations[0].Subject, d.Violations[0].Description)
		}
	}

	ctx := context.Background() // on shutdown, after grpc.Server.GracefulStop
	if err := upstream.Close(ctx); err != nil {
		log.Print(err)
	}
	if err := limiter.Close(ctx); err != nil {
		log.Print(err)
	}
	// Output:
	// OK 40 ResourceExhausted 10
	// retry in 1m30s
	// quota upstream limit 40/h
}

// quotaCall makes a call to method through limit's unary interceptor and
// returns its error: nil when the call reached its handler.
func quotaCall(limit *grpclimit.Interceptor, method string) error {
	ctx := peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{IP: net.ParseIP("192.0.2.1"), Port: 4000}})
	handler := func(ctx context.Context, req any) (any, error) { return nil, nil }
	_, err := limit.Unary()(ctx, nil, &grpc.UnaryServerInfo{FullMethod: method}, handler)
	return err
}
