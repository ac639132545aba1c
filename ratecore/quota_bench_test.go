package ratecore

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/redisrate/redisrate"
	"github.com/redisrate/redisrate/internal/hooktest"
)

// BenchmarkExhausted compares, at 1 ms added round trip and 64 requests in
// flight, the denials of a plain limit that is spent with the refusals of
// a spent quota: alone (a route's quota for all clients), and behind each
// client's own limit (whose units go back, a round trip of their own).
// Run with: go test -run - -bench Exhausted ./ratecore (ns/op: lower is
// more requests a second; the quota alone should be within 2x the plain).
func BenchmarkExhausted(b *testing.B) {
	for _, c := range []struct {
		name  string
		own   bool
		quota bool
	}{{"plain", true, false}, {"quota-alone", false, true}, {"quota-behind-own", true, true}} {
		b.Run(c.name, func(b *testing.B) {
			mr := miniredis.RunT(b)
			rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), PoolSize: 128})
			rdb.AddHook(hooktest.Delay(time.Millisecond))
			b.Cleanup(func() { _ = rdb.Close() })
			l := redisrate.NewLimiter(rdb, redisrate.WithDecisionTimeout(10*time.Second), redisrate.WithCoalescing(os.Getenv("NOCO") == ""))
			cfg := Config[req]{Limiter: l, Name: "api", Key: own}
			ownLimit := redisrate.PerHour(1_000_000)
			if !c.quota {
				ownLimit = redisrate.PerHour(1)
			}
			if c.quota {
				cfg.Quota = &Quota{Key: "upstream", Limit: redisrate.PerHour(1)}
			}
			r, err := New(cfg)
			if err != nil {
				b.Fatal(err)
			}
			var rule *Rule
			if c.own {
				if rule, err = r.Rule("", "Config.Limits", []redisrate.Limit{ownLimit}); err != nil {
					b.Fatal(err)
				}
			}
			ctx := context.Background()
			r.Decide(ctx, req{key: "a"}, rule, 1) // spends it
			if a := r.Decide(ctx, req{key: "a"}, rule, 1); a.Verdict != Deny {
				b.Fatalf("not spent: %+v", a)
			}
			b.SetParallelism(32) // 64 in flight on 2 cores
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if a := r.Decide(ctx, req{key: "a"}, rule, 1); a.Verdict != Deny {
						panic(fmt.Sprintf("served: %+v", a))
					}
				}
			})
		})
	}
}
