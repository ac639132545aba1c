package redisrate

import (
	"context"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redisrate/redisrate/internal/redisserver"
	"github.com/redisrate/redisrate/scripts"
)

// benchRedis returns a client of a real redis-server started for the
// benchmark on a free 127.0.0.1 port, or of miniredis when there is no
// redis-server: then allocations include miniredis's own, which run in this
// process, and the figures are only an upper bound.
func benchRedis(b *testing.B) *redis.Client {
	b.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		b.Log("no redis-server on PATH: miniredis, whose allocations count too")
		return newFakeRedis(b).rdb
	}
	srv, err := redisserver.Start(redisserver.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(srv.Stop)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1, ContextTimeoutEnabled: true}) // as recommended
	b.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// BenchmarkAllow is one decision through the client: run it with -benchmem
// for the allocations per decision: 16 on redis-server with the
// recommended ContextTimeoutEnabled (12 before a call sent alone went as a
// pipeline of one command, which go-redis never resends: the pipeline's
// command slice and bookkeeping are the difference): go-redis's (the
// command, its reply, the pool's check of the connection), the command's
// arguments (the slice, the key in it) and the decision deadline's
// context; see BenchmarkDecisionDeadline. The peer's is BenchmarkPeerAllow
// in bench/ (22).
func BenchmarkAllow(b *testing.B) {
	ctx := context.Background()
	rdb := benchRedis(b)
	for _, bc := range []struct {
		name   string
		limits []Limit
		opts   []Option
	}{
		// go-redis boxes each reply integer of 256 or more in an interface:
		// one allocation each, so small limits allocate less
		{"gcra_small_numbers", []Limit{Per(100, time.Millisecond)}, nil},
		{"gcra", []Limit{PerSecond(1e9)}, nil},
		{"gcra_prefix", []Limit{PerSecond(1e9)}, []Option{WithKeyPrefix("rate:")}},
		{"sliding_window", []Limit{PerSecond(1e9).WithAlgorithm(SlidingWindow)}, nil},
		{"gcra_two_limits", []Limit{PerSecond(1e9), PerHour(1e6)}, nil},
	} {
		b.Run(bc.name, func(b *testing.B) {
			l := testLimiter(rdb, bc.opts...)
			key := "bench:" + bc.name
			if _, err := l.Decide(ctx, Request{Key: key, Limits: bc.limits}); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if _, err := l.Decide(ctx, Request{Key: key, Limits: bc.limits}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkAllowFCall is BenchmarkAllow's gcra with the Functions library
// loaded: each decision is one FCALL of the function bound to this library
// version (loader.go, "Which library runs").
func BenchmarkAllowFCall(b *testing.B) {
	ctx := context.Background()
	rdb := benchRedis(b)
	if err := rdb.FunctionLoadReplace(ctx, scripts.Library).Err(); err != nil {
		b.Skipf("no Functions here (miniredis, or Redis before 7): %v", err)
	}
	l := testLimiter(rdb)
	limit := PerSecond(1e9)
	if _, err := l.Allow(ctx, "bench:fcall", limit); err != nil {
		b.Fatal(err)
	}
	if !l.loader.fnYes.Load() {
		b.Fatal("the Limiter does not go by FCALL")
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := l.Allow(ctx, "bench:fcall", limit); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBareEvalSha is the floor for any client: go-redis's EVALSHA of a
// script that returns 1.
func BenchmarkBareEvalSha(b *testing.B) {
	ctx := context.Background()
	rdb := benchRedis(b)
	sha, err := rdb.ScriptLoad(ctx, "return 1").Result()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if err := rdb.EvalSha(ctx, sha, []string{"bench"}, "1000000000", "1000").Err(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecideBatch is 100 decisions in one round trip.
func BenchmarkDecideBatch(b *testing.B) {
	ctx := context.Background()
	l := testLimiter(benchRedis(b))
	reqs := make([]Request, 100)
	for i := range reqs {
		reqs[i] = Request{Key: "batch:" + strconv.Itoa(i), Limits: []Limit{PerSecond(1e9)}, N: 1}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := l.DecideBatch(ctx, reqs); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(reqs)), "ns/decision")
}

// BenchmarkDecideKeys is a user's and its organisation's limit decided in
// one call of two keys, next to the two one-key calls it replaces (which
// are not all or nothing): one round trip instead of two.
func BenchmarkDecideKeys(b *testing.B) {
	ctx := context.Background()
	l := testLimiter(benchRedis(b))
	user, org := PerSecond(1e9), PerSecond(2e9)
	keys := []KeyLimit{{Key: "{bench:org}:user:1", Limit: user}, {Key: "{bench:org}", Limit: org}}
	b.Run("two_keys", func(b *testing.B) {
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			if r, err := l.Decide(ctx, Request{Keys: keys}); err != nil || !r.Allowed {
				b.Fatal(r, err)
			}
		}
	})
	b.Run("two_one_key_calls", func(b *testing.B) {
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			for _, k := range keys {
				if r, err := l.Allow(ctx, k.Key, k.Limit); err != nil || !r.Allowed {
					b.Fatal(r, err)
				}
			}
		}
	})
}

// BenchmarkDenyCacheHit is a denial answered by the deny cache, without Redis.
func BenchmarkDenyCacheHit(b *testing.B) {
	ctx := context.Background()
	l := testLimiter(benchRedis(b), WithDenyCache(100))
	lim := PerHour(1)
	_, _ = l.Allow(ctx, "denied", lim)
	if r, _ := l.Allow(ctx, "denied", lim); r.Allowed {
		b.Fatal("second unit of 1 per hour admitted")
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if r, _ := l.Allow(ctx, "denied", lim); r.Allowed {
			b.Fatal("admitted")
		}
	}
}

// BenchmarkDecisionDeadline is what the decision deadline costs a decision
// on redis-server: none (WithDecisionTimeout(0)); with a client that stops
// a command at its context's deadline (ContextTimeoutEnabled), a context
// per call; with one that does not (go-redis's defaults), a hand-over to a
// sender goroutine too (sender.go), so that the Limiter can stop waiting at
// the deadline.
func BenchmarkDecisionDeadline(b *testing.B) {
	ctx := context.Background()
	addr := benchRedis(b).Options().Addr
	for _, bc := range []struct {
		name    string
		honours bool
		timeout time.Duration
	}{
		{"none", false, 0},
		{"context_timeout_enabled", true, defaultDecisionTimeout},
		{"go_redis_defaults", false, defaultDecisionTimeout},
	} {
		b.Run(bc.name, func(b *testing.B) {
			rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, ContextTimeoutEnabled: bc.honours})
			b.Cleanup(func() { _ = rdb.Close() })
			l := testLimiter(rdb, WithDecisionTimeout(bc.timeout))
			lim := PerSecond(1e9)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if _, err := l.Allow(ctx, "bench:deadline", lim); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
