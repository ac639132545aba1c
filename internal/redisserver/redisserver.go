// Package redisserver starts a redis-server on a free 127.0.0.1 port for the
// tests and the bench program, and returns only once that server surely owns
// its port.
//
// A port probed free can be taken before redis-server binds it: go test runs
// packages in parallel processes, and hundreds of miniredis servers open
// ports of their own meanwhile. A server that loses the race exits, and a
// PING on the port then gets the other server's answer. So a server counts
// as started only once its own log says "Ready to accept connections",
// which Redis writes after it has bound every port it listens on; one that
// exits first is started again on another port.
package redisserver

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Ready is what Redis logs once it listens on every port (7.0 writes it
// alone, 7.2 and later add the listener's name).
const Ready = "Ready to accept connections"

// Options say how to start the server. The zero value starts redis-server
// from PATH without persistence.
type Options struct {
	// Bin is the redis-server binary; empty means "redis-server" on PATH.
	Bin string
	// Args gives the server's arguments for the port chosen. Nil means the
	// defaults: Port(port) and NoPersistence. The log must reach stdout at
	// notice level or more verbose (Redis's default), for Ready.
	Args func(port int) []string
	// Bus also wants port+10000 free: a Cluster node's bus port.
	Bus bool
	// Env is added to this process's environment for the server.
	Env []string
}

// Server is a started redis-server.
type Server struct {
	// Addr is 127.0.0.1:Port.
	Addr string
	// Port is the port it listens on.
	Port int
	// Cmd is its process.
	Cmd    *exec.Cmd
	log    *readyLog
	exited chan struct{}
}

// Port gives the arguments that make the server listen on port, on
// 127.0.0.1 only.
func Port(port int) []string {
	return []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1"}
}

// NoPersistence gives the arguments that keep the server from writing RDB
// or AOF files, and its log on stdout, into dir (empty: the current one).
func NoPersistence(dir string) []string {
	args := []string{"--save", "", "--appendonly", "no", "--logfile", ""}
	if dir != "" {
		args = append(args, "--dir", dir)
	}
	return args
}

// Start starts the server on a free port and returns it once it is ready
// (its log says Ready), or an error with the server's log. A server that
// exits before it is ready (its port taken meanwhile) is started again on
// another port, 5 times in all. The caller stops it with Stop.
func Start(opts Options) (*Server, error) {
	bin := opts.Bin
	if bin == "" {
		bin = "redis-server"
	}
	path, err := exec.LookPath(bin)
	if err != nil {
		return nil, err
	}
	args := opts.Args
	if args == nil {
		args = func(port int) []string { return append(Port(port), NoPersistence("")...) }
	}
	var last error
	for range 5 {
		port, err := FreePort(opts.Bus)
		if err != nil {
			return nil, err
		}
		s := &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), Port: port,
			log: &readyLog{ready: make(chan struct{})}, exited: make(chan struct{})}
		s.Cmd = exec.Command(path, args(port)...)
		s.Cmd.Env = append(os.Environ(), opts.Env...)
		s.Cmd.Stdout, s.Cmd.Stderr = s.log, s.log
		if err := s.Cmd.Start(); err != nil {
			return nil, fmt.Errorf("starting %s: %w", path, err)
		}
		go func() { _ = s.Cmd.Wait(); close(s.exited) }()
		select {
		case <-s.log.ready:
			return s, nil
		case <-s.exited:
			last = fmt.Errorf("%s on port %d exited before it was ready:\n%s", path, port, s.Log())
		case <-time.After(15 * time.Second):
			s.Stop()
			return nil, fmt.Errorf("%s on port %d not ready within 15s:\n%s", path, port, s.Log())
		}
	}
	return nil, last
}

// Stop kills the server and waits until it has exited.
func (s *Server) Stop() {
	_ = s.Cmd.Process.Kill()
	<-s.exited
}

// Exited is closed once the server's process has exited.
func (s *Server) Exited() <-chan struct{} { return s.exited }

// Log is what the server has logged so far.
func (s *Server) Log() string {
	s.log.mu.Lock()
	defer s.log.mu.Unlock()
	return s.log.buf.String()
}

// FreePort returns a port on 127.0.0.1 that could be bound just now (and,
// with bus, whose port+10000 could too). Nothing holds it: Start finds out
// whether its server got it.
func FreePort(bus bool) (int, error) {
	for range 50 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := ln.Addr().(*net.TCPAddr).Port
		_ = ln.Close()
		if !bus {
			return port, nil
		}
		if port+10000 > 65535 {
			continue
		}
		if b, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port+10000))); err == nil {
			_ = b.Close()
			return port, nil
		}
	}
	return 0, errors.New("no free port with a free port+10000 (a Cluster bus port) in 50 tries")
}

// readyLog keeps a server's log and closes ready once it holds Ready.
type readyLog struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	ready chan struct{}
	seen  bool
}

func (w *readyLog) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if !w.seen && strings.Contains(w.buf.String(), Ready) {
		w.seen = true
		close(w.ready)
	}
	return len(p), nil
}

// TB is the part of testing.TB that Missing uses (this package is also the
// bench program's, which does not link package testing).
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
	Skipf(format string, args ...any)
}

// Missing ends a test that needs a tool which is not installed: it skips
// the test, except under CI (CI=true), which installs every tool the tests
// need, so there a missing one fails the test instead of quietly running
// less. The one place that rule is written; format says what is missing.
func Missing(t TB, format string, args ...any) {
	t.Helper()
	if Required() {
		t.Fatalf(format+" (CI=true: CI must install it)", args...)
	} else {
		t.Skipf(format+" (skipped outside CI, which installs it)", args...)
	}
}

// Required reports whether every tool the tests need must be there: under
// CI (CI=true), which installs them all.
func Required() bool { return os.Getenv("CI") == "true" }
