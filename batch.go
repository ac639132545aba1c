package redisrate

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// DecideBatch decides many requests, for any keys, algorithms and limits,
// in one round trip: a pipeline of FCALL or EVALSHA calls. A server that
// does not have a script (a new node, a failover, SCRIPT FLUSH) answers
// those calls with NOSCRIPT; only they are sent again, with EVAL, in a
// second round trip.
//
// Each request goes through the same stages as Decide (plan, deny cache,
// circuit breaker, fallback, failure policy), so it is answered exactly as
// Decide would answer it: with FailOpen and Redis down, every request is
// admitted with Source SourceFailOpen and the error is nil. A request of
// KindWait is refused (ErrInvalid): a batch is one round trip.
//
// The results are in the order of reqs, always len(reqs) of them. When
// some requests get an error (bad arguments, a foreign key, Redis down with
// FailError), the error is a *BatchError whose Errs says which and why, and
// their Results are zero; the other requests are decided and recorded as
// usual. Each request is its own atomic decision: the batch as a whole is
// not a transaction.
//
// A client without pipelines (a Scripter that is not a go-redis client)
// gets the requests one after another.
func (l *Limiter) DecideBatch(ctx context.Context, reqs []Request) ([]Result, error) {
	if l == nil || l.rdb == nil || l.life.isClosed() {
		return make([]Result, len(reqs)), l.noClientErr()
	}
	bd := Decision{WholeBatch: true, Batch: len(reqs)}
	ctx = l.observeStart(ctx, &bd, nil)

	ops := make([]op, len(reqs))
	pending := make([]*op, 0, len(reqs))
	for i := range reqs {
		o, r := &ops[i], reqs[i]
		o.shape(&r)
		o.dec = o.decision(r.Kind)
		o.dec.Batch, o.dec.Index = len(reqs), i
		o.ctx = l.observeStart(ctx, &o.dec, o.lims())
		if r.Kind == KindWait {
			o.err = invalidf("invalid request %d: kind %s cannot be batched: a batch is one round trip; call Decide", i, r.Kind)
			continue
		}
		if l.plan(o) && !l.denyStage(o) {
			pending = append(pending, o)
		}
	}

	l.sendBatch(ctx, pending)
	for i := range ops {
		l.finish(ops[i].ctx, &ops[i]) // deny-cache hits too: shadow mode
	}

	results := make([]Result, len(reqs))
	var errs []error
	for i := range ops {
		o := &ops[i]
		o.dec.Carried = o.carried
		l.observeEnd(o.ctx, &o.dec, o.res, o.err)
		results[i] = o.res
		if o.err != nil {
			if errs == nil {
				errs = make([]error, len(reqs))
			}
			errs[i] = o.err
		}
	}
	var err error
	if errs != nil {
		err = &BatchError{Errs: errs}
	}
	l.observeEnd(ctx, &bd, Result{}, err)
	return results, err
}

// sendBatch is the send stage for many ops: their pipeline (pipeline),
// then settle for each.
func (l *Limiter) sendBatch(ctx context.Context, ops []*op) {
	if len(ops) == 0 {
		return
	}
	if err := ctx.Err(); err != nil {
		for _, o := range ops {
			o.err = callerGaveUp(o, err, nil)
		}
		return
	}
	if ops = l.toSend(ops); len(ops) == 0 {
		return
	}
	// One decision deadline for the whole batch, as for its pipeline: one
	// by one, each request would add a timeout.
	at := l.decisionDeadline()
	p, ok := l.rdb.(pipeliner)
	if !ok || len(ops) == 1 {
		for _, o := range ops {
			l.sendBy(o.ctx, o, at) // the request's own observer context, as a single call's
		}
		return
	}
	// One pipeline carries many requests: its commands run under the batch's
	// context (the span of the WholeBatch decision), not any one request's, and under one
	// decision deadline.
	sent, resets := l.sentAt()
	for _, o := range ops {
		o.sent, o.resets, o.carried = sent, resets, len(ops)
		o.argv() // built here: the pipeline may run on after the deadline
	}
	dctx, cancel, own := l.deadline(ctx, at)
	defer cancel()
	wires := make([]wire, len(ops))
	for i, o := range ops {
		var one [1]string
		wires[i] = wire{s: o.s, how: o.access, keys: append([]string(nil), o.sentKeys(&one)...), args: o.args}
	}
	cmds, err := within(l, dctx, func() []redis.Cmder { return l.pipeline(dctx, p, wires) })
	for i, o := range ops {
		var v answer
		e := err
		if cmds != nil {
			v, e = reply(cmds[i])
		}
		l.settle(ctx, o, v, l.timedOut(ctx, dctx, own, e))
	}
}
