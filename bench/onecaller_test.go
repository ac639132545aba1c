package main

import (
	"context"
	"strconv"
	"testing"

	redis_rate "github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
	"github.com/redisrate/redisrate"
	"github.com/redisrate/redisrate/scripts"
)

// BenchmarkOneCaller is the many-keys mode's one caller as a Go benchmark,
// for profiling (-cpuprofile, -memprofile, -run x -bench OneCaller/...):
// one goroutine deciding on 10,000 keys in turn, through redis_rate and
// through the Limiter on go-redis's default client and on one with
// ContextTimeoutEnabled, on one redis-server. With -count the three
// alternate. client-µs/op is this process's CPU (getrusage) per decision,
// the many-keys mode's client CPU; redis-server runs apart.
func BenchmarkOneCaller(b *testing.B) {
	ctx := context.Background()
	srv := benchServer(b)
	rdb := benchClient(b, &redis.Options{Addr: srv.Addr})
	cte := benchClient(b, &redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true})
	if err := rdb.FunctionLoadReplace(ctx, scripts.Library).Err(); err != nil {
		b.Fatal(err)
	}
	keys := make([]string, manyKeys)
	for i := range keys {
		keys[i] = "one:" + strconv.Itoa(i)
	}
	peer := redis_rate.NewLimiter(rdb)
	l := redisrate.NewLimiter(rdb)
	lc := redisrate.NewLimiter(cte)
	for _, s := range []manySubject{
		{"peer", func(ctx context.Context, key string) (bool, error) {
			r, err := peer.Allow(ctx, key, manyLimitPeer)
			return r.Allowed > 0, err
		}},
		{"limiter", func(ctx context.Context, key string) (bool, error) {
			r, err := l.Allow(ctx, key, manyLimit)
			return r.Allowed, err
		}},
		{"limiter_cte", func(ctx context.Context, key string) (bool, error) {
			r, err := lc.Allow(ctx, key, manyLimit)
			return r.Allowed, err
		}},
	} {
		b.Run(s.name, func(b *testing.B) {
			b.ReportAllocs()
			cpu0 := processCPU()
			i := 0
			for b.Loop() {
				if _, err := s.call(ctx, keys[i%len(keys)]); err != nil {
					b.Fatal(err)
				}
				i++
			}
			b.ReportMetric(float64(processCPU()-cpu0)/1e3/float64(b.N), "client-µs/op")
		})
	}
}
