package redisrate_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/redisrate/redisrate"
)

// countingObserver counts decisions by kind, outcome and source, as a
// metrics exporter would (the otelrate package does it for OpenTelemetry).
type countingObserver struct {
	mu     sync.Mutex
	counts map[string]int
}

func (o *countingObserver) Start(ctx context.Context, d redisrate.Decision) context.Context {
	return ctx // a tracer would start a span here and return its context
}

func (o *countingObserver) End(ctx context.Context, d redisrate.Decision, res redisrate.Result, err error) {
	if d.WholeBatch || d.Reset {
		return // a batch's requests are counted one by one; a Reset decides nothing
	}
	outcome := "denied"
	switch {
	case err != nil:
		outcome = "error"
	case res.Allowed:
		outcome = "allowed"
	}
	algorithm := "none" // a request refused for having no limits
	if len(d.Limits) > 0 {
		algorithm = d.Limits[0].Algorithm.String()
	}
	o.mu.Lock()
	o.counts[fmt.Sprintf("%s %s %s %s", algorithm, d.Kind, outcome, res.Source)]++
	o.mu.Unlock()
}

func ExampleObserver() {
	rdb, done := exampleRedis()
	defer done()
	ctx := context.Background()
	obs := &countingObserver{counts: map[string]int{}}
	// 10 s: this Example's Redis is embedded in the test, which a busy machine can starve past the 200 ms default.
	limiter := redisrate.NewLimiter(rdb, redisrate.WithDecisionTimeout(10*time.Second), redisrate.WithObserver(obs), redisrate.WithDenyCache(100))

	for range 4 {
		_, _ = limiter.Allow(ctx, "user:42", redisrate.PerMinute(2))
	}
	_, _ = limiter.AllowN(ctx, "user:42", redisrate.PerMinute(2), 0) // an invalid cost
	fmt.Println(obs.counts["gcra allow allowed redis"], obs.counts["gcra allow denied redis"],
		obs.counts["gcra allow denied deny-cache"], obs.counts["gcra allow error redis"])
	// Output: 2 1 1 1
}

func ExampleWithObserver() {
	rdb, done := exampleRedis()
	defer done()
	obs := &countingObserver{counts: map[string]int{}}
	// 10 s: this Example's Redis is embedded in the test, which a busy machine can starve past the 200 ms default.
	limiter := redisrate.NewLimiter(rdb, redisrate.WithDecisionTimeout(10*time.Second), redisrate.WithObserver(obs))
	_, _ = limiter.DecideBatch(context.Background(), []redisrate.Request{
		{Key: "a", Limits: []redisrate.Limit{redisrate.PerSecond(1)}},
		{Key: "b", Limits: []redisrate.Limit{redisrate.PerSecond(1)}, Kind: redisrate.KindCheck},
	})
	fmt.Println(obs.counts)
	// Output: map[gcra allow allowed redis:1 gcra check allowed redis:1]
}

// printObserver prints each Decision as the engine reports it.
type printObserver struct{}

// what names what d asked: its Kind, or a Reset, or a DecideBatch as a
// whole.
func what(d redisrate.Decision) string {
	switch {
	case d.Reset:
		return "reset"
	case d.WholeBatch:
		return "batch"
	}
	return d.Kind.String()
}

func (printObserver) Start(ctx context.Context, d redisrate.Decision) context.Context {
	fmt.Printf("start %s key=%s limits=%v cost=%d\n", what(d), d.Key, d.Limits, d.Cost)
	return ctx
}

func (printObserver) End(ctx context.Context, d redisrate.Decision, res redisrate.Result, err error) {
	fmt.Printf("end   %s key=%s: %v, err %v\n", what(d), d.Key, res, err)
}

func ExampleDecision() {
	rdb, done := exampleRedis()
	defer done()
	// 10 s: this Example's Redis is embedded in the test, which a busy machine can starve past the 200 ms default.
	limiter := redisrate.NewLimiter(rdb, redisrate.WithDecisionTimeout(10*time.Second), redisrate.WithObserver(printObserver{}), redisrate.WithKeyPrefix("redisrate:"))
	ctx := context.Background()
	_, _ = limiter.Decide(ctx, redisrate.Request{Key: "user:42", Limits: []redisrate.Limit{redisrate.PerSecond(5), redisrate.PerHour(100)}, N: 3})
	_ = limiter.Reset(ctx, "user:42")
	// Output:
	// start allow key=user:42 limits=[5/s 100/h] cost=3
	// end   allow key=user:42: allowed: 2 of 5 left, full in 600ms, err <nil>
	// start reset key=user:42 limits=[] cost=0
	// end   reset key=user:42: denied: 0 of 0 left, retry in 0s, err <nil>
}

func ExampleKind() {
	fmt.Print("a request asks:")
	for k := redisrate.KindAllow; k <= redisrate.KindForce; k++ {
		fmt.Print(" ", k)
	}
	fmt.Println()
	// Output:
	// a request asks: allow check peek wait upto refund force
}

func ExampleKind_String() {
	fmt.Println(redisrate.KindPeek.String())
	// Output: peek
}
