package integration_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redisrate/redisrate"
	"github.com/redisrate/redisrate/integration_test/internal/redistest"
)

// holdProxy forwards TCP connections to addr until hold is set; from then
// on it accepts connections and reads what clients send, and forwards
// nothing: a black hole, as a wedged proxy or a dead route's far end is.
type holdProxy struct {
	addr string
	hold atomic.Bool
}

func startHoldProxy(t *testing.T, to string) *holdProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &holdProxy{addr: ln.Addr().String()}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	track := func(c net.Conn) {
		mu.Lock()
		conns = append(conns, c)
		mu.Unlock()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			track(client)
			server, err := net.Dial("tcp", to)
			if err != nil {
				_ = client.Close()
				continue
			}
			track(server)
			wg.Add(2)
			go func() { defer wg.Done(); p.forward(server, client) }()
			go func() { defer wg.Done(); _, _ = io.Copy(client, server) }()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return p
}

// forward copies what the client sends to the server, and drops it while
// the proxy holds.
func (p *holdProxy) forward(server, client net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := client.Read(buf)
		if n > 0 && !p.hold.Load() {
			if _, werr := server.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// stallCalls is what callers saw during an outage.
type stallCalls struct {
	mu                                sync.Mutex
	during, byPolicy, failed, byRedis int
	failedBefore, failedAfterOpened   int
	firstPolicy                       time.Time
	lastErr                           error
}

// callUnderDeadlines runs workers goroutines calling l.Allow, each call
// with its own deadline, 5 ms apart, until stop is closed (then wait
// returns when they have); it counts apart the calls started at or after
// began.
func callUnderDeadlines(l *redisrate.Limiter, workers int, deadline time.Duration, began *atomic.Int64, stop chan struct{}) (s *stallCalls, wait func()) {
	s = &stallCalls{}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), deadline)
				start := time.Now()
				res, err := l.Allow(ctx, fmt.Sprintf("stall:%d:%d", w, i%8), redisrate.PerSecond(1000))
				cancel()
				s.record(start, began.Load(), res, err)
				time.Sleep(5 * time.Millisecond)
			}
		}()
	}
	return s, wg.Wait
}

func (s *stallCalls) record(start time.Time, began int64, res redisrate.Result, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.failed++
		s.lastErr = err
		if !s.firstPolicy.IsZero() && start.After(s.firstPolicy) {
			s.failedAfterOpened++
		}
	}
	if began == 0 || start.UnixNano() < began {
		if err != nil {
			s.failedBefore++
		}
		return
	}
	s.during++
	switch {
	case err != nil:
	case res.Degraded():
		s.byPolicy++
		if s.firstPolicy.IsZero() {
			s.firstPolicy = time.Now()
		}
	default:
		s.byRedis++
	}
}

// TestOutageShortDeadlines is issue 31's first finding on a real server:
// 32 callers with 100 ms deadlines, shorter than the decision timeout (as
// gRPC clients send), while Redis is black-holed or under CLIENT PAUSE.
// Under FailOpen they got only their own DeadlineExceeded for the whole
// stall (0 admissions of 800-900 calls), the breaker never opened, and
// shadow mode failed every call too. Now the first caller to give up
// starts a probe under the decision timeout; it gets no answer, the
// breaker opens, and the policy answers every call after it at once.
//
// Bounds are generous (a loaded 2-core machine under the race detector):
// the breaker opens within a few decision timeouts of the stall (target:
// one caller's deadline plus one decision timeout, 300 ms), most calls
// during the stall are answered by the policy, and in shadow mode none
// fails.
func TestOutageShortDeadlines(t *testing.T) {
	redistest.NeedLocal(t, "pauses its server")
	for _, outage := range []string{"black hole", "CLIENT PAUSE"} {
		for _, honours := range []bool{true, false} {
			for _, mode := range []string{"fail-open", "shadow"} {
				name := fmt.Sprintf("%s, ContextTimeoutEnabled %v, %s", outage, honours, mode)
				t.Run(name, func(t *testing.T) { stallRun(t, outage, honours, mode) })
			}
		}
	}
}

func stallRun(t *testing.T, outage string, honours bool, mode string) {
	srv := redistest.StartServer(t, redistest.Options{})
	admin := srv.Client(&redis.Options{MaxRetries: -1})
	addr := srv.Addr
	var proxy *holdProxy
	if outage == "black hole" {
		proxy = startHoldProxy(t, srv.Addr)
		addr = proxy.addr
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: honours})
	t.Cleanup(func() { _ = rdb.Close() })
	opts := []redisrate.Option{redisrate.WithFailurePolicy(redisrate.FailOpen)}
	if mode == "shadow" {
		opts = []redisrate.Option{redisrate.WithShadowMode()} // under FailError: shadow mode still fails no call
	}
	l := redisrate.NewLimiter(rdb, opts...) // the default decision timeout and breaker
	var began atomic.Int64
	stop := make(chan struct{})
	s, wait := callUnderDeadlines(l, 32, 100*time.Millisecond, &began, stop)
	time.Sleep(300 * time.Millisecond) // healthy
	start := time.Now()
	began.Store(start.UnixNano())
	if proxy != nil {
		proxy.hold.Store(true)
	} else if err := admin.Do(context.Background(), "CLIENT", "PAUSE", 2500, "ALL").Err(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2300 * time.Millisecond)
	close(stop)
	wait()

	opened := time.Duration(-1)
	if !s.firstPolicy.IsZero() {
		opened = s.firstPolicy.Sub(start)
	}
	redistest.Report(t, "stall "+t.Name(), "%d calls during the stall: %d answered by the policy (the first %v after it began), %d by Redis, %d failed; %d failed after the first policy answer",
		s.during, s.byPolicy, opened.Round(time.Millisecond), s.byRedis, s.failed-s.failedBefore, s.failedAfterOpened)
	if s.failedBefore > 0 && mode == "shadow" || s.failedBefore > 0 && !errors.Is(s.lastErr, context.DeadlineExceeded) {
		t.Errorf("%d calls failed before the stall (last: %v)", s.failedBefore, s.lastErr)
	}
	if limit := 4*defaultDecisionTimeout + time.Second; opened < 0 || opened > limit {
		t.Errorf("the policy first answered %v after the stall began; want within a few decision timeouts (%v)", opened, limit)
	}
	if 2*s.byPolicy <= s.during {
		t.Errorf("%d of %d calls during the stall answered by the policy; want most", s.byPolicy, s.during)
	}
	if mode == "shadow" && s.failed > 0 {
		t.Errorf("shadow mode: %d calls failed (last: %v); want none", s.failed, s.lastErr)
	}
}

// TestShortDeadlinesHealthyServer: what the fix must keep (issue 24). On a
// healthy Redis, 32 callers whose deadlines are a microsecond, under
// FailOpen: nothing is admitted by the policy (a short deadline buys no
// admission), and the breaker never opens (no outage is logged, and
// calls without a deadline meanwhile are all Redis's).
func TestShortDeadlinesHealthyServer(t *testing.T) {
	srv := redistest.StartServer(t, redistest.Options{})
	for _, honours := range []bool{true, false} {
		rdb := srv.Client(&redis.Options{ContextTimeoutEnabled: honours})
		var log bytes.Buffer
		var logMu sync.Mutex
		logger := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
			logMu.Lock()
			defer logMu.Unlock()
			return log.Write(p)
		}), nil))
		// The decision timeout of the tests under load: a probe that a
		// starved machine holds past 200 ms would be an outage; what is
		// shown is that deadlines far shorter than it never are.
		l := redistest.NewLimiter(rdb, redisrate.WithFailurePolicy(redisrate.FailOpen), redisrate.WithLogger(logger))
		var began atomic.Int64
		began.Store(time.Now().UnixNano())
		stop := make(chan struct{})
		s, wait := callUnderDeadlines(l, 32, time.Microsecond, &began, stop)
		var control, controlRedis int
		for end := time.Now().Add(1500 * time.Millisecond); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
			res, err := l.Allow(context.Background(), "control", redisrate.PerSecond(1000))
			control++
			if err == nil && res.Source == redisrate.SourceRedis {
				controlRedis++
			}
		}
		close(stop)
		wait()
		logMu.Lock()
		logged := log.String()
		logMu.Unlock()
		redistest.Report(t, fmt.Sprintf("short deadlines, healthy, ContextTimeoutEnabled %v", honours),
			"%d calls with 1µs deadlines: %d by the policy, %d by Redis, %d the caller's error; %d of %d calls without a deadline by Redis",
			s.during, s.byPolicy, s.byRedis, s.failed, controlRedis, control)
		if s.byPolicy > 0 || controlRedis != control || strings.Contains(logged, "level=WARN") {
			t.Errorf("ContextTimeoutEnabled %v: %d admitted by the policy, %d of %d control calls by Redis, log %q; want 0, all, no outage",
				honours, s.byPolicy, controlRedis, control, logged)
		}
		if s.failed > 0 && (!errors.Is(s.lastErr, context.DeadlineExceeded) || errors.Is(s.lastErr, redisrate.ErrUnavailable)) {
			t.Errorf("ContextTimeoutEnabled %v: a call's error %v; want the caller's own", honours, s.lastErr)
		}
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// defaultDecisionTimeout is the Limiter's decision timeout when none is set
// (WithDecisionTimeout's doc: 200 ms).
const defaultDecisionTimeout = 200 * time.Millisecond
