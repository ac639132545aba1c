package redisserver

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

func needRedis(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short (make unit): no real server; make test runs it")
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		Missing(t, "redis-server is not on PATH")
	}
}

// client is a go-redis client of s, closed when the test ends.
func client(t *testing.T, s *Server) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Start returns a server that is ready and is the one on its port; Stop
// kills it and waits for it, as often as it is called.
func TestStartStop(t *testing.T) {
	needRedis(t)
	s, err := Start(Options{})
	if err != nil {
		t.Fatal(err)
	}
	info, err := client(t, s).InfoMap(context.Background(), "server").Result()
	if err != nil {
		t.Fatal(err)
	}
	if got := info["Server"]["process_id"]; got != strconv.Itoa(s.Cmd.Process.Pid) {
		t.Errorf("process %s answers on %s, want the server started, %d", got, s.Addr, s.Cmd.Process.Pid)
	}
	if !strings.Contains(s.Log(), Ready) {
		t.Errorf("the log lacks %q:\n%s", Ready, s.Log())
	}
	s.Stop()
	select {
	case <-s.Exited():
	default:
		t.Fatal("Stop returned before the server exited")
	}
	// Not dialled after Stop: another test process may already hold the
	// port again. The process has exited, so nothing of it listens.
	if s.Cmd.ProcessState == nil || s.Cmd.ProcessState.Success() {
		t.Errorf("after Stop the process state is %v, want killed", s.Cmd.ProcessState)
	}
	s.Stop() // a second Stop returns at once
}

// A server whose port is taken exits before it is ready: Start tries
// again, and says why when every try failed. Here every try is sent to a
// port this test holds, so all five fail.
func TestStartPortTaken(t *testing.T) {
	needRedis(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	taken := ln.Addr().(*net.TCPAddr).Port
	tries := 0
	_, err = Start(Options{Args: func(int) []string {
		tries++
		return append(Port(taken), NoPersistence(t.TempDir())...)
	}})
	if err == nil || !strings.Contains(err.Error(), "exited before it was ready") {
		t.Fatalf("Start on a taken port: %v, want an error saying the server exited before it was ready", err)
	}
	if tries != 5 {
		t.Errorf("%d tries, want 5", tries)
	}
}

// The arguments given replace the defaults, Bin is what is run, and Env
// reaches the server: Bin is a shell script that writes down what it got
// in REDISSERVER_TEST, then becomes redis-server. (/proc/PID/environ is no
// witness: Redis writes its process title over it.)
func TestStartArgsBinEnv(t *testing.T) {
	needRedis(t)
	dir := t.TempDir()
	bin, seen := filepath.Join(dir, "redis-server.sh"), filepath.Join(dir, "env")
	script := "#!/bin/sh\nprintf %s \"$REDISSERVER_TEST\" > " + seen + "\nexec redis-server \"$@\"\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	s, err := Start(Options{
		Bin: bin,
		Args: func(port int) []string {
			return append(append(Port(port), NoPersistence(dir)...), "--maxmemory", "7mb")
		},
		Env: []string{"REDISSERVER_TEST=reached"},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	if got, err := os.ReadFile(seen); err != nil || string(got) != "reached" {
		t.Errorf("REDISSERVER_TEST in the server's environment: %q (%v), want %q", got, err, "reached")
	}
	got, err := client(t, s).ConfigGet(context.Background(), "maxmemory").Result()
	if err != nil {
		t.Fatal(err)
	}
	if got["maxmemory"] != strconv.Itoa(7<<20) {
		t.Errorf("CONFIG GET maxmemory: %v, want %d", got, 7<<20)
	}
}

// recorder is a TB that records which way Missing ended the test.
type recorder struct{ fatal, skip string }

func (r *recorder) Helper()                           {}
func (r *recorder) Fatalf(format string, args ...any) { r.fatal = fmt.Sprintf(format, args...) }
func (r *recorder) Skipf(format string, args ...any)  { r.skip = fmt.Sprintf(format, args...) }

// TestMissing: a missing tool skips a test outside CI and fails it under
// CI=true, naming the tool either way.
func TestMissing(t *testing.T) {
	for _, ci := range []string{"", "true"} {
		t.Setenv("CI", ci)
		var r recorder
		Missing(&r, "%s is not on PATH", "valkey-server")
		got, other := r.skip, r.fatal
		if ci == "true" {
			got, other = r.fatal, r.skip
		}
		if !strings.Contains(got, "valkey-server is not on PATH") || other != "" {
			t.Errorf("CI=%q: fatal %q, skip %q; want the message once, by %s", ci, r.fatal, r.skip, map[string]string{"": "Skipf", "true": "Fatalf"}[ci])
		}
		if Required() != (ci == "true") {
			t.Errorf("CI=%q: Required() = %v", ci, Required())
		}
	}
}
