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
// Reset, and each request of DecideBatch) is one op that goes through the
// same stages, in this order, as golang.org/x/time/rate funnels everything
// through reserveN:
//
//	observer Start (run in limiter.go, DecideBatch in batch.go)
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

// op is one call to a script as it moves through the stages.
type op struct {
	dec     Decision        // what the observer is told, for the ops of a batch (single calls keep theirs apart)
	ctx     context.Context // the observer's context for this op (batches)
	kind    Kind            // what each attempt does: a request's Kind, but KindAllow for KindWait
	ukey    string          // the key as the caller passed it (a call of several keys: the first)
	key     string          // as sent: prefix + key
	ukeys   []string        // a call of several keys: the caller's keys, limit i guarding ukeys[i]; nil for one key
	keys    []string        // ... and as sent, prefixed (keys[0] == key); nil for one key
	denyID  string          // a call of several keys: its identity in the deny cache (denyIdentity)
	blimits []Limit         // a batch request's limits; single calls pass theirs along, so that they never escape
	cost    int64
	s       *script
	access  access // writes, reads on the primary, or reads anywhere (*_RO)
	args    []any

	sent   time.Time // when it was sent, for the deny cache
	resets uint64    // the deny cache's count of Resets when it was sent
	probe  bool      // the breaker chose this op to start a probe, after its failure stage
	node   *health   // the health of the Redis node it was sent to (healthOf)
	// carried is how many decisions the round trip that decided o carried
	// (Decision.Carried): 1 sent alone, more coalesced (coalesce.go) or
	// pipelined; 0 when none was sent.
	carried int

	res Result
	err error
}

// attempt is the stages after plan, for one op: deny, send, settle, failure.
func (l *Limiter) attempt(ctx context.Context, o *op, limits []Limit) {
	o.res, o.err, o.carried = Result{}, nil, 0
	if !l.denyStage(o, limits) {
		l.send(ctx, o, limits)
	}
	l.finish(ctx, o, limits)
}

// finish is the stages after the send, for every op: the failure stage
// for an op Redis could not decide, unless its caller gave up meanwhile:
// then the context's error, or in shadow mode the policy's answer (an
// admission is what the call gets anyway, so a deadline buys nothing, and
// shadow mode fails no call for the limiter's sake). Then the probe the
// breaker asked the op to start.
func (l *Limiter) finish(ctx context.Context, o *op, limits []Limit) {
	if e, ok := o.err.(*Error); ok && e.unavailable() {
		if err := ended(ctx); err != nil {
			o.err = callerGaveUp(o, err, e.Err)
		} else {
			l.fail(ctx, o, limits, e)
		}
	}
	if e, ok := o.err.(*Error); ok && e.kind == nil && l.shadow && o.kind != KindReset {
		l.answerByPolicy(o, limits, e) // an *Error of no class is callerGaveUp's
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
func (l *Limiter) send(ctx context.Context, o *op, limits []Limit) {
	if l.hot != nil && coalescable(o, limits) {
		l.sendHot(ctx, o, limits)
		return
	}
	l.sendBy(ctx, o, limits, l.decisionDeadline())
}

// sendBy is send with the decision deadline at (see decisionDeadline): the
// requests of a DecideBatch sent one by one share the batch's.
func (l *Limiter) sendBy(ctx context.Context, o *op, limits []Limit, at time.Time) {
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
	keys, args := o.sentKeys(&one), o.argv(limits)
	o.carried = 1
	v, err := l.roundTrip(ctx, o, keys, args, at)
	if err == errLeftQueue {
		o.err = callerGaveUp(o, ctx.Err(), nil)
		return
	}
	l.settle(ctx, o, limits, v, err)
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
func (l *Limiter) settle(ctx context.Context, o *op, limits []Limit, v answer, err error) {
	h := l.healthFor(o)
	if err == nil {
		if o.kind == KindReset {
			l.denyReset(o)
			h.succeeded(l)
			return
		}
		var res Result
		if res, err = o.decode(v, limits); err == nil {
			o.res = l.calendarResult(res)
			l.denyStore(o, limits)
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
