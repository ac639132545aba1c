package integration_test

// Helpers of the reliability tests (issue 4): a Redis Cluster and a
// Sentinel deployment built from redistest servers, a load generator that
// keeps score, and the soak switch.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redisrate/redisrate"
	"github.com/redisrate/redisrate/integration_test/internal/redistest"
)

// soakFlag lengthens the load phases of the reliability tests. CI keeps
// them short; a soak run is e.g.
//
//	cd integration_test && go test -run Reliability -soak 10m -timeout 3h .
//
// or REDISRATE_SOAK=10m GOFLAGS=-timeout=3h make test (a phase of 10 minutes
// outlasts go test's default timeout).
var soakFlag = flag.Duration("soak", 0, "how long each load phase of the reliability tests runs (default: short, for CI; or $REDISRATE_SOAK)")

// loadFor is how long a load phase runs: short unless a soak was asked for.
func loadFor(t testing.TB, short time.Duration) time.Duration {
	t.Helper()
	if *soakFlag > 0 {
		return *soakFlag
	}
	if env := os.Getenv("REDISRATE_SOAK"); env != "" {
		d, err := time.ParseDuration(env)
		if err != nil {
			t.Fatalf("REDISRATE_SOAK=%q: %v", env, err)
		}
		return d
	}
	return short
}

// needLocal skips tests that need local redis-server processes (Cluster,
// Sentinel, kills and restarts).
func needLocal(t testing.TB) {
	t.Helper()
	if !redistest.Local() {
		t.Skip("needs redis-server on PATH (a container cannot be killed, restarted or clustered here): " + redistest.HowTo)
	}
}

// cluster is a Redis Cluster of local servers (redistest.StartCluster).
type cluster struct {
	*redistest.Cluster
	addrs []string
}

// startCluster starts 3 primaries and 3 replicas with empty script caches
// and a 1 s node timeout (so a failover takes seconds, not the default
// 15 s), and waits until every node sees the cluster healthy and lists a
// replica for every slot range.
func startCluster(t *testing.T) *cluster {
	t.Helper()
	needLocal(t)
	c := &cluster{Cluster: redistest.StartCluster(t, redistest.ClusterOptions{Primaries: 3, Replicas: 1})}
	c.addrs = c.Addrs()
	// Every node must also know every primary's replica, or a client that
	// asks it for the topology would send replica reads to primaries.
	deadline := time.Now().Add(30 * time.Second)
	for !c.replicasKnown() {
		if time.Now().After(deadline) {
			t.Fatal("nodes do not list a replica for every slot range within 30s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	return c
}

// replicasKnown reports whether every node's CLUSTER SHARDS gives each
// shard that serves slots a primary and a replica, both online.
func (c *cluster) replicasKnown() bool {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, addr := range c.addrs {
		rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
		shards, err := rdb.ClusterShards(ctx).Result()
		_ = rdb.Close()
		if err != nil || len(shards) == 0 {
			return false
		}
		for _, sh := range shards {
			online := 0
			for _, n := range sh.Nodes {
				if n.Health == "online" {
					online++
				}
			}
			if len(sh.Slots) > 0 && online < 2 {
				return false
			}
		}
	}
	return true
}

// client returns a ClusterClient of c; opts may be nil.
func (c *cluster) client(t *testing.T, opts *redis.ClusterOptions) *redis.ClusterClient {
	t.Helper()
	if opts == nil {
		opts = &redis.ClusterOptions{}
	}
	opts.Addrs = c.addrs
	rdb := redis.NewClusterClient(opts)
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// node returns the server at addr.
func (c *cluster) node(t *testing.T, addr string) *redistest.Server {
	t.Helper()
	for _, s := range c.Nodes() {
		if s.Addr == addr {
			return s
		}
	}
	t.Fatalf("no node at %s among %v", addr, c.addrs)
	return nil
}

// slot is the Cluster hash slot of key: CRC16 (XMODEM) of its hash tag or
// of the whole key, modulo 16384.
func slot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc ^= uint16(key[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % 16384
}

// keysOnSlots returns one key per n-th slot, so n keys spread over all
// 16384 slots: "<prefix>:<i>" names chosen by their slot.
func keysOnSlots(prefix string, n int) []string {
	want := make(map[int]int, n) // slot -> index
	for i := range n {
		want[i*16384/n] = i
	}
	keys := make([]string, n)
	found := 0
	for i := 0; found < n; i++ {
		k := prefix + ":" + strconv.Itoa(i)
		if idx, ok := want[slot(k)]; ok && keys[idx] == "" {
			keys[idx] = k
			found++
		}
	}
	return keys
}

// load runs workers that call decide in a loop until stop, and keeps
// score: admitted units, denials, errors (with their times; how many the
// open circuit breaker answered without asking Redis; how many did not
// match ErrUnavailable), and the largest Remaining seen after a given
// moment.
type load struct {
	admitted, denied, failed atomic.Int64
	byBreaker, untyped       atomic.Int64
	mu                       sync.Mutex
	failTimes                []time.Time
	firstErrs                []error
	lastOK                   time.Time
	stop                     chan struct{}
	wg                       sync.WaitGroup
}

func startLoad(workers int, decide func(ctx context.Context) (redisrate.Result, error), observe func(redisrate.Result)) *load {
	l := &load{stop: make(chan struct{})}
	for range workers {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for {
				select {
				case <-l.stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				res, err := decide(ctx)
				cancel()
				now := time.Now()
				if err != nil {
					l.failed.Add(1)
					if errors.Is(err, redisrate.ErrCircuitOpen) {
						l.byBreaker.Add(1)
					}
					if !errors.Is(err, redisrate.ErrUnavailable) {
						l.untyped.Add(1)
					}
					l.mu.Lock()
					l.failTimes = append(l.failTimes, now)
					if len(l.firstErrs) < 5 {
						l.firstErrs = append(l.firstErrs, err)
					}
					l.mu.Unlock()
					time.Sleep(time.Millisecond) // a client backing off, not a spin
					continue
				}
				if res.Allowed {
					l.admitted.Add(1)
				} else {
					l.denied.Add(1)
				}
				if observe != nil {
					observe(res)
				}
				l.mu.Lock()
				l.lastOK = now
				l.mu.Unlock()
			}
		}()
	}
	return l
}

func (l *load) finish() {
	close(l.stop)
	l.wg.Wait()
}

// gap is how long after since calls kept failing: from since to the last
// failure (0 if none failed).
func (l *load) gap(since time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	var last time.Time
	for _, ft := range l.failTimes {
		if ft.After(last) {
			last = ft
		}
	}
	if last.Before(since) {
		return 0
	}
	return last.Sub(since)
}

func (l *load) errs() []error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]error(nil), l.firstErrs...)
}

// report writes a figure for the README into the test log, in one
// greppable format: "FIGURE name: value".
func report(t testing.TB, name string, format string, args ...any) {
	t.Helper()
	t.Logf("FIGURE %s: %s", name, fmt.Sprintf(format, args...))
}
