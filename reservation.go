package redisrate

import (
	"context"
	"errors"
	"sync"
	"time"
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
	stop   func() bool

	mu      sync.Mutex
	spent   int64 // by Take
	settled bool
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
// are given back on their own (a timer settles the reservation with what
// Take spent, under the decision timeout), unless Settle came first. In
// any span of t the units a lease spends, with everything else the limits
// admit, are at most what guarantee 4 of CONTRACT.md allows in a span of t
// plus the lifetime: a unit is spent at most the lifetime after Redis
// granted it.
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
		v.ends = l.clock.Now().Add(lease)
		v.stop = l.afterFunc(lease, v.expire)
	}
	return v, nil
}

// Take spends n of the reserved units, n from 1, locally: no round trip.
// It reports false, spending nothing, when fewer than n are left, when
// the lease's lifetime (Request.Lease) has ended, or once the reservation
// is settled.
func (r *Reservation) Take(n int64) bool {
	if r == nil || n < 1 {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.settled || r.budget-r.spent < n || !r.ends.IsZero() && !r.l.clock.Now().Before(r.ends) {
		return false
	}
	r.spent += n
	return true
}

// Settle tells the reservation how many units were really used, from 0
// (cancel: give everything back), or -1 for what Take spent (a lease
// closed). Fewer than it took: one KindRefund call gives the difference
// back on every limit and key of the reservation. More: one KindForce call
// records the difference as a debt (as far as one capacity, CONTRACT.md's
// mode force), which later calls wait for. The same: no call. Settle
// returns the call's Result, or the zero Result when it made none (nothing
// to settle, or a reservation that was denied).
//
// A reservation is settled once: a second Settle, or one after its
// lease's lifetime ended, gets an *Error matching ErrInvalid and changes
// nothing. The call is one of the Limiter's, seen by its Observer (Kind
// KindRefund or KindForce): when Redis cannot decide it, the failure
// policy answers as for any call, and the difference is not recorded
// (under FailError the error is returned); it is not tried again.
func (r *Reservation) Settle(ctx context.Context, used int64) (Result, error) {
	if r == nil {
		return Result{}, invalidf("invalid reservation: nil; a Reservation comes from Limiter.Reserve")
	}
	r.mu.Lock()
	if r.settled {
		r.mu.Unlock()
		return Result{}, r.settledError()
	}
	if used == -1 {
		used = r.spent
	}
	if used < 0 {
		r.mu.Unlock()
		return Result{}, invalidf("invalid used '%d': must be the units used, from 0, or -1 for what Take spent", used)
	}
	r.settled = true
	if r.stop != nil {
		r.stop()
	}
	r.mu.Unlock()
	req := r.req
	switch {
	case !r.Result.Allowed:
		return Result{}, nil // it took nothing, and nothing was used
	case used < r.taken:
		req.Kind, req.N = KindRefund, r.taken-used
	case used > r.taken:
		req.Kind, req.N = KindForce, used-r.taken
	default:
		return Result{}, nil
	}
	return r.l.Decide(ctx, req)
}

// settledError is the error of a second Settle: the caller's mistake.
func (r *Reservation) settledError() error {
	e := &Error{Err: errors.New("reservation already settled: a reservation is settled once"), kind: ErrInvalid}
	if len(r.req.Limits) > 0 {
		e.Script = r.req.Limits[0].Algorithm.String()
	} else if len(r.req.Keys) > 0 {
		e.Script = r.req.Keys[0].Limit.Algorithm.String()
	}
	e.Key = r.req.Key
	if e.Key == "" && len(r.req.Keys) > 0 {
		e.Key = r.req.Keys[0].Key
	}
	if r.l != nil {
		e.Key = r.l.prefix + e.Key
	}
	return e
}

// expire ends a lease's lifetime: what Take did not spend goes back, in a
// call of its own, bounded by the decision timeout (twice it, so that the
// Limiter's own timeout, and its failure policy, answer first).
func (r *Reservation) expire() {
	d := r.l.timeout
	if d <= 0 {
		d = DefaultDecisionTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*d)
	defer cancel()
	_, _ = r.Settle(ctx, -1)
}

// timerClock is a clock that runs timers of its own: the tests' fake
// clocks, on which a lease's lifetime ends when the test moves the time.
type timerClock interface {
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

// afterFunc runs f after d on the Limiter's clock, in a goroutine of its
// own; the function it returns stops it.
func (l *Limiter) afterFunc(d time.Duration, f func()) func() bool {
	if c, ok := l.clock.(timerClock); ok {
		return c.AfterFunc(d, f)
	}
	return time.AfterFunc(d, f).Stop
}
