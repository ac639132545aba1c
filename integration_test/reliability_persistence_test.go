package integration_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redisrate/redisrate"
	"github.com/redisrate/redisrate/integration_test/internal/redistest"
	"github.com/redisrate/redisrate/scripts"
)

// With AOF on (fsync always), limiter state survives a restart, a clean one
// and a crash (SIGKILL): a key that was used up stays used up, and nothing
// is admitted above the bound. The scripts decide first by EVALSHA, then
// by FCALL of the library, which the AOF keeps too: after each restart the
// library is still loaded and decides.
func TestReliabilityAOFRestart(t *testing.T) {
	redistest.NeedLocal(t, "kills and restarts its server")
	srv := redistest.StartServer(t, redistest.Options{Args: []string{"--appendonly", "yes", "--appendfsync", "always"}})
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := context.Background()

	// waitUp waits until the restarted server answers a decision (go-redis
	// may take a moment to dial again).
	waitUp := func() {
		t.Helper()
		redistest.WaitFor(t, 15*time.Second, "the server to answer again", func() bool { return rdb.Ping(ctx).Err() == nil })
	}
	for _, via := range []string{"evalsha", "fcall"} {
		if via == "fcall" {
			if err := rdb.FunctionLoadReplace(ctx, scripts.Library).Err(); err != nil {
				t.Fatal(err)
			}
		}
		// A Limiter made now finds the library there or not.
		lim := redistest.NewLimiter(rdb)
		for _, restart := range []struct {
			name string
			do   func()
		}{
			{"restart", srv.Restart},
			{"crash", func() { srv.Kill(); srv.Restart() }},
		} {
			aofRestart(t, rdb, lim, via+":"+restart.name, restart.do, waitUp)
			if via != "fcall" {
				continue
			}
			// INFO commandstats starts afresh with the server.
			stats := rdb.Info(ctx, "commandstats").Val()
			if !strings.Contains(stats, "cmdstat_fcall:") || strings.Contains(stats, "cmdstat_evalsha:") {
				t.Errorf("after the %s the decisions were not made by FCALL: the library was lost\n%s", restart.name, stats)
			}
		}
	}
	if t.Failed() {
		return
	}
	redistest.Report(t, "aof", "state of 6 algorithms, and the Functions library, survived a restart and a SIGKILL with appendfsync always, by EVALSHA and by FCALL: 0 admitted above the bound")
}

// aofRestart takes 3 of 5 units of a key per algorithm, restarts the
// server with do, and checks that exactly 2 more are admitted.
func aofRestart(t *testing.T, rdb *redis.Client, lim *redisrate.Limiter, name string, do, waitUp func()) {
	t.Helper()
	ctx := context.Background()
	for _, algo := range redistest.Algorithms {
		key := name + ":" + algo.String()
		limit := redisrate.PerHour(5).WithAlgorithm(algo)
		for i := range 3 {
			if res, err := lim.Allow(ctx, key, limit); err != nil || !res.Allowed {
				t.Fatalf("%s call %d: %v, %v", key, i+1, res, err)
			}
		}
	}
	do()
	waitUp()
	for _, algo := range redistest.Algorithms {
		key := name + ":" + algo.String()
		limit := redisrate.PerHour(5).WithAlgorithm(algo)
		admitted := 0
		for range 5 {
			res, err := lim.Allow(ctx, key, limit)
			if err != nil {
				t.Fatalf("%s after the restart: %v", key, err)
			}
			if res.Allowed {
				admitted++
			}
		}
		// 3 taken before, so 2 more and no more: 5 per hour in all.
		if admitted != 2 {
			t.Errorf("%s: %d admitted after the restart, want 2 (state lost: %v)", key, admitted, admitted > 2)
		}
		// Sliding windows keep the previous window too: up to 2 periods.
		if ttl := rdb.PTTL(ctx, key).Val(); ttl <= 0 || ttl > 2*time.Hour {
			t.Errorf("%s: TTL %v after the restart", key, ttl)
		}
	}
}
