package redisrate

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
)

// failPipelines fails every pipeline of several script calls as a connection
// reset would, once fail is closed; it closes arrived when the first such
// pipeline comes.
type failPipelines struct {
	once    sync.Once
	arrived chan struct{}
	fail    chan struct{}
}

func (h *failPipelines) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h *failPipelines) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h *failPipelines) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if n := cmds[0].Name(); len(cmds) < 2 || n != "evalsha" && n != "eval" && n != "fcall" { // alone, or a new connection's handshake
			return next(ctx, cmds)
		}
		h.once.Do(func() { close(h.arrived) })
		<-h.fail
		err := errors.New("read tcp 127.0.0.1:6379: connection reset by peer")
		for _, c := range cmds {
			c.SetErr(err)
		}
		return err
	}
}

// TestPipelineReportsFailureOfLeftCallers: a pipeline that Redis fails
// after every caller in it has left (their contexts ended while it was in
// flight, before the decision timeout) opens the node's circuit breaker:
// no caller settles its answer, so the pipeline reports the failure
// itself (commit ac02690). Otherwise callers whose deadlines are shorter
// than the decision timeout never open the breaker, and under a stall
// each keeps waiting for Redis to its own deadline instead of getting the
// policy's answer at once.
func TestPipelineReportsFailureOfLeftCallers(t *testing.T) {
	f, g := newFakeRedis(t), &gate{}
	fp := &failPipelines{arrived: make(chan struct{}), fail: make(chan struct{})}
	f.rdb.AddHook(g)
	f.rdb.AddHook(fp)
	l := testLimiter(f.rdb, WithFailurePolicy(FailOpen)) // the breaker on, by default
	held, _ := holdFirst(t, l, g, 0, KindAllow)
	ctx, cancel := context.WithCancel(context.Background())
	const n = 3
	errs := make(chan error, n)
	for i := range n {
		go func() {
			_, err := l.Allow(ctx, fmt.Sprint("left", i), PerHour(100))
			errs <- err
		}()
	}
	waitFor(t, "the calls to queue", func() bool { return pipeQueued(l) == n })
	g.release() // the held call returns; the queued calls go as one pipeline...
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	<-fp.arrived // ...which Redis holds
	cancel()     // every caller in it leaves
	for range n {
		if err := <-errs; !errors.Is(err, context.Canceled) {
			t.Fatalf("a caller that left: %v; want its context's error", err)
		}
	}
	if l.health.skip() {
		t.Fatal("the breaker opened before Redis failed anything")
	}
	close(fp.fail) // now Redis fails the pipeline
	q := &l.pipes.main
	waitFor(t, "the pipeline to end", func() bool { q.mu.Lock(); defer q.mu.Unlock(); return !q.busy })
	if !l.health.skip() {
		t.Fatal("a pipeline Redis failed after its callers left did not open the breaker")
	}
	res, err := l.Allow(context.Background(), "next", PerHour(100))
	if err != nil || res.Source == SourceRedis || !res.Allowed {
		t.Errorf("the call after: %+v %v; want FailOpen's admission at once, the breaker open", res, err)
	}
}
