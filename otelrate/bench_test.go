package otelrate_test

import (
	"context"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/redisrate/redisrate"
	"github.com/redisrate/redisrate/otelrate"
)

// BenchmarkDenyCacheHit measures what otelrate adds to a decision that
// never leaves the process (a deny-cache hit): compare the sub-benchmarks'
// ns/op and allocs/op.
func BenchmarkDenyCacheHit(b *testing.B) {
	mr := miniredis.RunT(b)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	b.Cleanup(func() { _ = rdb.Close() })
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	tp := sdktrace.NewTracerProvider() // spans sampled, exported nowhere
	b.Cleanup(func() { _ = mp.Shutdown(context.Background()); _ = tp.Shutdown(context.Background()) })
	obs, err := otelrate.New(otelrate.WithMeterProvider(mp), otelrate.WithTracerProvider(tp))
	if err != nil {
		b.Fatal(err)
	}
	metricsOnly, err := otelrate.New(otelrate.WithMeterProvider(mp), otelrate.WithTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()))))
	if err != nil {
		b.Fatal(err)
	}
	limit := redisrate.PerMinute(1)
	for _, bc := range []struct {
		name string
		opts []redisrate.Option
	}{
		{"no observer", nil},
		{"otelrate metrics", []redisrate.Option{redisrate.WithObserver(metricsOnly)}},
		{"otelrate metrics and spans", []redisrate.Option{redisrate.WithObserver(obs)}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			l := testLimiter(rdb, append(bc.opts, redisrate.WithDenyCache(16))...)
			ctx := context.Background()
			key := "bench:" + bc.name
			for range 2 { // one admitted, one denial to cache
				if _, err := l.Allow(ctx, key, limit); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				res, err := l.Allow(ctx, key, limit)
				if err != nil || res.Source != redisrate.SourceDenyCache {
					b.Fatalf("%v, %v: not a deny-cache hit", res, err)
				}
			}
		})
	}
}
