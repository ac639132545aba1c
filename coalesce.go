package redisrate

import (
	"context"
	"hash/maphash"
	"sync"
	"time"
)

// Coalescing, a part of the send stage: concurrent one-key allows of this
// process for the same key, limits and cost are decided in one script call
// (contract v3's upto) while another of theirs is in flight.

// WithCoalescing turns the coalescing and pipelining of concurrent calls
// on (the default) or off.
//
// Pipelining: a call of any kind that finds no other call to its Redis
// node in flight in this Limiter (and the Limiters of With) goes at once,
// alone, as without it: it waits for nothing. One that finds a call in
// flight queues; when that returns, the calls queued meanwhile go in one
// pipeline, each its own script call, decided exactly as alone (on a
// Cluster, one pipeline per primary). Redis then spends about half the CPU
// per decision, and many callers on many keys get about twice the
// decisions per second (BENCHMARKS.md). No call is sent twice: a pipeline
// the network breaks is not sent again, and its calls Redis did not
// answer get the failure policy's answer. A queued call waits for the
// send in flight (at most its decision timeout) and then for its own
// pipeline, which has a decision timeout of its own from when it is sent:
// a Redis that answers each round trip within the decision timeout decides
// every call. A queued caller whose context ends returns at once.
//
// Coalescing: a one-key allow (Allow, AllowN, each attempt of Wait and
// WaitN, and Decide's KindAllow on one key) that finds no call of its key,
// limits and cost in flight in this Limiter goes as above. One that finds
// such a call in flight queues behind it; when that call returns, the m
// calls queued meanwhile (cost c each) go as one script call that takes up
// to m*c units (mode upto), and the grant is shared in arrival order: the
// first floor(g/c) are admitted, the others denied. Each is decided as it
// would be by a call of its own at that script call's time, in arrival
// order:
//   - an admitted call's Remaining is what was left right after its own
//     units (those of the calls after it in the group still there); its
//     ResetAfter is the key's after the whole group;
//   - a denied call gets the denial a call of cost c would get: the upto's
//     own when it granted nothing and c is 1, or else that of one more
//     check of cost c, sent after the grant (when the key refilled
//     meanwhile, RetryAfter is 1 ms: the check saw room); its Remaining
//     is always less than c;
//   - units a group took but could not use (a grant that is not a
//     multiple of c) are given back by one refund before that check.
//
// A queued call whose context ends leaves the queue, taking nothing. A
// group's calls run under no caller's context; each round trip of a group
// (the upto, the refund, the check) has its own decision deadline, from
// when it is sent, so a queued call waits for the call ahead of it and
// then for at most three round trips, each bounded by the decision
// timeout. When Redis
// cannot decide the call in flight, the breaker answers the group at once
// (see WithCircuitBreaker). When Redis cannot decide a group, each caller
// gets what a call of its own would get (the fallback, the failure
// policy), and the breaker hears of the failure once. An Observer sees
// how many decisions each round trip carried (Decision.Carried).
//
// A hot key (one shared quota that a whole fleet calls) costs Redis one
// script call per group instead of one per call: decisions per second grow
// with the callers, where Redis alone tops out at one script call at a
// time. Calls of several keys or limits that differ, other costs, and
// costs above a limit's capacity (never admitted) are not coalesced; they
// are pipelined.
func WithCoalescing(on bool) Option {
	return func(l *Limiter) {
		l.hot, l.pipes = nil, nil
		if on {
			l.hot, l.pipes = newHotKeys(), newPipes()
		}
	}
}

// hotShards is how many locks the keys in flight are spread over.
const hotShards = 32

// hotKeys is a Limiter's calls in flight, by prefixed key.
type hotKeys struct {
	seed   maphash.Seed
	shards [hotShards]hotShard
	pool   sync.Pool // of *flight: a call alone allocates none
}

type hotShard struct {
	mu sync.Mutex
	// inFlight holds a key while a call or a group of it is in flight. (A
	// map by key and not by identity: Go allocates every key of more than
	// 128 bytes on insertion, and this one is inserted by every call.)
	inFlight map[string]*flight
}

// flight is the identity of the calls in flight on a key (the deny
// cache's: the prefixed key, the limits, names too, and the cost), and
// the calls of that identity queued behind them, in arrival order. A call
// of another identity finds the key taken: it goes alone, uncoalesced.
type flight struct {
	id    denyKey
	queue []*waiter
}

func newHotKeys() *hotKeys {
	h := &hotKeys{seed: maphash.MakeSeed()}
	h.pool.New = func() any { return new(flight) }
	for i := range h.shards {
		h.shards[i].inFlight = make(map[string]*flight)
	}
	return h
}

func (h *hotKeys) shard(key string) *hotShard {
	return &h.shards[maphash.String(h.seed, key)%hotShards]
}

// waiter is a call queued behind one in flight. The group that decides it
// writes its answer, then closes done; only then does the caller read it.
type waiter struct {
	ctx   context.Context
	taken bool // taken into a group (under the shard's lock)
	done  chan struct{}

	res     Result
	err     error
	node    *health
	probe   bool
	carried int
}

// coalescable reports whether o may be decided with others of its
// identity: a one-key allow whose cost every limit can admit.
func coalescable(o *op) bool {
	if o.kind != KindAllow || o.keys != nil {
		return false
	}
	for _, lim := range o.lims() {
		if o.cost > lim.Capacity() {
			return false
		}
	}
	return true
}

// sendHot is the send stage of a coalescable op: alone when nothing of its
// key is in flight (or only calls of another identity), otherwise queued
// for the next group.
func (l *Limiter) sendHot(ctx context.Context, o *op) {
	id, _ := makeDenyKey(o.key, false, o.cost, o.lims())
	sh := l.hot.shard(o.key)
	sh.mu.Lock()
	f := sh.inFlight[o.key]
	if f == nil || f.id != id {
		var mine *flight
		if f == nil {
			mine = l.hot.pool.Get().(*flight)
			mine.id = id
			sh.inFlight[o.key] = mine
		}
		sh.mu.Unlock()
		l.sendBy(ctx, o, l.decisionDeadline())
		if mine != nil && l.hot.release(sh, mine) {
			go l.drain(sh, mine)
		}
		return
	}
	w := &waiter{ctx: ctx, done: make(chan struct{})}
	f.queue = append(f.queue, w)
	sh.mu.Unlock()
	// No timer of its own: the call in flight ahead of it returns by its
	// decision deadline, and each round trip of its group has one of its
	// own, counted from when it is sent. A Redis that answers each round
	// trip within the decision timeout decides every queued call; one that
	// does not fails that round trip, and the breaker answers the rest.
	select {
	case <-w.done:
	case <-ctx.Done():
		if !l.leftQueue(sh, f, w) {
			o.err = callerGaveUp(o, ctx.Err(), nil)
			return
		}
	}
	o.res, o.err, o.node, o.probe, o.carried = w.res, w.err, w.node, w.probe, w.carried
}

// leftQueue takes w out of f's queue for a caller that stops waiting, and
// reports whether its answer came meanwhile (then it counts).
func (l *Limiter) leftQueue(sh *hotShard, f *flight, w *waiter) bool {
	sh.leave(f, w)
	select {
	case <-w.done:
		return true
	default:
		return false
	}
}

// release ends the lone call of f: true when calls queued behind it are
// left for a group (f stays in flight), false when none were (f is gone).
func (h *hotKeys) release(sh *hotShard, f *flight) bool {
	sh.mu.Lock()
	if len(f.queue) > 0 {
		sh.mu.Unlock()
		return true
	}
	delete(sh.inFlight, f.id.key)
	sh.mu.Unlock()
	h.put(f)
	return false
}

// put gives f, no longer in flight, back to the pool.
func (h *hotKeys) put(f *flight) {
	f.id.key = ""
	clear(f.id.limits[:]) // no names kept alive
	f.queue = nil
	h.pool.Put(f)
}

// leave takes w out of f's queue, if no group has taken it yet.
func (sh *hotShard) leave(f *flight, w *waiter) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if w.taken {
		return
	}
	for i, x := range f.queue {
		if x == w {
			f.queue = append(f.queue[:i], f.queue[i+1:]...)
			return
		}
	}
}

// next takes the calls queued on f, at most max of them, whose contexts
// have not ended; when there are none, f is no longer in flight.
func (sh *hotShard) next(f *flight, max int) []*waiter {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	var group []*waiter
	i := 0
	for ; i < len(f.queue) && len(group) < max; i++ {
		f.queue[i].taken = true
		if f.queue[i].ctx.Err() == nil { // an ended one answers itself
			group = append(group, f.queue[i])
		}
	}
	if len(group) == 0 {
		delete(sh.inFlight, f.id.key)
		return nil
	}
	f.queue = append([]*waiter(nil), f.queue[i:]...) // group keeps its own
	return group
}

// drain decides the groups queued on f, one after another, until none is
// left.
func (l *Limiter) drain(sh *hotShard, f *flight) {
	// No group asks for more than a cost's maximum in all.
	most := int(min(maxNumber/f.id.cost, 1<<20))
	for {
		group := sh.next(f, most)
		if group == nil {
			l.hot.put(f)
			return
		}
		l.decideGroup(f.id, group)
		for _, w := range group {
			close(w.done)
		}
	}
}

// decideGroup decides the calls of group, of identity id, in one upto
// (alone, a call of its own), then the refund of the units it cannot use
// and the check that gives the denied ones their wait, as needed.
// Each round trip has a decision deadline of its own, from when it is
// sent: a group is decided whenever Redis answers each within the decision
// timeout.
func (l *Limiter) decideGroup(id denyKey, group []*waiter) {
	c, m := id.cost, int64(len(group))
	// The first caller's context, for its values (a trace's span): not
	// for its end, which is that caller's alone.
	ctx := context.WithoutCancel(group[0].ctx)
	kind := KindUpTo
	if m == 1 {
		kind = KindAllow
	}
	g := l.groupOp(id, kind, m*c)
	l.sendBy(ctx, g, l.decisionDeadline())
	for _, w := range group {
		w.node = g.node
		if g.carried > 0 { // it reached Redis: it carried them all
			w.carried = int(m)
		}
	}
	if g.err != nil {
		answerAll(group, g)
		return
	}
	if kind == KindAllow {
		group[0].res = g.res
		return
	}
	granted := g.res.Units
	admitted := min(granted/c, m)
	if rest := granted - admitted*c; rest > 0 {
		// Before the check, which then sees the key as the calls alone
		// would have left it; failed, the units stay taken, as an
		// unsettled reservation's (which can only deny more).
		l.sendBy(ctx, l.groupOp(id, KindRefund, rest), l.decisionDeadline())
	}
	for i := int64(0); i < admitted; i++ {
		res := g.res
		res.Units, res.RetryAfter = c, 0
		res.Remaining = min(g.res.Remaining+granted-(i+1)*c, res.Capacity)
		group[i].res = res
	}
	if admitted < m {
		denial := l.groupDenial(ctx, id, g)
		for _, w := range group[admitted:] {
			w.res = denial
		}
	}
}

// groupOp is one script call of a group of identity id.
func (l *Limiter) groupOp(id denyKey, kind Kind, cost int64) *op {
	access := accessWrite
	if kind == KindCheck {
		access = accessRead // the primary, which has just seen the grant
	}
	return &op{kind: kind, key: id.key, cost: cost, s: &algoScripts[id.limits[0].Algorithm], access: access, limits: id.limits, nlimits: id.count}
}

// groupDenial is the answer of a group's denied calls, after the upto g:
// its own denial when it granted nothing and the cost is 1 (the denial of
// one unit), or else that of a check of the cost. When the check fails,
// the key's ResetAfter as of the upto is the wait: Redis denied them, and
// the key is full then.
//
// A denial never reports the cost's units left (issue 38): a call of its
// own denied at the upto's time saw fewer, and one at the check's time
// that found the key refilled is told to come back at once (1 ms) with
// what the upto left, which is less than the cost.
func (l *Limiter) groupDenial(ctx context.Context, id denyKey, g *op) Result {
	limits := id.limits[:id.count]
	if g.res.Units == 0 && id.cost == 1 {
		if l.deny != nil && !g.sent.IsZero() {
			l.deny.store(id.key, false, nil, 1, limits, g.res, g.sent, g.resets)
		}
		return g.res
	}
	chk := l.groupOp(id, KindCheck, id.cost)
	l.sendBy(ctx, chk, l.decisionDeadline())
	res := chk.res
	switch {
	case chk.err != nil:
		res = g.res
		res.RetryAfter = max(g.res.ResetAfter, time.Millisecond)
	case res.Allowed:
		res.RetryAfter = time.Millisecond // the key refilled since the upto
		res.Remaining = g.res.Remaining
	}
	res.Allowed, res.Units = false, 0
	res.Remaining = max(min(res.Remaining, id.cost-1), 0)
	return res
}

// answerAll gives every caller of group the failure of its group's call
// g: each answers it as its own (fallback, failure policy); the breaker
// has heard of it once, and one caller starts the probe it asked for.
func answerAll(group []*waiter, g *op) {
	e, _ := g.err.(*Error)
	for i, w := range group {
		w.err = g.err
		if e != nil {
			cp := *e
			w.err = &cp
		}
		w.probe = i == 0 && g.probe
	}
}
