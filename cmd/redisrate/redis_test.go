package main

import (
	"context"
	"encoding/json"
	"net"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redisrate/redisrate/internal/redisserver"
	"github.com/redisrate/redisrate/scripts"
)

// startRedis starts redis-server from PATH on a free 127.0.0.1 port and stops
// it when the test ends. With cluster, the node has cluster mode on (and a
// free bus port at port+10000).
func startRedis(t *testing.T, cluster bool) string {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		redisserver.Missing(t, "redis-server is not on PATH: install it (Debian: apt-get install redis-server) to run the real-Redis tests")
	}
	dir := t.TempDir()
	return startServer(t, redisserver.Options{Bus: cluster, Args: func(port int) []string {
		args := append(redisserver.Port(port), redisserver.NoPersistence(dir)...)
		if cluster {
			args = append(args, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf")
		}
		return args
	}})
}

// startServer starts a redis-server (redisserver.Start: ready, and surely
// on its own port), stopped when the test ends, and returns its address.
func startServer(t *testing.T, opts redisserver.Options) string {
	t.Helper()
	if testing.Short() {
		t.Skip("-short (make unit): no real server; make test runs it")
	}
	s, err := redisserver.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s.Addr
}

// startCluster starts a Redis Cluster of two primaries that split the slots.
func startCluster(t *testing.T) []string {
	t.Helper()
	a, b := startRedis(t, true), startRedis(t, true)
	ctx := context.Background()
	ca := redis.NewClient(&redis.Options{Addr: a})
	cb := redis.NewClient(&redis.Options{Addr: b})
	defer ca.Close()
	defer cb.Close()
	host, port, _ := net.SplitHostPort(b)
	p, _ := strconv.Atoi(port)
	for _, cmd := range []*redis.StatusCmd{
		ca.ClusterMeet(ctx, host, strconv.Itoa(p)),
		ca.ClusterAddSlotsRange(ctx, 0, 8191),
		cb.ClusterAddSlotsRange(ctx, 8192, 16383),
	} {
		if err := cmd.Err(); err != nil {
			t.Fatalf("setting up the cluster: %v", err)
		}
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		ia, _ := ca.ClusterInfo(ctx).Result()
		ib, _ := cb.ClusterInfo(ctx).Result()
		na, _ := ca.ClusterNodes(ctx).Result()
		if strings.Contains(ia, "cluster_state:ok") && strings.Contains(ib, "cluster_state:ok") && strings.Count(na, "master") == 2 {
			return []string{a, b}
		}
		if time.Now().After(deadline) {
			t.Fatalf("cluster not ok within 15s:\n%s\n%s", ia, ib)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestLoadRealRedis(t *testing.T) {
	addr := startRedis(t, false)
	code, out, errOut := runCmd(t, "load", "--redis", addr)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.HasPrefix(out, "loaded 7 scripts on 1 primary: "+addr+"\n") {
		t.Errorf("output:\n%s", out)
	}
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	for _, s := range bundledScripts() {
		if !strings.Contains(out, s.sha1) {
			t.Errorf("output lacks %s's SHA1", s.name)
		}
		if ok, err := c.ScriptExists(context.Background(), s.sha1).Result(); err != nil || !ok[0] {
			t.Errorf("%s not loaded: %v %v", s.name, ok, err)
		}
	}
}

// load and functions --load reach every primary of a Cluster.
func TestLoadCluster(t *testing.T) {
	nodes := startCluster(t)
	ctx := context.Background()
	code, out, errOut := runCmd(t, "load", "--redis", nodes[0])
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "on 2 primaries") {
		t.Errorf("output:\n%s", out)
	}
	code, out, errOut = runCmd(t, "functions", "--load", "--redis", nodes[1])
	if code != 0 || !strings.Contains(out, "loaded library redisrate (version "+scripts.LibraryVersion+") on 2 primaries") {
		t.Fatalf("functions --load: exit %d: %s%s", code, out, errOut)
	}
	for _, addr := range nodes {
		c := redis.NewClient(&redis.Options{Addr: addr})
		for _, s := range bundledScripts() {
			if ok, err := c.ScriptExists(ctx, s.sha1).Result(); err != nil || !ok[0] {
				t.Errorf("%s: %s not loaded: %v %v", addr, s.name, ok, err)
			}
		}
		// Each algorithm's function and its _ro variant, each also by the
		// name bound to this version, and the version.
		libs, err := c.FunctionList(ctx, redis.FunctionListQuery{LibraryNamePattern: scripts.LibraryName}).Result()
		if err != nil || len(libs) != 1 || len(libs[0].Functions) != 4*len(scripts.Specs())+1 {
			t.Errorf("%s: FUNCTION LIST: %+v %v", addr, libs, err)
		}
		_ = c.Close()
	}
	// try goes through the cluster client: keys in either node's slots work.
	for _, key := range []string{"a", "b", "c", "d"} {
		if code, out, errOut := runCmd(t, "try", "--redis", nodes[0], key); code != 0 {
			t.Errorf("try %s on the cluster: exit %d: %s%s", key, code, out, errOut)
		}
	}
}

func TestTryRealRedis(t *testing.T) {
	addr := startRedis(t, false)
	base := []string{"try", "--redis", addr, "--algorithm", "token_bucket", "--limit", "3/hour", "--burst", "5"}
	var last tryJSON
	for i := range 6 {
		code, out, errOut := runCmd(t, append(base, "--json", "user:7")...)
		if err := json.Unmarshal([]byte(out), &last); err != nil {
			t.Fatalf("call %d: %v: %q %s", i+1, err, out, errOut)
		}
		wantCode := exitOK
		if i == 5 {
			wantCode = exitDenied
		}
		if code != wantCode || last.Allowed != (i < 5) || last.Capacity != 5 {
			t.Errorf("call %d: exit %d, %+v", i+1, code, last)
		}
	}
	if last.RetryAfterMs <= 0 || last.Algorithm != "token_bucket" || last.Limit != "3/h burst 5" {
		t.Errorf("denied reply %+v", last)
	}
	// --check decides without recording; cost 0 reads the state.
	code, out, _ := runCmd(t, append(base, "--check", "--cost", "0", "user:8")...)
	if code != 0 || !strings.Contains(out, "remaining    5 of 5") || !strings.Contains(out, "(the state; nothing taken)") {
		t.Errorf("check: exit %d:\n%s", code, out)
	}
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	if n, _ := c.Exists(context.Background(), "user:8").Result(); n != 0 {
		t.Error("--check wrote the key")
	}
	// Flags may follow the key.
	if code, out, _ := runCmd(t, "try", "--redis", addr, "k", "--json"); code != 0 || !strings.HasPrefix(out, "{") {
		t.Errorf("flags after the key: exit %d: %s", code, out)
	}
	// A wrong password is Redis refusing, not unreachable.
	if err := c.ConfigSet(context.Background(), "requirepass", "s3cret").Err(); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runCmd(t, "try", "--redis", "redis://:wrong@"+addr, "k")
	if code != exitRedis || !strings.Contains(errOut, "WRONGPASS") {
		t.Errorf("wrong password: exit %d, %q", code, errOut)
	}
	if code, _, errOut := runCmd(t, "try", "--redis", "redis://:s3cret@"+addr, "k"); code != 0 {
		t.Errorf("with the password: exit %d, %s", code, errOut)
	}
}

func TestDemoRealRedis(t *testing.T) {
	if testing.Short() {
		t.Skip("real time: skipped with -short")
	}
	addr := startRedis(t, false)
	// 40/s for a shortened pattern of 3.5 periods: under a second of real time.
	code, out, errOut := runCmd(t, "demo", "--redis", addr, "--limit", "40/250ms", "--algorithm", "gcra,sliding_log")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"on Redis 7", "real time: a shortened pattern of 875ms", "sliding_log"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if !regexMatch(`(?m)^gcra .* string, \d+ B +\d+ B$`, out) {
		t.Errorf("no MEMORY USAGE for gcra:\n%s", out)
	}
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	if n, _ := c.DBSize(context.Background()).Result(); n != 0 {
		keys, _ := c.Keys(context.Background(), "*").Result()
		t.Errorf("the demo left %d keys behind: %v", n, keys)
	}
}

func regexMatch(re, s string) bool { return regexp.MustCompile(re).MatchString(s) }
