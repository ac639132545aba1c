package redisrate

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Close ends the Limiter's work, for a graceful shutdown: it gives back
// what its leases (Reserve with Request.Lease) have not spent, one refund
// each, stops their timers, stops the circuit breaker's probes and
// diagnostic dials in flight, and makes every later call fail with an
// error matching ErrNoClient that says the Limiter is closed. The Limiters
// made from it with With are closed with it; closing one of those closes
// it alone. Close does not close the Redis client: close that after, so
// that the refunds can reach Redis.
//
// ctx bounds the wait: the refunds (each also bounded by the decision
// timeout) and the background work. A lease whose refund Redis does not
// decide keeps its units (they come back as the limit refills); Close
// returns the first such error, with ctx's if it ended first. Closing again
// does nothing.
func (l *Limiter) Close(ctx context.Context) error {
	if l == nil || l.life == nil {
		return nil
	}
	leases, tasks := l.life.close()
	var first error
	for _, v := range leases {
		if _, err := v.settle(ctx, -1, true); err != nil && first == nil && !errors.Is(err, errAlreadySettled) {
			first = err
		}
		v.release() // settled or kept: its timer stops either way
	}
	for _, t := range tasks {
		t.cancel()
	}
	for _, t := range tasks {
		select {
		case <-t.done:
		case <-ctx.Done():
			if first == nil {
				first = ctx.Err()
			}
			return first
		}
	}
	return first
}

// closedError is the error of a call on a closed Limiter.
type closedError struct{}

func (closedError) Error() string {
	return "redisrate: the Limiter is closed (Limiter.Close): it makes no more calls"
}

func (closedError) Is(target error) bool { return target == ErrNoClient }

// life is a Limiter's lifetime: whether Close has closed it, and the
// background work that Close ends: the leases out, and the probes and
// dials in flight. A Limiter made with With has a life of its own under
// its parent's, so that closing the parent closes it too; each lease and
// task is kept by its Limiter's life and every ancestor's, so a Close
// finds all of its own and its children's without a list of children
// (which With, called often, would grow without end).
type life struct {
	parent *life
	closed atomic.Bool

	mu     sync.Mutex
	leases map[*Reservation]struct{}
	tasks  map[*task]struct{}
}

// task is one piece of background work: cancel ends it, and done is closed
// when it has ended.
type task struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// child is a life under l.
func (l *life) child() *life { return &life{parent: l} }

// isClosed reports whether l or an ancestor is closed.
func (l *life) isClosed() bool {
	for ; l != nil; l = l.parent {
		if l.closed.Load() {
			return true
		}
	}
	return false
}

// track adds v (a lease) or t (a task) to l and its ancestors, unless one
// of them is closed: then it reports false. The locks are taken from l up,
// the order close never inverts.
func (l *life) track(v *Reservation, t *task) bool {
	var chain []*life
	for n := l; n != nil; n = n.parent {
		n.mu.Lock()
		chain = append(chain, n)
	}
	defer func() {
		for _, n := range chain {
			n.mu.Unlock()
		}
	}()
	for _, n := range chain {
		if n.closed.Load() {
			return false
		}
	}
	for _, n := range chain {
		if v != nil {
			if n.leases == nil {
				n.leases = map[*Reservation]struct{}{}
			}
			n.leases[v] = struct{}{}
		}
		if t != nil {
			if n.tasks == nil {
				n.tasks = map[*task]struct{}{}
			}
			n.tasks[t] = struct{}{}
		}
	}
	return true
}

// untrack removes v or t from l and its ancestors.
func (l *life) untrack(v *Reservation, t *task) {
	for n := l; n != nil; n = n.parent {
		n.mu.Lock()
		if v != nil {
			delete(n.leases, v)
		}
		if t != nil {
			delete(n.tasks, t)
		}
		n.mu.Unlock()
	}
}

// close closes l and returns what it tracks.
func (l *life) close() ([]*Reservation, []*task) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed.Swap(true) {
		return nil, nil
	}
	leases := make([]*Reservation, 0, len(l.leases))
	for v := range l.leases {
		leases = append(leases, v)
	}
	tasks := make([]*task, 0, len(l.tasks))
	for t := range l.tasks {
		tasks = append(tasks, t)
	}
	return leases, tasks
}

// background is a context for work the Limiter does in the background (a
// probe, a diagnostic dial), bounded by d and ended by Close; the function
// it returns must be called when the work ends.
func (l *Limiter) background(d time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	if l.life == nil {
		return ctx, cancel
	}
	t := &task{cancel: cancel, done: make(chan struct{})}
	if !l.life.track(nil, t) {
		cancel() // closed: the work finds its context done and stops at once
		return ctx, cancel
	}
	var once sync.Once
	return ctx, func() {
		once.Do(func() {
			cancel()
			l.life.untrack(nil, t)
			close(t.done)
		})
	}
}

// ownerCall marks the context of a call the Limiter makes on its own, with
// no caller: a lease's timer, Close's refunds.
type ownerCall struct{}

// ownerClosed reports the failure of such a call because its Redis client
// was closed (redis.ErrClosed): the client's owner is shutting down, which
// is no outage to log or to open the breaker for.
func ownerClosed(ctx context.Context, err error) bool {
	return ctx.Value(ownerCall{}) != nil && errors.Is(err, redis.ErrClosed)
}
