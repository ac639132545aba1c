package otelrate_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/extra/redisotel/v9"
	"github.com/redis/go-redis/v9"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/redisrate/redisrate"
	"github.com/redisrate/redisrate/internal/readmetest"
	"github.com/redisrate/redisrate/otelrate"
)

// The setup of docs/observability.md: metrics and traces on the global
// providers (set up by the service as usual), go-redis's spans nested under
// the decisions', and Redis failures logged once per burst.
func ExampleNew_setup() {
	// doc:start
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379", ContextTimeoutEnabled: true})
	if err := redisotel.InstrumentTracing(rdb); err != nil { // go-redis's spans
		log.Fatal(err)
	}
	obs, err := otelrate.New() // otel.GetMeterProvider(), otel.GetTracerProvider()
	if err != nil {
		log.Fatal(err)
	}
	logger := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	limiter := redisrate.NewLimiter(rdb,
		redisrate.WithObserver(obs),  // metrics, and a span per decision
		redisrate.WithLogger(logger), // Redis failures and recoveries, once per burst
	)
	// doc:end
	_ = limiter
}

// TestDocIsExample keeps the setup docs/observability.md and the README
// show the same code as ExampleNew_setup, which the test suite compiles.
func TestDocIsExample(t *testing.T) {
	readmetest.Check(t, "example_test.go", "../docs/observability.md", "doc")
	readmetest.Check(t, "example_test.go", "../README.md", "doc")
}

// The setup: an Observer on the global providers, and redisotel so that
// go-redis's spans nest under the decisions'. Here the providers are the
// SDK's, reading into memory, to print what was recorded.
func ExampleNew() {
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		log.Fatal(err)
	}
	defer mr.Close()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	tp := sdktrace.NewTracerProvider()

	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	if err := redisotel.InstrumentTracing(rdb, redisotel.WithTracerProvider(tp)); err != nil {
		log.Fatal(err)
	}
	obs, err := otelrate.New(otelrate.WithMeterProvider(mp), otelrate.WithTracerProvider(tp))
	if err != nil {
		log.Fatal(err)
	}
	limiter := redisrate.NewLimiter(rdb, redisrate.WithObserver(obs))

	for range 3 {
		_, _ = limiter.Allow(context.Background(), "login:ip:192.0.2.1", redisrate.PerMinute(2))
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil || len(rm.ScopeMetrics) == 0 {
		log.Fatal("nothing recorded: ", err)
	}
	for _, m := range rm.ScopeMetrics[0].Metrics {
		if sum, ok := m.Data.(metricdata.Sum[int64]); ok {
			for _, dp := range sum.DataPoints {
				outcome, _ := dp.Attributes.Value("redisrate.outcome")
				fmt.Println(m.Name, outcome.AsString(), dp.Value)
			}
		}
	}
	// Unordered output:
	// redisrate.decisions allowed 2
	// redisrate.decisions denied 1
}

// Name keys by their first two segments: "api:free" for
// "api:free:key:5f3a...".
func ExampleWithKeyPrefix() {
	twoSegments := func(key string) string {
		parts := strings.SplitN(key, ":", 3)
		if len(parts) < 3 {
			return "" // not a key of the expected shape: nothing
		}
		return parts[0] + ":" + parts[1]
	}
	fmt.Println(twoSegments("api:free:key:5f3a"))
	_, _ = otelrate.New(otelrate.WithKeyPrefix(twoSegments))
	// Output:
	// api:free
}

// An Observer sees each decision twice: Start, then End with the answer.
// The Limiter calls them; this shows what reaches the span.
func ExampleObserver() {
	tp := sdktrace.NewTracerProvider()
	obs, err := otelrate.New(otelrate.WithTracerProvider(tp), otelrate.WithMeterProvider(sdkmetric.NewMeterProvider()))
	if err != nil {
		log.Fatal(err)
	}
	d := redisrate.Decision{Kind: redisrate.KindAllow, Key: "login:ip:192.0.2.1", Limits: []redisrate.Limit{redisrate.PerMinute(5)}, Cost: 1}
	ctx := obs.Start(context.Background(), d)
	span := trace.SpanFromContext(ctx).(sdktrace.ReadOnlySpan)
	obs.End(ctx, d, redisrate.Result{Allowed: true, Remaining: 4, Capacity: 5}, nil)
	for _, kv := range span.Attributes() {
		if kv.Key == "redisrate.key.prefix" || kv.Key == "redisrate.outcome" {
			fmt.Println(kv.Key, kv.Value.AsString())
		}
	}
	// Output:
	// redisrate.key.prefix login
	// redisrate.outcome allowed
}

// Providers of one's own, instead of the global ones: here the SDK's, with
// a reader and a span recorder that keep in memory what was recorded.
func ExampleWithMeterProvider() {
	mr, err := miniredis.Run() // in production: your Redis
	if err != nil {
		log.Fatal(err)
	}
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()

	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	obs, err := otelrate.New(otelrate.WithMeterProvider(mp), otelrate.WithTracerProvider(tp))
	if err != nil {
		log.Fatal(err)
	}
	limiter := redisrate.NewLimiter(rdb, redisrate.WithObserver(obs))
	_, _ = limiter.Allow(context.Background(), "login:ip:192.0.2.1", redisrate.PerMinute(2))

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		log.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			fmt.Println("metric", m.Name)
		}
	}
	for _, s := range spans.Ended() {
		fmt.Println("span", s.Name())
	}
	// Unordered output:
	// metric redisrate.decisions
	// metric redisrate.decision.duration
	// metric redisrate.round_trip.decisions
	// span redisrate.allow
}
