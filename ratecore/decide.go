package ratecore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redisrate/redisrate"
)

// Verdict is what a transport does with a request.
type Verdict uint8

// The verdicts, with what httplimit and grpclimit answer.
const (
	// Serve: run the handler. The request was admitted (by its limits, by
	// the failure policy or the fallback), or shadow mode serves it.
	Serve Verdict = iota
	// Deny: its limit denied it (429, codes.ResourceExhausted).
	Deny
	// Unavailable: Redis could not decide, and the failure policy refuses
	// the request (503, codes.Unavailable), never as a spent quota.
	Unavailable
	// Ended: the request's context ended (the client went away, its
	// deadline passed) before its limit was decided. Never served: a
	// deadline is the client's to set, so it must not buy an admission.
	Ended
	// NoKey: the request has no usable key (400, codes.InvalidArgument),
	// the error's text shown.
	NoKey
	// Internal: a bug, such as a failing key function or a key holding
	// other data, or a deployment the server refuses
	// (redisrate.ErrMisconfigured: no failure policy answers it) (500,
	// codes.Internal), the error's text not shown.
	Internal
)

// Answer is the decision for a request, as a transport answers it.
type Answer struct {
	// Verdict is what to do with the request.
	Verdict Verdict
	// Result is the Limiter's decision; zero when there was none.
	Result redisrate.Result
	// Err is why the limit could not be decided; nil when it was decided.
	// A transport tells its OnError of every Answer with an Err, before
	// it answers the request: the errors that are bugs, or an outage.
	Err error

	fields bool      // send the rate-limit fields: decided, and not in shadow mode without ShadowHeaders
	rule   *Rule     // nil: none (the quota alone, or no decision)
	quota  *fieldSet // the quota's policy, when the quota refused the request
}

// Policy is the RateLimit-Policy value of the answer's rule: every limit,
// its own and the scopes', and the quota's when the quota refused the
// request. It is "" when no fields are to be sent: the request was not
// decided, or in shadow mode without Config.ShadowHeaders.
func (a Answer) Policy() string {
	if !a.fields {
		return ""
	}
	var p []string
	if a.rule != nil {
		p = append(p, a.rule.fields.policy)
	}
	if a.quota != nil {
		p = append(p, a.quota.policy)
	}
	return strings.Join(p, ", ")
}

// RateLimit is the RateLimit value of the binding limit; "" when Policy is
// "" or the decision was degraded (redisrate.Result.Degraded): such a
// decision has no quota to report. A transport sends the quota it reports
// (httplimit's X-RateLimit-*) only with it.
func (a Answer) RateLimit() string {
	switch {
	case !a.fields || a.Result.Degraded():
		return ""
	case a.quota != nil: // the quota's refusal: the binding limit is the quota
		return a.quota.rateLimit(a.Result)
	case a.rule == nil:
		return ""
	}
	return a.rule.fields.rateLimit(a.Result)
}

// RetryAfter is how long a client should wait: for Deny the limit's wait,
// or false when waiting cannot help (the cost is more than the capacity);
// for Unavailable the outage's, at least a second; otherwise 0 and false.
func (a Answer) RetryAfter() (time.Duration, bool) {
	switch {
	case a.Verdict == Unavailable:
		return max(a.Result.RetryAfter, time.Second), true
	case a.Verdict != Deny || a.Result.Never():
		return 0, false
	}
	return a.Result.RetryAfter, true
}

// Binding is the policy name and the limit of the binding limit of a
// decided answer ("" and the zero Limit otherwise), to name the violated
// policy of a denial: the quota's (Quota.Key) when the quota refused it.
func (a Answer) Binding() (string, redisrate.Limit) {
	switch {
	case a.Err != nil:
		return "", redisrate.Limit{}
	case a.quota != nil:
		return a.quota.name(0), a.quota.limits[0]
	case a.rule == nil:
		return "", redisrate.Limit{}
	}
	b := min(max(a.Result.Binding, 0), len(a.rule.fields.limits)-1)
	return a.rule.fields.name(b), a.rule.fields.limits[b]
}

// Decide takes cost units from the key of req under rule's limits, and
// from the keys of the scopes under theirs, in one call under ctx; then,
// with a Quota, cost units of the quota's lease. A nil rule holds req to
// the Quota alone (every client's requests share it: no key is needed).
// Once Close has closed r, every request is Unavailable.
func (r *Rules[R]) Decide(ctx context.Context, req R, rule *Rule, cost int64) Answer {
	if a, closed := r.closedAnswer(); closed {
		return a
	}
	if a, ok := r.refusedBefore(rule, cost); ok {
		return a
	}
	if rule == nil {
		if r.quota == nil {
			return r.Fail(errors.New("ratecore: Decide with no rule and no Config.Quota"))
		}
		return r.held(ctx, nil, Answer{Verdict: Serve}, cost)
	}
	q, err := r.request(req, rule, cost)
	if err != nil {
		return r.Fail(err)
	}
	res, err := r.limiter.Decide(ctx, q)
	return r.held(ctx, &q, r.answer(rule, res, err), cost)
}

// Reserve is Decide as a reservation (redisrate.Limiter.Reserve), for a
// cost known only after the request has run: settle the Reservation with
// the amount used. The Reservation is nil when the answer has an error.
func (r *Rules[R]) Reserve(ctx context.Context, req R, rule *Rule, cost int64) (Answer, *redisrate.Reservation) {
	if a, closed := r.closedAnswer(); closed {
		return a, nil
	}
	q, err := r.request(req, rule, cost)
	if err != nil {
		return r.Fail(err), nil
	}
	v, err := r.limiter.Reserve(ctx, q)
	if err != nil {
		return r.Fail(err), nil
	}
	return r.answer(rule, v.Result, nil), v
}

// answer is the Answer to the Limiter's decision res, err for req.
func (r *Rules[R]) answer(rule *Rule, res redisrate.Result, err error) Answer {
	if err != nil {
		return r.Fail(err)
	}
	return Answer{Result: res, rule: rule, fields: !res.Shadow || r.shadowHeaders, Verdict: verdictOf(res)}
}

// verdictOf is the verdict of a decision: Deny (429, ResourceExhausted)
// only for a limit's own denial, never for a request the failure policy
// refused because Redis could not decide it: that is Unavailable.
func verdictOf(res redisrate.Result) Verdict {
	switch {
	case res.Allowed:
		return Serve
	case res.Source == redisrate.SourceFailClosed:
		return Unavailable
	}
	return Deny
}

// request is the one Request of the Limiter per decision: req's key under
// rule's limits, and its scopes' keys under theirs.
func (r *Rules[R]) request(req R, rule *Rule, cost int64) (redisrate.Request, error) {
	key, err := r.keyOf(r.key, req)
	if err != nil {
		return redisrate.Request{}, err
	}
	if len(r.scopes) == 0 {
		if rule.base {
			key = escape(key)
		}
		return redisrate.Request{Key: rule.prefix + key, Limits: rule.fields.limits, N: cost}, nil
	}
	values := make([]string, len(r.scopes))
	for i, s := range r.scopes {
		if values[i], err = r.keyOf(s.Key, req); err != nil {
			return redisrate.Request{}, fmt.Errorf("scope %q: %w", s.Name, err)
		}
	}
	keys := scopedKeys(r.name, rule.name, key, r.scopes, values)
	kl := make([]redisrate.KeyLimit, len(keys))
	for i, k := range keys {
		kl[i] = redisrate.KeyLimit{Key: k, Limit: rule.fields.limits[i]}
	}
	return redisrate.Request{Keys: kl, N: cost}, nil
}

// keyOf is f's key for req. An empty key is an error (ErrNoKey): a missing
// identity must never mean "no limit".
func (r *Rules[R]) keyOf(f func(R) (string, error), req R) (string, error) {
	key, err := f(req)
	if err == nil && key == "" {
		err = fmt.Errorf("%w: the %s's key is empty (use Config.Exempt to exempt %ss)", ErrNoKey, r.unit, r.unit)
	}
	return key, err
}

// Fail answers a request whose limit could not be decided because of err:
// an error of Decide's, or of the transport's own (a plan or a cost that
// could not be chosen), as Decide answers its own.
func (r *Rules[R]) Fail(err error) Answer {
	a := Answer{Err: err, Verdict: Internal}
	switch {
	case callerGaveUp(err):
		a.Verdict = Ended
	case r.shadow:
		a.Verdict = Serve
	case errors.Is(err, ErrNoKey):
		a.Verdict = NoKey
	case errors.Is(err, redisrate.ErrUnavailable):
		a.Verdict = Unavailable
	}
	return a
}

// callerGaveUp reports whether err, an error of a Limiter's call, says that
// the caller's context ended before Redis decided. Such a request is
// answered as ended, never by the failure policy or shadow mode: its
// deadline is the client's to set. An error that matches
// redisrate.ErrUnavailable is Redis failing, not the caller.
func callerGaveUp(err error) bool {
	return !errors.Is(err, redisrate.ErrUnavailable) &&
		(errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded))
}

// escape is key as the rule without a name keeps it after Name + ":".
// The keys of named rules continue there with their name (a gRPC method's
// starts with '/'), so a key that starts with '/' (or '%', the escape) gets
// a '%' in front, and no client's key of one rule is another client's key
// of another, whatever rules come and go. Keys that start otherwise (the IP
// and API keys) are kept as they are.
func escape(key string) string {
	if key != "" && (key[0] == '/' || key[0] == '%') {
		return "%" + key
	}
	return key
}

// maxKeys is the most keys one call takes (CONTRACT.md, several keys): a
// request's own and up to 7 scopes'.
const maxKeys = 8

// scopedKeys returns the Redis keys of a request held to its own limit and
// to scopes, in the order of their limits: the own key first, then each
// scope's. Every key starts with the hash tag of the broadest (last)
// scope's value, so that all share one Redis Cluster slot, and the
// broadest scope's key is the tag alone: "{name:account:42}" for the
// account, with a scope "account" of value "42";
// "{name:account:42}:segment:key" for the request's own;
// "{name:account:42}:scope:value" for a scope in between. HTTP and gRPC
// build their keys here, so that an HTTP API and a gRPC one of the same
// name and scopes share an account's state.
//
// name, segment and the scopes' names are checked by New and Rule: not
// empty, without ':', '{' or '}', all different. key and values are a
// client's: in the tag, '%' and '}' of the value are percent-encoded, so
// the tag ends where this ends it, and distinct values stay distinct.
func scopedKeys[K any](name, segment, key string, scopes []Scope[K], values []string) []string {
	last := len(scopes) - 1
	tag := "{" + name + ":" + scopes[last].Name + ":" + tagValue.Replace(values[last]) + "}"
	keys := make([]string, 0, len(scopes)+1)
	keys = append(keys, tag+":"+segment+":"+key)
	for i, s := range scopes[:last] {
		keys = append(keys, tag+":"+s.Name+":"+values[i])
	}
	return append(keys, tag)
}

// tagValue percent-encodes '%' and '}' in a hash tag's value.
var tagValue = strings.NewReplacer("%", "%25", "}", "%7D")

// Close ends r's work, for a graceful shutdown: the Quota's lease gives
// back what it has not spent, the timers of r's leases stop, and every
// later request is answered Unavailable (503, codes.Unavailable: try
// another instance), with an Err matching redisrate.ErrNoClient. It closes r's own Limiter (made with
// redisrate.Limiter.With), never Config.Limiter, which may serve others:
// close that one after every middleware on it. ctx bounds the wait.
// Closing again does nothing.
func (r *Rules[R]) Close(ctx context.Context) error {
	r.closed.Store(true)
	var err error
	if r.quota != nil {
		err = r.quota.close(ctx)
	}
	return errors.Join(err, r.limiter.Close(ctx))
}

// closedAnswer is the answer to every request once r is closed.
func (r *Rules[R]) closedAnswer() (Answer, bool) {
	if !r.closed.Load() {
		return Answer{}, false
	}
	a := r.Fail(errRulesClosed)
	if a.Verdict != Serve { // shadow mode serves it still
		a.Verdict = Unavailable
	}
	return a, true
}

// errRulesClosed is the error of a request once Close has closed its
// middleware.
var errRulesClosed = fmt.Errorf("ratecore: the middleware is closed (Close): %w", redisrate.ErrNoClient)
