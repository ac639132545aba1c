package integration_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redisrate/redisrate"
	"github.com/redisrate/redisrate/integration_test/internal/redistest"
	"github.com/redisrate/redisrate/scripts"
)

// scriptsCached returns, for each script, whether the node at addr has it.
func scriptsCached(t *testing.T, addr string) []bool {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	var shas []string
	for _, s := range scripts.Specs() {
		shas = append(shas, s.SHA1)
	}
	ok, err := rdb.ScriptExists(context.Background(), shas...).Result()
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// Every algorithm through a ClusterClient, over keys on slots spread over
// all 16384, with the nodes' script caches empty at the start: every
// decision right, no CROSSSLOT, each primary loads the scripts itself.
func TestReliabilityClusterAllAlgorithms(t *testing.T) {
	c := startCluster(t)
	for _, addr := range c.addrs {
		for i, ok := range scriptsCached(t, addr) {
			if ok {
				t.Fatalf("node %s already has script %d: the test needs empty caches", addr, i)
			}
		}
	}
	rdb := c.client(t, nil)
	lim := redistest.NewLimiter(rdb, redisrate.WithKeyPrefix("rl:"))
	keys := keysOnSlots("k", 256)
	ctx := context.Background()

	var wg sync.WaitGroup
	errs := make(chan error, len(redistest.Algorithms)*len(keys))
	sem := make(chan struct{}, 8)
	for _, algo := range redistest.Algorithms {
		limit := redisrate.PerMinute(3).WithAlgorithm(algo)
		for _, k := range keys {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; wg.Done() }()
				key := algo.String() + ":" + k
				for i := range 4 {
					res, err := lim.Allow(ctx, key, limit)
					if err != nil {
						errs <- err
						return
					}
					want := i < 3
					if res.Allowed != want || res.Capacity != 3 || res.Source != redisrate.SourceRedis ||
						(want && res.Remaining != int64(2-i)) || (!want && (res.RetryAfter <= 0 || res.Remaining != 0)) {
						errs <- errors.New(algo.String() + " " + key + ": call " + string(rune('1'+i)) + ": " + res.String())
						return
					}
				}
				if res, err := lim.Decide(ctx, redisrate.Request{Kind: redisrate.KindCheck, Key: key, Limits: []redisrate.Limit{limit}}); err != nil || res.Allowed {
					errs <- errors.Join(err, errors.New(key+": check after 3 of 3: "+res.String()))
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	n := 0
	for err := range errs {
		if n++; n <= 5 {
			t.Error(err)
		}
		if strings.Contains(err.Error(), "CROSSSLOT") {
			t.Fatal("CROSSSLOT:", err)
		}
	}
	if n > 0 {
		t.Fatalf("%d of %d keys went wrong", n, len(redistest.Algorithms)*len(keys))
	}

	// Each primary got keys, and loaded every script on demand.
	masters := map[string]bool{}
	for _, k := range keys {
		m, err := rdb.MasterForKey(ctx, "rl:gcra:"+k)
		if err != nil {
			t.Fatal(err)
		}
		masters[m.Options().Addr] = true
	}
	if len(masters) != 3 {
		t.Fatalf("keys reached %d primaries, want 3", len(masters))
	}
	for addr := range masters {
		for i, ok := range scriptsCached(t, addr) {
			if !ok {
				t.Errorf("primary %s never loaded %s", addr, scripts.Specs()[i].Name)
			}
		}
	}
	// Empty, huge, binary and hash-tagged keys route and work on a Cluster.
	checkKeys(t, lim, "")
	if slot("{user:42}:login") != slot("{user:42}:payment") {
		t.Fatal("hash tags: the two keys are on different slots")
	}
	redistest.Report(t, "cluster-keys", "%d keys x %d algorithms on 3 primaries, 0 errors", len(keys), len(redistest.Algorithms))
}

// Check and Peek through EVALSHA_RO, and through FCALL_RO once the library
// is loaded on every primary, on a Cluster's replicas (a ClusterClient
// with ReadOnly) answer as the primary does once the state is replicated,
// and the replicas, not the primaries, serve them.
func TestReliabilityClusterReplicaCheck(t *testing.T) {
	c := startCluster(t)
	ctx := context.Background()
	for _, phase := range []struct {
		name      string
		functions bool
		ro        []string // the commands of the read-only calls
	}{
		{"evalsha_ro", false, []string{"evalsha_ro", "eval_ro"}},
		{"fcall_ro", true, []string{"fcall_ro"}},
	} {
		t.Run(phase.name, func(t *testing.T) {
			if phase.functions {
				for _, p := range c.Primaries {
					if err := c.Admin(p).FunctionLoadReplace(ctx, scripts.Library).Err(); err != nil {
						t.Fatalf("FUNCTION LOAD on %s: %v", p.Addr, err)
					}
				}
				for _, r := range c.Replicas {
					redistest.WaitFor(t, 10*time.Second, "the library on replica "+r.Addr, func() bool {
						libs, err := c.Admin(r).FunctionList(ctx, redis.FunctionListQuery{LibraryNamePattern: scripts.LibraryName}).Result()
						return err == nil && len(libs) == 1
					})
				}
			}
			primary := redistest.NewLimiter(c.client(t, nil))
			ro := c.client(t, &redis.ClusterOptions{ReadOnly: true})
			replica := redistest.NewLimiter(ro, redisrate.WithReadOnlyCheck())
			// Each Limiter asks once whether the library is there (a keyless
			// FCALL_RO to any node): before the counts.
			for _, l := range []*redisrate.Limiter{primary, replica} {
				if _, err := l.Decide(ctx, redisrate.Request{Kind: redisrate.KindPeek, Key: "learn", Limits: []redisrate.Limit{redisrate.PerHour(1)}}); err != nil {
					t.Fatal(err)
				}
			}
			before := map[string]int64{}
			for _, s := range c.Nodes() {
				before[s.Addr] = redistest.ReadCommandStats(t, c.Admin(s)).Sum(phase.ro...)
			}
			for _, algo := range redistest.Algorithms {
				key := phase.name + ":ro:" + algo.String()
				limit := redisrate.PerHour(5).WithAlgorithm(algo)
				for range 3 {
					if _, err := primary.Allow(ctx, key, limit); err != nil {
						t.Fatal(err)
					}
				}
				m, err := ro.MasterForKey(ctx, key)
				if err != nil {
					t.Fatal(err)
				}
				if n, err := m.Wait(ctx, 1, 5*time.Second).Result(); err != nil || n < 1 {
					t.Fatalf("WAIT: %d replicas, %v", n, err)
				}
				// 3 of 5 used: a check of one unit leaves 1, a peek sees 2.
				for i, kind := range []string{"check", "peek"} {
					left := int64(1 + i)
					var want, got redisrate.Result
					var errP, errR error
					if kind == "check" {
						want, errP = primary.Decide(ctx, redisrate.Request{Kind: redisrate.KindCheck, Key: key, Limits: []redisrate.Limit{limit}})
						got, errR = replica.Decide(ctx, redisrate.Request{Kind: redisrate.KindCheck, Key: key, Limits: []redisrate.Limit{limit}})
					} else {
						want, errP = primary.Decide(ctx, redisrate.Request{Kind: redisrate.KindPeek, Key: key, Limits: []redisrate.Limit{limit}})
						got, errR = replica.Decide(ctx, redisrate.Request{Kind: redisrate.KindPeek, Key: key, Limits: []redisrate.Limit{limit}})
					}
					if errP != nil || errR != nil {
						t.Fatalf("%s %s: primary %v, replica %v", algo, kind, errP, errR)
					}
					if got.Allowed != want.Allowed || got.Remaining != want.Remaining || got.Capacity != want.Capacity ||
						got.Remaining != left || redistest.AbsDur(got.ResetAfter-want.ResetAfter) > time.Second || redistest.AbsDur(got.RetryAfter-want.RetryAfter) > time.Second {
						t.Fatalf("%s %s: replica says %v, primary %v; the nodes: %s", algo, kind, got, want, c.whoHolds(key))
					}
				}
			}
			// The replicas, not the primaries, ran the read-only calls.
			var onReplicas int64
			for _, s := range c.Nodes() {
				n := redistest.ReadCommandStats(t, c.Admin(s)).Sum(phase.ro...) - before[s.Addr]
				role, _ := c.Admin(s).Info(ctx, "replication").Result()
				if n > 0 && !strings.Contains(role, "role:slave") {
					t.Errorf("primary %s ran %d of %v: read-only calls did not go to replicas", s.Addr, n, phase.ro)
				}
				if strings.Contains(role, "role:slave") {
					onReplicas += n
				}
			}
			t.Logf("replicas ran %d of %v for 6 checks and 6 peeks", onReplicas, phase.ro)
			if onReplicas < 12 {
				t.Fatalf("replicas ran %d of %v for 6 checks and 6 peeks", onReplicas, phase.ro)
			}
		})
	}
}

// hotKey is a key under load in the failover tests, with its algorithm's
// bound on what it may hold after a failover that kept its state (what it
// may admit over the run is redistest.Bound).
type hotKey struct {
	name  string
	limit redisrate.Limit
	// refill is the most units that may come back during a gap of d that
	// started at run time into the run.
	refill func(d, at time.Duration) int64
}

// hotKeys are well below the load, so every admission counts and the key
// stays near empty; they refill slowly, so the seconds of a failover do not
// fill them again: state lost in the failover shows as a full key.
func hotKeys(tag string) []hotKey {
	gcra := redisrate.PerSecond(10).WithBurst(200)
	log := redisrate.PerMinute(300).WithAlgorithm(redisrate.SlidingLog)
	fixed := redisrate.PerMinute(300).WithAlgorithm(redisrate.FixedWindow)
	return []hotKey{
		{tag + ":gcra", gcra,
			func(d, _ time.Duration) int64 { return int64(float64(gcra.Rate)*d.Seconds()) + 1 }},
		// Entries leave the log as they age past a minute.
		{tag + ":sliding_log", log,
			func(d, _ time.Duration) int64 { return int64(math.Ceil(float64(log.Rate) * d.Seconds() / 60)) }},
		// A new window may open during a gap only in a soak run: CI runs
		// are shorter than the first window.
		{tag + ":fixed_window", fixed,
			func(d, at time.Duration) int64 {
				if at+d >= time.Minute {
					return fixed.Rate
				}
				return 0
			}},
	}
}

// failover puts a few thousand decisions a second on hot keys, calls kill,
// waits for healthy, and measures: calls that failed, how long calls kept
// failing, and units admitted above each key's bound over the run.
func failover(t *testing.T, lim *redisrate.Limiter, tag string, kill func(), healthy func()) {
	t.Helper()
	before := redistest.LoadFor(t, 3*time.Second)
	after := redistest.LoadFor(t, 4*time.Second)
	keys := hotKeys(tag)
	var mu sync.Mutex
	var killedAt time.Time
	maxAfter := make([]int64, len(keys)) // largest Remaining after the kill
	// The longest time without a decision around the failover, per key:
	// the key refills during it.
	prev := make([]time.Time, len(keys))
	longest := make([]time.Duration, len(keys))
	var lastDecision time.Time
	start := time.Now()
	var loads []*redistest.Load
	for i, hk := range keys {
		maxAfter[i] = -1
		decide := func(ctx context.Context) (redisrate.Result, error) { return lim.Allow(ctx, hk.name, hk.limit) }
		loads = append(loads, redistest.StartLoad(4, 0, decide, func(res redisrate.Result) {
			mu.Lock()
			defer mu.Unlock()
			now := time.Now()
			lastDecision = now
			if killedAt.IsZero() || now.Before(killedAt) {
				prev[i] = now
				return
			}
			longest[i] = max(longest[i], now.Sub(prev[i]))
			prev[i] = now
			maxAfter[i] = max(maxAfter[i], res.Remaining)
		}))
	}
	time.Sleep(before)
	mu.Lock()
	killedAt = time.Now()
	mu.Unlock()
	kill()
	healthy()
	healthyAt := time.Now()
	time.Sleep(after)
	var failed, byBreaker, untyped, decisions int64
	var gap time.Duration
	var errs []error
	for _, l := range loads {
		l.Stop()
		failed += l.Failed.Load()
		byBreaker += l.ByBreaker.Load()
		untyped += l.Untyped.Load()
		decisions += l.Decisions()
		gap = max(gap, l.Gap(killedAt))
		errs = append(errs, l.Errs()...)
	}
	elapsed := lastDecision.Sub(start)
	if lastDecision.Before(healthyAt) {
		t.Fatal("no decision after the failover")
	}
	rate := float64(decisions) / elapsed.Seconds()
	t.Logf("%d decisions (%.0f/s) over %v; %d failed; first errors: %v", decisions, rate, elapsed.Round(time.Millisecond), failed, errs[:min(len(errs), 3)])
	redistest.Report(t, t.Name()+" failed-calls", "%d of %d (%d of them answered at once by the open circuit breaker; %d not ErrUnavailable)",
		failed, decisions+failed, byBreaker, untyped)
	if untyped > 0 {
		t.Errorf("%d failed calls did not match ErrUnavailable", untyped)
	}
	redistest.Report(t, t.Name()+" seconds-until-healthy", "%.2f (calls failing for %.2fs after the kill; topology healthy after %.2fs)",
		max(gap, healthyAt.Sub(killedAt)).Seconds(), gap.Seconds(), healthyAt.Sub(killedAt).Seconds())
	redistest.Report(t, t.Name()+" decisions-per-second", "%.0f", rate)
	for i, hk := range keys {
		admitted := loads[i].Admitted.Load()
		bound := redistest.Bound(hk.limit, elapsed)
		above := float64(admitted) - bound
		// Half a second more for the scheduling of a shared machine.
		refill := hk.refill(longest[i]+500*time.Millisecond, killedAt.Sub(start))
		redistest.Report(t, t.Name()+" "+hk.limit.Algorithm.String(), "admitted %d, bound %.0f, above the bound %.0f; after the failover %d of %v left (refill during the gap: up to %d)",
			admitted, bound, max(above, 0), maxAfter[i], hk.limit.Capacity(), refill)
		// State carried over: the key did not come back full.
		if maxAfter[i] > refill || (refill < hk.limit.Capacity()-1 && maxAfter[i] >= hk.limit.Capacity()-1) {
			t.Errorf("%s: after the failover %d of %v left, more than the %d that refilled: its state was lost",
				hk.name, maxAfter[i], hk.limit.Capacity(), refill)
		}
		// Asynchronous replication may lose the last writes acknowledged
		// before the kill; far less than a burst.
		if above > float64(hk.limit.Capacity())/4 {
			t.Errorf("%s: admitted %d, %.0f above the bound %.0f", hk.name, admitted, above, bound)
		}
	}
}

// Kill the hot key's primary under load: its replica takes over, the
// limiter keeps deciding, and the key's state carries over.
func TestReliabilityClusterFailover(t *testing.T) {
	c := startCluster(t)
	rdb := c.client(t, &redis.ClusterOptions{MaxRedirects: 8})
	lim := redisrate.NewLimiter(rdb)
	key := "{hot}" // every hot key is on this slot, on one primary
	ctx := context.Background()
	m, err := rdb.MasterForKey(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	victim := c.node(t, m.Options().Addr)
	failover(t, lim, key, victim.Kill, func() {
		deadline := time.Now().Add(30 * time.Second)
		for {
			m, err := rdb.MasterForKey(ctx, key)
			if err == nil && m.Options().Addr != victim.Addr {
				if rdb.Ping(ctx).Err() == nil && c.unhealthySlot(key) == "" {
					return
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("no new primary for %s within 30s", key)
			}
			rdb.ReloadState(ctx)
			time.Sleep(50 * time.Millisecond)
		}
	})
	// The promoted replica had no scripts (they are not replicated): the
	// client loaded the ones it ran there on demand.
	m, err = rdb.MasterForKey(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	cached := scriptsCached(t, m.Options().Addr)
	for _, algo := range []redisrate.Algorithm{redisrate.GCRA, redisrate.SlidingLog, redisrate.FixedWindow} {
		if !cached[algo] {
			t.Errorf("new primary %s lacks the %s script", m.Options().Addr, algo)
		}
	}
}

// whoHolds says, for a failure's message, what each node answers for key
// (a replica read as READONLY) and how far each has replicated.
func (c *cluster) whoHolds(key string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var out []string
	for _, s := range c.Nodes() {
		rdb := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1,
			OnConnect: func(ctx context.Context, cn *redis.Conn) error { return cn.ReadOnly(ctx).Err() }})
		n, err := rdb.Exists(ctx, key).Result()
		repl, _ := rdb.Info(ctx, "replication").Result()
		_ = rdb.Close()
		var fields []string
		for line := range strings.Lines(repl) {
			if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok && (k == "role" || strings.HasSuffix(k, "repl_offset") || k == "master_link_status") {
				fields = append(fields, k+"="+v)
			}
		}
		out = append(out, fmt.Sprintf("%s: EXISTS %d (%v), %s", s.Addr, n, err, strings.Join(fields, " ")))
	}
	return strings.Join(out, "; ")
}

// unhealthySlot asks a running node whether the key's slot is served by a
// primary that is up.
func (c *cluster) unhealthySlot(key string) string {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	for _, s := range c.Nodes() {
		if !s.Running() {
			continue
		}
		rdb := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
		info, err := rdb.ClusterInfo(ctx).Result()
		_ = rdb.Close()
		if err != nil {
			return err.Error()
		}
		if !strings.Contains(info, "cluster_state:ok") {
			return s.Addr + ": cluster not ok"
		}
		return ""
	}
	return "no node running"
}
