package hardening

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redisrate/redisrate"
	"github.com/redisrate/redisrate/integration_test/internal/redistest"
	"github.com/redisrate/redisrate/scripts"
)

// hotLimits are limits the load exceeds, so that a reset or a lost write
// would show as admissions above the bound.
func hotLimit(algo redisrate.Algorithm) redisrate.Limit {
	switch algo {
	case redisrate.GCRA, redisrate.LeakyBucket, redisrate.TokenBucket:
		return redisrate.PerSecond(50).WithAlgorithm(algo).WithBurst(100)
	default:
		return redisrate.Per(100, 2*time.Second).WithAlgorithm(algo)
	}
}

// Resharding under load: on a 3-primary Cluster, the slot of each
// algorithm's hot key is migrated twice (IMPORTING/MIGRATING, MIGRATE,
// SETSLOT NODE) while workers call it through a ClusterClient. Calls
// follow ASK during the move (to a target whose script cache was just
// flushed) and MOVED after it: 0 failed calls, 0 admitted above any bound,
// and the state goes with the key (an exhausted key in the same slot stays
// exhausted). Run twice: by EVALSHA, and by FCALL with the library loaded
// on every primary, the target's library flushed before each move (the
// client falls back to EVALSHA on "function not found").
func TestReshardingUnderLoad(t *testing.T) {
	redistest.NeedLocal(t, "a Cluster")
	for _, library := range []bool{false, true} {
		t.Run(map[bool]string{false: "EVALSHA", true: "FCALL"}[library], func(t *testing.T) {
			t.Parallel()
			reshard(t, library)
		})
	}
}

func reshard(t *testing.T, library bool) {
	ctx := context.Background()
	name := map[bool]string{false: "resharding EVALSHA", true: "resharding FCALL"}[library]
	c := redistest.StartCluster(t, redistest.ClusterOptions{Primaries: 3})
	if library {
		for _, p := range c.Primaries {
			if err := c.Admin(p).FunctionLoadReplace(ctx, scripts.Library).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = rdb.Close() })
	l := redistest.NewLimiter(rdb, redisrate.WithKeyPrefix("rate:"))

	var keys []*hot
	idle := redisrate.PerHour(3)
	for _, algo := range redistest.Algorithms {
		h := &hot{key: "{" + algo.String() + "}:hot", lim: hotLimit(algo)}
		keys = append(keys, h)
		// An exhausted key in the same slot: it must stay exhausted.
		for range 3 {
			if _, err := l.Allow(ctx, "{"+algo.String()+"}:idle", idle.WithAlgorithm(algo)); err != nil {
				t.Fatal(err)
			}
		}
	}
	stop := hammer(keys, 2, 0, func(ctx context.Context, h *hot) (redisrate.Result, error) {
		return l.Allow(ctx, h.key, h.lim)
	})
	defer stop()
	time.Sleep(redistest.LoadFor(t, 300*time.Millisecond))

	// One slot at a time, as redis-cli --cluster reshard moves them. Each
	// phase lasts until the load has been through it, however fast or slow
	// the machine: calls meet the slot MIGRATING with the keys still on
	// the source, follow ASK to the target once they have moved (the
	// target counts the ASKING a client sends before the command an ASK
	// redirects), and MOVED once it is the owner.
	var migrations, moved int
	owners := map[*hot][]*redistest.Server{} // where each key's slot has been
	for range 2 {
		for _, h := range keys {
			slot, err := c.KeySlot(ctx, "rate:"+h.key)
			if err != nil {
				t.Fatal(err)
			}
			from, err := c.Owner(ctx, slot)
			if err != nil {
				t.Fatal(err)
			}
			// Each move to a primary the slot has not been on: the second
			// round reaches the third primary.
			owners[h] = append(owners[h], from)
			to := c.OtherPrimary(owners[h]...)
			// The target forgets its scripts: calls sent there by ASK
			// meet NOSCRIPT and must load them.
			if err := c.Admin(to).ScriptFlush(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			if library {
				if err := c.Admin(to).FunctionFlush(ctx).Err(); err != nil {
					t.Fatal(err)
				}
			}
			asking := redistest.ReadCommandStats(t, c.Admin(to)).Sum("asking")
			m, err := c.BeginMigration(ctx, slot, to)
			if err != nil {
				t.Fatal(err)
			}
			h.AwaitCalls(t, 20, 10*time.Second, "on "+h.key+" with its slot MIGRATING")
			n, err := m.MoveKeys(ctx, 10)
			if err != nil {
				t.Fatal(err)
			}
			redistest.WaitFor(t, 10*time.Second, "a call on "+h.key+" to follow ASK to "+to.Addr, func() bool {
				return redistest.ReadCommandStats(t, c.Admin(to)).Sum("asking") > asking
			})
			if err := m.Finish(ctx); err != nil {
				t.Fatal(err)
			}
			migrations++
			moved += n
			c.WaitHealthy(10 * time.Second)
			h.AwaitCalls(t, 20, 10*time.Second, "on "+h.key+" after its slot moved")
		}
	}
	time.Sleep(redistest.LoadFor(t, 300*time.Millisecond))
	stop()

	redistest.Report(t, name, "%d slot migrations of hot keys (%d keys moved by MIGRATE) under load", migrations, moved)
	checkBounds(t, name, keys, 0, false)
	for _, algo := range redistest.Algorithms {
		res, err := l.Decide(ctx, redisrate.Request{Kind: redisrate.KindCheck, Key: "{" + algo.String() + "}:idle", Limits: []redisrate.Limit{idle.WithAlgorithm(algo)}})
		if err != nil || res.Allowed {
			t.Errorf("%s: the exhausted key in the migrated slot: %v, %v; want still denied (state carried)", algo, res, err)
		}
	}
	// With the library loaded, the primaries decided by FCALL (and by the
	// scripts, loaded on demand, where a move had flushed it).
	fcalls := 0
	for _, p := range c.Primaries {
		st := redistest.ReadCommandStats(t, c.Admin(p))
		t.Logf("%s: %d EVALSHA, %d EVAL, %d FCALL, %d ASKING", p.Addr, st["evalsha"], st["eval"], st["fcall"], st["asking"])
		if st["fcall"] > 0 {
			fcalls++
		}
	}
	if library && fcalls == 0 {
		t.Error("no primary ran FCALL: the library path was not exercised")
	}
}
