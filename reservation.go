package redisrate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Reservation is units taken before their real amount is known: an
// estimate (a model's max_tokens) reserved by Reserve, then settled with
// the amount really used, or a lease whose units a holder spends with Take,
// with no round trip each. Its methods are safe for concurrent use.
//
// A reservation never settled keeps what it took. Settling gives back what
// was not used, or records what was used beyond the reservation, in one
// call on every limit and key of the reservation.
type Reservation struct {
	// Result is the reservation's decision, as Decide answers it: Allowed
	// says whether it took anything (or was admitted by the failure
	// policy, or in shadow mode), Units how many units it took.
	Result Result

	l      *Limiter
	req    Request   // as asked, its slices the reservation's own, without its Lease
	taken  int64     // units Redis recorded for it: what Settle gives back or adds to
	budget int64     // units Take may spend
	ends   time.Time // when Take stops; zero: no lifetime

	settling sync.Mutex // one settlement at a time, held across its round trip

	mu      sync.Mutex
	spent   int64         // by Take
	closing bool          // a settlement began: Take spends no more
	settled bool          // Redis decided the settlement
	stop    func() bool   // stops the lease's timer; nil: none armed
	retry   time.Duration // the wait before the timer's next try, after an outage
}

// Reserve takes units now, to be settled later with the amount really
// used (Reservation.Settle), in one round trip on every limit and key of r,
// as Decide would. r.Kind is KindAllow (the zero value: N units, all or
// nothing) or KindUpTo (as many as every limit grants now, up to N: a
// lease); any other Kind is refused (ErrInvalid).
//
// The Reservation comes back whenever Redis (or the fallback, or the
// failure policy) decided, also when it took nothing: its Result then says
// denied, and settling it makes no call. An error (ErrInvalid, or
// ErrUnavailable under FailError) comes with a nil Reservation.
//
// With r.Lease, the reservation is a lease: Take spends its units with no
// round trip until the lease's lifetime ends, and then the unspent units
// are given back on their own (a timer closes the reservation, as Close
// does; in an outage it tries again, later and later, for a few minutes,
// then logs what it keeps), unless Settle or Close came first. Limiter.Close
// gives back what its leases hold. In any span of t the units a lease
// spends, with everything else the limits admit, are at most what
// guarantee 4 of CONTRACT.md allows in a span of t plus the lifetime: a
// unit is spent at most the lifetime after Redis granted it.
//
// A reservation that Redis did not decide (a FailOpen admission, a
// fallback's) took nothing from Redis: Settle records the whole amount
// used, once Redis decides again. In shadow mode a reservation Redis
// denied took nothing either, and its use is recorded the same way.
func (l *Limiter) Reserve(ctx context.Context, r Request) (*Reservation, error) {
	if r.Kind != KindAllow && r.Kind != KindUpTo {
		return nil, invalidf("invalid kind %s: Reserve takes KindAllow (all or nothing) or KindUpTo (a lease of what there is)", r.Kind)
	}
	if r.Lease < 0 {
		return nil, invalidf("invalid lease %v: must be a lifetime from 0 (none)", r.Lease)
	}
	lease := r.Lease
	r.Lease = 0
	r.N = defaultN(r)
	r.Limits = append([]Limit(nil), r.Limits...) // settled later: the caller may reuse its slices
	r.Keys = append([]KeyLimit(nil), r.Keys...)
	l.pinCalendar(&r) // settled in the calendar windows it took from
	res, err := l.Decide(ctx, r)
	if err != nil {
		return nil, err
	}
	v := &Reservation{Result: res, l: l, req: r, budget: res.Units}
	if res.Source == SourceRedis {
		v.taken = res.Units
	}
	if res.Allowed && res.Units == 0 { // admitted without Redis's units: the policy, or shadow mode
		v.budget = r.N
	}
	if lease > 0 && res.Allowed {
		if l.life != nil && !l.life.track(v, nil) { // closed since the call began: give it all back
			_, _ = v.settle(ctx, 0, true)
			return nil, closedError{}
		}
		v.ends = l.clock.Now().Add(lease)
		// Armed under mu: the timer may fire at once (a lifetime of 1 ns),
		// and its settlement reads stop.
		v.mu.Lock()
		v.stop = l.clock.AfterFunc(lease, v.expire)
		v.mu.Unlock()
	}
	return v, nil
}

// Take spends n of the reserved units, n from 1, locally: no round trip.
// It reports false, spending nothing, when fewer than n are left, when
// the lease's lifetime (Request.Lease) has ended, or once Settle or Close
// was called (even one that failed: what a settlement gives back must not
// change under it).
func (r *Reservation) Take(n int64) bool {
	if r == nil || n < 1 {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closing || r.budget-r.spent < n || !r.ends.IsZero() && !r.l.clock.Now().Before(r.ends) {
		return false
	}
	r.spent += n
	return true
}

// Settle tells the reservation how many units were really used, from 0
// (cancel: give everything back). Fewer than it took: one KindRefund call
// gives the difference back on every limit and key of the reservation.
// More: one KindForce call records the difference as a debt (as far as
// one capacity, CONTRACT.md's mode force), which later calls wait for. The
// same: no call. Settle returns the call's Result, or the zero Result when
// it made none (nothing to settle, or a reservation that was denied).
//
// A reservation is settled once Redis has decided its settlement: a second
// Settle then gets an *Error matching ErrInvalid and changes nothing. Until
// then a failed Settle can be tried again: one with an amount refused
// (ErrInvalid, such as a debt past what one call records), or one that
// Redis could not decide, which returns an error matching ErrUnavailable
// whatever the failure policy (there is nothing to admit: the policy's
// answer would only hide that nothing was given back or recorded). Its
// Observer sees the call (Kind KindRefund or KindForce) as any other.
//
// The call is detached from ctx's cancellation (context.WithoutCancel), so
// that a client that goes away as its request ends still pays, and bounded
// by twice the decision timeout (WithDecisionTimeout; its default when
// there is none). In an outage nothing is recorded: a lease's units stay
// taken until a later Settle or Close succeeds, or the limit refills them;
// a debt is not recorded unless Settle is tried again.
func (r *Reservation) Settle(ctx context.Context, used int64) (Result, error) {
	if r == nil {
		return Result{}, invalidf("invalid reservation: nil; a Reservation comes from Limiter.Reserve")
	}
	if used < 0 {
		return Result{}, invalidf("invalid used '%d': must be the units used, from 0 (to give back what Take did not spend, use Close)", used)
	}
	return r.settle(ctx, used, false)
}

// Close settles the reservation with what Take spent: a lease given back
// before its lifetime ends, with Settle's rules (it can be tried again
// when Redis did not decide; a settled reservation's Close is an error
// matching ErrInvalid). A lease whose whole budget Take spent makes no
// call.
func (r *Reservation) Close(ctx context.Context) (Result, error) {
	if r == nil {
		return Result{}, invalidf("invalid reservation: nil; a Reservation comes from Limiter.Reserve")
	}
	return r.settle(ctx, -1, false)
}

// errAlreadySettled is matched by settledError.
var errAlreadySettled = errors.New("reservation already settled: a reservation is settled once")

// settle settles r with used, or with what Take spent when used is -1.
// closing is Limiter.Close's settlement of a lease, which a closed Limiter
// still makes.
func (r *Reservation) settle(ctx context.Context, used int64, closing bool) (Result, error) {
	r.settling.Lock()
	defer r.settling.Unlock()
	r.mu.Lock()
	if r.settled {
		r.mu.Unlock()
		return Result{}, r.settledError()
	}
	r.closing = true
	if used == -1 {
		used = r.spent
	}
	r.mu.Unlock()
	req := r.req
	switch {
	case !r.Result.Allowed || used == r.taken: // it took nothing and nothing was used, or the amount stands
		r.settledNow()
		return Result{}, nil
	case used < r.taken:
		req.Kind, req.N = KindRefund, r.taken-used
	default:
		req.Kind, req.N = KindForce, used-r.taken
	}
	l := r.l
	if closing {
		open := *l // the last calls of a closed Limiter
		open.life = nil
		l = &open
	}
	if closing {
		ctx = context.WithValue(ctx, ownerCall{}, true)
	}
	sctx, cancel := l.settleContext(ctx)
	defer cancel()
	res, err := l.Decide(sctx, req)
	if err == nil && res.Source != SourceRedis {
		cause := res.Cause
		if cause == nil {
			cause = errors.New("no cause given")
		}
		err = &Error{Script: req.algorithm().String(), Key: l.prefix + req.firstKey(), kind: ErrUnavailable,
			Err: fmt.Errorf("the settlement was not decided by Redis (answered by %s): nothing was given back or recorded; settle again: %w", res.Source, cause)}
	}
	if err != nil {
		return res, err
	}
	r.settledNow()
	return res, nil
}

// settledNow marks r settled and stops its timer.
func (r *Reservation) settledNow() {
	r.mu.Lock()
	r.settled = true
	r.mu.Unlock()
	r.release()
}

// release stops r's timer and forgets it in its Limiter's life.
func (r *Reservation) release() {
	r.mu.Lock()
	stop := r.stop
	r.stop = nil
	r.mu.Unlock()
	if stop != nil {
		stop()
	}
	if r.l != nil && r.l.life != nil {
		r.l.life.untrack(r, nil)
	}
}

// settleContext is ctx without its cancellation, bounded by twice the
// decision timeout, so that the Limiter's own timeout, and its failure
// policy, answer first.
func (l *Limiter) settleContext(ctx context.Context) (context.Context, context.CancelFunc) {
	d := l.timeout
	if d <= 0 {
		d = defaultDecisionTimeout
	}
	return context.WithTimeout(context.WithoutCancel(ctx), 2*d)
}

// firstKey is the key of r, or its first key.
func (r *Request) firstKey() string {
	if r.Key == "" && len(r.Keys) > 0 {
		return r.Keys[0].Key
	}
	return r.Key
}

// algorithm is the algorithm of r's limits.
func (r *Request) algorithm() Algorithm {
	if len(r.Limits) > 0 {
		return r.Limits[0].Algorithm
	}
	if len(r.Keys) > 0 {
		return r.Keys[0].Limit.Algorithm
	}
	return GCRA
}

// settledError is the error of a second Settle: the caller's mistake.
func (r *Reservation) settledError() error {
	e := &Error{Err: errAlreadySettled, kind: ErrInvalid, Script: r.req.algorithm().String(), Key: r.req.firstKey()}
	if r.l != nil {
		e.Key = r.l.prefix + e.Key
	}
	return e
}

// Lease retries after an outage: the first wait, and the longest.
const (
	leaseRetryFirst = time.Second
	leaseRetryMax   = time.Minute
)

// expire ends a lease's lifetime: what Take did not spend goes back. When
// Redis cannot decide, the timer tries again, later and later (1 s, 2 s,
// ... up to a minute), until it does or the Limiter is closed; when it
// gives up, or on any other failure (the Redis client closed before the
// Limiter, a key replaced by other data), it logs what the lease keeps,
// which would otherwise be lost silently.
func (r *Reservation) expire() {
	_, err := r.settle(context.WithValue(context.Background(), ownerCall{}, true), -1, false)
	switch {
	case err == nil, errors.Is(err, errAlreadySettled):
		return
	case errors.Is(err, ErrUnavailable) && !errors.Is(err, redis.ErrClosed) && !r.l.life.isClosed():
		r.mu.Lock()
		again := !r.settled && r.stop != nil && r.retry < leaseRetryMax
		if again {
			r.retry = min(max(2*r.retry, leaseRetryFirst), leaseRetryMax)
			r.stop = r.l.clock.AfterFunc(r.retry, r.expire)
		}
		r.mu.Unlock()
		if again {
			return
		}
	}
	r.release()
	if r.l.life.isClosed() {
		return // Close settles (or reports) it
	}
	r.mu.Lock()
	kept := max(r.taken-r.spent, r.spent-r.taken)
	r.mu.Unlock()
	logger := r.l.logger
	if logger == nil {
		logger = slog.Default()
	}
	logger.Warn("redisrate: a lease's unspent units were not given back; close the Limiter (Limiter.Close) before its Redis client",
		slog.String("key", r.l.prefix+r.req.firstKey()), slog.Int64("units", kept), slog.String("error", err.Error()))
}
