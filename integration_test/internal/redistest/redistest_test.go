package redistest

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func client(t *testing.T, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestStartAppliesArgsAndDefaults(t *testing.T) {
	ctx := context.Background()
	addr, stop := Start(t, "--maxmemory", "12mb", "--hz", "50")
	host, _, _ := net.SplitHostPort(addr)
	if host != "127.0.0.1" {
		t.Errorf("addr %s: want 127.0.0.1", addr)
	}
	c := client(t, addr)
	want := map[string]string{
		"maxmemory":  "12582912",
		"hz":         "50",
		"save":       "",
		"appendonly": "no",
		"bind":       "127.0.0.1",
	}
	for k, v := range want {
		got, err := c.ConfigGet(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		if got[k] != v {
			t.Errorf("CONFIG GET %s = %q, want %q", k, got[k], v)
		}
	}
	stop()
	if err := ping(addr, nil); err == nil {
		t.Errorf("server at %s still answers after stop", addr)
	}
	stop() // twice is harmless
}

func TestStartSeveralServers(t *testing.T) {
	seen := map[string]bool{}
	for range 3 {
		s := StartServer(t, Options{})
		if seen[s.Addr] {
			t.Fatalf("two servers on %s", s.Addr)
		}
		seen[s.Addr] = true
		if !s.Container && !canListen(s.Port+10000) {
			t.Errorf("bus port %d of server %s is taken", s.Port+10000, s.Addr)
		}
	}
}

func TestStartReportsBadConfig(t *testing.T) {
	NeedLocal(t, "the server's own complaint in its log")
	// A failing start must fail the test with the server's own words; run it
	// in a fake TB to observe that without failing this test.
	ft := &fakeTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() { _ = recover() }()
		StartServer(ft, Options{Args: []string{"--no-such-directive", "1"}})
	}()
	<-done
	if !ft.failed || !strings.Contains(ft.msg, "no-such-directive") {
		t.Fatalf("want a failure quoting the server's complaint, got failed=%v %q", ft.failed, ft.msg)
	}
}

// fakeTB records a Fatalf and stops the goroutine, as testing.T does.
type fakeTB struct {
	testing.TB
	failed  bool
	skipped bool
	msg     string
}

func (f *fakeTB) Fatal(args ...any) { f.Fatalf("%s", fmt.Sprint(args...)) }

// Skip and Skipf record the skip, so that a test of the skip does not show
// as a skipped test in make test's list of what did not run.
func (f *fakeTB) Skip(args ...any) { f.Skipf("%s", fmt.Sprint(args...)) }

func (f *fakeTB) Skipf(format string, args ...any) {
	f.skipped = true
	f.msg = fmt.Sprintf(format, args...)
	panic("skip")
}

// stops runs f, which stops with a panic of fakeTB's, to its end.
func stops(f func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() { _ = recover() }()
		f()
	}()
	<-done
}

func (f *fakeTB) Fatalf(format string, args ...any) {
	f.failed = true
	f.msg = fmt.Sprintf(format, args...)
	panic("fatal")
}

func TestRestartKeepsAOF(t *testing.T) {
	NeedLocal(t, "Kill and Restart")
	ctx := context.Background()
	s := StartServer(t, Options{Args: []string{"--appendonly", "yes", "--appendfsync", "always"}})
	c := client(t, s.Addr)
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	s.Kill()
	if s.Running() {
		t.Fatal("still running after Kill")
	}
	s.Restart()
	if got, err := c.Get(ctx, "k").Result(); err != nil || got != "v" {
		t.Fatalf("after restart GET k = %q, %v; want v from the AOF", got, err)
	}
	if _, err := os.Stat(filepath.Join(s.Dir, "appendonlydir")); err != nil {
		t.Errorf("no AOF directory in %s: %v", s.Dir, err)
	}
}

func TestSentinel(t *testing.T) {
	NeedLocal(t, "Sentinel")
	ctx := context.Background()
	primary := StartServer(t, Options{})
	s := StartServer(t, Options{Sentinel: true, Config: []string{
		"sentinel monitor m 127.0.0.1 " + strconv.Itoa(primary.Port) + " 1",
	}})
	c := client(t, s.Addr)
	got, err := c.Do(ctx, "SENTINEL", "get-master-addr-by-name", "m").StringSlice()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, ":") != primary.Addr {
		t.Fatalf("sentinel reports %v, want %s", got, primary.Addr)
	}
}

func TestOpenSharedDeletesOnlyItsKeys(t *testing.T) {
	ctx := context.Background()
	addr, _ := Start(t)
	c := client(t, addr)
	if err := c.Set(ctx, "users:data", "keep me", 0).Err(); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvAddr, addr)
	var prefix string
	t.Run("shared", func(t *testing.T) {
		r := Open(t)
		if r.Own || r.Addr != addr {
			t.Fatalf("Open with %s=%s gave own=%v addr=%s", EnvAddr, addr, r.Own, r.Addr)
		}
		prefix = r.Prefix
		for i := range 1200 {
			r.Client.Set(ctx, r.Key(strconv.Itoa(i)), "x", 0)
		}
	})
	if n := len(c.Keys(ctx, prefix+"*").Val()); n != 0 {
		t.Errorf("%d keys under %s left behind", n, prefix)
	}
	if got := c.Get(ctx, "users:data").Val(); got != "keep me" {
		t.Errorf("a key outside the prefix was touched: %q", got)
	}
}

func TestOpenBadAddrFails(t *testing.T) {
	t.Setenv(EnvAddr, "not an address")
	ft := &fakeTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() { _ = recover() }()
		Open(ft)
	}()
	<-done
	if !ft.failed || !strings.Contains(ft.msg, EnvAddr) {
		t.Fatalf("want a failure naming %s, got failed=%v %q", EnvAddr, ft.failed, ft.msg)
	}
}

func TestParseAddr(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1:6379":           "127.0.0.1:6379",
		"redis://localhost:7000/2": "localhost:7000",
		"[::1]:6380":               "[::1]:6380",
	} {
		o, err := ParseAddr(in)
		if err != nil || o.Addr != want {
			t.Errorf("ParseAddr(%q) = %v, %v; want addr %s", in, o, err, want)
		}
	}
	for _, in := range []string{"localhost", "redis://:bad:port:x", ""} {
		if _, err := ParseAddr(in); err == nil {
			t.Errorf("ParseAddr(%q): want an error", in)
		}
	}
}

// TestDockerDetection shows that an engine is recognised by its /_ping
// answer, and that a socket which accepts but never answers, or nothing at
// all, is not one and does not hang the caller.
func TestDockerDetection(t *testing.T) {
	dir := t.TempDir()
	serve := func(name, reply string) string {
		path := filepath.Join(dir, name)
		l, err := net.Listen("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Close() })
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				go func() {
					defer c.Close()
					buf := make([]byte, 512)
					_, _ = c.Read(buf)
					if reply == "" {
						time.Sleep(3 * time.Second) // never answers in time
						return
					}
					_, _ = c.Write([]byte(reply))
				}()
			}
		}()
		return "unix://" + path
	}
	ok := serve("ok.sock", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nOK")
	mute := serve("mute.sock", "")
	refuse := serve("refuse.sock", "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\n\r\n")
	if !pingEngine(ok) {
		t.Error("an engine answering OK was not recognised")
	}
	if pingEngine(refuse) {
		t.Error("an engine answering 500 was taken for a working one")
	}
	start := time.Now()
	if pingEngine(mute) {
		t.Error("a socket that never answers was taken for an engine")
	}
	if pingEngine("unix://" + filepath.Join(dir, "absent.sock")) {
		t.Error("a missing socket was taken for an engine")
	}
	if pingEngine("ssh://user@host") {
		t.Error("ssh:// cannot be asked quickly and must not count")
	}
	// A hang guard, not a speed goal: the mute socket costs its 1 s deadline.
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("detection took %v", d)
	}
}

func TestSkipsWithoutRedis(t *testing.T) {
	if dockerEngine() != "" {
		t.Skip("a Docker engine answers here, so nothing would skip")
	}
	t.Setenv("PATH", t.TempDir())
	t.Setenv(EnvAddr, "")
	t.Setenv("CI", "")
	quiet := &fakeTB{TB: t}
	stops(func() { Open(quiet) })
	if !quiet.skipped || quiet.failed || !strings.Contains(quiet.msg, "install "+ServerBin()) {
		t.Fatalf("Open without redis-server, REDIS_ADDR or Docker: skipped=%v failed=%v %q; want a skip naming what to install", quiet.skipped, quiet.failed, quiet.msg)
	}
	// In CI the same situation is a failure naming what to install.
	t.Setenv("CI", "true")
	ft := &fakeTB{TB: t}
	stops(func() { StartServer(ft, Options{}) })
	if !ft.failed || !strings.Contains(ft.msg, "CI=true") {
		t.Fatalf("with CI=true: failed=%v %q, want a failure", ft.failed, ft.msg)
	}
}

// TestServerBinRuns: a fresh server is the binary EnvServer names, so a run
// with REDISRATE_SERVER=valkey-server (make test's second pass) does test
// Valkey, and the default run Redis.
func TestServerBinRuns(t *testing.T) {
	addr, stop := Start(t)
	defer stop()
	info, err := client(t, addr).Info(context.Background(), "server").Result()
	if err != nil {
		t.Fatal(err)
	}
	want := "server_name:valkey"
	if ServerBin() != "valkey-server" {
		want = "redis_mode:" // Redis 7 reports no server_name
		if strings.Contains(info, "server_name:valkey") {
			t.Errorf("%s runs Valkey", ServerBin())
		}
	}
	if !strings.Contains(info, want) {
		t.Errorf("%s: INFO server lacks %q", ServerBin(), want)
	}
}

// TestNeedLocal: a test that needs local servers skips, saying what to
// install and why, where there are none; in CI it fails instead, so that
// the Cluster, Sentinel and fault tests never quietly stop running there.
func TestNeedLocal(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	t.Setenv("CI", "")
	quiet := &fakeTB{TB: t}
	stops(func() { NeedLocal(quiet, "a Cluster") })
	if !quiet.skipped || quiet.failed || !strings.Contains(quiet.msg, ServerBin()) || !strings.Contains(quiet.msg, "a Cluster") {
		t.Fatalf("NeedLocal without %s: skipped=%v failed=%v %q; want a skip naming it and what for", ServerBin(), quiet.skipped, quiet.failed, quiet.msg)
	}
	t.Setenv("CI", "true")
	ci := &fakeTB{TB: t}
	stops(func() { NeedLocal(ci, "a Cluster") })
	if !ci.failed || ci.skipped || !strings.Contains(ci.msg, "CI=true") {
		t.Fatalf("NeedLocal without %s, CI=true: skipped=%v failed=%v %q; want a failure", ServerBin(), ci.skipped, ci.failed, ci.msg)
	}
}

// TestWrites: reads leave the count alone; a write, even of a TTL alone,
// or one a script makes, raises it.
func TestWrites(t *testing.T) {
	ctx := context.Background()
	addr, _ := Start(t)
	c := client(t, addr)
	n := Writes(t, c)
	for _, step := range []struct {
		what  string
		do    func() error
		wrote bool
	}{
		{"SET", func() error { return c.Set(ctx, "k", "v", 0).Err() }, true},
		{"GET", func() error { return c.Get(ctx, "k").Err() }, false},
		{"a script that reads", func() error { return c.Eval(ctx, "return redis.call('GET', KEYS[1])", []string{"k"}).Err() }, false},
		{"PEXPIRE", func() error { return c.PExpire(ctx, "k", time.Hour).Err() }, true},
		{"a script that sets a TTL", func() error {
			return c.Eval(ctx, "return redis.call('PEXPIRE', KEYS[1], 7200000)", []string{"k"}).Err()
		}, true},
	} {
		if err := step.do(); err != nil {
			t.Fatalf("%s: %v", step.what, err)
		}
		after := Writes(t, c)
		if (after > n) != step.wrote {
			t.Errorf("%s: writes %d, then %d", step.what, n, after)
		}
		n = after
	}
}

// TestOtherServerIsNotAContainer: with REDISRATE_SERVER naming a server
// that is not on PATH, a fresh server is not a redis:7 container even
// where a Docker engine answers: the run would test Redis under another
// server's name. It skips saying so (fails in CI).
func TestOtherServerIsNotAContainer(t *testing.T) {
	dockerEngine() // the probe is done once per process: done now, then overridden
	saved := engine
	engine = "unix:///nonexistent/docker.sock" // as if an engine answered there
	t.Cleanup(func() { engine = saved })
	t.Setenv("DOCKER_HOST", engine) // where testcontainers-go would look, were it asked
	t.Setenv(EnvServer, "no-such-server")
	t.Setenv("CI", "")
	quiet := &fakeTB{TB: t}
	stops(func() { StartServer(quiet, Options{}) })
	if !quiet.skipped || quiet.failed || !strings.Contains(quiet.msg, "no-such-server") || !strings.Contains(quiet.msg, Image) {
		t.Fatalf("%s=no-such-server, not on PATH, with an engine: skipped=%v failed=%v %q; want a skip naming the server and saying the containers are %s", EnvServer, quiet.skipped, quiet.failed, quiet.msg, Image)
	}
	if src := Source(); strings.Contains(src, "container") {
		t.Errorf("Source() = %q: fresh servers are no containers here", src)
	}
	t.Setenv("CI", "true")
	ci := &fakeTB{TB: t}
	stops(func() { StartServer(ci, Options{}) })
	if !ci.failed || !strings.Contains(ci.msg, "no-such-server") {
		t.Fatalf("the same with CI=true: failed=%v %q; want a failure", ci.failed, ci.msg)
	}
}

// TestStartContainer runs the container path where a Docker engine
// answers: the options reach redis-server's command line and Stop ends
// it. Elsewhere it skips, saying why: it is the one test here that needs
// Docker, and CI does not install it.
func TestStartContainer(t *testing.T) {
	e := dockerEngine()
	if e == "" {
		t.Skip("no Docker engine answers (DOCKER_HOST, /var/run/docker.sock, ~/.docker/run, ~/.docker/desktop, $XDG_RUNTIME_DIR's docker.sock or podman.sock): the " + Image + " container path is not exercised here")
	}
	ctx := context.Background()
	s := startContainer(t, e, Options{Args: []string{"--maxmemory", "12mb"}, Config: []string{"hz 50"}})
	if !s.Container || !s.Running() {
		t.Fatalf("container=%v running=%v", s.Container, s.Running())
	}
	c := client(t, s.Addr)
	for k, v := range map[string]string{"maxmemory": "12582912", "hz": "50", "save": "", "appendonly": "no"} {
		got, err := c.ConfigGet(ctx, k).Result()
		if err != nil || got[k] != v {
			t.Errorf("CONFIG GET %s = %q, %v; want %q", k, got[k], err, v)
		}
	}
	s.Stop()
	if s.Running() || ping(s.Addr, nil) == nil {
		t.Errorf("the container at %s still runs after Stop", s.Addr)
	}
}
