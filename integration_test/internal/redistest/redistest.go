// Package redistest gives the integration tests real Redis servers.
//
// A test asks for one of two things:
//
//   - Open: a Redis to run ordinary checks on. That is the server named by
//     REDIS_ADDR when it is set (shared, so keys are namespaced per test and
//     deleted afterwards), otherwise a fresh server started for the test.
//   - Start / StartServer: a fresh server of the test's own, with extra
//     configuration, for tests that change the server itself (SCRIPT FLUSH,
//     CONFIG SET, replication, Cluster, Sentinel, AOF restarts).
//
// A fresh server is redis-server from PATH, listening on 127.0.0.1 on a free
// port, with no persistence unless asked, in its own temporary directory, and
// stopped when the test ends. Without redis-server, where a Docker engine
// answers, it is a redis:7 container (testcontainers-go). Without either the
// test is skipped with HowTo, which says how to run it (in CI, where
// CI=true, it fails instead: CI installs redis-server).
//
// It also holds what the module's test packages share besides servers
// (helpers.go, load.go): the algorithms, NeedLocal, FIGURE lines, WaitFor,
// command statistics, the soak switch, guarantee 4's Bound and a load
// generator that keeps score.
package redistest

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// HowTo is the reason given when a test is skipped for want of a Redis.
const HowTo = "no Redis to test against: install redis-server so it is on PATH " +
	"(Debian/Ubuntu: apt-get install redis-server; macOS: brew install redis), " +
	"or set REDIS_ADDR=host:port (or a redis:// URL) to use a running Redis 7, " +
	"or start a Docker engine so testcontainers-go can run redis:7"

// EnvAddr is the environment variable naming a running Redis to test against.
const EnvAddr = "REDIS_ADDR"

// EnvServer is the environment variable naming the server binary fresh
// servers run: redis-server by default, valkey-server to run the same tests
// on Valkey (make test does both).
const EnvServer = "REDISRATE_SERVER"

// ServerBin is the binary fresh local servers run (EnvServer).
func ServerBin() string {
	if bin := strings.TrimSpace(os.Getenv(EnvServer)); bin != "" {
		return bin
	}
	return "redis-server"
}

// Redis is a server to run ordinary tests on, as Open returns it.
type Redis struct {
	// Client is connected to the server; it is closed when the test ends.
	Client *redis.Client
	// Addr is the server's host:port.
	Addr string
	// Own is true when the server was started for this test alone, so the
	// test may change it (SCRIPT FLUSH, CONFIG SET, FLUSHALL). On a shared
	// server (REDIS_ADDR) it is false.
	Own bool
	// Prefix is put in front of every key by Key: unique to the test, so
	// tests never see each other's keys on a shared server.
	Prefix string
}

// Key returns name under the test's unique prefix.
func (r *Redis) Key(name string) string { return r.Prefix + name }

// Open returns a Redis for t: the one at REDIS_ADDR if set, otherwise a fresh
// server (see Start). On a shared server every key under r.Prefix is deleted
// when the test ends. It skips t with HowTo when no Redis can be had, and
// fails it when REDIS_ADDR is set but does not answer.
func Open(t testing.TB) *Redis {
	t.Helper()
	r := &Redis{Prefix: "redisrate-it:" + randomHex(6) + ":"}
	var opts *redis.Options
	if env := strings.TrimSpace(os.Getenv(EnvAddr)); env != "" {
		var err error
		if opts, err = ParseAddr(env); err != nil {
			t.Fatalf("%s=%q: %v", EnvAddr, env, err)
		}
	} else {
		addr, _ := Start(t)
		opts = &redis.Options{Addr: addr}
		r.Own = true
	}
	r.Addr = opts.Addr
	r.Client = redis.NewClient(opts)
	t.Cleanup(func() { _ = r.Client.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := r.Client.Ping(ctx).Err(); err != nil {
		t.Fatalf("Redis at %s does not answer PING: %v", r.Addr, err)
	}
	if !r.Own {
		// Registered after the client's Close, so it runs before it.
		t.Cleanup(func() { deletePrefix(t, r.Client, r.Prefix) })
	}
	return r
}

// ParseAddr reads a REDIS_ADDR value: host:port, or a redis:// or rediss://
// URL (with a password, database number or TLS).
func ParseAddr(s string) (*redis.Options, error) {
	if strings.Contains(s, "://") {
		return redis.ParseURL(s)
	}
	if _, _, err := net.SplitHostPort(s); err != nil {
		return nil, fmt.Errorf("want host:port or a redis:// URL: %w", err)
	}
	return &redis.Options{Addr: s}, nil
}

// deletePrefix removes the keys a test left on a shared server.
func deletePrefix(t testing.TB, rdb *redis.Client, prefix string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	iter := rdb.Scan(ctx, 0, escapeGlob(prefix)+"*", 1000).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Logf("cleaning up keys %s*: %v", prefix, err)
		return
	}
	for len(keys) > 0 {
		n := min(len(keys), 500)
		if err := rdb.Del(ctx, keys[:n]...).Err(); err != nil {
			t.Logf("cleaning up keys %s*: %v", prefix, err)
			return
		}
		keys = keys[n:]
	}
}

func escapeGlob(s string) string {
	var b strings.Builder
	for _, c := range s {
		if strings.ContainsRune(`*?[]\`, c) {
			b.WriteByte('\\')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// Options describes a server for StartServer.
type Options struct {
	// Args are extra command-line arguments, as redis-server takes them:
	// "--appendonly", "yes", "--maxmemory", "10mb". They override the
	// defaults (no RDB, no AOF).
	Args []string
	// Config are extra lines for the configuration file, written before
	// Args take effect; for directives that are awkward on a command line,
	// e.g. "sentinel monitor m 127.0.0.1 7000 2".
	Config []string
	// Sentinel starts the server in Sentinel mode (redis-server --sentinel).
	Sentinel bool
	// TLS makes the server listen with TLS only, on Port, with these
	// certificates (see NewCerts): the plain-text port is off.
	TLS *Certs
	// TLSAuthClients makes a TLS server demand a client certificate signed
	// by the CA (tls-auth-clients yes); by default it asks for none.
	TLSAuthClients bool
	// ClockShift moves the server's wall clock by this much: TIME, and so
	// every script's clock, reads the real time plus ClockShift. See
	// ClockMethod for how. Zero leaves the clock alone.
	ClockShift time.Duration
}

// Server is a Redis server started for a test.
type Server struct {
	// Addr is 127.0.0.1:Port (for a container, the host's mapped address).
	Addr string
	// Port is the port it listens on. For a local server, Port+10000 (the
	// Cluster bus port) was free too when the port was chosen; both stay
	// reserved from the other test processes until the test ends.
	Port int
	// Dir is its working directory (RDB and AOF files, nodes.conf), empty
	// for a container.
	Dir string
	// LogFile is its log, empty for a container.
	LogFile string
	// Container is true when the server runs in a Docker container rather
	// than as a local redis-server process; Kill and Restart need a local
	// process.
	Container bool
	// TLS is the client side of a TLS server (Options.TLS): it trusts the
	// test's CA. Nil for a plain-text server.
	TLS *tls.Config

	t        testing.TB
	opts     Options
	mu       sync.Mutex
	cmd      *exec.Cmd
	exited   chan struct{} // closed when cmd has exited
	waitErr  error
	stopOnce func() // terminates a container
	stopped  bool   // the container was terminated
}

// Start starts a fresh server with extra command-line args (see
// Options.Args) and returns its address and a function that stops it. The
// server is stopped when t ends in any case; calling stop earlier is allowed
// (and calling it twice is harmless). It skips t with HowTo when neither
// redis-server nor a Docker engine is available.
func Start(t testing.TB, args ...string) (addr string, stop func()) {
	t.Helper()
	s := StartServer(t, Options{Args: args})
	return s.Addr, s.Stop
}

// StartServer starts a fresh server described by opts (see Start).
func StartServer(t testing.TB, opts Options) *Server {
	t.Helper()
	if bin, err := exec.LookPath(ServerBin()); err == nil {
		return startLocal(t, bin, opts)
	}
	if !containerServes() {
		// The containers are redis:7: a run of another server's tests
		// would test Redis under that server's name.
		noRedis(t, fmt.Sprintf("%s=%s: %s is not on PATH, and the container path runs %s only: install %s, or unset %s to test redis-server",
			EnvServer, ServerBin(), ServerBin(), Image, ServerBin(), EnvServer))
	}
	if opts.TLS != nil || opts.ClockShift != 0 {
		noRedis(t, "a TLS server or a shifted clock needs redis-server on PATH, not a container: "+HowTo)
	}
	if engine := dockerEngine(); engine != "" {
		return startContainer(t, engine, opts)
	}
	noRedis(t, HowTo)
	return nil
}

// containerServes reports whether a container may stand in for a missing
// ServerBin: only for redis-server, as Image is Redis.
func containerServes() bool { return ServerBin() == "redis-server" }

// noRedis skips t saying why, except in CI (CI=true), which installs the
// servers and tools: there a missing one fails the test, so that the
// real-Redis tests never quietly stop running. This module's one place for
// that rule (the root's is internal/redisserver.Missing, which a module of
// its own does not import).
func noRedis(t testing.TB, why string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatal(why + " (CI=true: CI must install it)")
	}
	t.Skip(why)
}

// Local reports whether fresh servers are local ServerBin processes (as
// Cluster and Sentinel tests need, since a container announces addresses the
// host cannot reach).
func Local() bool {
	_, err := exec.LookPath(ServerBin())
	return err == nil
}

func startLocal(t testing.TB, bin string, opts Options) *Server {
	t.Helper()
	dir := t.TempDir()
	s := &Server{Dir: dir, LogFile: filepath.Join(dir, "redis.log"), t: t, opts: opts}
	if opts.TLS != nil {
		s.TLS = opts.TLS.ClientConfig()
	}
	var env []string
	if opts.ClockShift != 0 {
		env = clockEnv(t, opts.ClockShift, dir)
	}
	const attempts = 8
	for i := 1; ; i++ {
		port, release := freePort(t)
		s.Port, s.Addr = port, net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		err := s.launchEnv(bin, env)
		if err == nil {
			// The port stays reserved until the server is stopped for good
			// (registered first, so it runs after Stop), through restarts.
			t.Cleanup(release)
			break
		}
		release()
		// Another process may take a port between our probe and the
		// server's bind: try another one.
		if i < attempts && strings.Contains(err.Error(), "already in use") {
			continue
		}
		t.Fatalf("starting redis-server: %v", err)
	}
	t.Cleanup(s.Stop)
	if opts.ClockShift != 0 {
		s.checkShift(opts.ClockShift)
	}
	return s
}

// Client returns a new client of the server (over TLS for a TLS server),
// closed when the test ends; opts may be nil, and its Addr and TLSConfig
// are filled in.
func (s *Server) Client(opts *redis.Options) *redis.Client {
	if opts == nil {
		opts = &redis.Options{}
	}
	opts.Addr = s.Addr
	if s.TLS != nil && opts.TLSConfig == nil {
		opts.TLSConfig = s.TLS.Clone()
	}
	c := redis.NewClient(opts)
	s.t.Cleanup(func() { _ = c.Close() })
	return c
}

// writeConfig writes the configuration file: Redis rewrites it in Sentinel
// and Cluster mode, so it lives in the server's own directory.
func (s *Server) writeConfig() (string, error) {
	lines := []string{
		"bind 127.0.0.1",
		"port " + strconv.Itoa(s.Port),
		"dir " + quote(s.Dir),
		"logfile " + quote(s.LogFile),
		"daemonize no",
	}
	if !s.opts.Sentinel {
		lines = append(lines, `save ""`, "appendonly no", `dbfilename "dump.rdb"`)
	}
	if s.opts.TLS != nil {
		lines = append(lines, s.opts.TLS.serverConfig(s.Port, s.opts.TLSAuthClients)...)
	}
	lines = append(lines, s.opts.Config...)
	path := filepath.Join(s.Dir, "redis.conf")
	if s.opts.Sentinel {
		path = filepath.Join(s.Dir, "sentinel.conf")
	}
	if _, err := os.Stat(path); err == nil {
		return path, nil // a restart: keep what the server rewrote into it
	}
	return path, os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600)
}

func quote(s string) string { return strconv.Quote(s) }

func itoa(n int) string { return strconv.Itoa(n) }

// launch starts the process on s.Port and waits until it answers PING.
func (s *Server) launch(bin string) error {
	var env []string
	if s.opts.ClockShift != 0 {
		env = clockEnv(s.t, s.opts.ClockShift, s.Dir)
	}
	return s.launchEnv(bin, env)
}

// launchEnv is launch with extra environment variables for the process.
func (s *Server) launchEnv(bin string, env []string) error {
	conf, err := s.writeConfig()
	if err != nil {
		return err
	}
	args := []string{conf}
	if s.opts.Sentinel {
		args = append(args, "--sentinel")
	}
	args = append(args, s.opts.Args...)
	// Start from an empty log so that a failure shows this attempt's lines.
	_ = os.Remove(s.LogFile)
	cmd := exec.Command(bin, args...)
	cmd.Dir = s.Dir
	cmd.SysProcAttr = sysProcAttr()
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	s.mu.Lock()
	s.cmd, s.exited = cmd, exited
	s.mu.Unlock()
	go func() {
		err := cmd.Wait()
		s.mu.Lock()
		s.waitErr = err
		s.mu.Unlock()
		close(exited)
	}()
	deadline := time.Now().Add(15 * time.Second)
	for {
		if ping(s.Addr, s.TLS) == nil {
			// What answers may not be this process: another test process
			// may have probed the same free port at the same moment and
			// started its server there first (this one then fails to
			// bind). Only this process's own answer will do.
			pid, err := serverPID(s.Addr, s.TLS)
			if err == nil && pid == cmd.Process.Pid {
				return nil
			}
			if err == nil {
				s.kill()
				return fmt.Errorf("port %d already in use: another redis-server (process %d) answers there", s.Port, pid)
			}
		}
		select {
		case <-exited:
			return fmt.Errorf("redis-server %s exited before answering PING (%v); its log:\n%s",
				strings.Join(args, " "), s.exitErr(), s.logTail(30))
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.kill()
			return fmt.Errorf("redis-server on %s did not answer PING within 15s; its log:\n%s", s.Addr, s.logTail(30))
		}
	}
}

func (s *Server) exitErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.waitErr
}

// logTail returns the last n lines of the server's log.
func (s *Server) logTail(n int) string {
	b, err := os.ReadFile(s.LogFile)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Stop shuts the server down (SIGTERM, then SIGKILL after 10 s) and waits
// for it. It is idempotent.
func (s *Server) Stop() {
	if s.Container {
		if s.stopOnce != nil {
			s.stopOnce()
		}
		return
	}
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	select {
	case <-exited:
		return
	default:
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		s.t.Logf("redis-server on %s ignored SIGTERM for 10s; killing it", s.Addr)
		s.kill()
	}
}

// Kill stops the server at once with SIGKILL, as a crash would: nothing is
// flushed. It needs a local process.
func (s *Server) Kill() {
	s.t.Helper()
	if s.Container {
		s.t.Skip("Kill needs a local redis-server; this server is a container")
	}
	s.kill()
}

func (s *Server) kill() {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	<-exited
}

// Restart stops the server if it runs and starts it again on the same port,
// in the same directory, with the same configuration: what it persisted
// (AOF, RDB) is loaded again. It needs a local process.
func (s *Server) Restart() {
	s.t.Helper()
	if s.Container {
		s.t.Skip("Restart needs a local redis-server; this server is a container")
	}
	s.Stop()
	bin, err := exec.LookPath(ServerBin())
	if err != nil {
		s.t.Fatal(err)
	}
	// The port was ours a moment ago; a brief TIME_WAIT does not stop a
	// listener (Redis sets SO_REUSEADDR), but another process might take it.
	if err := s.launch(bin); err != nil {
		s.t.Fatalf("restarting redis-server on %s: %v", s.Addr, err)
	}
}

// Running reports whether the server process is alive.
func (s *Server) Running() bool {
	s.mu.Lock()
	if s.Container {
		defer s.mu.Unlock()
		return !s.stopped
	}
	exited := s.exited
	s.mu.Unlock()
	if exited == nil {
		return false
	}
	select {
	case <-exited:
		return false
	default:
		return true
	}
}

// Log returns the server's log so far (empty for a container).
func (s *Server) Log() string {
	if s.LogFile == "" {
		return ""
	}
	b, _ := os.ReadFile(s.LogFile)
	return string(b)
}

// dial opens a raw connection to addr (over TLS with tlsConfig).
func dial(addr string, tlsConfig *tls.Config) (net.Conn, error) {
	if tlsConfig != nil {
		d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: 200 * time.Millisecond}, Config: tlsConfig}
		return d.Dial("tcp", addr)
	}
	return net.DialTimeout("tcp", addr, 200*time.Millisecond)
}

// serverPID asks the server at addr for its process_id (INFO server).
func serverPID(addr string, tlsConfig *tls.Config) (int, error) {
	c, err := dial(addr, tlsConfig)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte("INFO server\r\n")); err != nil {
		return 0, err
	}
	r := bufio.NewReader(c)
	head, err := r.ReadString('\n')
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(head, "$")))
	if !strings.HasPrefix(head, "$") || err != nil {
		return 0, fmt.Errorf("INFO server answered %q", strings.TrimSpace(head))
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(body)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); ok {
			return strconv.Atoi(v)
		}
	}
	return 0, errors.New("INFO server gives no process_id")
}

// ping sends a raw PING and wants +PONG (or, from a server still loading
// its data, keeps waiting: -LOADING is not ready).
func ping(addr string, tlsConfig *tls.Config) error {
	c, err := dial(addr, tlsConfig)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(500 * time.Millisecond))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "+PONG") {
		return errors.New(strings.TrimSpace(line))
	}
	return nil
}

var (
	portsMu sync.Mutex
	ports   = map[int]bool{} // reserved in this process (servers' ports and bus ports)
)

// freePort returns a port p on 127.0.0.1 such that p and p+10000 (a Cluster
// node's bus port) can both be bound now. Ports come from 10000-21999 so
// that neither meets the kernel's ephemeral range (from 32768), where
// outgoing connections take theirs. The port and its bus port are
// reserved, in this process and (lockPort) from the other test processes,
// until release: the server's life, restarts included.
func freePort(t testing.TB) (port int, release func()) {
	t.Helper()
	portsMu.Lock()
	defer portsMu.Unlock()
	for range 1000 {
		n, err := rand.Int(rand.Reader, big.NewInt(12000))
		if err != nil {
			t.Fatal(err)
		}
		p := 10000 + int(n.Int64())
		bus := p + 10000
		if ports[p] || ports[bus] || !lockPort(p) {
			continue
		}
		if !lockPort(bus) {
			unlockPort(p)
			continue
		}
		if !canListen(p) || !canListen(bus) {
			unlockPort(p)
			unlockPort(bus)
			continue
		}
		ports[p], ports[bus] = true, true
		return p, func() {
			portsMu.Lock()
			delete(ports, p)
			delete(ports, bus)
			unlockPort(p)
			unlockPort(bus)
			portsMu.Unlock()
		}
	}
	t.Fatal("no free port pair (p, p+10000) on 127.0.0.1 in 10000-21999")
	return 0, nil
}

func canListen(port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	_ = l.Close()
	return true
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
