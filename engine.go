package redisrate

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// The engine: every call of a Limiter (Allow, AllowN, Decide, Wait, WaitN,
// Reset, and each request of DecideBatch) is one op (plan.go) that goes
// through the same stages, in this order, as golang.org/x/time/rate
// funnels everything through reserveN. The entry calls are here, and the
// stages they run, in this order, each a method of the Limiter over the
// parts it asks (the deny cache, the breaker's health, the failure policy),
// which stand in files of their own below it:
//
//	observer Start (run, DecideBatch in batch.go)
//	plan      validate the request and its keys, pick the script and the
//	          mode (plan.go)                                  ErrInvalid ends here
//	deny      answer from the deny cache (denyStage)          a hit ends here
//	send      build the ARGV (once per distinct call), send it alone,
//	          coalesced with the calls of a hot key (coalesce.go), or
//	          pipelined (pipe.go; sendBatch in batch.go) through the loader
//	          (FCALL, EVALSHA, EVAL); skipped while the circuit breaker is
//	          open (skipped; the breaker is breaker.go)
//	settle    decode the reply, classify an error, feed the deny cache
//	          and the breaker (settle)
//	failure   fallback, then failure policy, for ErrUnavailable only (fail),
//	          unless the caller's context ended (finish)
//	shadow    in shadow mode, a denial admitted (shadowStage)
//	probe     the probe the breaker asked for (startProbe)
//	observer End
//
// One attempt is deny..probe. A decision makes one; Wait (wait.go) makes
// attempts over one plan until one is admitted; DecideBatch runs each stage
// over all its ops before the next. Nothing here calls back up.

// Allow takes one unit from key under limit. An empty key is refused
// (ErrInvalid), by every call: it is almost always an identity not found,
// and would hold every caller without one to one shared limit.
func (l *Limiter) Allow(ctx context.Context, key string, limit Limit) (Result, error) {
	o := oneKey(KindAllow, key, limit, 1)
	return l.run(ctx, &o)
}

// AllowN takes n units from key under limit, n from 1. To read the state
// without taking anything, use Decide with KindPeek: an n of 0 is refused
// (ErrInvalid), so that a forgotten cost never means "do not limit".
func (l *Limiter) AllowN(ctx context.Context, key string, limit Limit, n int64) (Result, error) {
	o := oneKey(KindAllow, key, limit, n)
	return l.run(ctx, &o)
}

// Decide makes the decision r asks for, in one round trip (or a wait of
// several, for KindWait), and returns it. Every call of the Limiter is
// one: Allow(ctx, key, lim) is Decide(ctx, Request{Key: key, Limits:
// []Limit{lim}}).
//
// The kinds, with what the Result says:
//   - KindAllow: N units under every limit, all or nothing; Allowed
//     says whether they were taken, Units how many (N or 0).
//   - KindCheck: whether KindAllow would admit N units, recording nothing.
//   - KindPeek: the state, taking nothing: what remains, when it is full.
//   - KindUpTo: as many units as every limit admits now, at most N; Units
//     is how many were taken, Allowed whether any was.
//   - KindRefund: N units given back to every limit (what a reservation
//     did not use); Units is how many the binding limit took back.
//   - KindForce: N units recorded whatever the limits say, up to a debt of
//     one capacity (what already happened: a penalty, tokens a reply
//     used); Allowed says whether KindAllow would have admitted them.
//   - KindWait: KindAllow, waited for as WaitN waits.
//
// KindUpTo, KindRefund and KindForce need the scripts of contract v3.
// The Result describes the binding limit (Result.Binding; with several
// keys, Result.Key is its key).
func (l *Limiter) Decide(ctx context.Context, r Request) (Result, error) {
	var o op
	o.shape(&r)
	return l.run(ctx, &o)
}

// Reset deletes the state kept under key, so that its next request finds
// every limit at full capacity, and forgets the key's cached denials. A
// key that holds anything but redisrate state is left untouched, and the
// error matches ErrForeignKey. Resetting a key that does not exist is not
// an error. When Redis cannot be reached the error matches ErrUnavailable
// whatever the failure policy: nothing else can reset Redis's state.
func (l *Limiter) Reset(ctx context.Context, key string) error {
	_, err := l.run(ctx, &op{kind: kindReset, ukey: key})
	return err
}

// run is the one path of every call but a batch, top to bottom, for o as
// asked (its kind, key or keys, limits, cost): the observer's Start, plan
// (plan.go) and one attempt (attempt, below), or Wait's loop of attempts
// over its plan (wait.go), and the observer's End.
func (l *Limiter) run(ctx context.Context, o *op) (Result, error) {
	if l == nil || l.rdb == nil || l.life.isClosed() {
		return Result{}, l.noClientErr()
	}
	asked := o.kind
	if asked == KindWait {
		o.kind = KindAllow // each attempt of a wait is an allow
	}
	// The decision is a variable of its own, not a field of o: what the
	// observer is handed escapes, and o (with the caller's limits) must not.
	dec := o.decision(asked)
	ctx = l.observeStart(ctx, &dec, o.lims())
	switch {
	case asked == KindWait:
		o.res, o.err = l.wait(ctx, o)
	case l.plan(o):
		l.attempt(ctx, o)
	}
	dec.Carried = o.carried
	l.observeEnd(ctx, &dec, o.res, o.err)
	return o.res, o.err
}

// attempt is the stages after plan, for one op: deny, send, settle, failure.
func (l *Limiter) attempt(ctx context.Context, o *op) {
	o.res, o.err, o.carried = Result{}, nil, 0
	if !l.denyStage(o) {
		l.send(ctx, o)
	}
	l.finish(ctx, o)
}

// denyStage is the engine's deny-cache stage, before the send: true when
// the cache answered o (o.res, Source SourceDenyCache). A Reset forgets
// the key instead.
func (l *Limiter) denyStage(o *op) bool {
	if l.deny == nil {
		return false
	}
	switch o.kind {
	case kindReset:
		l.deny.forget(o.key)
		return false
	case KindAllow, KindCheck:
	default:
		// A peek is always admitted; up-to's denial waits for one unit,
		// not for the cost; refund and force always record.
		return false
	}
	// A cost above a capacity is never cached (RetryAfter infDuration): it
	// goes to Redis, which says so.
	id, several := o.denyIdentity()
	res, hit := l.deny.lookup(id, several, o.cost, o.lims(), l.deny.now())
	if hit {
		o.res = res
	}
	return hit
}

// denyIdentity is what the deny cache knows o by: its key, or, for a call
// of several keys, all of them (denyID), which no one key can equal.
func (o *op) denyIdentity() (id string, several bool) {
	if o.keys == nil {
		return o.key, false
	}
	return o.denyID, true
}

// send asks Redis, unless the circuit breaker is open (then o.err matches
// ErrUnavailable at once), and settles the reply, within the decision
// timeout from now. A one-key allow goes through coalescing (coalesce.go):
// alone when nothing of its identity is in flight, else in the next group.
func (l *Limiter) send(ctx context.Context, o *op) {
	if l.hot != nil && coalescable(o) {
		l.sendHot(ctx, o)
		return
	}
	l.sendBy(ctx, o, l.decisionDeadline())
}

// sendBy is send with the decision deadline at (see decisionDeadline): the
// requests of a DecideBatch sent one by one share the batch's.
func (l *Limiter) sendBy(ctx context.Context, o *op, at time.Time) {
	if err := ctx.Err(); err != nil {
		o.err = callerGaveUp(o, err, nil) // nobody waits for the answer: do not ask
		return
	}
	if o.node = l.healthOf(o.key); o.node.skip() {
		l.skipped(o)
		return
	}
	o.sent, o.resets = l.sentAt()
	var one [1]string
	keys, args := o.sentKeys(&one), o.argv()
	o.carried = 1
	v, err := l.roundTrip(ctx, o, keys, args, at)
	switch err {
	case errLeftQueue:
		o.carried = 0 // it left before a round trip answered it
		o.err = callerGaveUp(o, ctx.Err(), nil)
		return
	case errBreakerOpen:
		o.carried = 0 // no round trip decided it
		l.skipped(o)
		return
	}
	l.settle(ctx, o, v, err)
}

// sentAt is the time a call is sent, for the deny cache: taken before the
// request goes to Redis, so that a cached denial never outlasts the one
// Redis gave; and the cache's count of Resets then, so that a denial sent
// before a Reset is not stored after it. Zero without a deny cache.
func (l *Limiter) sentAt() (time.Time, uint64) {
	if l.deny == nil {
		return time.Time{}, 0
	}
	return l.deny.now(), l.deny.resetCount()
}

// healthOf returns the health that answers for a call on key: on a
// Cluster, its primary's (by address), once go-redis knows the slots;
// otherwise the Limiter's.
func (l *Limiter) healthOf(key string) *health {
	if c, ok := l.rdb.(*redis.ClusterClient); ok {
		if m, err := c.MasterForKey(noIO, key); err == nil {
			return l.health.of(m.Options().Addr)
		}
	}
	return l.health
}

// healthFor is the health of a sent op (see healthOf), or the Limiter's.
func (l *Limiter) healthFor(o *op) *health {
	if o.node != nil {
		return o.node
	}
	return l.health
}

// toSend sets the health of each of a batch's ops, answers those whose
// breaker is open (skipped), and returns the others, reusing ops.
func (l *Limiter) toSend(ops []*op) []*op {
	send := ops[:0]
	for _, o := range ops {
		if o.node = l.healthOf(o.key); o.node.skip() {
			l.skipped(o)
		} else {
			send = append(send, o)
		}
	}
	return send
}

// skipped answers an op the breaker kept from Redis, and marks it to start
// a probe if one is due.
func (l *Limiter) skipped(o *op) {
	h := l.healthFor(o)
	o.err = &Error{Script: o.s.name, Key: o.key, Err: h.openErr(), kind: ErrUnavailable}
	o.probe = h.probeDue()
}

// settle decodes a reply into o.res, or classifies the error into o.err,
// and feeds the deny cache and the breaker. ctx is the context the call was
// sent with: when it ended before Redis answered, the failure is the
// caller's (finish returns the context's error), and the breaker is not
// told; a probe is started instead (suspect), which tells it whether Redis
// answers within the decision timeout.
func (l *Limiter) settle(ctx context.Context, o *op, v answer, err error) {
	h := l.healthFor(o)
	if err == nil {
		if o.kind == kindReset {
			l.denyReset(o)
			h.succeeded(l)
			return
		}
		var res Result
		if res, err = o.decode(v); err == nil {
			o.res = l.calendarResult(res)
			l.denyStore(o)
			h.succeeded(l)
			return
		}
	}
	kind := classify(err)
	if kind == ErrUnavailable && ended(ctx) == nil {
		err = h.explained(err) // "connection refused", not a timeout, once a dial found it
	}
	o.err = o.failed(err, kind)
	switch {
	case kind == ErrMisconfigured:
		h.misconfigured(l, err, o.s.name, o.key) // Redis answered: not an outage, but loud
	case kind != ErrUnavailable:
		h.succeeded(l) // Redis answered: the caller's mistake, not an outage
	case ended(ctx) != nil:
		o.probe = h.suspect()
	case !errors.Is(err, ErrBadReply) && !errors.Is(err, context.Canceled) && !ownerClosed(ctx, err):
		// The cause every other caller is answered with while the breaker
		// is open is Redis's own error, without this call's key.
		h.failed(l, err, o.s.name, o.key)
	}
}

// decode reads the reply to o: the contract's six integers, and the
// seventh, units, that v3 scripts append. Later contract versions may
// append more, which are ignored.
func (o *op) decode(a answer) (Result, error) {
	limits := o.lims()
	var n [7]int64
	got := 0
	switch arr := a.other.(type) {
	case nil: // as the loader reads an algorithm's reply
		if len(a.ints) < 6 {
			return Result{}, fmt.Errorf("%w: want an array of 6 or 7 integers, got %v", ErrBadReply, a.ints)
		}
		got = copy(n[:], a.ints)
	case []any:
		if len(arr) < 6 {
			return Result{}, fmt.Errorf("%w: want an array of 6 or 7 integers, got %T %v", ErrBadReply, arr, arr)
		}
		for got < len(n) && got < len(arr) {
			x, ok := arr[got].(int64)
			if !ok {
				return Result{}, fmt.Errorf("%w: field %d is %T, not an integer", ErrBadReply, got+1, arr[got])
			}
			n[got] = x
			got++
		}
	default:
		return Result{}, fmt.Errorf("%w: want an array of 6 or 7 integers, got %T %v", ErrBadReply, arr, arr)
	}
	if n[5] < 1 || n[5] > int64(len(limits)) {
		return Result{}, fmt.Errorf("%w: binding limit %d out of range 1..%d", ErrBadReply, n[5], len(limits))
	}
	r := Result{
		Allowed:    n[0] == 1,
		Remaining:  n[1],
		RetryAfter: msDuration(n[2]),
		ResetAfter: msDuration(n[3]),
		Capacity:   n[4],
		Binding:    int(n[5]) - 1,
		Units:      n[6],
	}
	if got < 7 && r.Allowed {
		// A script before v3 has no field 7; it knows only allow, check
		// and peek, whose units are the cost when admitted.
		r.Units = o.cost
	}
	r.Limit = limits[r.Binding]
	return r, nil
}

// calendarResult is r, decoded from a reply under limits, as the caller
// is answered when its binding limit's key is a calendar window's: the
// waits end at that window's end on the Limiter's clock, when the next
// window's key starts empty, and the limit is the caller's. The script's
// own waits run to the end of its longer period.
func (l *Limiter) calendarResult(r Result) Result {
	end := r.Limit.calEnd
	if end == 0 {
		return r
	}
	now := l.clock.Now()
	left := ceilMs(time.UnixMilli(end).Sub(now))
	if left < time.Millisecond {
		left = time.Millisecond // decided as the window ended: retry in the next
	}
	if r.RetryAfter > 0 && r.RetryAfter != infDuration {
		r.RetryAfter = min(r.RetryAfter, left)
	}
	if r.ResetAfter > 0 {
		r.ResetAfter = min(r.ResetAfter, left)
		if r.RetryAfter != infDuration {
			r.ResetAfter = max(r.ResetAfter, r.RetryAfter)
		}
	}
	if r.Limit.Calendar != "" {
		r.Limit.Period = 0
	}
	r.Limit.calEnd = 0
	return r
}

// denyStore remembers o's result if it is a denial that a wait can end,
// and forgets the key's denials when o took or gave back units.
func (l *Limiter) denyStore(o *op) {
	if l.deny == nil || o.sent.IsZero() || o.kind == KindUpTo && o.res.Units == 0 && !o.res.Allowed {
		return // an up-to that took nothing wrote nothing (its denial is a coalesced group's to store)
	}
	// Units taken make the key's cached waits too short, units given back
	// too long: either way they go, and so does a denial sent before.
	// Up-to's, refund's and force's own answers are never stored (see
	// denyStage): they are not allow's.
	moved := o.kind == KindUpTo || o.kind == KindRefund || o.kind == KindForce
	if o.res.Allowed || moved {
		if o.kind.writes() {
			now := l.deny.now()
			var one [1]string
			for _, k := range o.sentKeys(&one) {
				l.deny.took(k, now)
			}
		}
		return
	}
	if o.res.RetryAfter <= 0 || o.res.RetryAfter == infDuration {
		return
	}
	if o.access == accessReplica {
		// A replica may lag this Limiter's own Resets and takes, which
		// the cache is kept true to: its denial is not kept.
		return
	}
	id, several := o.denyIdentity()
	l.deny.store(id, several, o.keys, o.cost, o.lims(), o.res, o.sent, o.resets)
}

// denyReset forgets o's key once its Reset has succeeded: a denial stored
// while the Reset was on its way is older than the Reset.
func (l *Limiter) denyReset(o *op) {
	if l.deny != nil {
		l.deny.forget(o.key)
	}
}

// sentKeys are the keys o is sent with: its keys, or its one key in one,
// which the caller keeps on its stack so that a one-key call allocates
// nothing for them.
func (o *op) sentKeys(one *[1]string) []string {
	if o.keys != nil {
		return o.keys
	}
	one[0] = o.key
	return one[:]
}

// bindingKey is the caller's key that the binding limit of o's Result
// guards: o's key for a one-key call.
func (o *op) bindingKey() string {
	if b := o.res.Binding; b >= 0 && b < len(o.ukeys) {
		return o.ukeys[b]
	}
	return o.ukey
}

// failed is o's *Error for a call that failed with err, classified kind.
// An error about a key's value names it (Error.Key): with several keys,
// the key at the position the script's words give ("ERR key #2 holds
// ..."). CROSSSLOT, Redis Cluster's refusal of keys of different slots,
// says how to make them share one.
func (o *op) failed(err, kind error) *Error {
	e := &Error{Script: o.s.name, Key: o.key, Err: err, kind: kind}
	if i := foreignKeyIndex(err.Error()); i >= 1 && i <= len(o.keys) {
		e.Key = o.keys[i-1]
	}
	if strings.HasPrefix(err.Error(), "CROSSSLOT") {
		e.Err = fmt.Errorf("keys %q: the keys of one call must hash to one Redis Cluster slot: give them a common hash tag, "+
			"e.g. {org:7}:user:42 and {org:7} (and a key prefix must hold no '{'): %w", o.keys, err)
	}
	return e
}

// foreignKeyIndex is the position a script's error about the value of a
// key of several names ("ERR key #2 holds ..."), or 0.
func foreignKeyIndex(msg string) int {
	if !foreignKeyAt(msg) {
		return 0
	}
	rest := strings.TrimPrefix(msg, "ERR key #")
	i, err := strconv.Atoi(rest[:strings.IndexByte(rest, ' ')])
	if err != nil {
		return 0
	}
	return i
}

// finish is the stages after the send, for every op: the failure stage
// for an op Redis could not decide, unless its caller gave up meanwhile:
// then the context's error, or in shadow mode the policy's answer (an
// admission is what the call gets anyway, so a deadline buys nothing, and
// shadow mode fails no call for the limiter's sake). Then the probe the
// breaker asked the op to start.
func (l *Limiter) finish(ctx context.Context, o *op) {
	if e, ok := o.err.(*Error); ok && e.unavailable() {
		if err := ended(ctx); err != nil {
			o.err = callerGaveUp(o, err, e.Err)
		} else {
			l.fail(ctx, o, e)
		}
	}
	if e, ok := o.err.(*Error); ok && e.kind == nil && l.shadow && o.kind != kindReset {
		l.answerByPolicy(o, e) // an *Error of no class is callerGaveUp's
	}
	if o.err == nil {
		o.res.Key = o.bindingKey()
		if o.kind == KindPeek {
			o.res.peek = true
		}
	}
	l.shadowStage(o)
	l.startProbe(o)
}

// ended returns the error of a context that is done, or whose deadline has
// passed although its timer has not fired yet: a socket deadline set to the
// context's (go-redis's ContextTimeoutEnabled) can fire first, and the
// failure it causes is still the context's.
func ended(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		return context.DeadlineExceeded
	}
	return nil
}

// callerGaveUp is the error of an op whose caller's context was cancelled
// or passed its deadline before Redis decided: the context's error, which
// is not a Redis failure. No failure policy or fallback answers it, and
// the breaker does not count it: otherwise any caller could switch the
// limit off (FailOpen) or open the breaker for every other caller, with a
// deadline in the past.
func callerGaveUp(o *op, ctxErr, cause error) *Error {
	err := fmt.Errorf("%w before Redis decided", ctxErr)
	if cause != nil && !errors.Is(cause, ctxErr) {
		err = fmt.Errorf("%w before Redis decided (%v)", ctxErr, cause)
	}
	return &Error{Script: o.s.name, Key: o.key, Err: err}
}

// fail is the failure stage: o failed with e, which matches
// ErrUnavailable. The fallback decides, or else the policy.
func (l *Limiter) fail(ctx context.Context, o *op, e *Error) {
	if o.kind == kindReset {
		l.healthFor(o).errors.Add(1)
		return // nothing else can reset Redis's state
	}
	if fb := l.fallback; fb != nil && fb != l && ctx.Value(inFallback{}) == nil {
		res, err := fb.run(context.WithValue(ctx, inFallback{}, true), o.attemptOp())
		if cerr := ended(ctx); err != nil && cerr != nil {
			o.err = callerGaveUp(o, cerr, e.Err) // the caller gave up while the fallback decided
			return
		}
		if err == nil {
			if res.Degraded() {
				res.Cause = errors.Join(e, res.Cause) // the fallback's own policy decided: both failures matter
			} else {
				res.Source, res.Cause = SourceFallback, e
			}
			o.res, o.err = res, nil
			l.healthFor(o).degraded.Add(1)
			return
		}
		// The fallback's error is told, not wrapped: the call failed as Redis
		// failed it (ErrUnavailable), not as the fallback did (its breaker, a
		// foreign key in its own Redis).
		e = &Error{Script: e.Script, Key: e.Key, Err: fmt.Errorf("%w (and the fallback failed: %v)", e.Err, err), kind: e.kind}
		o.err = e
	}
	l.answerByPolicy(o, e)
}

// answerByPolicy is the failure policy's answer to o, which Redis did not
// decide (e): a Result and no error, or, under FailError, o.err as it is.
func (l *Limiter) answerByPolicy(o *op, e *Error) {
	h := l.healthFor(o)
	lim := o.limits[0]
	policy := l.policy
	if l.shadow && policy != FailOpen {
		policy = FailClosed // then admitted by the shadow stage, as a denial it would have been
	}
	switch policy {
	case FailClosed:
		o.res = Result{RetryAfter: h.retryAfter(), Capacity: lim.Capacity(), Limit: lim, Source: SourceFailClosed, Cause: e}
	case FailOpen:
		o.res = Result{Allowed: true, Capacity: lim.Capacity(), Limit: lim, Source: SourceFailOpen, Cause: e}
	default:
		h.errors.Add(1)
		return
	}
	o.err = nil
	h.degraded.Add(1)
}

// shadowStage is the engine's last stage in shadow mode: a denial becomes
// an admission that says it would have been denied.
func (l *Limiter) shadowStage(o *op) {
	if !l.shadow || o.err != nil || o.kind == kindReset {
		return
	}
	o.res.Shadow = true
	if !o.res.Allowed {
		o.res.Allowed, o.res.WouldDeny = true, true
	}
}

// startProbe starts the probe the breaker asked o for (see skipped), once
// o's own answer is settled, so that the probe's report of a burst counts
// it.
func (l *Limiter) startProbe(o *op) {
	if o.probe {
		o.probe = false
		go l.probe(l.healthFor(o), o.key)
	}
}

// probe asks Redis, in the background, whether it answers: a cost-0 read
// of key, which writes nothing, for h (key's node). Any answer closes the
// breaker, even an error reply (a foreign key): Redis is up. No answer
// within the probe's deadline opens it (a probe of suspect), and makes the
// next probe's deadline longer.
func (l *Limiter) probe(h *health, key string) {
	defer h.probes.Done()
	// A probe waits as long as a call would, at first: a Redis that
	// answers only after the decision timeout would fail the calls again.
	// A client that does not stop at its context's deadline is left to
	// finish in the background (detached), as a call's is.
	base := probeTimeout
	if l.timeout > 0 {
		base = l.timeout
	}
	h.mu.Lock()
	wait := max(h.probeWait, base)
	h.mu.Unlock()
	ctx, cancel := l.background(wait) // ended by Close
	defer cancel()
	args, _ := buildArgs(0, "", []Limit{PerSecond(1)})
	_, err := l.detached(ctx, &algoScripts[GCRA], accessRead, []string{key}, args)
	timedOut := err != nil && !isRedisError(err) && ended(ctx) != nil
	h.mu.Lock()
	h.probing = false
	if timedOut {
		err = &timeoutError{after: wait, err: err, probe: true}
		h.probeWait = nextProbeWait(wait, base)
	}
	h.mu.Unlock()
	if err == nil || classify(err) != ErrUnavailable {
		h.succeeded(l)
	} else if !errors.Is(err, ErrBadReply) {
		h.failed(l, err, algoScripts[GCRA].name, key)
	}
}
