package integration_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redisrate/redisrate"
	"github.com/redisrate/redisrate/integration_test/internal/redistest"
)

// TestClusterDeadShard is issue 31's second finding: 3 primaries without
// replicas (cluster-require-full-coverage no), FailClosed, 8 workers with
// two thirds of their calls on keys of the live shards, and one primary
// killed with SIGKILL. With one breaker per Limiter, from 2.5 s after the
// kill about 98% of the live shards' calls were degraded (denied by
// FailClosed: their tenants got 503s for the whole node outage): a probe
// on a live key closed the breaker, the next call to the dead shard opened
// it again. With one breaker per primary, the live shards' calls are
// Redis's; asserted: at least 90% of them from 2 s after the kill.
func TestClusterDeadShard(t *testing.T) {
	c := redistest.StartCluster(t, redistest.ClusterOptions{Primaries: 3, Config: []string{"cluster-require-full-coverage no"}})
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	t.Cleanup(func() { _ = rdb.Close() })
	lim := redisrate.NewLimiter(rdb, redisrate.WithFailurePolicy(redisrate.FailClosed)) // the default decision timeout and breaker
	ctx := context.Background()
	victim := c.Primaries[0]
	var live, dead []string
	for _, k := range keysOnSlots("shard", 96) {
		m, err := rdb.MasterForKey(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		if m.Options().Addr == victim.Addr {
			dead = append(dead, k)
		} else {
			live = append(live, k)
		}
	}
	if len(live) == 0 || len(dead) == 0 {
		t.Fatalf("%d keys on the live shards, %d on the victim %s: want both", len(live), len(dead), victim.Addr)
	}

	type outcome struct {
		start  time.Time
		live   bool
		redis  bool // decided by Redis
		failed bool
	}
	var mu sync.Mutex
	var all []outcome
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []outcome
			defer func() { mu.Lock(); all = append(all, mine...); mu.Unlock() }()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				o := outcome{start: time.Now(), live: i%3 != 2}
				key := dead[(w+i)%len(dead)]
				if o.live {
					key = live[(w+i)%len(live)]
				}
				res, err := lim.Allow(ctx, key, redisrate.PerSecond(1000))
				o.failed = err != nil
				o.redis = err == nil && !res.Degraded()
				mine = append(mine, o)
				time.Sleep(2 * time.Millisecond)
			}
		}()
	}
	time.Sleep(time.Second)
	killed := time.Now()
	victim.Kill()
	time.Sleep(4500 * time.Millisecond)
	close(stop)
	wg.Wait()

	from := killed.Add(2 * time.Second)
	var liveCalls, liveRedis, deadCalls, deadRedis, before, beforeRedis int
	for _, o := range all {
		switch {
		case o.start.Before(killed):
			before++
			if o.redis {
				beforeRedis++
			}
		case o.start.Before(from):
		case o.live:
			liveCalls++
			if o.redis {
				liveRedis++
			}
		default:
			deadCalls++
			if o.redis {
				deadRedis++
			}
		}
	}
	redistest.Report(t, "cluster-dead-shard", "from 2 s after the kill: %d of %d calls on the live shards decided by Redis, %d of %d on the dead one; before it: %d of %d",
		liveRedis, liveCalls, deadRedis, deadCalls, beforeRedis, before)
	if liveCalls == 0 || float64(liveRedis) < 0.9*float64(liveCalls) {
		t.Errorf("from 2 s after the kill, %d of %d calls on the live shards were decided by Redis; want at least 90%%", liveRedis, liveCalls)
	}
	if deadCalls == 0 || deadRedis > 0 {
		t.Errorf("%d of %d calls on the dead shard decided by Redis: the outage did not happen", deadRedis, deadCalls)
	}
}
