package integration_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redisrate/redisrate"
	"github.com/redisrate/redisrate/integration_test/internal/redistest"
)

// With AOF on (fsync always), limiter state survives a restart, a clean one
// and a crash (SIGKILL): a key that was used up stays used up, and nothing
// is admitted above the bound.
func TestReliabilityAOFRestart(t *testing.T) {
	needLocal(t)
	srv := redistest.StartServer(t, redistest.Options{Args: []string{"--appendonly", "yes", "--appendfsync", "always"}})
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = rdb.Close() })
	lim := redisrate.NewLimiter(rdb)
	ctx := context.Background()

	// waitUp waits until the restarted server answers a decision (go-redis
	// may take a moment to dial again).
	waitUp := func() {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for rdb.Ping(ctx).Err() != nil {
			if time.Now().After(deadline) {
				t.Fatal("server not back within 15s")
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	for _, restart := range []struct {
		name string
		do   func()
	}{
		{"restart", srv.Restart},
		{"crash", func() { srv.Kill(); srv.Restart() }},
	} {
		for _, algo := range allAlgorithms {
			key := restart.name + ":" + algo.String()
			limit := redisrate.PerHour(5).WithAlgorithm(algo)
			for i := range 3 {
				if res, err := lim.Allow(ctx, key, limit); err != nil || !res.Allowed {
					t.Fatalf("%s call %d: %v, %v", key, i+1, res, err)
				}
			}
		}
		restart.do()
		waitUp()
		for _, algo := range allAlgorithms {
			key := restart.name + ":" + algo.String()
			limit := redisrate.PerHour(5).WithAlgorithm(algo)
			admitted := 0
			for range 5 {
				res, err := lim.Allow(ctx, key, limit)
				if err != nil {
					t.Fatalf("%s after %s: %v", key, restart.name, err)
				}
				if res.Allowed {
					admitted++
				}
			}
			// 3 taken before, so 2 more and no more: 5 per hour in all.
			if admitted != 2 {
				t.Errorf("%s: %d admitted after the %s, want 2 (state lost: %v)", key, admitted, restart.name, admitted > 2)
			}
			// Sliding windows keep the previous window too: up to 2 periods.
			if ttl := rdb.PTTL(ctx, key).Val(); ttl <= 0 || ttl > 2*time.Hour {
				t.Errorf("%s: TTL %v after the %s", key, ttl, restart.name)
			}
		}
	}
	if t.Failed() {
		return
	}
	report(t, "aof", "state of 6 algorithms survived a restart and a SIGKILL with appendfsync always: 0 admitted above the bound")
}
