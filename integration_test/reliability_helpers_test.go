package integration_test

// Helpers of the reliability tests (issue 4): a Redis Cluster built from
// redistest servers, and keys spread over its slots.

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redisrate/redisrate/integration_test/internal/redistest"
)

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
	redistest.NeedLocal(t, "a Cluster")
	c := &cluster{Cluster: redistest.StartCluster(t, redistest.ClusterOptions{Primaries: 3, Replicas: 1})}
	c.addrs = c.Addrs()
	// Every node must also know every primary's replica, or a client that
	// asks it for the topology would send replica reads to primaries.
	redistest.WaitFor(t, 30*time.Second, "every node to list a replica for every slot range", c.replicasKnown)
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
