package redisrate

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The engine: every call of a Limiter (Allow, AllowN, Decide, Wait, WaitN,
// Reset, and each request of DecideBatch) is one op (plan.go) that goes
// through the same stages, in this order, as golang.org/x/time/rate
// funnels everything through reserveN. The entry calls are here, beside
// the stages they run:
//
//	observer Start (run, DecideBatch in batch.go)
//	plan      validate the request and its keys, pick the script and the
//	          mode (plan.go)                                  ErrInvalid ends here
//	deny      answer from the deny cache (denycache.go)       a hit ends here
//	send      build the ARGV (once per distinct call), send it alone,
//	          coalesced with the calls of a hot key (coalesce.go), or
//	          pipelined for DecideBatch (send, sendBatch in batch.go) through
//	          the loader (FCALL, EVALSHA, EVAL); skipped while the circuit
//	          breaker is open (breaker.go)
//	settle    decode the reply, classify an error, feed the deny cache
//	          and the breaker (settle)
//	failure   fallback, then failure policy, for ErrUnavailable only (fail),
//	          unless the caller's context ended (finish)
//	shadow    in shadow mode, a denial admitted (shadowStage)
//	observer End
//
// One attempt is deny..shadow. A decision makes one; Wait (wait.go) makes
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

// startProbe starts the probe the breaker asked o for (see skipped), once
// o's own answer is settled, so that the probe's report of a burst counts
// it.
func (l *Limiter) startProbe(o *op) {
	if o.probe {
		o.probe = false
		go l.probe(l.healthFor(o), o.key)
	}
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
	if err == errLeftQueue {
		o.err = callerGaveUp(o, ctx.Err(), nil)
		return
	}
	l.settle(ctx, o, v, err)
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
