package redistest

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// A TLS server answers a client that trusts the test's CA, and refuses a
// plain-text one (the plain port is off; the TLS port drops it).
func TestTLSServer(t *testing.T) {
	ctx := context.Background()
	certs := NewCerts(t)
	s := StartServer(t, Options{TLS: certs})
	if s.TLS == nil {
		t.Fatal("Server.TLS is nil for a TLS server")
	}
	c := s.Client(nil)
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("TLS client: %v", err)
	}
	plain := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: time.Second})
	defer plain.Close()
	if err := plain.Ping(ctx).Err(); err == nil {
		t.Fatal("a plain-text client got an answer from the TLS port")
	} else {
		t.Logf("plain-text client refused: %v", err)
	}
	// A server that demands client certificates refuses a client without one.
	s2 := StartServer(t, Options{TLS: certs, TLSAuthClients: true})
	if err := s2.Client(nil).Ping(ctx).Err(); err != nil {
		t.Fatalf("client with a certificate: %v", err)
	}
	noCert := s2.TLS.Clone()
	noCert.Certificates = nil
	if err := s2.Client(&redis.Options{TLSConfig: noCert, MaxRetries: -1}).Ping(ctx).Err(); err == nil {
		t.Fatal("a client without a certificate got an answer from a server that demands one")
	}
}

// A shifted clock moves TIME, inside scripts too, and survives a restart.
func TestClockShift(t *testing.T) {
	t.Logf("clock shift by %s", ClockMethod())
	ctx := context.Background()
	for _, shift := range []time.Duration{-2 * time.Second, 2 * time.Second} {
		s := StartServer(t, Options{ClockShift: shift})
		c := s.Client(nil)
		off, err := ClockOffset(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		lua, err := c.Eval(ctx, "local t = redis.call('TIME') return t[1] * 1000 + math.floor(t[2] / 1000)", nil).Int64()
		if err != nil {
			t.Fatal(err)
		}
		luaOff := time.Duration(lua-time.Now().UnixMilli()) * time.Millisecond
		t.Logf("shift %v: TIME off by %v, script TIME off by %v", shift, off.Round(time.Millisecond), luaOff)
		for _, got := range []time.Duration{off, luaOff} {
			if d := got - shift; d < -300*time.Millisecond || d > 300*time.Millisecond {
				t.Errorf("shift %v: clock off by %v", shift, got)
			}
		}
		s.Restart()
		if off, err = ClockOffset(ctx, s.Client(nil)); err != nil || off-shift > 300*time.Millisecond || shift-off > 300*time.Millisecond {
			t.Errorf("after a restart: off by %v, %v", off, err)
		}
	}
}

// A slot moves between primaries with its keys: during the move the source
// answers ASK for a key it no longer holds, afterwards MOVED, and a
// ClusterClient finds every key throughout.
func TestClusterMigration(t *testing.T) {
	ctx := context.Background()
	c := StartCluster(t, ClusterOptions{Primaries: 3})
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	defer cc.Close()
	key := "mig:{slot}"
	slot, err := c.KeySlot(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		if err := cc.Set(ctx, key+strconv.Itoa(i), i, time.Hour).Err(); err != nil {
			t.Fatal(err)
		}
	}
	from, err := c.Owner(ctx, slot)
	if err != nil {
		t.Fatal(err)
	}
	to := c.OtherPrimary(from)
	m, err := c.BeginMigration(ctx, slot, to)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := m.MoveKeys(ctx, 10); err != nil || n != 10 {
		t.Fatalf("MoveKeys: %d, %v", n, err)
	}
	// Some key is on the target now: the source says ASK for it.
	moved, err := c.Admin(to).Do(ctx, "CLUSTER", "GETKEYSINSLOT", slot, 1).StringSlice()
	if err != nil || len(moved) != 1 {
		t.Fatalf("GETKEYSINSLOT on the target: %v, %v", moved, err)
	}
	if err := c.Admin(from).Get(ctx, moved[0]).Err(); err == nil || !strings.HasPrefix(err.Error(), "ASK ") {
		t.Fatalf("GET of a moved key on the source: %v, want ASK", err)
	}
	if v, err := cc.Get(ctx, moved[0]).Result(); err != nil || v == "" {
		t.Fatalf("ClusterClient GET during the move: %q, %v", v, err)
	}
	if err := m.Finish(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Admin(from).Get(ctx, key+"0").Err(); err == nil || !strings.HasPrefix(err.Error(), "MOVED ") {
		t.Fatalf("GET on the source after the move: %v, want MOVED", err)
	}
	for i := range 50 {
		v, err := cc.Get(ctx, key+strconv.Itoa(i)).Result()
		if err != nil || v != strconv.Itoa(i) {
			t.Fatalf("key %d after the move: %q, %v", i, v, err)
		}
		if ttl := cc.TTL(ctx, key+strconv.Itoa(i)).Val(); ttl <= 0 {
			t.Fatalf("key %d lost its TTL in the move: %v", i, ttl)
		}
	}
	if owner, err := c.Owner(ctx, slot); err != nil || owner != to {
		t.Fatalf("owner after the move: %v, %v", owner, err)
	}
	c.WaitHealthy(10 * time.Second)
}
