package redistest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// ClusterOptions describe a Cluster for StartCluster.
type ClusterOptions struct {
	Primaries int      // at least 1; the slots are split evenly between them
	Replicas  int      // replicas of each primary
	Config    []string // extra configuration lines for every node
}

// Cluster is a Redis Cluster of local servers, built with CLUSTER
// ADDSLOTSRANGE, MEET and REPLICATE (no redis-cli needed), stopped when the
// test ends.
type Cluster struct {
	Primaries []*Server
	Replicas  []*Server // Replicas[i*n+j] is replica j of Primaries[i]
	t         testing.TB
	ids       map[string]string // addr -> node ID
	mu        sync.Mutex
	clients   map[string]*redis.Client // addr -> admin client
}

// Addrs are the addresses of every node, primaries first.
func (c *Cluster) Addrs() []string {
	var a []string
	for _, s := range append(append([]*Server(nil), c.Primaries...), c.Replicas...) {
		a = append(a, s.Addr)
	}
	return a
}

// Nodes are every node, primaries first.
func (c *Cluster) Nodes() []*Server {
	return append(append([]*Server(nil), c.Primaries...), c.Replicas...)
}

// StartCluster starts a Cluster (cluster-node-timeout 1000) and waits until
// every node reports it healthy with all 16384 slots served.
func StartCluster(t testing.TB, opts ClusterOptions) *Cluster {
	t.Helper()
	NeedLocal(t, "a Cluster: a container announces addresses the host cannot reach")
	if opts.Primaries < 1 {
		opts.Primaries = 3
	}
	conf := append([]string{
		"cluster-enabled yes",
		"cluster-config-file nodes.conf",
		"cluster-node-timeout 1000",
		"cluster-replica-validity-factor 0",
	}, opts.Config...)
	c := &Cluster{t: t, ids: map[string]string{}, clients: map[string]*redis.Client{}}
	for range opts.Primaries {
		c.Primaries = append(c.Primaries, StartServer(t, Options{Config: conf}))
	}
	for range opts.Primaries * opts.Replicas {
		c.Replicas = append(c.Replicas, StartServer(t, Options{Config: conf}))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, s := range c.Nodes() {
		id, err := c.admin(s).ClusterMyID(ctx).Result()
		if err != nil {
			t.Fatalf("CLUSTER MYID on %s: %v", s.Addr, err)
		}
		c.ids[s.Addr] = id
	}
	n := len(c.Primaries)
	for i, p := range c.Primaries {
		lo, hi := i*16384/n, (i+1)*16384/n-1
		if err := c.admin(p).Do(ctx, "CLUSTER", "ADDSLOTSRANGE", lo, hi).Err(); err != nil {
			t.Fatalf("CLUSTER ADDSLOTSRANGE %d %d on %s: %v", lo, hi, p.Addr, err)
		}
	}
	first := c.Primaries[0]
	for _, s := range c.Nodes()[1:] {
		if err := c.admin(s).ClusterMeet(ctx, "127.0.0.1", strconv.Itoa(first.Port)).Err(); err != nil {
			t.Fatalf("CLUSTER MEET from %s: %v", s.Addr, err)
		}
	}
	for i, r := range c.Replicas {
		p := c.Primaries[i/opts.Replicas]
		for {
			// The replica must know the primary before it can follow it.
			err := c.admin(r).Do(ctx, "CLUSTER", "REPLICATE", c.ids[p.Addr]).Err()
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("CLUSTER REPLICATE on %s: %v", r.Addr, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	c.WaitHealthy(30 * time.Second)
	return c
}

// admin returns a plain client of one node (no redirections), closed when
// the test ends.
func (c *Cluster) admin(s *Server) *redis.Client {
	c.mu.Lock()
	defer c.mu.Unlock()
	if rdb := c.clients[s.Addr]; rdb != nil {
		return rdb
	}
	rdb := s.Client(&redis.Options{MaxRetries: -1})
	c.clients[s.Addr] = rdb
	return rdb
}

// Admin returns a plain client of one node: it talks to that node only and
// follows no MOVED or ASK.
func (c *Cluster) Admin(s *Server) *redis.Client { return c.admin(s) }

// ID is the Cluster node ID of s.
func (c *Cluster) ID(s *Server) string { return c.ids[s.Addr] }

// WaitHealthy waits until every running node reports cluster_state:ok with
// all 16384 slots served and agrees on who serves each slot, and every
// replica's link to its primary is up.
func (c *Cluster) WaitHealthy(within time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(within)
	for {
		why := c.unhealthy()
		if why == "" {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("cluster not healthy after %v: %s", within, why)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (c *Cluster) unhealthy() string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var layout string
	for _, s := range c.Nodes() {
		if !s.Running() {
			continue
		}
		rdb := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1, TLSConfig: s.TLS})
		info, err := rdb.ClusterInfo(ctx).Result()
		var shards []redis.ClusterShard
		if err == nil {
			shards, err = rdb.ClusterShards(ctx).Result()
		}
		var repl string
		if err == nil {
			repl, err = rdb.Info(ctx, "replication").Result()
		}
		_ = rdb.Close()
		switch {
		case err != nil:
			return s.Addr + ": " + err.Error()
		case !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, "cluster_slots_ok:16384"):
			return s.Addr + ": " + strings.Join(strings.Fields(info)[:3], " ")
		case strings.Contains(repl, "role:slave") && !strings.Contains(repl, "master_link_status:up"):
			return s.Addr + ": replica link down"
		}
		l := slotLayout(shards)
		if layout == "" {
			layout = l
		} else if l != layout {
			return s.Addr + ": sees another slot layout than its peers"
		}
	}
	return ""
}

// slotLayout is a canonical text of who serves what, primaries only.
func slotLayout(shards []redis.ClusterShard) string {
	var parts []string
	for _, sh := range shards {
		for _, r := range sh.Slots {
			parts = append(parts, fmt.Sprintf("%d-%d:%s", r.Start, r.End, primaryID(sh)))
		}
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}

// Owner returns the primary that serves slot, as the first primary sees it.
func (c *Cluster) Owner(ctx context.Context, slot int) (*Server, error) {
	shards, err := c.admin(c.Primaries[0]).ClusterShards(ctx).Result()
	if err != nil {
		return nil, err
	}
	for _, sh := range shards {
		for _, r := range sh.Slots {
			if int(r.Start) <= slot && slot <= int(r.End) {
				id := primaryID(sh)
				for _, s := range c.Nodes() {
					if c.ids[s.Addr] == id {
						return s, nil
					}
				}
				return nil, fmt.Errorf("slot %d is served by node %s, not a node of this cluster", slot, id)
			}
		}
	}
	return nil, fmt.Errorf("no node serves slot %d", slot)
}

// primaryID is the ID of a shard's primary.
func primaryID(sh redis.ClusterShard) string {
	for _, n := range sh.Nodes {
		if n.Role == "master" {
			return n.ID
		}
	}
	return ""
}

// OtherPrimary is the first primary that is none of not: where to move a
// slot away from the primaries it is and has been on.
func (c *Cluster) OtherPrimary(not ...*Server) *Server {
	for _, p := range c.Primaries {
		if !slices.Contains(not, p) {
			return p
		}
	}
	c.t.Fatalf("a Cluster of %d primaries has none but the %d named", len(c.Primaries), len(not))
	return nil
}

// KeySlot is the hash slot of key (CLUSTER KEYSLOT).
func (c *Cluster) KeySlot(ctx context.Context, key string) (int, error) {
	n, err := c.admin(c.Primaries[0]).ClusterKeySlot(ctx, key).Result()
	return int(n), err
}

// Migration is one slot on its way from one primary to another, as
// redis-cli --cluster reshard moves it: the target IMPORTING, the source
// MIGRATING, the keys moved with MIGRATE in batches, then SETSLOT NODE on
// every primary. While it is under way the source answers ASK for keys it
// no longer has; afterwards every node answers MOVED.
type Migration struct {
	c        *Cluster
	Slot     int
	From, To *Server
	Moved    int // keys moved so far
}

// BeginMigration marks slot as IMPORTING on to and MIGRATING on its owner.
func (c *Cluster) BeginMigration(ctx context.Context, slot int, to *Server) (*Migration, error) {
	from, err := c.Owner(ctx, slot)
	if err != nil {
		return nil, err
	}
	if from == to {
		return nil, fmt.Errorf("slot %d is already on %s", slot, to.Addr)
	}
	if err := c.admin(to).Do(ctx, "CLUSTER", "SETSLOT", slot, "IMPORTING", c.ID(from)).Err(); err != nil {
		return nil, fmt.Errorf("SETSLOT %d IMPORTING on %s: %w", slot, to.Addr, err)
	}
	if err := c.admin(from).Do(ctx, "CLUSTER", "SETSLOT", slot, "MIGRATING", c.ID(to)).Err(); err != nil {
		return nil, fmt.Errorf("SETSLOT %d MIGRATING on %s: %w", slot, from.Addr, err)
	}
	return &Migration{c: c, Slot: slot, From: from, To: to}, nil
}

// MoveKeys moves up to batch keys of the slot with one MIGRATE and returns
// how many it moved (0 when none are left).
func (m *Migration) MoveKeys(ctx context.Context, batch int) (int, error) {
	src := m.c.admin(m.From)
	keys, err := src.ClusterGetKeysInSlot(ctx, m.Slot, batch).Result()
	if err != nil || len(keys) == 0 {
		return 0, err
	}
	args := []any{"MIGRATE", "127.0.0.1", m.To.Port, "", 0, 5000, "KEYS"}
	for _, k := range keys {
		args = append(args, k)
	}
	if err := src.Do(ctx, args...).Err(); err != nil && !errors.Is(err, redis.Nil) && err.Error() != "NOKEY" {
		return 0, fmt.Errorf("MIGRATE of %d keys of slot %d: %w", len(keys), m.Slot, err)
	}
	m.Moved += len(keys)
	return len(keys), nil
}

// Finish moves the keys left and assigns the slot to the target on every
// primary: the target first, then the source, then the others.
func (m *Migration) Finish(ctx context.Context) error {
	for {
		n, err := m.MoveKeys(ctx, 100)
		if err != nil {
			return err
		}
		if n == 0 {
			break
		}
	}
	order := []*Server{m.To, m.From}
	for _, p := range m.c.Primaries {
		if p != m.To && p != m.From {
			order = append(order, p)
		}
	}
	for _, p := range order {
		if err := m.c.admin(p).Do(ctx, "CLUSTER", "SETSLOT", m.Slot, "NODE", m.c.ID(m.To)).Err(); err != nil {
			return fmt.Errorf("SETSLOT %d NODE on %s: %w", m.Slot, p.Addr, err)
		}
	}
	return nil
}

// MigrateSlot moves slot and its keys to the primary to, at once.
func (c *Cluster) MigrateSlot(ctx context.Context, slot int, to *Server) error {
	m, err := c.BeginMigration(ctx, slot, to)
	if err != nil {
		return err
	}
	return m.Finish(ctx)
}
