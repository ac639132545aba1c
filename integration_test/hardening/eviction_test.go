package hardening

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redisrate/redisrate"
	"github.com/redisrate/redisrate/integration_test/internal/redistest"
)

// junk is a 1 KiB value for filling memory.
var junk = strings.Repeat("x", 1024)

// Under maxmemory with an evicting policy, a limiter key can be evicted,
// which silently resets its limit: shown for allkeys-lru and volatile-lru
// (limiter keys carry TTLs, so volatile-* policies evict them too).
func TestEvictionResetsLimits(t *testing.T) {
	redistest.NeedLocal(t, "fills its server to maxmemory")
	t.Parallel()
	ctx := context.Background()
	for _, policy := range []string{"allkeys-lru", "volatile-lru"} {
		srv := redistest.StartServer(t, redistest.Options{Args: []string{"--maxmemory", "4mb", "--maxmemory-policy", policy}})
		rdb := srv.Client(nil)
		l := redistest.NewLimiter(rdb, redisrate.WithKeyPrefix("rate:"))
		exhausted := map[redisrate.Algorithm]redisrate.Limit{}
		for _, algo := range redistest.Algorithms {
			lim := redisrate.PerHour(3).WithAlgorithm(algo)
			for range 3 {
				if _, err := l.Allow(ctx, algo.String(), lim); err != nil {
					t.Fatal(err)
				}
			}
			if res, err := l.Allow(ctx, algo.String(), lim); err != nil || res.Allowed {
				t.Fatalf("%s: 4th of 3 per hour: %v, %v", algo, res, err)
			}
			exhausted[algo] = lim
		}
		// Fill memory with other keys (with TTLs, so that volatile-lru has
		// them to choose from as well) until every limiter key is gone.
		written := 0
		for ; written < 200000; written++ {
			if err := rdb.Set(ctx, "cache:"+strconv.Itoa(written), junk, time.Hour).Err(); err != nil {
				t.Fatalf("%s: SET: %v", policy, err)
			}
			if written%500 == 499 {
				n, err := rdb.Exists(ctx, "rate:gcra", "rate:token_bucket", "rate:leaky_bucket", "rate:sliding_window", "rate:fixed_window", "rate:sliding_log").Result()
				if err != nil {
					t.Fatal(err)
				}
				if n == 0 {
					break
				}
			}
		}
		evicted := redistest.Info(t, rdb, "stats", "evicted_keys")
		reset := 0
		for algo, lim := range exhausted {
			res, err := l.Allow(ctx, algo.String(), lim)
			if err != nil {
				t.Fatal(err)
			}
			if res.Allowed && res.Remaining == 2 {
				reset++ // a fresh key's answer: the limit was reset
			}
		}
		redistest.Report(t, "eviction "+policy, "after %d KiB of other keys (maxmemory 4 MB, %s keys evicted), %d of 6 exhausted limits (3 per hour) admitted again as fresh keys", written+1, evicted, reset)
		if reset != len(exhausted) {
			t.Errorf("%s: %d of %d evicted limits were reset; the test expects eviction to reach them all", policy, reset, len(exhausted))
		}
	}
}

// With noeviction at the limit, every script fails with OOM and writes
// nothing, on a new key and an existing one (contract guarantee 10); a
// check still answers (it writes nothing); the client classifies the OOM
// as ErrUnavailable and the failure policy answers.
func TestNoevictionOOM(t *testing.T) {
	redistest.NeedLocal(t, "fills its server to maxmemory")
	t.Parallel()
	ctx := context.Background()
	srv := redistest.StartServer(t, redistest.Options{Args: []string{"--maxmemory", "4mb", "--maxmemory-policy", "noeviction"}})
	rdb := srv.Client(nil)
	plain := redistest.NewLimiter(rdb, redisrate.WithKeyPrefix("rate:"), redisrate.WithCircuitBreaker(0))
	open := redistest.NewLimiter(rdb, redisrate.WithKeyPrefix("rate:"), redisrate.WithCircuitBreaker(0), redisrate.WithFailurePolicy(redisrate.FailOpen))
	closed := redistest.NewLimiter(rdb, redisrate.WithKeyPrefix("rate:"), redisrate.WithCircuitBreaker(0), redisrate.WithFailurePolicy(redisrate.FailClosed))
	limits := map[redisrate.Algorithm]redisrate.Limit{}
	for _, algo := range redistest.Algorithms {
		limits[algo] = redisrate.PerHour(5).WithAlgorithm(algo)
		if _, err := plain.Allow(ctx, "old:"+algo.String(), limits[algo]); err != nil {
			t.Fatal(err)
		}
	}
	// Fill memory to the limit.
	filled := 0
	for ; ; filled++ {
		err := rdb.Set(ctx, "fill:"+strconv.Itoa(filled), junk, 0).Err()
		if err != nil {
			if !strings.HasPrefix(err.Error(), "OOM") {
				t.Fatalf("filling: %v", err)
			}
			break
		}
		if filled > 100000 {
			t.Fatal("maxmemory 4mb never reached")
		}
	}
	// Redis judges OOM once, when a command starts, from used_memory, which
	// swings by kilobytes (client buffers shrink in the background): 1 KiB
	// past the limit can fall back under it. A limit far below the memory
	// in use keeps every later command over it.
	if err := rdb.ConfigSet(ctx, "maxmemory", "1mb").Err(); err != nil {
		t.Fatal(err)
	}
	dump := func(key string) string {
		v, err := rdb.Dump(ctx, key).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			t.Fatal(err)
		}
		return v
	}
	for _, algo := range redistest.Algorithms {
		lim := limits[algo]
		for _, key := range []string{"old:" + algo.String(), "new:" + algo.String()} {
			before := dump("rate:" + key)
			_, err := plain.Allow(ctx, key, lim)
			if !errors.Is(err, redisrate.ErrUnavailable) || !strings.Contains(err.Error(), "OOM") {
				t.Errorf("%s %s at maxmemory: %v, want an OOM matching ErrUnavailable", algo, key, err)
			}
			if algo == redisrate.GCRA && key == "new:gcra" {
				t.Logf("at maxmemory: %v", err)
			}
			if after := dump("rate:" + key); after != before {
				t.Errorf("%s %s: the failed call changed the key", algo, key)
			}
			if res, err := open.Allow(ctx, key, lim); err != nil || res.Source != redisrate.SourceFailOpen || !res.Allowed {
				t.Errorf("%s %s FailOpen: %v, %v", algo, key, res, err)
			}
			if res, err := closed.Allow(ctx, key, lim); err != nil || res.Source != redisrate.SourceFailClosed || res.Allowed {
				t.Errorf("%s %s FailClosed: %v, %v", algo, key, res, err)
			}
			// A check writes nothing: Redis still answers it.
			res, err := plain.Decide(ctx, redisrate.Request{Kind: redisrate.KindCheck, Key: key, Limits: []redisrate.Limit{lim}})
			if err != nil || res.Source != redisrate.SourceRedis || !res.Allowed {
				t.Errorf("%s %s Check at maxmemory: %v, %v", algo, key, res, err)
			}
		}
	}
	redistest.Report(t, "noeviction OOM", "after %d KiB: every script's Allow failed with OOM (ErrUnavailable), keys unchanged, new keys not created; FailOpen/FailClosed answered; Check still decided by Redis", filled)
}
