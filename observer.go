package redisrate

import (
	"context"
	"strconv"
)

// Observer watches the decisions of a Limiter: for metrics, traces and logs
// (the otelrate package builds OpenTelemetry on it). Set it with
// WithObserver. A Limiter without an observer pays nothing for the hook: no
// allocation, no call.
//
// For every decision the engine calls Start before anything else happens
// (before the deny cache, before Redis), with the context the caller passed,
// and uses the context Start returns for the rest of the decision: for the
// Redis command (so a span started there is the parent of go-redis's own
// span when redisotel is on), the fallback and End (a nil context from
// Start means the caller's own). End is called exactly once per Start, after the failure stage, with what the caller gets back:
// the Result (Result.Source says who decided; Result.Cause is the Redis
// error behind a degraded decision; in shadow mode, Result.WouldDeny says
// what was admitted only because of it) and the error. Time End minus Start is
// the decision's latency as the caller saw it.
//
// The calls, by method of the Limiter:
//   - Allow, AllowN, Decide: one decision, of the Request's Kind (Allow
//     and AllowN: KindAllow).
//   - Wait, WaitN, and Decide with KindWait: one decision of Kind
//     KindWait, from the call to its return, however many attempts it
//     took; End gets the last attempt's Result.
//   - DecideBatch: one decision with WholeBatch set that brackets the batch
//     (its Batch is the number of requests; its End gets a zero Result and
//     the batch's error), and inside it one decision per request, with the
//     request's own Kind and Index, Batch set, and the batch's context as
//     their parent. Count decisions from the requests, not from the
//     WholeBatch one.
//   - Reset: one decision with Reset set; its End gets a zero Result.
//   - Reserve: one decision of the Request's Kind; Reservation.Settle,
//     when it makes a call, one of Kind KindRefund or KindForce (a
//     lease's end too, from the goroutine of its timer).
//
// An argument error (ErrInvalid) is a decision too: Start and End are
// called, End with the error. So is a call the server refused for a
// reason of the deployment: End gets an error matching ErrMisconfigured
// (never ErrUnavailable, never a degraded Result), on every call until it
// is fixed, so that metrics count it apart from outages.
//
// Observers are called concurrently from every goroutine that uses the
// Limiter, and in the caller's goroutine: keep them fast and never block.
// They must not modify the Decision's Limits.
type Observer interface {
	// Start is called before the decision; the context it returns is the
	// one the Redis command runs with, and the one End gets. (The requests
	// of a DecideBatch that share a pipeline run under the batch's
	// context: one pipeline carries them all.)
	Start(ctx context.Context, d Decision) context.Context
	// End is called with the decision's outcome: its Result and error.
	End(ctx context.Context, d Decision, res Result, err error)
}

// Decision describes one decision for an Observer.
type Decision struct {
	// Kind is what was asked: a Request's Kind (KindWait for Wait and
	// WaitN). A Reset and a DecideBatch as a whole ask no request's kind:
	// Reset or WholeBatch says so, and Kind is then zero. Read those first.
	Kind Kind

	// Reset is set for a decision that is a Reset of Key: it has no
	// Limits or Cost, and its End gets a zero Result. Observers
	// count it apart from decisions of a Kind.
	Reset bool

	// WholeBatch is set for the decision that brackets a DecideBatch as a
	// whole: Batch is its number of requests, each of which is a decision of
	// its own, inside it. It has no Key, Limits or Cost, and its
	// End gets a zero Result and the batch's error. Count decisions from
	// the requests, not from it.
	WholeBatch bool

	// Key is the key as the caller passed it, without the Limiter's key
	// prefix (WithKeyPrefix). Keys often hold user ids and IP addresses:
	// an observer should not export them raw.
	Key string

	// Keys are the keys of a call of several keys (a Request with Keys),
	// as the caller passed them, in order:
	// Limits[i] guards Keys[i], and Key is Keys[0]. Nil for one-key calls.
	// Read them, never modify them.
	Keys []string

	// Limits are the limits of the call, in order; nil for a Reset and a
	// WholeBatch decision. They belong to the Limiter: read them, never modify them.
	// Their algorithm, one for all, is Limits[0].Algorithm.
	// Their names (Limit.Name; the middleware's policy names) name the
	// limit in metrics: the binding one, Limits[Result.Binding], when the
	// call has a Result.
	Limits []Limit

	// Cost is the units asked for: 1 for Allow, n for AllowN, a Request's
	// N (1 for an N of 0 that means 1), 0 for KindPeek, a Reset and a
	// WholeBatch decision.
	Cost int64

	// Batch is the number of requests of the DecideBatch call this decision
	// belongs to (or brackets, for WholeBatch); 0 outside DecideBatch.
	Batch int

	// Index is the position of the request in its batch, from 0; 0
	// outside DecideBatch.
	Index int

	// Carried is, at End, how many decisions the round trip that decided
	// this one carried: 1 for a call sent alone, more for calls of a hot
	// key decided together or calls in flight pipelined together
	// (WithCoalescing), or the requests of a DecideBatch's pipeline; 0
	// when no round trip decided it (the deny
	// cache, the open circuit breaker, an argument error) and at Start.
	Carried int
}

// Kind says what a Request asks (Decide, DecideBatch, Reserve) and what a
// Decision asked. The zero Kind is KindAllow. A Request of any other value
// is refused (ErrInvalid): no Decide can reset a key (Reset does), and a
// Decision reports a Reset or a DecideBatch as a whole by fields of its
// own (Decision.Reset, Decision.WholeBatch).
type Kind uint8

// The kinds of requests. The values of KindUpTo, KindRefund and KindForce
// are CONTRACT.md's modes upto, refund and force, which need the scripts
// of contract v3.
const (
	KindAllow  Kind = iota // Allow, AllowN: take N units if every limit admits them, all or nothing
	KindCheck              // decide exactly as KindAllow would, record nothing
	KindPeek               // read the state, take nothing (cost 0)
	KindWait               // Wait, WaitN: KindAllow, retried until admitted; observers see it from the call to its return
	KindUpTo               // take as many units as every limit admits now, from 0 to N
	KindRefund             // give N units back to every limit
	KindForce              // record N units whatever the limits decide, up to a debt of one capacity
)

var kindNames = [...]string{"allow", "check", "peek", "wait", "upto", "refund", "force"}

// String returns the kind's name, e.g. "allow", as metrics and spans label it.
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// WithObserver makes the Limiter report every decision to o (see
// Observer). A nil o removes it.
func WithObserver(o Observer) Option {
	return func(l *Limiter) { l.observer = o }
}

// observeStart opens a decision: with no observer it does nothing and costs
// nothing. limits is copied only when there is an observer, so that the
// caller's (often stack-allocated) slice never escapes.
func (l *Limiter) observeStart(ctx context.Context, d *Decision, limits []Limit) context.Context {
	if l.observer == nil {
		return ctx
	}
	if len(limits) > 0 {
		d.Limits = append([]Limit(nil), limits...)
	}
	if c := l.observer.Start(ctx, *d); c != nil {
		return c
	}
	return ctx
}

// observeEnd closes a decision opened by observeStart.
func (l *Limiter) observeEnd(ctx context.Context, d *Decision, res Result, err error) {
	if l.observer != nil {
		l.observer.End(ctx, *d, res, err)
	}
}
