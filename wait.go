package redisrate

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"
)

// maxJitter caps the random delay a waiter adds to the reply's RetryAfter.
const maxJitter = time.Second

// Wait blocks until one unit is taken from key under limit, or until it is
// clear that it cannot be: see WaitN.
func (l *Limiter) Wait(ctx context.Context, key string, limit Limit) (Result, error) {
	o := oneKey(KindWait, key, limit, 1)
	return l.run(ctx, &o)
}

// WaitN blocks until n units are taken from key under limit. It is for
// clients of a rate-limited service (workers calling a third-party API)
// that would rather wait their turn than fail. Decide waits the same way
// for a Request of KindWait: several limits, or several keys.
//
// Each attempt is an AllowN. On a denial WaitN sleeps for the reply's
// RetryAfter plus a random jitter of up to a tenth of it (at most a
// second), so that waiters woken by the same reply do not all retry at the
// same instant; it never sleeps less than RetryAfter, and it tries again.
// The jitter never costs a turn that comes before the context's deadline:
// the sleep ends early enough for the try to come back in time (twice the
// last round trip, at least a millisecond, before the deadline), or at the
// turn when that is later.
// Another client may take the turn meanwhile: waiting is not a queue, and
// there is no fairness between waiters.
//
// WaitN returns, with the last decision and an error:
//   - at once, matching ErrExceedsCapacity, when n can never be admitted
//     (Result.Never);
//   - at once, matching context.DeadlineExceeded, when the context's
//     deadline comes before the turn would: it does not sleep in vain;
//   - when ctx is cancelled while sleeping, matching ctx.Err();
//   - at once on any error of AllowN (Redis unreachable, ErrInvalid, ...),
//     which it does not retry.
//
// When Redis cannot decide, the failure stage answers the attempt as it
// would answer AllowN: a FailOpen admission ends the wait with a nil error;
// a FailClosed denial ends it at once with that Result and an error
// matching ErrUnavailable (an outage is not a turn to wait for); FailError
// returns the error.
//
// A denied attempt records nothing, so giving up leaves the key as it was.
// An n of 0 is refused (ErrInvalid).
func (l *Limiter) WaitN(ctx context.Context, key string, limit Limit, n int64) (Result, error) {
	o := oneKey(KindWait, key, limit, n)
	return l.run(ctx, &o)
}

// wait is Wait's loop of attempts (engine.go) over o, planned once, until
// one is admitted or waiting cannot help. A calendar limit's op is planned
// again, from its limits as asked, before each later attempt: the wait may
// have reached the next window, which has a key of its own.
func (l *Limiter) wait(ctx context.Context, o *op) (Result, error) {
	asked := o.limits
	if !l.plan(o) {
		return Result{}, o.err
	}
	clk := l.clock
	key := o.ukey
	var res Result
	// A context done before the first try ends the wait at once. After a
	// sleep there is no such check: the sleep ended before the deadline
	// (see tryMargin), and the try is made even at the deadline's edge,
	// where it sees the context itself.
	if err := ctx.Err(); err != nil {
		return res, fmt.Errorf("redisrate: wait on key %q: %w", key, err)
	}
	for try := 0; ; try++ {
		start := clk.Now()
		if try > 0 && hasCalendar(asked[:o.nlimits]) {
			o.limits, o.args = asked, nil
			if !l.plan(o) {
				return Result{}, o.err
			}
		}
		l.attempt(ctx, o)
		took := clk.Now().Sub(start)
		res = o.res
		if o.err != nil || res.Allowed {
			return res, o.err
		}
		if res.Source == SourceFailClosed {
			return res, fmt.Errorf("redisrate: wait on key %q: denied by the failure policy: %w", key, res.Cause)
		}
		if res.Never() {
			return res, fmt.Errorf("redisrate: wait on key %q: %w (cost %d, capacity %d)", key, ErrExceedsCapacity, o.cost, res.Capacity)
		}
		d := res.RetryAfter + jitter(res.RetryAfter)
		if deadline, ok := ctx.Deadline(); ok {
			left := deadline.Sub(clk.Now())
			if res.RetryAfter > left {
				return res, fmt.Errorf("redisrate: wait on key %q: the turn comes in %v, after the context's deadline in %v: %w",
					key, res.RetryAfter, left.Round(time.Millisecond), context.DeadlineExceeded)
			}
			// The jitter must not cost the turn: wake while the try can
			// still reach Redis and return before the deadline, but never
			// before the turn.
			d = max(min(d, left-tryMargin(took)), res.RetryAfter)
		}
		if err := clk.Sleep(ctx, d); err != nil {
			return res, fmt.Errorf("redisrate: wait on key %q: %w", key, err)
		}
	}
}

// tryMargin is how long before the deadline a try is made, when the
// jitter would make it later: twice the last try's round trip, and at
// least a millisecond.
func tryMargin(lastTry time.Duration) time.Duration {
	return max(2*lastTry, time.Millisecond)
}

// jitter returns a random duration in [0, min(d/10, maxJitter)].
func jitter(d time.Duration) time.Duration {
	span := min(d/10, maxJitter)
	if span <= 0 {
		return 0
	}
	return time.Duration(rand.Int64N(int64(span) + 1))
}
