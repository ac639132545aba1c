// Package httplimit is net/http middleware that rate-limits requests with
// redisrate: per client IP (behind trusted proxies only), per API key
// (hashed with a secret), or per any key a function derives from the
// request; under one or several limits at once, chosen per request (plans)
// and with a cost per request; and to further keys with limits of their
// own, decided in the same atomic call (Config.Scopes): an API key's limit
// and its account's, all or nothing.
//
// Every response the limiter decided carries the rate-limit fields of
// draft-ietf-httpapi-ratelimit-headers-10 and the legacy X-RateLimit-*
// headers; a denied request gets 429 Too Many Requests with Retry-After and
// an RFC 9457 problem+json body. Each set of headers can be switched off
// (Config.Omit).
//
// Headers, for a policy named "api" of 100 requests per minute, 42 left:
//
//	RateLimit-Policy: "api";q=100;w=60
//	RateLimit: "api";r=42;t=1
//	X-RateLimit-Limit: 100
//	X-RateLimit-Remaining: 42
//	X-RateLimit-Reset: 35
//	Retry-After: 2                    (on 429 and 503 only)
//
// RateLimit-Policy lists every limit that was applied, the plan's and the
// Scopes': q units in w whole seconds. For a limit that refills its whole
// capacity in a whole number of seconds, q is the capacity (the burst, or
// the limit of a window) and w that time; otherwise (a period of 100 ms,
// a refill of 1.5 s) w is the shortest whole number of seconds that holds
// whole periods and q what they replenish, so that q/w is always the
// limit's rate.
//
// The RateLimit field reports the binding limit (redisrate.Result.Binding):
// r is the units left; t, as the draft defines it, the seconds until
// additional quota is made available, rounded up (for the continuous
// buckets, one more unit; for the token bucket, its next refill; for the
// windows, full capacity, the latest time at which more is certain), and no
// t at all when the limit is full. On a denial t is at most Retry-After.
// X-RateLimit-Limit and X-RateLimit-Remaining are the binding limit's
// capacity and units left; X-RateLimit-Reset is the seconds until full
// capacity, rounded up: a delay, not a Unix timestamp. Retry-After is in
// whole seconds, rounded up, so a client that honours it is admitted.
//
// When Redis fails (or does not answer within the Limiter's decision
// timeout, redisrate.WithDecisionTimeout), the Limiter's fallback decides
// (redisrate.WithFallback), or else the failure policy: Config.FailurePolicy
// or the Limiter's (an explicit FailClosed or FailError on either is never
// served open), by default redisrate.FailOpen, which serves the request.
// The middleware tells the truth about it:
//
//   - a request admitted by policy (redisrate.FailOpen, the default) is
//     served without RateLimit or X-RateLimit-* headers: there is no quota
//     to report;
//   - a request refused by policy (redisrate.FailClosed or
//     redisrate.FailError) gets 503 Service Unavailable with Retry-After,
//     never a 429 that would tell the client it spent its quota: only a
//     limit's own denial is a 429;
//   - a server that refuses the deployment (redisrate.ErrMisconfigured: a
//     wrong password, an ACL, no scripting) is no outage and no policy
//     answers it: every request gets 500 and OnError is told;
//   - a decision of the fallback Limiter is kept (served, or 429 with
//     Retry-After) but reported without quota headers, as it holds only in
//     this process.
//
// Two middlewares on one route (a limit per address in front of one per
// API key, say) both report: RateLimit-Policy and RateLimit list the
// limits of both, the outer's first, and X-RateLimit-* describe the one
// with the fewest units left.
//
// In shadow mode (Config.Shadow) every request is decided and recorded as
// usual, and served.
//
// The middleware never panics on a Redis error.
package httplimit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redisrate/redisrate"
	"github.com/redisrate/redisrate/ratecore"
)

// Headers selects sets of response headers, to switch them off with
// Config.Omit.
type Headers uint8

const (
	// DraftHeaders are RateLimit-Policy and RateLimit
	// (draft-ietf-httpapi-ratelimit-headers-10).
	DraftHeaders Headers = 1 << iota
	// LegacyHeaders are X-RateLimit-Limit, X-RateLimit-Remaining and
	// X-RateLimit-Reset (seconds from now).
	LegacyHeaders
	// RetryAfterHeader is Retry-After on 429 and 503 responses, in whole
	// seconds.
	RetryAfterHeader
)

// Plan is a named set of limits that a request can be held to, such as
// the limits of a pricing plan.
type Plan struct {
	// Name names the plan: in the headers (as the policy name of a single
	// limit without a Name of its own) and in Redis, where each plan keeps
	// its own state.
	Name string

	// Limits are the plan's limits, all applied at once (see
	// a redisrate.Request of several Limits): 1 to 8 limits of one
	// algorithm. Each is named in RateLimit-Policy and RateLimit, and in
	// metrics, by its Name (redisrate.Limit.WithName); one without is
	// named Name for a single limit, or Name-1, Name-2, ... by its place.
	Limits []redisrate.Limit
}

// Config configures a Middleware. Limiter is required, and either Limits
// or Plans with Plan.
type Config struct {
	// Limiter decides, in Redis. When Redis cannot, its fallback
	// (redisrate.WithFallback) decides, or else the failure policy: its
	// own (redisrate.WithFailurePolicy) unless FailurePolicy is set; an
	// explicit FailClosed or FailError on it is never served open.
	Limiter *redisrate.Limiter

	// FailurePolicy decides a request when Redis cannot (after the
	// Limiter's fallback, if it has one): serve it (redisrate.FailOpen) or
	// refuse it with 503 (redisrate.FailClosed, redisrate.FailError). Zero:
	// the Limiter's own policy if it was given one, else FailOpen, so that
	// an outage of the limiter is not an outage of the service
	// (docs/reliability.md); the Limiter's metrics (source fail-open) and
	// its log line (redisrate.WithLogger: policy=fail-open) say so. A limit
	// that must hold through an outage, such as a login form's, sets
	// FailClosed here or on its Limiter. FailOpen here with a FailClosed
	// or FailError Limiter is an error of New: one of them would not be
	// what the service does.
	FailurePolicy redisrate.FailurePolicy

	// Shadow decides and records every request as usual and serves it
	// whatever the decision: the way to roll a limit out. Metrics and
	// traces (redisrate.Observer, otelrate) report what would have been
	// denied (redisrate.Result.WouldDeny). No request is refused, not even
	// one that the limit could not be decided for (OnError is told). See
	// redisrate.WithShadowMode: a Limiter in shadow mode admits every
	// decision too, and its Results turn the headers off alike.
	Shadow bool

	// ShadowHeaders sends the rate-limit headers in shadow mode too
	// (never Retry-After): off by default, so that a limit being rolled
	// out changes nothing clients see.
	ShadowHeaders bool

	// Limits are the limits every request is held to, all at once, when
	// there are no Plans: 1 to 8 limits of one algorithm. Each is named in
	// the headers by its Name, as in Plan.Limits (by default Name, or
	// Name-1, Name-2, ...).
	Limits []redisrate.Limit

	// Plans are the sets of limits a request can be held to, one chosen
	// per request by Plan; instead of Limits. Each plan keeps its own
	// state: a client that moves to another plan starts afresh there.
	Plans []Plan

	// Plan names the plan of r, from Plans, e.g. from the plan of the
	// authenticated account. Required with Plans. An error, or a name that
	// is not in Plans, is answered 500 (and OnError is told).
	Plan func(r *http.Request) (string, error)

	// Cost is the units r takes (at least 1), e.g. 10 for a bulk
	// endpoint. Nil: 1. An error, or a cost below 1, is answered 500. A
	// cost above a limit's capacity is denied with 429 and no
	// Retry-After: waiting cannot help.
	Cost func(r *http.Request) (int64, error)

	// Settle makes Cost an estimate, settled once the handler has run: a
	// request reserves its Cost (redisrate.Limiter.Reserve), and when the
	// handler returns, the reservation is settled with what the handler
	// reported with Used (redisrate.Reservation.Settle): the difference is
	// given back, or recorded as a debt that the client's next requests
	// wait for. A handler that reports nothing keeps the estimate. The
	// settlement runs under the request's context without its
	// cancellation, so that a client that goes away still pays, within a
	// timeout of its own; when Redis cannot decide it, the estimate stands
	// and OnError is told, under every failure policy.
	Settle bool

	// Quota, when not nil, is a limit that every request shares across
	// every process serving it (an upstream's own limit), spent from
	// leases after each request's own limits: see ratecore.Quota. A
	// request it refuses is answered 429 with its Retry-After, naming the
	// quota's Key as the violated policy, and its own units go back;
	// while Redis cannot decide the quota, FailurePolicy answers (503 or
	// served), never 429. Without Limits and Plans, the quota alone holds
	// every request, whatever its client (Key is not called). Not with
	// Settle. Close the Middleware on shutdown to give its lease back.
	Quota *ratecore.Quota

	// Key identifies the client: ClientIP, APIKey, or any KeyFunc. Nil
	// means ClientIP{}: the connection's address, which is right only
	// without proxies in front. Its configuration is checked by New.
	Key Keyer

	// Exempt, when it reports true, lets r through without a limit and
	// without rate-limit headers: health checks, an allowlist. It is the
	// only way to exempt a request; a KeyFunc that returns an empty key
	// gets an error (ratecore.ErrNoKey).
	Exempt func(r *http.Request) bool

	// ExemptPreflight answers CORS preflight requests (OPTIONS with an
	// Access-Control-Request-Method header, as the Fetch standard has
	// them) here, with 204 No Content and without counting them; they
	// never reach the limited handler. By default a preflight is counted
	// like any request: any client can send that header, so an exemption
	// that called the handler would let it run without limit.
	//
	// Put the CORS middleware in front of this one. If it answers
	// preflights itself (the usual way), they never come here. If it
	// passes them on after setting its headers (a "passthrough" option),
	// set ExemptPreflight: the 204 carries those headers, and a browser's
	// preflight does not take a unit of its client's quota.
	ExemptPreflight bool

	// Name keeps the state of this Middleware apart in Redis: the key of
	// a client is Name + ":" + the KeyFunc's key, with the plan's name in
	// between when there are Plans (with Scopes, see there). Neither name
	// may hold ':', '{' or '}', so the keys of two Names never meet. It is
	// also the policy name of a single limit without Plans and without a
	// Name of its own (redisrate.Limit.Name). Give each
	// Middleware its own Name. Default "default".
	Name string

	// Omit switches sets of headers off, e.g. LegacyHeaders.
	Omit Headers

	// OnDenied writes the response to a request denied by its limit, after
	// the rate-limit headers (and Retry-After) are set. Default: 429 with
	// a problem+json body (RFC 9457) of the draft's "quota-exceeded" type.
	// A request denied by policy while Redis is down (Source
	// redisrate.SourceFailClosed) does not come here: it gets 503.
	OnDenied func(w http.ResponseWriter, r *http.Request, res redisrate.Result)

	// Scopes hold every request to further keys, each with a limit of
	// its own, in the same atomic call as its own limit (Key and Limits,
	// or its plan's): per API key at 10/s and per account at 1000/s, say.
	// The request is admitted only if every limit admits it; a request
	// that one limit denies takes nothing from the others. The headers
	// list every limit and describe the binding one by its policy name:
	// its Limit.Name, else the plan's (or Name), or the scope's.
	//
	// The last scope is the broadest: every other key of a request belongs
	// to one of its keys (an account holds API keys), and its key is the
	// Redis Cluster hash tag of all of them, so that one call may hold
	// them: the account's state is "{Name:account:42}", shared by all its
	// API keys, and an API key's "{Name:account:42}:plan:key" (the plan's
	// name, or Name without plans). A client's key cannot leave its tag:
	// '%' and '}' in the broadest key are percent-encoded.
	//
	// So the scopes must nest, and the broadest scope's key must follow
	// from the request's own key on the server (the account that owns an
	// API key, looked up), never from what a client sends: ratecore.Scope's
	// Key says why, and what to do for limits that do not nest.
	//
	// With Scopes the request's own key holds one limit (Limits, or each
	// plan's): a key holds one limit in a call of several keys. Hold it to
	// a further limit with a Scope of the same Key. At most 7 scopes, all
	// limits of one algorithm.
	Scopes []Scope

	// OnError, if set, is told of every request whose limit could not be
	// decided, before it is answered: to log the errors that are bugs (a
	// key holding other data, a failing Plan or KeyFunc). Redis being
	// down is logged by the Limiter (redisrate.WithLogger), once per
	// outage: skip errors that match redisrate.ErrUnavailable. A
	// deployment the server refuses (redisrate.ErrMisconfigured) is told
	// on every request: alert on it. The answer is the middleware's: 400
	// for a request without its key (ratecore.ErrNoKey, the error's text
	// shown), 503 with Retry-After when Redis could not decide
	// (redisrate.ErrUnavailable), 503 without it when the request's
	// context ended first (the client went away, a deadline passed), 500
	// for anything else (a misconfiguration included); never the error's
	// text, which may describe the infrastructure. In shadow mode the
	// request is served instead, but for an ended context.
	OnError func(r *http.Request, err error)
}

// Scope is a further key that a request is held to, with a limit of its
// own, in the same atomic call as the request's own limit: per API key and
// per account, say (see Config.Scopes, and ratecore.Scope for its fields).
// Its Key is a Keyer, whose errors, and an empty key, are answered as
// Config.Key's are.
type Scope = ratecore.Scope[Keyer]

// Middleware limits the requests that go through its Handler.
type Middleware struct {
	rules           *ratecore.Rules[*http.Request]
	plans           map[string]*ratecore.Rule
	single          *ratecore.Rule // without Plans
	choose          func(*http.Request) (string, error)
	cost            func(*http.Request) (int64, error)
	settle          bool
	exempt          func(*http.Request) bool
	exemptPreflight bool
	omit            Headers
	onDenied        func(http.ResponseWriter, *http.Request, redisrate.Result)
	onError         func(*http.Request, error)
}

// New checks c and returns its Middleware. Every configuration error is
// reported here, never per request.
func New(c Config) (*Middleware, error) {
	if c.Quota != nil && c.Settle {
		return nil, errors.New("httplimit: Config.Quota with Config.Settle: a quota's lease takes the estimate, which nothing would settle")
	}
	core, err := newCore(c)
	if err != nil {
		return nil, fmt.Errorf("httplimit: %w", err)
	}
	m := &Middleware{rules: core, choose: c.Plan, cost: c.Cost, settle: c.Settle, exempt: c.Exempt,
		exemptPreflight: c.ExemptPreflight, omit: c.Omit, onDenied: c.OnDenied, onError: c.OnError}
	switch {
	case len(c.Plans) == 0 && c.Plan != nil:
		return nil, errors.New("httplimit: Config.Plan is set but Config.Plans is empty")
	case len(c.Plans) == 0 && len(c.Limits) == 0 && c.Quota != nil:
		return m, nil // the quota alone
	case len(c.Plans) == 0:
		if len(c.Limits) == 0 {
			return nil, errors.New("httplimit: Config.Limits is empty: give at least one limit, or Plans, or a Quota")
		}
		if m.single, err = core.Rule("", "", c.Limits); err != nil {
			return nil, fmt.Errorf("httplimit: Config.Limits: %w", err)
		}
		return m, nil
	case len(c.Limits) > 0:
		return nil, errors.New("httplimit: Config has both Limits and Plans: put the limits in a Plan")
	case c.Plan == nil:
		return nil, errors.New("httplimit: Config.Plans needs Config.Plan to choose a plan per request")
	}
	m.plans = map[string]*ratecore.Rule{}
	for i, pl := range c.Plans {
		if pl.Name == "" { // "" is the rule of Config.Limits
			return nil, fmt.Errorf("httplimit: Config.Plans[%d]: invalid Name: empty policy name", i)
		}
		if m.plans[pl.Name] != nil {
			return nil, fmt.Errorf("httplimit: Config.Plans has the plan %q twice", pl.Name)
		}
		if m.plans[pl.Name], err = core.Rule(pl.Name, fmt.Sprintf("the plan %q", pl.Name), pl.Limits); err != nil {
			return nil, fmt.Errorf("httplimit: Config.Plans[%d] (%q): %w", i, pl.Name, err)
		}
	}
	return m, nil
}

// newCore is the protocol-neutral part of c, checked: its keyers become
// key functions of a request.
func newCore(c Config) (*ratecore.Rules[*http.Request], error) {
	name := c.Name
	if name == "" {
		name = "default"
	}
	keyer := c.Key
	if keyer == nil {
		keyer = ClientIP{}
	}
	key, err := keyFunc(keyer, "Config.Key")
	if err != nil {
		return nil, err
	}
	scopes := make([]ratecore.Scope[func(*http.Request) (string, error)], len(c.Scopes))
	for i, s := range c.Scopes {
		scopes[i] = ratecore.Scope[func(*http.Request) (string, error)]{Name: s.Name, Limit: s.Limit}
		if s.Key == nil {
			continue // ratecore.New names it
		}
		if scopes[i].Key, err = keyFunc(s.Key, fmt.Sprintf("Config.Scopes[%d] (%q).Key", i, s.Name)); err != nil {
			return nil, err
		}
	}
	return ratecore.New(ratecore.Config[*http.Request]{
		Limiter: c.Limiter, FailurePolicy: c.FailurePolicy, Shadow: c.Shadow, ShadowHeaders: c.ShadowHeaders,
		Name: name, Unit: "request", Key: key, Scopes: scopes, Quota: c.Quota,
	})
}

// keyFunc is k's KeyFunc, checked, as a function of the core's; what names
// k in errors.
func keyFunc(k Keyer, what string) (func(*http.Request) (string, error), error) {
	f, err := k.KeyFunc()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if f == nil { // a Keyer of the caller's own: a nil f would panic per request
		return nil, fmt.Errorf("%s gives a nil KeyFunc", what)
	}
	return f, nil
}

// isPreflight reports whether r is a CORS preflight request: OPTIONS with
// an Access-Control-Request-Method header (Fetch standard).
func isPreflight(r *http.Request) bool {
	return r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != ""
}

// Handler returns next limited: each request takes its cost from its
// client's key under every limit of its plan, or is denied.
func (m *Middleware) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if m.exemptPreflight && isPreflight(r) {
			// Answered here, never by next: the header is the client's to
			// send, so it must not buy a call of the handler.
			w.WriteHeader(http.StatusNoContent)
			return
		}
		if m.exempt != nil && m.exempt(r) {
			next.ServeHTTP(w, r)
			return
		}
		a, reserved := m.decide(r)
		if a.Err != nil && m.onError != nil {
			m.onError(r, a.Err)
		}
		m.setHeaders(w.Header(), a)
		switch a.Verdict {
		case ratecore.Serve:
			m.serve(w, r, next, reserved)
		case ratecore.Deny:
			if m.onDenied != nil {
				m.onDenied(w, r, a.Result)
				return
			}
			m.deny(w, a)
		case ratecore.Unavailable:
			writeProblem(w, http.StatusServiceUnavailable, problem{
				Type: "about:blank", Title: "Service Unavailable",
				Detail: "The rate limiter is unavailable; try again later.",
			})
		case ratecore.Ended:
			writeProblem(w, http.StatusServiceUnavailable, problem{
				Type: "about:blank", Title: "Service Unavailable",
				Detail: "The request ended before its rate limit was decided.",
			})
		case ratecore.NoKey:
			writeProblem(w, http.StatusBadRequest, problem{Type: "about:blank", Title: "Bad Request", Detail: a.Err.Error()})
		default:
			writeProblem(w, http.StatusInternalServerError, problem{
				Type: "about:blank", Title: "Internal Server Error",
				Detail: "The rate limit could not be decided.",
			})
		}
	})
}

// decide chooses r's plan and cost, and decides r under them: with
// Config.Settle, as a reservation, returned too.
func (m *Middleware) decide(r *http.Request) (ratecore.Answer, *redisrate.Reservation) {
	p := m.single
	if p == nil && m.plans != nil {
		name, err := m.choose(r)
		if err != nil {
			return m.rules.Fail(fmt.Errorf("httplimit: Config.Plan: %w", err)), nil
		}
		if p = m.plans[name]; p == nil {
			return m.rules.Fail(fmt.Errorf("httplimit: Config.Plan chose %q, which is not in Config.Plans", name)), nil
		}
	}
	cost := int64(1)
	if m.cost != nil {
		var err error
		if cost, err = m.cost(r); err != nil {
			return m.rules.Fail(fmt.Errorf("httplimit: Config.Cost: %w", err)), nil
		}
		if cost < 1 {
			return m.rules.Fail(fmt.Errorf("httplimit: Config.Cost returned %d: a cost is at least 1 (exempt requests with Config.Exempt)", cost)), nil
		}
	}
	if m.settle {
		return m.rules.Reserve(r.Context(), r, p, cost)
	}
	return m.rules.Decide(r.Context(), r, p, cost), nil
}

// serve runs next for an admitted r, and settles r's reservation, if it
// has one, with what next reported (Used).
func (m *Middleware) serve(w http.ResponseWriter, r *http.Request, next http.Handler, reserved *redisrate.Reservation) {
	if reserved == nil {
		next.ServeHTTP(w, r)
		return
	}
	u := &usage{}
	r = r.WithContext(context.WithValue(r.Context(), usageKey{}, u))
	next.ServeHTTP(w, r)
	u.mu.Lock()
	used, reported := u.n, u.reported
	u.mu.Unlock()
	if !reported {
		return // the estimate stands
	}
	// Not the request's own context: a client that leaves as the handler
	// ends must not escape its debt. The Limiter's timeout bounds the call.
	if _, err := reserved.Settle(context.WithoutCancel(r.Context()), used); err != nil {
		if m.onError != nil {
			m.onError(r, fmt.Errorf("httplimit: settling the request's cost: %w", err))
		}
	}
}

// Close gives back what the Config.Quota's lease has not spent and stops
// the middleware's timers, for a graceful shutdown: call it once the
// server has stopped taking requests (http.Server.Shutdown). A request
// after it is answered 503 with Retry-After (another instance can serve
// it), and OnError is told with an error matching redisrate.ErrNoClient.
// It does not close Config.Limiter, which other middleware may share:
// close that after (redisrate.Limiter.Close), then its Redis client. ctx
// bounds the wait.
func (m *Middleware) Close(ctx context.Context) error {
	return m.rules.Close(ctx)
}

// usageKey is the context key of a request's usage, which Used sets.
type usageKey struct{}

// usage is what a handler reported with Used.
type usage struct {
	mu       sync.Mutex
	n        int64
	reported bool
}

// Used reports, from a handler behind a Middleware with Config.Settle, the
// units r really cost, from 0: once the handler returns, the middleware
// settles the request's reservation of Config.Cost with it. The last
// report counts. A negative n, or a request that the middleware did not
// reserve for (no Config.Settle, an exempt request), is ignored.
func Used(r *http.Request, n int64) {
	u, ok := r.Context().Value(usageKey{}).(*usage)
	if !ok || n < 0 {
		return
	}
	u.mu.Lock()
	u.n, u.reported = n, true
	u.mu.Unlock()
}

// setHeaders writes the headers a can vouch for: all of them for a
// decision of Redis (or of the deny cache, which repeats one); for a
// degraded decision only the policy, which is configuration, and
// Retry-After on a refusal. A middleware in front (another limit on the
// same route) has set its own already: the draft's fields list both
// (their values are lists), and the legacy ones, which hold one limit,
// keep the one with the fewest units left.
func (m *Middleware) setHeaders(h http.Header, a ratecore.Answer) {
	rl := a.RateLimit() // "": no quota to report
	if m.omit&DraftHeaders == 0 {
		appendItem(h, "RateLimit-Policy", a.Policy())
		appendItem(h, "RateLimit", rl)
	}
	res := a.Result
	if m.omit&LegacyHeaders == 0 && rl != "" && fewer(h, res.Remaining) {
		h.Set("X-RateLimit-Limit", strconv.FormatInt(res.Capacity, 10))
		h.Set("X-RateLimit-Remaining", strconv.FormatInt(max(res.Remaining, 0), 10))
		h.Set("X-RateLimit-Reset", strconv.FormatInt(ceilSeconds(res.ResetAfter), 10))
	}
	if wait, ok := a.RetryAfter(); ok && m.omit&RetryAfterHeader == 0 {
		h.Set("Retry-After", strconv.FormatInt(max(ceilSeconds(wait), 1), 10))
	}
}

// appendItem adds item to the list that field holds, as one field line.
func appendItem(h http.Header, field, item string) {
	if item == "" {
		return
	}
	if v := h.Values(field); len(v) > 0 {
		item = strings.Join(append(v, item), ", ")
	}
	h.Set(field, item)
}

// fewer reports whether remaining is fewer units than the
// X-RateLimit-Remaining already set, if any.
func fewer(h http.Header, remaining int64) bool {
	set, err := strconv.ParseInt(h.Get("X-RateLimit-Remaining"), 10, 64)
	return err != nil || max(remaining, 0) < set
}

// deny is the default OnDenied.
func (m *Middleware) deny(w http.ResponseWriter, a ratecore.Answer) {
	p := problem{
		Type:  "https://iana.org/assignments/http-problem-types#quota-exceeded",
		Title: "Quota Exceeded",
	}
	if name, _ := a.Binding(); !a.Result.Degraded() {
		p.Violated = []string{name}
	}
	if wait, ok := a.RetryAfter(); ok {
		p.Detail = fmt.Sprintf("Too many requests: retry in %d s.", max(ceilSeconds(wait), 1))
	} else {
		p.Detail = "This request costs more than the quota allows: it can never be admitted."
	}
	writeProblem(w, http.StatusTooManyRequests, p)
}

// ceilSeconds rounds d up to whole seconds, at least 1 for a positive d:
// a client that waits that long is admitted.
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d-1)/time.Second) + 1
}

// problem is an RFC 9457 problem details object.
type problem struct {
	Type     string   `json:"type"`
	Title    string   `json:"title"`
	Status   int      `json:"status"`
	Detail   string   `json:"detail,omitempty"`
	Violated []string `json:"violated-policies,omitempty"`
}

func writeProblem(w http.ResponseWriter, status int, p problem) {
	p.Status = status
	body, _ := json.Marshal(p) // strings and ints only: cannot fail
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Content-Length", strconv.Itoa(len(body)+1))
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}
