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
// back when its Lifetime ends or the next lease is taken. A request is
// held to its own limits first; one the quota cannot serve is refused and
// its own units go back. Over any span, the units the quota serves are at
// most its limit's bound (guarantee 4 of the contract) plus what one
// Lifetime lets each process's lease spend.
type Quota struct {
	// Key names the quota in Redis, under Config.Name: the key
	// "{Name:quota}:Key". Printable ASCII without ':', '{' or '}'.
	Key string
	// Limit is the shared limit.
	Limit redisrate.Limit
	// Lease is the most units one lease takes. Zero: a tenth of the
	// limit's capacity, at least 1.
	Lease int64
	// Lifetime is how long a lease is spent before what is left goes
	// back. Zero: a tenth of the limit's period.
	Lifetime time.Duration
}

// quota is a checked Quota and the lease in hand.
type quota struct {
	key    string
	limits []redisrate.Limit
	lease  int64
	life   time.Duration

	mu  sync.Mutex
	cur *redisrate.Reservation // the lease in hand; nil: none
}

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
	lease, life := q.Lease, q.Lifetime
	if lease == 0 {
		lease = max(q.Limit.Capacity()/10, 1)
	}
	if life == 0 {
		life = q.Limit.Period / 10
	}
	return &quota{key: "{" + name + ":quota}:" + q.Key, limits: []redisrate.Limit{q.Limit}, lease: lease, life: life}, nil
}

// take serves cost units from the lease in hand, or from a new one. When
// the quota cannot serve them, ok is false and res is the quota's denial
// of cost units, with its honest RetryAfter.
func (q *quota) take(ctx context.Context, l *redisrate.Limiter, cost int64) (res redisrate.Result, ok bool, err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.cur != nil {
		if q.cur.Take(cost) {
			return q.cur.Result, true, nil
		}
		_, _ = q.cur.Settle(ctx, -1) // what it did not spend goes back (its failure is the policy's)
		q.cur = nil
	}
	v, err := l.Reserve(ctx, redisrate.Request{Kind: redisrate.KindUpTo, Key: q.key, Limits: q.limits, N: max(q.lease, cost), Lease: q.life})
	if err != nil {
		return redisrate.Result{}, false, err
	}
	if v.Take(cost) {
		q.cur = v
		return v.Result, true, nil
	}
	if v.Result.Units > 0 {
		_, _ = v.Settle(ctx, 0) // fewer than cost: all of it back
	}
	// The lease's reply is the wait for one unit: a check of cost units
	// says when they would be.
	res, err = l.Decide(ctx, redisrate.Request{Kind: redisrate.KindCheck, Key: q.key, Limits: q.limits, N: cost})
	if err == nil && res.Allowed { // freed meanwhile: served by the next request
		res.Allowed, res.RetryAfter = false, time.Millisecond
	}
	return res, false, err
}

// held answers a request that its own limits served (a) under the quota:
// served when the quota serves cost units too; else refused, with the own
// units given back (q, the request's own).
func (r *Rules[R]) held(ctx context.Context, req R, q redisrate.Request, a Answer, cost int64) Answer {
	if r.quota == nil || a.Verdict != Serve || a.Err != nil {
		return a
	}
	res, ok, err := r.quota.take(ctx, r.limiter, cost)
	switch {
	case err != nil:
		return r.Fail(req, err)
	case ok || r.shadow:
		return a
	}
	if res.Source == redisrate.SourceFailOpen {
		return a // the quota was not decided, and the policy serves
	}
	q.Kind, q.N = redisrate.KindRefund, cost
	_, _ = r.limiter.Decide(ctx, q) // the request was not served: its own units go back
	// A policy's refusal is no spent quota: Unavailable, not Deny.
	return Answer{Result: res, Verdict: verdictOf(res)}
}
