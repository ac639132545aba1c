package redisrate

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// The engine: every call of a Limiter (Allow*, Check*, Peek, *Multi,
// AllowBatch, Wait*, Reset) is one or more ops that go through the same
// stages, in this order, as golang.org/x/time/rate funnels everything
// through reserveN:
//
//	observer Start
//	plan      validate, pick the script (plan)                ErrInvalid ends here
//	deny      answer from the deny cache (denycache.go)       a hit ends here
//	send      build the ARGV (once per distinct call), send it alone or
//	          pipelined for AllowBatch (send, sendBatch in batch.go) through
//	          the loader (FCALL, EVALSHA, EVAL); skipped while the circuit
//	          breaker is open (breaker.go)
//	settle    decode the reply, classify an error, feed the deny cache
//	          and the breaker (settle)
//	failure   fallback, then failure policy, for ErrUnavailable only (fail),
//	          unless the caller's context ended (finish)
//	shadow    in shadow mode, a denial admitted (shadowStage)
//	observer End
//
// AllowBatch runs each stage over all its ops before the next; Wait repeats
// deny..failure over one plan.

// op is one call to a script as it moves through the stages.
type op struct {
	dec     Decision        // what the observer is told, for the ops of a batch (single calls keep theirs apart)
	ctx     context.Context // the observer's context for this op (batches)
	kind    Kind            // KindAllow, KindCheck, KindPeek or KindReset
	ukey    string          // the key as the caller passed it (a call of several keys: the first)
	key     string          // as sent: prefix + key
	ukeys   []string        // a call of several keys (AllowKeys): the caller's keys, limit i guarding ukeys[i]; nil for one key
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

	res Result
	err error
}

// call runs one op through every stage and reports it to the observer: the
// engine's entry for every single call. kind is what the observer is told;
// KindWait decides the op by Wait's loop of attempts, the others once.
func (l *Limiter) call(ctx context.Context, kind Kind, key string, cost int64, limits []Limit) (Result, error) {
	return l.callKeys(ctx, kind, key, nil, cost, limits)
}

// callKeys is call for one key (ukeys nil) or several: ukeys are the
// caller's keys, key the first, and limit i guards ukeys[i].
func (l *Limiter) callKeys(ctx context.Context, kind Kind, key string, ukeys []string, cost int64, limits []Limit) (Result, error) {
	if l == nil || l.rdb == nil {
		return Result{}, l.noClientErr()
	}
	o := op{kind: kind, ukey: key, key: key, ukeys: ukeys, cost: cost}
	if kind == KindWait {
		o.kind = KindAllow
	}
	// The decision is a variable of its own, not a field of o: what the
	// observer is handed escapes, and o (with the caller's limits) must not.
	dec := Decision{Kind: kind, Key: key, Keys: ukeys, Cost: cost}
	if len(limits) > 0 {
		dec.Algorithm = limits[0].Algorithm
	}
	ctx = l.observeStart(ctx, &dec, limits)
	if l.plan(&o, limits) {
		if kind == KindWait {
			o.res, o.err = l.waitLoop(ctx, &o, limits)
		} else {
			l.attempt(ctx, &o, limits)
		}
	}
	l.observeEnd(ctx, &dec, o.res, o.err)
	return o.res, o.err
}

// attempt is the stages after plan, for one op: deny, send, settle, failure.
func (l *Limiter) attempt(ctx context.Context, o *op, limits []Limit) {
	o.res, o.err = Result{}, nil
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

// plan validates the op and picks its script; false (with o.err set) when
// the call is refused before any round trip. The ARGV waits for the send:
// a deny-cache hit needs none.
func (l *Limiter) plan(o *op, limits []Limit) bool {
	if o.ukeys == nil && o.ukey == "" {
		// The scripts take any key; an empty one is almost always an
		// identity that was not found, and would hold every caller
		// without one to one shared limit.
		o.err = invalidf("invalid key '': must not be empty")
		return false
	}
	o.key = l.prefix + o.key
	if o.ukeys != nil && !l.planKeys(o, limits) {
		return false
	}
	if o.kind == KindReset {
		o.s = &resetScript
		return true
	}
	switch {
	case o.kind == KindPeek:
		o.cost = 0
	case o.cost == 0:
		o.err = invalidf("invalid cost '0': must be at least 1 to take units; ask with Peek to read the state without taking any")
		return false
	}
	if err := validateCall(o.cost, limits); err != nil {
		o.err = err
		return false
	}
	o.s = &algoScripts[limits[0].Algorithm]
	switch {
	case o.kind == KindAllow:
		o.access = accessWrite
	case l.readOnlyCheck:
		o.access = accessReplica
	default:
		o.access = accessRead
	}
	return true
}

// send asks Redis, unless the circuit breaker is open (then o.err matches
// ErrUnavailable at once), and settles the reply, within the decision
// timeout from now.
func (l *Limiter) send(ctx context.Context, o *op, limits []Limit) {
	l.sendBy(ctx, o, limits, l.decisionDeadline())
}

// sendBy is send with the decision deadline at (see decisionDeadline): the
// requests of an AllowBatch sent one by one share the batch's.
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
		if res, err = decodeReply(v, limits); err == nil {
			o.res = res
			l.denyStore(o, limits)
			h.succeeded(l)
			return
		}
	}
	kind := classify(err)
	o.err = o.failed(err, kind)
	switch {
	case kind != ErrUnavailable:
		h.succeeded(l) // Redis answered: the caller's mistake, not an outage
	case ended(ctx) != nil:
		o.probe = h.suspect()
	case !errors.Is(err, ErrBadReply) && !errors.Is(err, context.Canceled):
		// The cause every other caller is answered with while the breaker
		// is open is Redis's own error, without this call's key.
		h.failed(l, err, o.s.name, o.key)
	}
}

// Args returns the ARGV the script of limits[0].Algorithm takes for a
// request of cost units (check: record nothing; a cost of 0 reads the state
// and takes nothing), after validating them exactly as the script would: it
// refuses what the script refuses, with the script's words (without "ERR ",
// matching ErrInvalid), in the script's order (the first limit, the cost,
// then the further limits). It is how other clients of the scripts can build
// calls that match this package's. A call of several keys (AllowKeys) takes
// the same ARGV, limit i for KEYS[i].
//
// Only the arguments the call needs are returned: a default (burst equal to
// the rate, cost 1, no mode) is left out at the end and written "" in the
// middle. Numbers are int64, "" and "check" strings, as go-redis takes them.
func Args(cost int64, check bool, limits ...Limit) ([]any, error) {
	return buildArgs(cost, check, limits)
}

// argv returns o's ARGV, built once (Wait sends it again and again) and
// only when the op is sent: a deny-cache hit builds nothing.
func (o *op) argv(limits []Limit) []any {
	if o.args == nil && o.kind != KindReset {
		o.args = cachedArgs(o.cost, o.kind == KindCheck, limits)
	}
	return o.args
}

// argsKey is everything an ARGV depends on, comparable so that a map
// lookup needs no allocation.
type argsKey struct {
	cost   int64
	check  bool
	count  int
	limits [maxLimits]Limit
}

// argsCache remembers the ARGV of recent calls: a service calls with a
// handful of limits, and boxing each number in an interface was a good part
// of the client's allocations per decision. The cached slices are only read
// (go-redis copies them into its command), never handed to callers. Past
// maxCachedArgs entries it starts over: a caller that never repeats itself
// costs a little memory, never a leak.
var argsCache = struct {
	sync.RWMutex
	m map[argsKey][]any
}{m: make(map[argsKey][]any)}

const maxCachedArgs = 1024

// cachedArgs is formatArgs through argsCache, for validated calls.
func cachedArgs(cost int64, check bool, limits []Limit) []any {
	k := argsKey{cost: cost, check: check, count: len(limits)}
	copy(k.limits[:], limits)
	for i := range limits {
		k.limits[i].Name = "" // not an argument: named limits share an ARGV
	}
	argsCache.RLock()
	args, ok := argsCache.m[k]
	argsCache.RUnlock()
	if ok {
		return args
	}
	args = formatArgs(cost, check, limits)
	argsCache.Lock()
	if len(argsCache.m) >= maxCachedArgs {
		clear(argsCache.m)
	}
	argsCache.m[k] = args
	argsCache.Unlock()
	return args
}

func buildArgs(cost int64, check bool, limits []Limit) ([]any, error) {
	if err := validateCall(cost, limits); err != nil {
		return nil, err
	}
	return formatArgs(cost, check, limits), nil
}

// validateCall checks a call's cost and limits as the scripts do, in their
// order.
func validateCall(cost int64, limits []Limit) error {
	if len(limits) == 0 {
		return invalidf("invalid call: no limit given; pass at least one Limit")
	}
	if len(limits) > maxLimits {
		return invalidf("too many limits (%d): must be at most %d", len(limits), maxLimits)
	}
	algo := limits[0].Algorithm
	for i, lim := range limits {
		if i == 1 {
			// The scripts check the cost and mode after the first triple.
			if cost < 0 || cost > maxNumber {
				return invalidf("invalid cost '%d': must be a whole number from 0 to 10^15", cost)
			}
		}
		if lim.Algorithm != algo {
			return invalidf("invalid algorithm #%d '%s': must be the first limit's, %s; one key holds one algorithm's state", i+1, lim.Algorithm, algo)
		}
		if err := lim.validate(i); err != nil {
			return err
		}
	}
	if len(limits) == 1 && (cost < 0 || cost > maxNumber) {
		return invalidf("invalid cost '%d': must be a whole number from 0 to 10^15", cost)
	}
	return nil
}

// formatArgs writes a validated call's ARGV, leaving out the defaults.
func formatArgs(cost int64, check bool, limits []Limit) []any {
	args := make([]any, 0, 5+3*(len(limits)-1))
	for i, lim := range limits {
		var burst any = ""
		if lim.Burst != 0 && lim.Burst != lim.Rate {
			burst = lim.Burst
		}
		args = append(args, lim.Rate, int64(lim.Period/time.Millisecond), burst)
		if i == 0 {
			var c, mode any = "", ""
			if cost != 1 {
				c = cost
			}
			if check {
				mode = "check"
			}
			args = append(args, c, mode)
		}
	}
	if len(limits) == 1 { // leave out the defaults at the end
		for len(args) > 2 && args[len(args)-1] == "" {
			args = args[:len(args)-1]
		}
	}
	return args
}
