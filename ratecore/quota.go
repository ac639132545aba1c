package ratecore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redisrate/redisrate"
)

// Quota is a limit that every request of the middleware shares, across
// every process that serves it (an upstream's 1,000 calls a second, a paid
// API's daily budget), spent from leases (redisrate.Limiter.Reserve with
// KindUpTo): a process takes up to Lease units in one call and serves
// requests from them with no round trip; what a lease has not spent goes
// back when its Lifetime ends, when the next lease is taken, or when the
// middleware is closed. A request is held to its own limits first; one the
// quota cannot serve is refused, naming the quota (its Key is its policy
// name), and its own units go back.
//
// Over any span, the units the quota serves are at most its limit's bound
// (guarantee 4 of the contract) plus what one Lifetime lets each process's
// lease spend. The other way round, a process holds one lease at a time,
// so N processes whose leases sit idle keep at most N × Lease units from
// the others, each for at most one Lifetime: by default that is at most
// what the limit refills in N seconds (and at least N units), and at most
// N tenths of its capacity. Ten processes under PerDay(1000) keep at most
// 10 units; under PerSecond(1000), at most 1,000 for a tenth of a second.
//
// While Redis cannot decide, the quota is answered by the failure policy,
// as a request's own limits are: served (FailOpen), or refused as
// unavailable (FailClosed, FailError: 503, codes.Unavailable), never as a
// spent quota.
type Quota struct {
	// Key names the quota in Redis, under Config.Name: the key
	// "{Name:quota}:Key"; and it is the quota's policy name in the fields
	// and errors of a refusal. Printable ASCII without ':', '{' or '}'.
	Key string
	// Limit is the shared limit.
	Limit redisrate.Limit
	// Lease is the most units one lease takes. Zero: what the limit
	// refills in one Lifetime, at least 1 and at most a tenth of its
	// capacity.
	Lease int64
	// Lifetime is how long a lease is spent before what is left goes
	// back. Zero: a tenth of the limit's period, at most a second, so
	// that a daily quota's lease lives a second, not hours.
	Lifetime time.Duration
}

// quota is a checked Quota and the lease in hand.
type quota struct {
	key    string
	limits []redisrate.Limit
	fields *fieldSet // the quota's policy, named Quota.Key
	lease  int64
	life   time.Duration

	mu     sync.Mutex
	cur    *redisrate.Reservation // the lease in hand; nil: none
	refill chan struct{}          // closed when the refill in flight ends; nil: none in flight
	closed bool
	// The last refusal, answered again, with no round trip, until its wait
	// has passed, to requests of at least its cost.
	denied     redisrate.Result
	deniedCost int64
	deniedTill time.Time
}

// errQuotaClosed is the error of a quota's request once Close has closed it.
var errQuotaClosed = errors.New("ratecore: the middleware is closed (Close): its quota takes no more leases")

// newQuota checks q, for the middleware called name.
func newQuota(name string, q Quota) (*quota, error) {
	if err := checkKeyName(q.Key); err != nil {
		return nil, fmt.Errorf("invalid Config.Quota.Key %q: %w", q.Key, err)
	}
	if err := q.Limit.Validate(); err != nil {
		return nil, fmt.Errorf("Config.Quota.Limit: %w", err)
	}
	if q.Lease < 0 || q.Lifetime < 0 {
		return nil, errors.New("Config.Quota: Lease and Lifetime must not be negative")
	}
	lease, life := leaseSize(q.Limit, q.Lease, q.Lifetime)
	f, err := newFieldSet([]string{q.Key}, []redisrate.Limit{q.Limit})
	if err != nil {
		return nil, fmt.Errorf("Config.Quota.Key: %w", err)
	}
	return &quota{key: "{" + name + ":quota}:" + q.Key, limits: f.limits, fields: f, lease: lease, life: life}, nil
}

// leaseSize is the lease and lifetime of a quota of limit l, from the
// ones given (0: the defaults, which scale with the limit's rate).
func leaseSize(l redisrate.Limit, lease int64, life time.Duration) (int64, time.Duration) {
	if life == 0 {
		life = max(min(l.Period/10, time.Second), time.Millisecond)
	}
	if lease == 0 {
		refilled := float64(l.Rate) * float64(life) / float64(l.Period) // what the limit refills in one lifetime
		lease = max(min(int64(refilled), l.Capacity()/10), 1)
	}
	return lease, life
}

// take serves cost units from the lease in hand, or from a new one. When
// the quota cannot serve them, ok is false and res is the quota's denial
// of cost units, with its honest RetryAfter, or the failure policy's
// refusal (res.Source redisrate.SourceFailClosed). No lock is held across
// a round trip: one caller renews the lease while the others wait for it
// under their own contexts.
func (q *quota) take(ctx context.Context, l *redisrate.Limiter, cost int64) (res redisrate.Result, ok bool, err error) {
	for {
		q.mu.Lock()
		switch {
		case q.closed:
			q.mu.Unlock()
			return redisrate.Result{}, false, errQuotaClosed
		case q.cur != nil && q.cur.Take(cost):
			res = q.cur.Result
			q.mu.Unlock()
			return res, true, nil
		case q.refused(cost, &res):
			q.mu.Unlock()
			return res, false, nil
		case q.refill == nil:
			done := make(chan struct{})
			old := q.cur
			q.refill, q.cur = done, nil
			q.mu.Unlock()
			return q.renew(ctx, l, cost, old, done)
		}
		wait := q.refill
		q.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return redisrate.Result{}, false, fmt.Errorf("%w before the quota's lease was renewed", ctx.Err())
		}
	}
}

// refused reports whether the last refusal holds for cost units still,
// and sets res to it, with its wait as it is now. q.mu is held.
func (q *quota) refused(cost int64, res *redisrate.Result) bool {
	now := time.Now()
	if q.deniedCost == 0 || cost < q.deniedCost || !now.Before(q.deniedTill) {
		return false
	}
	*res = q.denied
	res.RetryAfter = q.deniedTill.Sub(now)
	return true
}

// refusal is the refusal of cost units that the quota answers with no
// round trip, if it has one: asked before the request's own limits, so
// that a request the quota refuses takes (and gives back) none of their
// units.
func (q *quota) refusal(cost int64) (res redisrate.Result, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	ok = !q.closed && q.refused(cost, &res)
	return res, ok
}

// renew gives back what the lease old did not spend, takes a new lease and
// serves cost units from it; then ends the refill (done).
func (q *quota) renew(ctx context.Context, l *redisrate.Limiter, cost int64, old *redisrate.Reservation, done chan struct{}) (res redisrate.Result, ok bool, err error) {
	var cur *redisrate.Reservation
	var deniedTill time.Time
	defer func() {
		q.mu.Lock()
		if q.closed && cur != nil {
			_, _ = cur.Close(ctx) // closed meanwhile: Close has no lease to give back but this one
			cur = nil
		}
		q.cur, q.refill = cur, nil
		if !deniedTill.IsZero() {
			q.denied, q.deniedCost, q.deniedTill = res, cost, deniedTill
		}
		q.mu.Unlock()
		close(done)
	}()
	if old != nil {
		_, _ = old.Close(ctx) // what it did not spend goes back; in an outage its timer tries again
	}
	v, err := l.Reserve(ctx, redisrate.Request{Kind: redisrate.KindUpTo, Key: q.key, Limits: q.limits, N: max(q.lease, cost), Lease: q.life})
	switch {
	case err != nil:
		return redisrate.Result{}, false, err
	case v.Result.Source == redisrate.SourceFailClosed:
		return v.Result, false, nil
	case v.Result.Allowed && v.Result.Units == 0:
		// Admitted by the failure policy (or shadow mode): served, and no
		// lease kept, so that an outage does not pile up leases to settle.
		_, _ = v.Settle(ctx, 0) // it took nothing: no call
		return v.Result, true, nil
	case v.Take(cost):
		cur = v
		return v.Result, true, nil
	}
	if v.Result.Units > 0 {
		_, _ = v.Settle(ctx, 0) // fewer than cost: all of it back
	}
	// The lease's reply is the wait for one unit: a check of cost units
	// says when they would be.
	res, err = l.Decide(ctx, redisrate.Request{Kind: redisrate.KindCheck, Key: q.key, Limits: q.limits, N: cost})
	switch {
	case err != nil || res.Source == redisrate.SourceFailClosed:
		return res, false, err
	case res.Allowed: // freed meanwhile: served by the next request
		res.Allowed, res.RetryAfter = false, time.Millisecond
	case !res.Never() && res.Source == redisrate.SourceRedis:
		deniedTill = time.Now().Add(res.RetryAfter)
	}
	return res, false, nil
}

// close gives back the lease in hand and refuses every later request.
func (q *quota) close(ctx context.Context) error {
	q.mu.Lock()
	cur := q.cur
	q.cur, q.closed = nil, true
	q.mu.Unlock()
	if cur == nil {
		return nil
	}
	_, err := cur.Close(ctx)
	return err
}

// refusedBefore is the answer to a request that the quota refuses with no
// round trip (its refusal's wait has not passed), before the request's
// own limits are asked: not in shadow mode, which asks them all.
func (r *Rules[R]) refusedBefore(rule *Rule, cost int64) (Answer, bool) {
	if r.quota == nil || r.shadow {
		return Answer{}, false
	}
	res, ok := r.quota.refusal(cost)
	if !ok {
		return Answer{}, false
	}
	return Answer{Result: res, Verdict: Deny, fields: true, rule: rule, quota: r.quota.fields}, true
}

// held answers a request that its own limits served (a) under the quota:
// served when the quota serves cost units too; else refused, with the own
// units given back (q, the request's own; none with the quota alone).
func (r *Rules[R]) held(ctx context.Context, q *redisrate.Request, a Answer, cost int64) Answer {
	if r.quota == nil || a.Verdict != Serve || a.Err != nil {
		return a
	}
	res, ok, err := r.quota.take(ctx, r.limiter, cost)
	switch {
	case errors.Is(err, errQuotaClosed): // closed meanwhile
		a, _ = r.closedAnswer()
	case err != nil:
		a = r.Fail(err)
	case ok || r.shadow:
		return a
	case res.Source == redisrate.SourceFailClosed: // Redis could not decide: the policy's refusal
		a = Answer{Result: res, Verdict: Unavailable}
	default:
		a = Answer{Result: res, Verdict: Deny, fields: true, rule: a.rule, quota: r.quota.fields}
	}
	if q != nil && a.Verdict != Serve {
		q.Kind, q.N = redisrate.KindRefund, cost
		// The request was not served: its own units go back, whether or
		// not its client waits.
		_, _ = r.limiter.Decide(context.WithoutCancel(ctx), *q)
	}
	return a
}
