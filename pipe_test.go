package redisrate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redisrate/redisrate/internal/hooktest"
	"github.com/redisrate/redisrate/internal/redisserver"
)

// servers runs test on miniredis and, when redis-server is on PATH, on a
// real one started for it.
func servers(t *testing.T, test func(t *testing.T, addr string, f *fakeRedis)) {
	t.Run("miniredis", func(t *testing.T) {
		f := newFakeRedis(t)
		test(t, f.mr.Addr(), f)
	})
	t.Run("redis-server", func(t *testing.T) {
		if _, err := exec.LookPath("redis-server"); err != nil {
			t.Skip("no redis-server on PATH")
		}
		srv, err := redisserver.Start(redisserver.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(srv.Stop)
		test(t, srv.Addr, nil)
	})
}

// pipeQueued is how many calls wait in the queue of l's node.
func pipeQueued(l *Limiter) int {
	q := &l.pipes.main
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.queue)
}

// pipelines counts the pipelines of several commands a client sends, and
// their commands; and apart those of one command, which is how a call goes
// alone (alone in pipe.go). It keeps the keys sent.
type pipelines struct {
	n, cmds, ones atomic.Int64
	keys          sync.Map // every string argument sent
}

// sent reports whether a pipeline carried key.
func (h *pipelines) sent(key string) bool {
	_, ok := h.keys.Load(key)
	return ok
}

func (h *pipelines) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h *pipelines) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h *pipelines) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			for _, a := range c.Args() {
				if s, ok := a.(string); ok {
					h.keys.Store(s, true)
				}
			}
		}
		if n := cmds[0].Name(); len(cmds) == 1 && (n == "evalsha" || n == "fcall" || n == "eval") {
			h.ones.Add(1)
		} else if n == "evalsha" || n == "fcall" || n == "eval" { // not a new connection's handshake
			h.n.Add(1)
			h.cmds.Add(int64(len(cmds)))
		}
		return next(ctx, cmds)
	}
}

// holdFirst queues n calls of other keys behind a call of key "held"
// that g holds in flight, and returns their results' channel once they
// all wait.
func holdFirst(t *testing.T, l *Limiter, g *gate, n int, kind Kind) (held chan error, results chan Result) {
	t.Helper()
	lim := []Limit{PerHour(100)}
	g.arm("held")
	held = make(chan error, 1)
	go func() {
		_, err := l.Decide(context.Background(), Request{Key: "held", Limits: lim})
		held <- err
	}()
	<-g.held
	results = make(chan Result, n)
	for i := range n {
		go func() {
			res, err := l.Decide(context.Background(), Request{Kind: kind, Key: fmt.Sprint("key", i), Limits: lim})
			if err != nil {
				t.Errorf("call %d: %v", i, err)
			}
			results <- res
		}()
	}
	waitFor(t, "the calls to queue", func() bool { return pipeQueued(l) == n })
	return held, results
}

// TestPipelineCarriesCallsInFlight: calls of other keys that find a call
// in flight go together, in one pipeline, each decided by Redis as alone;
// for every kind of call.
func TestPipelineCarriesCallsInFlight(t *testing.T) {
	for _, kind := range []Kind{KindAllow, KindCheck, KindPeek, KindUpTo} {
		t.Run(kind.String(), func(t *testing.T) {
			if kind == KindUpTo {
				needV3Mode(t, "upto")
			}
			f, g, p := newFakeRedis(t), &gate{}, &pipelines{}
			f.rdb.AddHook(g)
			f.rdb.AddHook(p)
			l := testLimiter(f.rdb)
			held, results := holdFirst(t, l, g, 6, kind)
			g.release()
			if err := <-held; err != nil {
				t.Fatal(err)
			}
			for range 6 {
				if res := <-results; res.Source != SourceRedis || res.Remaining < 99 || kind != KindPeek && !res.Allowed {
					t.Errorf("a pipelined %v: %+v; want Redis's decision, as alone", kind, res)
				}
			}
			if p.n.Load() != 1 || p.cmds.Load() != 6 {
				t.Errorf("%d pipelines of %d commands in all; want the 6 calls queued in one", p.n.Load(), p.cmds.Load())
			}
		})
	}
}

// TestPipelineResetAndSeveralKeys: a Reset and a call of several keys
// are pipelined too.
func TestPipelineResetAndSeveralKeys(t *testing.T) {
	f, g, p := newFakeRedis(t), &gate{}, &pipelines{}
	f.rdb.AddHook(g)
	f.rdb.AddHook(p)
	nl := &nameLog{}
	f.rdb.AddHook(nl)
	l := testLimiter(f.rdb)
	ctx := context.Background()
	if _, err := l.Allow(ctx, "r", PerHour(1)); err != nil {
		t.Fatal(err)
	}
	if err := l.Reset(ctx, "other"); err != nil { // the reset script loaded: one step each
		t.Fatal(err)
	}
	held, results := holdFirst(t, l, g, 1, KindAllow)
	errc := make(chan error, 2)
	go func() { errc <- l.Reset(ctx, "r") }()
	go func() {
		_, err := l.Decide(ctx, Request{Keys: []KeyLimit{{"{o}:u", PerHour(5)}, {"{o}", PerHour(50)}}})
		errc <- err
	}()
	waitFor(t, "the calls to queue", func() bool { return pipeQueued(l) == 3 })
	g.release()
	for _, c := range []chan error{held, errc, errc} {
		if err := <-c; err != nil {
			t.Fatal(err)
		}
	}
	<-results
	if p.n.Load() != 1 || p.cmds.Load() != 3 {
		t.Errorf("%d pipelines of %d commands; want one of 3: %v", p.n.Load(), p.cmds.Load(), nl.pipes)
	}
	if res, err := l.Allow(ctx, "r", PerHour(1)); err != nil || !res.Allowed {
		t.Errorf("after a pipelined Reset: %+v %v; want the key full again", res, err)
	}
}

// TestPipelineQueuedCallCancelled: a queued caller whose context is
// cancelled returns at once, with the context's error, while the send
// ahead of it is still held; the call is never sent.
func TestPipelineQueuedCallCancelled(t *testing.T) {
	f, g, p := newFakeRedis(t), &gate{}, &pipelines{}
	f.rdb.AddHook(g)
	f.rdb.AddHook(p)
	l := testLimiter(f.rdb, WithFailurePolicy(FailOpen))
	held, _ := holdFirst(t, l, g, 0, KindAllow)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := l.Allow(ctx, "cancelled", PerHour(1))
		done <- err
	}()
	waitFor(t, "the call to queue", func() bool { return pipeQueued(l) == 1 })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled queued call: %v; want context.Canceled (no policy answers it)", err)
	}
	if n := pipeQueued(l); n != 0 {
		t.Errorf("%d calls still queued after the only one left", n)
	}
	g.release()
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	if p.n.Load() != 0 || p.sent(l.prefix+"cancelled") || !p.sent(l.prefix+"held") {
		t.Errorf("%d pipelines sent, the cancelled call's key in one: %v; want the held call alone: the cancelled call must not be", p.n.Load(), p.sent(l.prefix+"cancelled"))
	}
}

// TestPipelineDeadlineShorterThanWindow: a queued caller's deadline that
// passes before its pipeline can go (the send ahead is held) is honoured:
// it returns with context.DeadlineExceeded, answered by no policy.
func TestPipelineDeadlineShorterThanWindow(t *testing.T) {
	f, g := newFakeRedis(t), &gate{}
	f.rdb.AddHook(g)
	l := testLimiter(f.rdb, WithFailurePolicy(FailOpen))
	held, _ := holdFirst(t, l, g, 0, KindAllow)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	res, err := l.Allow(ctx, "short", PerHour(1))
	if !errors.Is(err, context.DeadlineExceeded) || res.Allowed {
		t.Errorf("a queued call past its deadline: %+v %v; want context.DeadlineExceeded", res, err)
	}
	g.release()
	if err := <-held; err != nil {
		t.Fatal(err)
	}
}

// TestPipelineOfWithKeepsItsTimeout: a Limiter of With with a decision
// timeout of its own is not queued behind its parent's send, which goes
// under the parent's timeout (here 0: none): held there, its call waited
// as long as the parent's send, for ever. It is answered while the
// parent's call is still held.
func TestPipelineOfWithKeepsItsTimeout(t *testing.T) {
	f, g := newFakeRedis(t), &gate{}
	f.rdb.AddHook(g)
	parent := testLimiter(f.rdb, WithDecisionTimeout(0))
	child := parent.With(WithDecisionTimeout(10*time.Second), WithFailurePolicy(FailOpen))
	held, _ := holdFirst(t, parent, g, 0, KindAllow)
	done := make(chan error, 1)
	go func() {
		_, err := child.Allow(context.Background(), "child", PerHour(1))
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("the child's call: %v", err)
		}
	case <-time.After(time.Minute): // not a speed bound: a call queued for as long as the parent's send is held
		t.Error("the child's call still waits behind the parent's held send after a minute")
	}
	g.release()
	if err := <-held; err != nil {
		t.Fatal(err)
	}
}

// TestPipelineQueuedCallsMeetOpenBreaker: calls queued behind a send
// while their breaker opens are answered by the open breaker when their
// pipeline was to go, at once and without asking Redis, as calls that find
// it open are. (The queued calls are a Limiter of With's with a breaker of
// its own, behind its parent's held call, so that the held call's answer,
// which closes its own breaker, does not close theirs.)
func TestPipelineQueuedCallsMeetOpenBreaker(t *testing.T) {
	f, g, p := newFakeRedis(t), &gate{}, &pipelines{}
	f.rdb.AddHook(g)
	f.rdb.AddHook(p)
	parent := testLimiter(f.rdb, WithFailurePolicy(FailOpen))
	l := parent.With(WithCircuitBreaker(time.Hour))
	g.arm("held")
	held := make(chan error, 1)
	go func() {
		_, err := parent.Allow(context.Background(), "held", PerHour(100))
		held <- err
	}()
	<-g.held
	results := make(chan Result, 3)
	for i := range 3 {
		go func() {
			res, err := l.Allow(context.Background(), fmt.Sprint("key", i), PerHour(100))
			if err != nil {
				t.Errorf("call %d: %v", i, err)
			}
			results <- res
		}()
	}
	waitFor(t, "the calls to queue", func() bool { return pipeQueued(l) == 3 })
	l.health.failed(l, errors.New("down"), "gcra", "k") // their breaker opens while they wait
	g.release()
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if res := <-results; res.Source != SourceFailOpen || !errors.Is(res.Cause, ErrCircuitOpen) {
			t.Errorf("a call queued as its breaker opened: %+v; want the open breaker's answer", res)
		}
	}
	for i := range 3 {
		if p.sent(l.prefix + fmt.Sprint("key", i)) {
			t.Errorf("key%d was sent to Redis with its breaker open", i)
		}
	}
}

// cutProxy forwards TCP connections to a Redis and counts the script
// calls that reach it. Armed, it lets a reply through only once want
// script calls in all have reached Redis, then forwards half of what
// Redis answered and cuts the connection: a pipeline that Redis ran in
// full, whose client saw part of the answers.
type cutProxy struct {
	ln    net.Listener
	to    string
	mu    sync.Mutex
	sent  []*bytes.Buffer // what each connection sent Redis
	armed atomic.Int64    // the script calls after which to cut; 0: not armed
	cuts  atomic.Int32
}

func newCutProxy(t *testing.T, to string) *cutProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, to: to}
	t.Cleanup(func() { _ = ln.Close() })
	go p.serve()
	return p
}

func (p *cutProxy) addr() string { return p.ln.Addr().String() }

func (p *cutProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.to)
		if err != nil {
			_ = c.Close()
			continue
		}
		buf := new(bytes.Buffer)
		p.mu.Lock()
		p.sent = append(p.sent, buf)
		p.mu.Unlock()
		go func() { // client to Redis, recorded
			b := make([]byte, 64<<10)
			for {
				n, err := c.Read(b)
				if n > 0 {
					p.mu.Lock()
					buf.Write(b[:n])
					p.mu.Unlock()
					if _, err := s.Write(b[:n]); err != nil {
						break
					}
				}
				if err != nil {
					break
				}
			}
			_ = s.Close()
		}()
		go func() { // Redis to client, cut when armed
			defer c.Close()
			defer s.Close()
			b := make([]byte, 64<<10)
			for {
				n, err := s.Read(b)
				if want := p.armed.Load(); n > 0 && want > 0 && p.scriptCalls() >= int(want) && p.armed.CompareAndSwap(want, 0) {
					// Let Redis answer the rest of what reached it, then
					// forward half of all it answered.
					got := append([]byte(nil), b[:n]...)
					_ = s.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
					for {
						m, err := s.Read(b)
						got = append(got, b[:m]...)
						if err != nil {
							break
						}
					}
					_, _ = c.Write(got[:len(got)/2])
					p.cuts.Add(1)
					return
				}
				if n > 0 {
					if _, err := c.Write(b[:n]); err != nil {
						return
					}
				}
				if err != nil {
					return
				}
			}
		}()
	}
}

// scriptCalls is how many script calls reached Redis through p.
func (p *cutProxy) scriptCalls() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, b := range p.sent {
		for _, name := range []string{"evalsha", "fcall", "eval"} {
			n += bytes.Count(bytes.ToLower(b.Bytes()), []byte("\r\n"+name+"\r\n"))
		}
	}
	return n
}

// TestPipelineNoResendAfterCut: a pipeline whose connection breaks after
// Redis ran it, mid-reply, is not sent again, although go-redis retries
// (MaxRetries 3): the calls whose answers came are Redis's decisions, the
// others the failure policy's, and Redis ran each call once. For
// DecideBatch's pipeline and the pipeline of calls in flight.
func TestPipelineNoResendAfterCut(t *testing.T) {
	servers(t, func(t *testing.T, addr string, _ *fakeRedis) {
		p := newCutProxy(t, addr)
		rdb := redis.NewClient(&redis.Options{Addr: p.addr(), Protocol: 2, MaxRetries: 3})
		t.Cleanup(func() { _ = rdb.Close() })
		g := &gate{}
		rdb.AddHook(g)
		l := testLimiter(rdb, WithCircuitBreaker(0))
		ctx := context.Background()
		if _, err := l.Allow(ctx, "warm", PerHour(100)); err != nil { // the script loaded, the connection made
			t.Fatal(err)
		}
		check := func(what string, before, n int, errs []error) {
			t.Helper()
			if got := p.scriptCalls() - before; got != n {
				t.Errorf("%s: %d script calls reached Redis for %d calls; want each once", what, got, n)
			}
			failed := 0
			for _, err := range errs {
				if err != nil {
					failed++
					if !errors.Is(err, ErrUnavailable) {
						t.Errorf("%s: %v; want ErrUnavailable for a call whose answer was cut", what, err)
					}
				}
			}
			if p.cuts.Load() == 0 || failed == 0 || failed == n {
				t.Errorf("%s: %d cuts, %d of %d calls failed; want the connection cut mid-reply", what, p.cuts.Load(), failed, n)
			}
		}

		const n = 8
		reqs := make([]Request, n)
		for i := range reqs {
			reqs[i] = Request{Key: fmt.Sprint("batch", i), Limits: []Limit{PerHour(100)}}
		}
		before := p.scriptCalls()
		p.armed.Store(int64(before + n))
		_, err := l.DecideBatch(ctx, reqs)
		var be *BatchError
		if !errors.As(err, &be) {
			t.Fatalf("DecideBatch through a cut connection: %v; want a BatchError", err)
		}
		check("DecideBatch", before, n, be.Errs)

		before, cuts := p.scriptCalls(), p.cuts.Load()
		g.arm("held")
		held := make(chan error, 1)
		go func() { _, err := l.Allow(ctx, "held", PerHour(100)); held <- err }()
		<-g.held
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = l.Allow(ctx, fmt.Sprint("flight", i), PerHour(100))
			}()
		}
		waitFor(t, "the calls to queue", func() bool { return pipeQueued(l) == n })
		p.armed.Store(int64(before + n + 1))
		g.release()
		wg.Wait()
		if err := <-held; err != nil {
			t.Fatal(err)
		}
		p.cuts.Store(p.cuts.Load() - cuts)
		check("calls in flight", before+1, n, errs)
	})
}

// TestSlowRedisDecidesEveryCall is issue 38's seventh finding: a Redis
// that answers every command within 0.4 of the decision timeout decides
// every call of 64 goroutines, queued or not (pipelined, coalesced on a
// hot key at a cost of 2, whose groups take three round trips): none is
// answered by the failure policy.
func TestSlowRedisDecidesEveryCall(t *testing.T) {
	needV3Mode(t, "upto")
	const timeout = time.Second
	f := newFakeRedis(t)
	l := testLimiter(f.rdb, WithDecisionTimeout(timeout), WithFailurePolicy(FailOpen))
	lim := PerHour(20)
	// The script loaded and the connections made: on a cold start the
	// loader's FCALL check, the NOSCRIPT and the EVAL, and a new
	// connection's handshake, share the call's decision timeout
	// (docs/reliability.md, "Round-trip time").
	if _, err := l.Allow(context.Background(), "warm", lim); err != nil {
		t.Fatal(err)
	}
	if _, err := l.DecideBatch(context.Background(), []Request{{Key: "w1", Limits: []Limit{lim}}, {Key: "w2", Limits: []Limit{lim}}}); err != nil {
		t.Fatal(err)
	}
	f.rdb.AddHook(hooktest.Delay(timeout * 4 / 10))
	var byPolicy, byRedis, denied atomic.Int64
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 3 {
				key, n := fmt.Sprint("own", i, ":", j), int64(1)
				if i%2 == 0 {
					key, n = "hot", 2 // exhausted after 10 calls
				}
				res, err := l.AllowN(context.Background(), key, lim, n)
				switch {
				case err != nil:
					t.Errorf("%s: %v", key, err)
				case res.Source != SourceRedis:
					if byPolicy.Add(1) == 1 {
						t.Logf("%s: answered by the policy: %v", key, res.Cause)
					}
				default:
					byRedis.Add(1)
					if !res.Allowed {
						denied.Add(1)
					}
				}
			}
		}()
	}
	wg.Wait()
	if byPolicy.Load() != 0 || denied.Load() == 0 {
		t.Errorf("%d calls decided by Redis (%d denied), %d by the failure policy; want all by Redis", byRedis.Load(), denied.Load(), byPolicy.Load())
	}
}

// TestCoalescedDenialLeavesLessThanCost is issue 38's fourth finding: a
// coalesced denial on a fast-refilling limit never reports the cost's
// units left (a Result a call alone could not get), on every algorithm.
func TestCoalescedDenialLeavesLessThanCost(t *testing.T) {
	t.Parallel() // its own Redis; runs beside the other slow tests
	needV3Mode(t, "upto")
	servers(t, func(t *testing.T, addr string, f *fakeRedis) {
		rdb := redis.NewClient(&redis.Options{Addr: addr, Protocol: 2})
		t.Cleanup(func() { _ = rdb.Close() })
		stop := make(chan struct{})
		if f != nil { // miniredis: its clock moves 1 ms at a time
			go func() {
				for {
					select {
					case <-stop:
						return
					default:
						f.advance(time.Millisecond)
						time.Sleep(100 * time.Microsecond)
					}
				}
			}()
		}
		defer close(stop)
		l := testLimiter(rdb, WithDecisionTimeout(0))
		for a := range Algorithm(numAlgorithms) {
			lim := Per(20, 50*time.Millisecond).WithAlgorithm(a)
			for _, cost := range []int64{1, 2} {
				var bad, denials atomic.Int64
				var wg sync.WaitGroup
				for range 64 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for range 40 {
							res, err := l.AllowN(context.Background(), fmt.Sprint("fast:", a, cost), lim, cost)
							if err != nil {
								t.Error(err)
								return
							}
							if !res.Allowed {
								denials.Add(1)
								if res.Remaining >= cost {
									bad.Add(1)
									t.Logf("%v cost %d: %v", a, cost, res)
								}
							}
						}
					}()
				}
				wg.Wait()
				if bad.Load() != 0 {
					t.Errorf("%v cost %d: %d of %d denials report %d or more units left", a, cost, bad.Load(), denials.Load(), cost)
				}
			}
		}
	})
}

type nameLog struct {
	mu    sync.Mutex
	pipes [][]string
}

func (h *nameLog) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h *nameLog) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h *nameLog) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		var names []string
		for _, c := range cmds {
			names = append(names, fmt.Sprint(c.Args()[:2]))
		}
		h.mu.Lock()
		h.pipes = append(h.pipes, names)
		h.mu.Unlock()
		return next(ctx, cmds)
	}
}

// TestPipelinePerClusterNode: on a Cluster each primary has its own queue
// and its own send in flight: calls of a shard are not held behind a call
// in flight on another, and calls of one shard queued together go in one
// pipeline, to that shard.
func TestPipelinePerClusterNode(t *testing.T) {
	rdb, _, keys := twoNodeCluster(t)
	g, p := &gate{}, &pipelines{}
	rdb.AddHook(g)
	rdb.AddHook(p)
	l := testLimiter(rdb)
	ctx := context.Background()
	lim := PerHour(100)
	for _, k := range keys { // the connections made
		if _, err := l.Allow(ctx, k, lim); err != nil {
			t.Fatal(err)
		}
	}
	g.arm(keys[0])
	held := make(chan error, 1)
	go func() { _, err := l.Allow(ctx, keys[0], lim); held <- err }()
	<-g.held
	if res, err := l.Allow(ctx, keys[1], lim); err != nil || res.Source != SourceRedis {
		t.Fatalf("the other shard's key while a call is in flight on the first: %+v %v; want Redis's decision at once", res, err)
	}
	// Calls of the first shard's slot queue behind the held one.
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if res, err := l.Decide(ctx, Request{Kind: KindCheck, Key: keys[0], Limits: []Limit{lim}, N: int64(i + 1)}); err != nil || !res.Allowed {
				t.Errorf("a queued check: %+v %v", res, err)
			}
		}()
	}
	q := l.pipes.of(l, l.healthOf(l.prefix+keys[0]))
	waitFor(t, "the checks to queue", func() bool { q.mu.Lock(); defer q.mu.Unlock(); return len(q.queue) == 4 })
	g.release()
	wg.Wait()
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	if p.n.Load() != 1 || p.cmds.Load() != 4 {
		t.Errorf("%d pipelines of %d commands; want the 4 queued checks in one", p.n.Load(), p.cmds.Load())
	}
}

// TestPipelineSlowCallHoldsNoOther: a call Redis does not answer holds
// the calls queued behind it no longer than its decision timeout: then
// they go, and Redis decides them, while it is still unanswered.
func TestPipelineSlowCallHoldsNoOther(t *testing.T) {
	f, g := newFakeRedis(t), &gate{}
	f.rdb.AddHook(g)
	l := testLimiter(f.rdb, WithDecisionTimeout(200*time.Millisecond), WithCircuitBreaker(0))
	if _, err := l.Allow(context.Background(), "warm", PerHour(100)); err != nil {
		t.Fatal(err)
	}
	held, results := holdFirst(t, l, g, 3, KindAllow)
	for range 3 {
		if res := <-results; res.Source != SourceRedis || !res.Allowed {
			t.Errorf("a call queued behind one Redis does not answer: %+v; want Redis's decision", res)
		}
	}
	var te *timeoutError
	if err := <-held; !errors.As(err, &te) {
		t.Errorf("the held call: %v; want its decision timeout", err)
	}
	g.release()
}
