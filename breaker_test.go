package redisrate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// breakerRig is a Limiter on a miniredis that a test stops and restarts,
// with the breaker on a clock the test moves.
type breakerRig struct {
	f   *fakeRedis
	l   *Limiter
	clk *fakeClock
	log *cmdLog
}

func newBreakerRig(t *testing.T, opts ...Option) *breakerRig {
	f := newFakeRedis(t)
	rdb := fastClient(t, f.mr.Addr())
	log := &cmdLog{}
	rdb.AddHook(log)
	clk := &fakeClock{t: epoch2026}
	l := testLimiterOn(clk, rdb, opts...)
	return &breakerRig{f: f, l: l, clk: clk, log: log}
}

// TestBreakerCauseHoldsNoOtherCallersKey: while the breaker is open, every
// call is answered with the failure that opened it; that cause is Redis's
// error, not the first failed call's, so no caller reads another's key (a
// user id, an IP address) in its error.
func TestBreakerCauseHoldsNoOtherCallersKey(t *testing.T) {
	ctx := context.Background()
	r := newBreakerRig(t)
	lim := PerMinute(100)
	r.f.mr.Close()
	if _, err := r.l.Allow(ctx, "user-a-secret", lim); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("the failure: %v, want ErrUnavailable", err)
	}
	_, err := r.l.Allow(ctx, "user-b", lim)
	if !errors.Is(err, ErrCircuitOpen) || !errors.Is(err, ErrUnavailable) {
		t.Fatalf("breaker open: %v, want ErrCircuitOpen and ErrUnavailable", err)
	}
	if msg := err.Error(); strings.Contains(msg, "user-a-secret") || !strings.Contains(msg, `"user-b"`) {
		t.Fatalf("user-b's error: %s; want its own key and not user-a-secret's", msg)
	}
}

// TestBreakerAnswersAtOnceWhileRedisIsDown: after the first failure, calls
// do not go to Redis until a probe finds it again; one probe at a time,
// one per interval; decisions are Redis's again right after a probe
// succeeds, within one interval of its return.
func TestBreakerAnswersAtOnceWhileRedisIsDown(t *testing.T) {
	ctx := context.Background()
	r := newBreakerRig(t, WithFailurePolicy(FailOpen))
	lim := PerMinute(100)
	if res, err := r.l.Allow(ctx, "k", lim); err != nil || res.Source != SourceRedis {
		t.Fatalf("Redis up: %+v %v", res, err)
	}
	r.f.mr.Close()
	r.log.take()
	res, err := r.l.Allow(ctx, "k", lim)
	if err != nil || res.Source != SourceFailOpen {
		t.Fatalf("the failure: %+v %v", res, err)
	}
	if n := r.log.scriptCalls(); n != 1 {
		t.Fatalf("the call that found Redis down sent %d script calls, want 1", n)
	}
	// Open: no call asks Redis, however many, until the interval has passed.
	for range 50 {
		res, err := r.l.Allow(ctx, "k", lim)
		if err != nil || res.Source != SourceFailOpen {
			t.Fatalf("breaker open: %+v %v", res, err)
		}
		var be *breakerError
		if !errors.As(res.Cause, &be) || !errors.Is(res.Cause, ErrUnavailable) {
			t.Fatalf("Cause %v: want the breaker's error, matching ErrUnavailable", res.Cause)
		}
	}
	r.clk.Advance(defaultProbeInterval - time.Millisecond)
	_, _ = r.l.Allow(ctx, "k", lim)
	r.l.health.probes.Wait()
	if n := r.log.scriptCalls(); n != 0 {
		t.Fatalf("before the interval, %d script calls went to Redis, want 0", n)
	}
	// One interval on: the next call starts one probe (and does not wait
	// for it); Redis is still down, so the breaker stays open.
	r.clk.Advance(time.Millisecond)
	for range 5 {
		if res, _ := r.l.Allow(ctx, "k", lim); res.Source != SourceFailOpen {
			t.Fatalf("%+v", res)
		}
	}
	r.l.health.probes.Wait()
	if n := r.log.scriptCalls(); n != 1 {
		t.Fatalf("one interval on: %d script calls, want exactly 1 probe", n)
	}
	if !r.l.health.skip() {
		t.Fatal("a failed probe closed the breaker")
	}
	// Redis returns: the first call after the next interval probes, and the
	// calls after the probe are Redis's.
	if err := r.f.mr.Restart(); err != nil {
		t.Fatal(err)
	}
	r.clk.Advance(defaultProbeInterval)
	if res, _ := r.l.Allow(ctx, "k", lim); res.Source != SourceFailOpen {
		t.Fatalf("the probing call: %+v, want the policy's answer (it does not wait)", res)
	}
	r.l.health.probes.Wait()
	res, err = r.l.Allow(ctx, "k", lim)
	if err != nil || res.Source != SourceRedis || !res.Allowed {
		t.Fatalf("after the probe: %+v %v, want Redis's decision", res, err)
	}
	// The probe wrote nothing: Redis's count is the one admitted call
	// before the outage and this one.
	if res.Remaining != 98 {
		t.Errorf("remaining %d after two recorded calls, want 98: the probe must not take units", res.Remaining)
	}
}

// TestBreakerOneProbeAtATime: while a probe is in flight no other starts.
func TestBreakerOneProbeAtATime(t *testing.T) {
	clk := &fakeClock{t: epoch2026}
	h := newHealth(defaultProbeInterval, clk)
	l := &Limiter{}
	h.failed(l, errors.New("down"), "gcra", "k")
	if h.probeDue() {
		t.Fatal("a probe at once after the failure, want one interval later")
	}
	clk.Advance(defaultProbeInterval)
	if !h.probeDue() {
		t.Fatal("no probe after one interval")
	}
	clk.Advance(10 * defaultProbeInterval)
	if h.probeDue() {
		t.Fatal("a second probe while the first is in flight")
	}
	h.mu.Lock()
	h.probing = false
	h.mu.Unlock()
	h.probes.Done()
	if !h.probeDue() {
		t.Fatal("no probe after the first ended")
	}
	h.probes.Done()
}

// TestBreakerIgnoresCallerErrors: a caller's cancellation or passed
// deadline, an argument error and a foreign key are not Redis failing: the
// breaker stays shut.
func TestBreakerIgnoresCallerErrors(t *testing.T) {
	r := newBreakerRig(t)
	for how, ctx := range gaveUp(t) {
		if _, err := r.l.Allow(ctx, "k", PerMinute(1)); err == nil {
			t.Fatalf("a %s call succeeded", how)
		}
	}
	r.f.rdb.Set(context.Background(), "user", "order 42", 0)
	if _, err := r.l.Allow(context.Background(), "user", PerMinute(1)); !errors.Is(err, ErrForeignKey) {
		t.Fatal(err)
	}
	if _, err := r.l.Allow(context.Background(), "k", PerMinute(-1)); !errors.Is(err, ErrInvalid) {
		t.Fatal(err)
	}
	if r.l.health.skip() {
		t.Fatal("the breaker opened on the caller's errors")
	}
	if res, err := r.l.Allow(context.Background(), "k", PerMinute(1)); err != nil || !res.Allowed {
		t.Fatalf("%+v %v", res, err)
	}
}

// TestBreakerOff: WithCircuitBreaker(0) asks Redis on every call, and a
// call that succeeds ends the burst at once.
func TestBreakerOff(t *testing.T) {
	ctx := context.Background()
	r := newBreakerRig(t, WithCircuitBreaker(0), WithFailurePolicy(FailClosed))
	r.f.mr.Close()
	r.log.take()
	for range 3 {
		if res, _ := r.l.Allow(ctx, "k", PerMinute(1)); res.Source != SourceFailClosed {
			t.Fatalf("%+v", res)
		}
	}
	if n := r.log.scriptCalls(); n != 3 {
		t.Fatalf("%d script calls, want 3: without a breaker every call asks", n)
	}
	if err := r.f.mr.Restart(); err != nil {
		t.Fatal(err)
	}
	if res, err := r.l.Allow(ctx, "k", PerMinute(1)); err != nil || res.Source != SourceRedis {
		t.Fatalf("Redis back: %+v %v", res, err)
	}
}

// syncBuffer is a bytes.Buffer safe for the probe's goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestLoggerOncePerBurst: WithLogger logs the first failure of a burst
// (Warn, with the error) and Redis's return (Info, with the calls Redis
// did not decide counted: degraded decisions and errors), not every call in
// between. Under FailError the calls are errors (the middleware's 503s):
// the log said degraded=0 after 4 s of them (issue 22).
func TestLoggerOncePerBurst(t *testing.T) {
	for _, c := range []struct {
		policy   FailurePolicy
		breaker  bool
		counted  string
		countedB string // with the breaker: the call that started the probe was answered without Redis too
	}{
		{FailOpen, true, "", "degraded=23 errors=0"},
		{FailOpen, false, "degraded=22 errors=0", ""},
		{FailError, true, "", "degraded=0 errors=23"},
		{FailError, false, "degraded=0 errors=22", ""},
	} {
		breaker := c.breaker
		ctx := context.Background()
		var buf syncBuffer
		opts := []Option{WithFailurePolicy(c.policy), WithLogger(slog.New(slog.NewTextHandler(&buf, nil)))}
		if !breaker {
			opts = append(opts, WithCircuitBreaker(0))
		}
		r := newBreakerRig(t, opts...)
		_, _ = r.l.Allow(ctx, "k", PerMinute(100))
		r.f.mr.Close()
		for range 20 {
			_, _ = r.l.Allow(ctx, "k", PerMinute(100))
		}
		_, _ = r.l.DecideBatch(ctx, []Request{{Key: "a", Limits: []Limit{PerMinute(1)}}, {Key: "b", Limits: []Limit{PerMinute(1)}}})
		if err := r.f.mr.Restart(); err != nil {
			t.Fatal(err)
		}
		r.clk.Advance(defaultProbeInterval)
		_, _ = r.l.Allow(ctx, "k", PerMinute(100)) // starts the probe (with the breaker) or succeeds
		r.l.health.probes.Wait()
		_, _ = r.l.Allow(ctx, "k", PerMinute(100))
		lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
		if len(lines) != 2 {
			t.Fatalf("breaker %v: %d log lines, want 2 (down, back):\n%s", breaker, len(lines), buf.String())
		}
		if !strings.Contains(lines[0], "level=WARN") || !strings.Contains(lines[0], "connection refused") || !strings.Contains(lines[0], "policy="+c.policy.String()) {
			t.Errorf("first line %q: want a warning with the error and the policy", lines[0])
		}
		counted := c.counted
		if breaker {
			counted = c.countedB
		}
		if !strings.Contains(lines[1], "level=INFO") || !strings.Contains(lines[1], "Redis answers again") || !strings.Contains(lines[1], counted) {
			t.Errorf("%v, breaker %v: second line %q: want Redis's return with %s", c.policy, breaker, lines[1], counted)
		}
	}
}

// WithCircuitBreaker's doc gives the default probe interval: 200 ms.
func TestDefaultProbeIntervalIsDocumented(t *testing.T) {
	if got := testLimiter(nil).health.probeEvery; got != 200*time.Millisecond {
		t.Errorf("NewLimiter probes every %v by default; WithCircuitBreaker's doc says 200 ms", got)
	}
}

// twoNodeCluster is a ClusterClient over two miniredis servers, the first
// holding slots 0-8191 and the second the rest (miniredis answers any key:
// the client routes by these slots), and a key on each.
func twoNodeCluster(t *testing.T) (rdb *redis.ClusterClient, nodes [2]*fakeRedis, keys [2]string) {
	nodes = [2]*fakeRedis{newFakeRedis(t), newFakeRedis(t)}
	slots := []redis.ClusterSlot{
		{Start: 0, End: 8191, Nodes: []redis.ClusterNode{{Addr: nodes[0].mr.Addr()}}},
		{Start: 8192, End: 16383, Nodes: []redis.ClusterNode{{Addr: nodes[1].mr.Addr()}}},
	}
	rdb = redis.NewClusterClient(&redis.ClusterOptions{
		ClusterSlots: func(context.Context) ([]redis.ClusterSlot, error) { return slots, nil },
		Protocol:     2, DisableIdentity: true, MaxRetries: -1, DialerRetries: 1, PoolSize: 100,
	})
	t.Cleanup(func() { _ = rdb.Close() })
	for i := 0; keys[0] == "" || keys[1] == ""; i++ {
		k := fmt.Sprint("user:", i)
		m, err := rdb.MasterForKey(context.Background(), k)
		if err != nil {
			t.Fatal(err)
		}
		for n := range nodes {
			if strings.HasSuffix(m.Options().Addr, ":"+nodes[n].mr.Port()) && keys[n] == "" { // go-redis drops a loopback host
				keys[n] = k
			}
		}
	}
	return rdb, nodes, keys
}

// TestBreakerPerClusterNode is issue 31's second finding: one dead shard
// of a Cluster opened the breaker for every key, and the next call to it
// opened it again after a probe on a healthy key closed it. Each primary
// now has its own: the live shard's calls are Redis's, the dead shard's
// are answered at once, and neither's probe closes the other's breaker.
func TestBreakerPerClusterNode(t *testing.T) {
	ctx := context.Background()
	rdb, nodes, keys := twoNodeCluster(t)
	l := testLimiter(rdb, WithFailurePolicy(FailClosed)) // the dead shard refuses at once; the live one must not time out on a busy machine
	clk := &fakeClock{t: epoch2026}
	l.health.now = clk.Now
	lim := PerMinute(1000)
	for _, k := range keys {
		if res, err := l.Allow(ctx, k, lim); err != nil || res.Source != SourceRedis {
			t.Fatalf("%s before the outage: %+v %v", k, res, err)
		}
	}
	nodes[0].mr.Close()
	if res, _ := l.Allow(ctx, keys[0], lim); res.Source != SourceFailClosed {
		t.Fatalf("the dead shard's key: %+v; want FailClosed's denial", res)
	}
	for round := range 3 {
		for range 20 {
			if res, err := l.Allow(ctx, keys[1], lim); err != nil || res.Source != SourceRedis {
				t.Fatalf("round %d, the live shard's key: %+v %v (cause %v); want Redis's decision", round, res, err, res.Cause)
			}
			res, _ := l.Allow(ctx, keys[0], lim)
			if !errors.Is(res.Cause, ErrCircuitOpen) {
				t.Fatalf("round %d, the dead shard's key: %+v; want the open breaker's answer", round, res)
			}
		}
		clk.Advance(defaultProbeInterval) // the dead shard's next call probes it, and fails
		_, _ = l.Allow(ctx, keys[0], lim)
		l.health.probes.Wait()
	}
	if l.health.skip() {
		t.Error("the Limiter's own breaker opened: a Cluster's are per primary")
	}
	if err := nodes[0].mr.Restart(); err != nil {
		t.Fatal(err)
	}
	clk.Advance(defaultProbeInterval)
	_, _ = l.Allow(ctx, keys[0], lim)
	l.health.probes.Wait()
	if res, err := l.Allow(ctx, keys[0], lim); err != nil || res.Source != SourceRedis {
		t.Fatalf("the shard back: %+v %v; want Redis's decision", res, err)
	}
}

// TestOutageLogLine is issue 33's: the outage's log line printed the raw
// key (a client's address, which spans never carry), and with go-redis's
// default options hid the cause behind "context deadline exceeded" (the
// "connection refused" was in go-redis's own log only). It now names the
// key's name only, and the cause, found by a dial when the error does not
// say it.
func TestOutageLogLine(t *testing.T) {
	mr := miniredis.RunT(t)
	refused := mr.Addr()
	mr.Close()
	for _, c := range []struct{ name, addr, cause string }{
		{"refused", refused, `cause="connection refused"`},
		{"black hole", blackhole(t), "accepts connections but did not answer"},
	} {
		for _, honours := range []bool{true, false} {
			var buf syncBuffer
			rdb := redis.NewClient(&redis.Options{Addr: c.addr, ContextTimeoutEnabled: honours}) // go-redis's defaults
			t.Cleanup(func() { _ = rdb.Close() })
			l := NewLimiter(rdb, WithKeyPrefix("rate:"), WithLogger(slog.New(slog.NewTextHandler(&buf, nil))))
			_, err := l.Allow(context.Background(), "api:ip:192.0.2.7", PerMinute(1))
			l.health.probes.Wait()
			line := buf.String()
			if !errors.Is(err, ErrUnavailable) || !strings.Contains(line, "level=WARN") || !strings.Contains(line, c.cause) ||
				strings.Contains(line, "192.0.2") || !strings.Contains(line, "key=rate:api:…") {
				t.Errorf("%s, ContextTimeoutEnabled %v: %v; log %q: want the cause (%s) and the key's name, not the address", c.name, honours, err, line, c.cause)
			}
		}
	}
}

// keyName keeps a key's name and drops who is limited.
func TestKeyName(t *testing.T) {
	for key, want := range map[string]string{
		"ip:192.0.2.1":           "ip:…",
		"api:ip:2001:db8::/64":   "api:…",
		"{login:org:7}:x:1":      "login:…",
		"192.0.2.1":              "…",
		"2001:db8::1":            "…",
		"fe80::1":                "…",
		"user42":                 "…",
		"alice@example.com:mail": "…",
		"":                       "…",
	} {
		if got := keyName("", key); got != want {
			t.Errorf("keyName(%q) = %q, want %q", key, got, want)
		}
	}
	if got := keyName("rate:", "rate:login:bob"); got != "rate:login:…" {
		t.Errorf("with a prefix: %q", got)
	}
}

// TestRefusedIsNotATimeout (issue 38, finding 6): a Redis that refuses
// connections was reported as a timeout: go-redis redials until the
// decision deadline, then reports only the deadline. The burst's first
// failure dials the node to find the cause, and the calls the open breaker
// answers then carry it: "connection refused", matching
// syscall.ECONNREFUSED, without WithLogger too.
func TestRefusedIsNotATimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close() // nobody listens there now: connections are refused
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = rdb.Close() })
	l := NewLimiter(rdb, WithFailurePolicy(FailClosed))
	ctx := context.Background()
	first, err := l.Allow(ctx, "k", PerSecond(1))
	if err != nil || first.Source != SourceFailClosed {
		t.Fatalf("first call: %+v %v; want the policy's denial", first, err)
	}
	l.health.probes.Wait() // the diagnosis
	res, err := l.Allow(ctx, "k", PerSecond(1))
	if err != nil || !errors.Is(res.Cause, ErrCircuitOpen) || !errors.Is(res.Cause, syscall.ECONNREFUSED) ||
		!strings.Contains(res.Cause.Error(), "cannot connect to Redis at "+addr) || strings.Contains(res.Cause.Error(), "no answer") {
		t.Errorf("a call the open breaker answered: cause %v; want it to say the connection was refused, not a timeout", res.Cause)
	}

	// Without the breaker every call asks Redis, and says so too.
	nb := NewLimiter(rdb, WithCircuitBreaker(0), WithDecisionTimeout(50*time.Millisecond))
	_, _ = nb.Allow(ctx, "k", PerSecond(1))
	nb.health.probes.Wait()
	for i := range 2 {
		_, err := nb.Allow(ctx, "k", PerSecond(1))
		if !errors.Is(err, ErrUnavailable) || !errors.Is(err, syscall.ECONNREFUSED) ||
			!strings.Contains(err.Error(), "cannot connect to Redis at "+addr) {
			t.Errorf("without a breaker, call %d: %v; want it to say the connection was refused", i, err)
		}
		if i == 0 {
			t.Logf("without a breaker: %v", err)
		}
	}
}
