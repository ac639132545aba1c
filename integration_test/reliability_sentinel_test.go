package integration_test

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redisrate/redisrate"
	"github.com/redisrate/redisrate/integration_test/internal/redistest"
	"github.com/redisrate/redisrate/scripts"
)

// A primary, its replica and three Sentinels (quorum 2, down after 1 s):
// kill the primary under load, through redis.NewFailoverClient. The
// limiter keeps deciding after the failover and the hot key's state
// carries over. The library is loaded on the primary, so decisions are
// FCALLs before and after: FUNCTION LOAD replicates, and the promoted
// replica decides by FCALL at once (the Cluster failover test covers
// EVALSHA, whose scripts a promoted replica has to be sent again).
func TestReliabilitySentinelFailover(t *testing.T) {
	redistest.NeedLocal(t, "Sentinel and replication")
	// No diskless-sync delay: Redis 7 waits 5 s by default before the first
	// sync, and a kill within it promoted a replica that held nothing.
	primary := redistest.StartServer(t, redistest.Options{Config: []string{"repl-diskless-sync-delay 0"}})
	replica := redistest.StartServer(t, redistest.Options{Args: []string{"--replicaof", "127.0.0.1", strconv.Itoa(primary.Port)}})
	var sentinels []string
	for range 3 {
		s := redistest.StartServer(t, redistest.Options{Sentinel: true, Config: []string{
			"sentinel monitor m 127.0.0.1 " + strconv.Itoa(primary.Port) + " 2",
			"sentinel down-after-milliseconds m 1000",
			"sentinel failover-timeout m 5000",
			"sentinel parallel-syncs m 1",
		}})
		sentinels = append(sentinels, s.Addr)
	}
	ctx := context.Background()
	// Wait until every Sentinel knows the replica and the other Sentinels:
	// they find each other through hello messages, every 2 s.
	deadline := time.Now().Add(30 * time.Second)
	for _, addr := range sentinels {
		sc := redis.NewSentinelClient(&redis.Options{Addr: addr})
		for {
			reps, _ := sc.Replicas(ctx, "m").Result()
			sens, _ := sc.Sentinels(ctx, "m").Result()
			if len(reps) >= 1 && len(sens) >= 2 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("sentinel %s knows %d replicas and %d other sentinels after 30s", addr, len(reps), len(sens))
			}
			time.Sleep(100 * time.Millisecond)
		}
		_ = sc.Close()
	}

	rdb := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "m", SentinelAddrs: sentinels})
	t.Cleanup(func() { _ = rdb.Close() })
	if err := rdb.FunctionLoadReplace(ctx, scripts.Library).Err(); err != nil {
		t.Fatal(err)
	}
	// The replica has synced and holds the library before the load starts:
	// the test is about the failover, not about a replica still syncing.
	if n, err := rdb.Do(ctx, "WAIT", 1, 10000).Int(); err != nil || n != 1 {
		t.Fatalf("WAIT 1: %d replicas acknowledged the library (%v)", n, err)
	}
	lim := redisrate.NewLimiter(rdb)
	sc := redis.NewSentinelClient(&redis.Options{Addr: sentinels[0]})
	t.Cleanup(func() { _ = sc.Close() })

	failover(t, lim, "hot", primary.Kill, func() {
		deadline := time.Now().Add(30 * time.Second)
		for {
			addr, err := sc.GetMasterAddrByName(ctx, "m").Result()
			if err == nil && net.JoinHostPort(addr[0], addr[1]) == replica.Addr && rdb.Ping(ctx).Err() == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("Sentinel did not promote the replica within 30s (master: %v, %v)", addr, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
	// The failover client now talks to the former replica.
	if role := rdb.Do(ctx, "ROLE").Val(); role == nil {
		t.Fatal("no ROLE from the new primary")
	}
	// Redis decides again: at once on an idle machine; on a busy one the
	// breaker's probes may keep timing out a while after the topology is
	// healthy (4 s and more once, under -race with load 15 on 2 cores).
	var last error
	back := time.Now()
	redistest.WaitFor(t, 15*time.Second, "the limiter to decide by Redis again", func() bool {
		res, err := lim.Allow(ctx, "after", redisrate.PerSecond(1))
		if err != nil {
			last = err
		}
		return err == nil && res.Source == redisrate.SourceRedis
	})
	redistest.Report(t, "sentinel-resume", "Redis decided again %v after the load ended (the last error before: %v)", time.Since(back).Round(time.Millisecond), last)
	// The promoted replica decided by FCALL, never by EVALSHA (a replica
	// counts the commands it served, not the writes it replicated).
	promoted := redis.NewClient(&redis.Options{Addr: replica.Addr})
	defer promoted.Close()
	stats := promoted.Info(ctx, "commandstats").Val()
	if !strings.Contains(stats, "cmdstat_fcall:") || strings.Contains(stats, "cmdstat_evalsha:") {
		t.Errorf("the promoted replica did not decide by FCALL alone:\n%s", stats)
	}
}
