package redisrate

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// The decision deadline: how long the send stage waits for Redis.

// defaultDecisionTimeout is how long, by default, a call waits for Redis
// before its failure policy answers (see WithDecisionTimeout, whose doc
// gives the value).
//
// 200 ms: a healthy Redis answers a script in well under a millisecond on
// the same network, and in a few milliseconds at the far tail (a busy
// server, a fork for a snapshot, a client's GC pause), so a call that has
// waited 200 ms is facing a Redis that is down, paused or overloaded, and
// every such answer opens the circuit breaker for all callers. Shorter
// (httprate-redis takes 100 ms) turns such tail latencies into outages;
// longer adds a visible stall, under every policy, to the requests in
// flight when Redis goes away, and 200 ms is still a small part of the
// budget of a request that a limit guards.
const defaultDecisionTimeout = 200 * time.Millisecond

// WithDecisionTimeout bounds how long a call waits for Redis to decide:
// when d passes without an answer, Redis has failed this call (its error
// matches ErrUnavailable; it opens the circuit breaker), and the failure
// policy answers at once, or the fallback decides, under its own deadline
// (see WithFallback). It is 200 ms unless set (why 200 ms: see
// defaultDecisionTimeout); 0 leaves only the caller's context to bound a
// call.
//
// It bounds every round trip of every kind of call: Allow, Decide of every
// Kind, a DecideBatch as a whole (its pipeline, or its
// requests one after another on a client without pipelines), each attempt
// of a Wait (not its sleeps), and Reset; and so the httplimit and
// grpclimit middleware. A call queued behind others in flight
// (WithCoalescing) waits for the sends ahead of it, each so bounded (one,
// unless more than 512 calls queued before it), and then has the decision
// timeout for its own round trip, counted from when it is sent: a Redis
// that answers each round trip in time decides every call. It holds when Redis refuses connections and when
// it accepts them but does not answer (CLIENT PAUSE, a wedged proxy), with
// or without go-redis's ContextTimeoutEnabled: a client that does not stop
// a command at its context's deadline is left to finish it in the
// background, and the call returns at the deadline. (go-redis also retries
// and redials within that time; its own ReadTimeout and DialTimeout still
// bound a command that runs on.)
//
// A context deadline of the caller's that comes first is the caller's: a
// call that reaches it returns the context's error, and no policy answers
// it (see WithFailurePolicy; in shadow mode it is admitted). It does start
// a probe under the decision timeout, which opens the circuit breaker if
// Redis does not answer it (see WithCircuitBreaker): then the following
// calls get the policy's answer at once, whatever their deadlines.
func WithDecisionTimeout(d time.Duration) Option {
	return func(l *Limiter) { l.timeout = max(d, 0) }
}

// honoursDeadlines reports whether rdb stops a command at its context's
// deadline (redis.Options.ContextTimeoutEnabled, with socket deadlines on:
// a negative ReadTimeout or WriteTimeout sets none, and then no context's
// either). Other clients, wrappers included, are assumed not to.
func honoursDeadlines(rdb redis.Scripter) bool {
	switch c := rdb.(type) {
	case *redis.Client:
		o := c.Options()
		return o.ContextTimeoutEnabled && o.ReadTimeout >= 0 && o.WriteTimeout >= 0
	case *redis.ClusterClient:
		o := c.Options()
		return o.ContextTimeoutEnabled && o.ReadTimeout >= 0 && o.WriteTimeout >= 0
	case *redis.Ring:
		o := c.Options()
		return o.ContextTimeoutEnabled && o.ReadTimeout >= 0 && o.WriteTimeout >= 0
	}
	return false
}

// decisionDeadline is when a decision that starts now must be answered:
// the decision timeout from now; zero without one.
func (l *Limiter) decisionDeadline() time.Time {
	if l.timeout <= 0 {
		return time.Time{}
	}
	return time.Now().Add(l.timeout)
}

// deadline returns the context a send runs under: ctx with the decision
// deadline at (from decisionDeadline), unless the caller's own deadline
// comes first (then ctx, and own is false: what happens at that deadline is
// the caller's).
func (l *Limiter) deadline(ctx context.Context, at time.Time) (dctx context.Context, cancel context.CancelFunc, own bool) {
	if at.IsZero() {
		return ctx, func() {}, false
	}
	if d, ok := ctx.Deadline(); ok && !d.After(at) {
		return ctx, func() {}, false
	}
	dctx, cancel = context.WithDeadline(ctx, at)
	return dctx, cancel, true
}

// within runs f, which sends under dctx, and returns what it returns; if
// the client does not stop f at dctx's deadline, within runs f on a sender
// (sender.go) and stops waiting for it then, with dctx's error (f finishes
// in the background, and its result is dropped).
func within[T any](l *Limiter, dctx context.Context, f func() T) (T, error) {
	if l.honoursCtx || dctx.Done() == nil {
		return f(), nil
	}
	done := make(chan T, 1) // f never blocks on it: its sender goes on to the next send
	goSend(func() { done <- f() })
	select {
	case v := <-done:
		return v, nil
	case <-dctx.Done():
		var zero T
		return zero, dctx.Err()
	}
}

// detached is the loader's run through within, for a client that does not
// stop at dctx's deadline (a function of its own, so that the closure is
// not made for the clients that do).
func (l *Limiter) detached(dctx context.Context, s *script, how access, keys []string, args []any) (answer, error) {
	type reply struct {
		v   answer
		err error
	}
	own := append([]string(nil), keys...) // the send may outlive the call: keys stay the caller's
	r, err := within(l, dctx, func() reply {
		v, err := l.loader.run(dctx, s, how, own, args)
		return reply{v, err}
	})
	if err != nil {
		return answer{}, err
	}
	return r.v, r.err
}

// timedOut turns an error at the decision deadline (before dctx is
// cancelled) into the Limiter's own timeout: a failure of Redis. A failure
// at the caller's deadline is left as it is (settle finds it the
// caller's), and so is an error reply: Redis answered.
func (l *Limiter) timedOut(ctx, dctx context.Context, own bool, err error) error {
	if err == nil || !own || isRedisError(err) || ended(ctx) != nil {
		return err
	}
	// Not ended(dctx): a send that noRetry stopped after a network error
	// cancelled dctx before its deadline, and that error is no timeout.
	if d, _ := dctx.Deadline(); time.Now().Before(d) {
		return err
	}
	return &timeoutError{after: l.timeout, err: err}
}

// timeoutError is the failure of a call Redis did not answer within the
// decision timeout. It does not match context.DeadlineExceeded, which is
// kept for the caller's deadlines.
type timeoutError struct {
	after time.Duration
	err   error
	probe bool // a probe's deadline (see health.probeWait), not a call's
}

func (e *timeoutError) Error() string {
	if e.probe {
		return fmt.Sprintf("no answer from Redis to a probe within %v (%v)", e.after, e.err)
	}
	return fmt.Sprintf("no answer from Redis within the decision timeout of %v (%v)", e.after, e.err)
}
