package redisrate

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Pipelining, the part of the send stage that carries calls of different
// keys to Redis together. Redis spends about as much CPU reading and
// answering one small command (a read and a write call of its event loop)
// as running a script; calls that share a round trip share that cost.
//
// There is no background goroutine. Each Redis node (the Limiter's one,
// or each primary of a Cluster, as the circuit breaker sees them) has a
// queue and at most one send in flight: a call that finds nothing in
// flight goes at once, alone, as without pipelining (one caller waits for
// nothing); a call that finds a send in flight queues. When a send returns,
// the calls queued meanwhile go as one pipeline (a goroutine that lives
// while the queue refills, then ends), and so on. So a queued call waits
// for the send in flight, itself bounded by its decision deadline (and for
// the pipelines of the calls queued before it, maxPipeline at a time, when
// more than that were), and then for its own pipeline, under a decision
// deadline of its own counted from when it is sent: a Redis that answers
// each round trip within the decision timeout decides every call.
//
// No decision is sent twice: go-redis resends a whole pipeline after a
// network error (its MaxRetries), which would run again the calls Redis
// had already run; a pipeline's commands stop that (noRetry), and a
// command the network failed is answered by the failure policy. NOSCRIPT
// and a missing Functions library are answered as in DecideBatch: only the
// calls refused so are sent again (pipeline).

// maxPipeline is how many calls one pipeline carries at most: past a few
// hundred, Redis's saving per call is spent, and a longer pipeline only
// delays its first calls' answers.
const maxPipeline = 512

// pipes is a Limiter's queues, one per Redis node (per *health). The
// Limiters of With share them while they keep one decision timeout: a
// pipeline carries calls, not answers, and each call is settled by its own
// Limiter, but a pipeline goes under its sender's timeout.
type pipes struct {
	main  pipeQueue // the Limiter's node: every client but a Cluster
	mu    sync.Mutex
	nodes map[*health]*pipeQueue // a Cluster's primaries
	// ones are go-redis pipelines for calls sent alone, kept for the next:
	// a new one costs four allocations, and Exec leaves one empty.
	ones sync.Pool
}

type pipeQueue struct {
	mu    sync.Mutex
	busy  bool // a send is in flight
	queue []*pcall
}

// pcall is a call queued for the next pipeline. Its sender writes the
// answer, then closes done; only then does the caller read it.
type pcall struct {
	ctx   context.Context // the caller's: its values, not its end
	node  *health         // its node's breaker, told of a failure no waiting caller reports
	key   string          // its key as the breaker's log names it
	w     wire
	taken bool // taken into a pipeline (under the queue's lock)
	done  chan struct{}

	v       answer
	err     error
	carried int
}

func newPipes() *pipes {
	return &pipes{nodes: make(map[*health]*pipeQueue)}
}

// of is node's queue.
func (p *pipes) of(l *Limiter, node *health) *pipeQueue {
	if node == l.health || node == nil {
		return &p.main
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	q := p.nodes[node]
	if q == nil {
		if len(p.nodes) >= maxNodeQueues {
			clear(p.nodes) // nodes come and go over a Cluster's life: never a leak
		}
		q = new(pipeQueue)
		p.nodes[node] = q
	}
	return q
}

// maxNodeQueues bounds the queues of a Cluster's nodes kept.
const maxNodeQueues = 1024

// roundTrip sends o's script call, alone or in the node's next pipeline,
// and returns Redis's answer. ctx is the caller's; at the decision deadline
// of a call sent at once.
func (l *Limiter) roundTrip(ctx context.Context, o *op, keys []string, args []any, at time.Time) (answer, error) {
	p, _ := l.rdb.(pipeliner)
	if l.pipes == nil || p == nil {
		return l.alone(ctx, p, o, keys, args, at)
	}
	q := l.pipes.of(l, o.node)
	q.mu.Lock()
	if !q.busy {
		q.busy = true
		q.mu.Unlock()
		defer l.released(p, q) // deferred: a panic in a hook of the client does not wedge the queue
		return l.alone(ctx, p, o, keys, args, at)
	}
	c := &pcall{ctx: ctx, node: l.healthFor(o), key: o.key, w: wire{s: o.s, how: o.access, keys: append([]string(nil), keys...), args: args}, done: make(chan struct{})}
	q.queue = append(q.queue, c)
	q.mu.Unlock()
	select {
	case <-c.done:
	case <-ctx.Done():
		if !q.leave(c) {
			return answer{}, errLeftQueue
		}
	}
	o.carried = c.carried
	return c.v, c.err
}

// errLeftQueue is roundTrip's answer to a caller whose context ended
// while its call was queued or in flight in a pipeline: sendBy answers it
// with the context's error (callerGaveUp).
var errLeftQueue = errors.New("the caller left before its pipeline was answered")

// alone sends o's call by itself, under the decision deadline at. A
// client with pipelines (p not nil) gets it as a pipeline of one command
// (one), so that go-redis does not send it again after a network error:
// its MaxRetries resends a single command as it does a pipeline, and a
// decision Redis ran before the connection broke (a refund, say) would be
// made twice. A client without pipelines (a wrapper of the scripting
// commands alone) gets the command as it is, with its own retries.
func (l *Limiter) alone(ctx context.Context, p pipeliner, o *op, keys []string, args []any, at time.Time) (answer, error) {
	if p == nil {
		dctx, cancel, own := l.deadline(ctx, at)
		var v answer
		var err error
		if l.honoursCtx || dctx.Done() == nil {
			v, err = l.loader.run(dctx, o.s, o.access, keys, args)
		} else {
			v, err = l.detached(dctx, o.s, o.access, keys, args)
		}
		err = l.timedOut(ctx, dctx, own, err)
		cancel()
		return v, err
	}
	// One context both holds the decision deadline and is the one that
	// noRetry cancels (stop) after a network error: a second would cost a
	// decision a few allocations more.
	dctx, stop, own := l.deadline(ctx, at)
	if !own {
		dctx, stop = context.WithCancel(ctx)
	}
	var v answer
	var err error
	if l.honoursCtx || (!own && ctx.Done() == nil) {
		// On the caller's goroutine: the client returns at dctx's end. A
		// wire of its own, which stays on the stack with the caller's keys.
		w := wire{s: o.s, how: o.access, keys: keys, args: args}
		v, err = l.one(dctx, stop, p, &w)
	} else {
		// The send may outlive the call: keys stay the caller's.
		w := &wire{s: o.s, how: o.access, keys: append([]string(nil), keys...), args: args}
		v, err = l.oneAside(ctx, dctx, stop, p, w, at)
	}
	err = l.timedOut(ctx, dctx, own, err)
	stop()
	return v, err
}

// one sends w alone, step after step (FCALL or EVALSHA, then EVALSHA or
// EVAL as the loader's next says), each as a pipeline of one command under
// ctx, which stop cancels after a network error (noRetry): then nothing
// more is sent.
func (l *Limiter) one(ctx context.Context, stop context.CancelFunc, p pipeliner, w *wire) (answer, error) {
	st := l.loader.first(ctx, w.s)
	for {
		var pipe redis.Pipeliner
		if l.pipes != nil {
			pipe, _ = l.pipes.ones.Get().(redis.Pipeliner)
		}
		if pipe == nil {
			pipe = p.Pipeline()
		}
		cmd := l.loader.command(ctx, pipe, st, w.s, w.how, w.keys, w.args, stop)
		cmds, err := pipe.Exec(ctx)
		if l.pipes != nil && len(cmds) == 1 {
			l.pipes.ones.Put(pipe) // Exec emptied it
		}
		connErr(cmds, err)
		v, err := reply(cmd)
		if ctx.Err() != nil {
			return v, err
		}
		if st = l.loader.next(st, err); st == stepDone {
			return v, err
		}
	}
}

// oneAside is one on a sender (sender.go), for a client that does not stop
// at ctx's end: the caller returns at its context's end or the decision
// deadline at, whichever comes first, and the send finishes in the
// background.
func (l *Limiter) oneAside(ctx, dctx context.Context, stop context.CancelFunc, p pipeliner, w *wire, at time.Time) (answer, error) {
	type result struct {
		v   answer
		err error
	}
	done := make(chan result, 1) // the sender never blocks on it
	goSend(func() {
		v, err := l.one(dctx, stop, p, w)
		done <- result{v, err}
	})
	select {
	case r := <-done:
		return r.v, r.err
	case <-dctx.Done():
	}
	if dctx.Err() != context.Canceled || ctx.Err() != nil {
		return answer{}, dctx.Err() // the decision deadline or the caller's end
	}
	// stop cancelled dctx: a network error failed the send, which returns
	// at once (noRetry) with that error, the answer to give. The deadline
	// still bounds the wait.
	var deadline <-chan time.Time
	if !at.IsZero() {
		t := time.NewTimer(time.Until(at))
		defer t.Stop()
		deadline = t.C
	}
	select {
	case r := <-done:
		return r.v, r.err
	case <-ctx.Done():
		return answer{}, ctx.Err()
	case <-deadline:
		return answer{}, context.DeadlineExceeded
	}
}

// released ends a call sent alone on q: the calls queued meanwhile go
// as the next pipeline.
func (l *Limiter) released(p pipeliner, q *pipeQueue) {
	if batch := q.next(); batch != nil {
		go l.flush(p, q, batch)
	}
}

// next takes the calls queued on q, at most maxPipeline of them, whose
// callers still wait; when there are none, q's send in flight is over.
func (q *pipeQueue) next() []*pcall {
	q.mu.Lock()
	defer q.mu.Unlock()
	var batch []*pcall
	i := 0
	for ; i < len(q.queue) && len(batch) < maxPipeline; i++ {
		c := q.queue[i]
		c.taken = true
		if c.ctx.Err() == nil { // one whose caller left answers itself
			batch = append(batch, c)
		}
	}
	clear(q.queue[:i])
	q.queue = q.queue[i:]
	if len(q.queue) == 0 {
		q.queue = nil
	}
	if len(batch) == 0 {
		q.busy = false
		return nil
	}
	return batch
}

// leave takes c out of q for a caller that stops waiting, and reports
// whether it is answered (then the answer counts).
func (q *pipeQueue) leave(c *pcall) bool {
	q.mu.Lock()
	if !c.taken {
		for i, x := range q.queue {
			if x == c {
				q.queue = append(q.queue[:i], q.queue[i+1:]...)
				break
			}
		}
		q.mu.Unlock()
		return false
	}
	q.mu.Unlock()
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// flush sends batch, then the calls queued meanwhile, one pipeline after
// another, until none is left.
func (l *Limiter) flush(p pipeliner, q *pipeQueue, batch []*pcall) {
	for batch != nil {
		// The send ahead may have opened the breaker: its calls are
		// answered by it (sendBy), as a call that finds it open is.
		send := batch[:0:0]
		for _, c := range batch {
			if c.node.skip() {
				c.err = errBreakerOpen
			} else {
				send = append(send, c)
			}
		}
		if len(send) > 0 {
			l.sendPipeline(p, send)
		}
		for _, c := range batch {
			close(c.done)
		}
		batch = q.next()
	}
}

// errBreakerOpen is roundTrip's answer to a queued call whose breaker was
// open when its pipeline was to go: sendBy answers it as skipped.
var errBreakerOpen = errors.New("the circuit breaker opened while the call was queued")

// sendPipeline sends batch as one pipeline, under a decision deadline of
// its own counted from now, and writes each call's answer.
func (l *Limiter) sendPipeline(p pipeliner, batch []*pcall) {
	// The first caller's context, for its values (a trace's span): not for
	// its end, which is that caller's alone.
	ctx := context.WithoutCancel(batch[0].ctx)
	dctx, cancel, own := l.deadline(ctx, l.decisionDeadline())
	defer cancel()
	wires := make([]wire, len(batch))
	for i, c := range batch {
		wires[i] = c.w
	}
	cmds, err := within(l, dctx, func() []redis.Cmder { return l.pipeline(dctx, p, wires) })
	var orphaned *pcall // a call Redis failed whose caller has left
	for i, c := range batch {
		e := err
		if cmds != nil {
			c.v, e = reply(cmds[i])
		}
		c.err = l.timedOut(ctx, dctx, own, e)
		c.carried = len(batch)
		if orphaned == nil && c.err != nil && c.ctx.Err() != nil && classify(c.err) == ErrUnavailable {
			orphaned = c
		}
	}
	// A caller that waits reports its call's failure to the breaker as it
	// settles; one that left (its deadline shorter than the decision
	// timeout) never reads its answer. So that a Redis that fails only
	// such callers still opens the breaker, the pipeline reports it.
	if orphaned != nil {
		orphaned.node.failed(l, orphaned.err, orphaned.w.s.name, orphaned.key)
	}
}
