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
// timeout, redisrate.WithDecisionTimeout), the failure policy decides: the
// Limiter's (redisrate.WithFailurePolicy, WithFallback), or
// Config.FailurePolicy, in the same words. The middleware tells the truth
// about it:
//
//   - a request admitted by policy (redisrate.FailOpen) is served without
//     RateLimit or X-RateLimit-* headers: there is no quota to report;
//   - a request refused by policy (redisrate.FailClosed, or
//     redisrate.FailError, the default) gets 503 Service Unavailable with
//     Retry-After, never a 429 that would tell the client it spent its
//     quota;
//   - a decision of the fallback Limiter is kept (served, or 429 with
//     Retry-After) but reported without quota headers, as it holds only in
//     this process.
//
// In shadow mode (Config.Shadow) every request is decided and recorded as
// usual, and served.
//
// The middleware never panics on a Redis error.
package httplimit

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/redisrate/redisrate"
	"github.com/redisrate/redisrate/ratefields"
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
	// limit) and in Redis, where each plan keeps its own state.
	Name string

	// Limits are the plan's limits, all applied at once (see
	// redisrate.Request.Limits): 1 to 8 limits of one algorithm.
	Limits []redisrate.Limit

	// PolicyNames name each limit in RateLimit-Policy and RateLimit, in
	// the order of Limits. Default: Name for a single limit; Name-1,
	// Name-2, ... for several.
	PolicyNames []string
}

// Config configures a Middleware. Limiter is required, and either Limits
// or Plans with Plan.
type Config struct {
	// Limiter decides, in Redis. Its failure policy
	// (redisrate.WithFailurePolicy) decides when Redis cannot, unless
	// FailurePolicy says otherwise.
	Limiter *redisrate.Limiter

	// FailurePolicy decides a request when Redis cannot: serve it
	// (redisrate.FailOpen) or refuse it with 503 (redisrate.FailClosed,
	// redisrate.FailError). Zero: the Limiter's policy, so that one
	// setting, on the Limiter, holds for HTTP and gRPC alike.
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
	// there are no Plans: 1 to 8 limits of one algorithm.
	Limits []redisrate.Limit

	// PolicyNames name each of Limits in the headers, as Plan.PolicyNames.
	PolicyNames []string

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

	// Key identifies the client: ClientIP, APIKey (or Header), or any
	// KeyFunc. Nil means ClientIP{}: the connection's address, which is
	// right only without proxies in front. Its configuration is checked
	// by New.
	Key Keyer

	// Exempt, when it reports true, lets r through without a limit and
	// without rate-limit headers: health checks, an allowlist. It is the
	// only way to exempt a request; a KeyFunc that returns an empty key
	// gets an error (ErrNoKey).
	Exempt func(r *http.Request) bool

	// ExemptPreflight answers CORS preflight requests (IsPreflight:
	// OPTIONS with an Access-Control-Request-Method header) here, with 204
	// No Content and without counting them; they never reach the limited
	// handler. By default a preflight is counted like any request: any
	// client can send that header, so an exemption that called the handler
	// would let it run without limit.
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
	// also the policy name of a single limit without Plans. Give each
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
	// the plan's (or Name), or the scope's.
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
	// API key, looked up), never from what a client sends: the own key's
	// state is kept under the broadest key's tag, so a client that could
	// choose that key (a header of its own), or a scope that does not
	// hold the own key (a client address for an API key), would get a
	// fresh own-key limit for every value it sends. For limits that do not
	// nest (per API key and per address), use two middlewares.
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
	// outage: skip errors that match redisrate.ErrUnavailable. The answer
	// is the middleware's: 400 for a request without its key (ErrNoKey,
	// the error's text shown), 503 with Retry-After when Redis could not
	// decide (redisrate.ErrUnavailable), 503 without it when the request's
	// context ended first (the client went away, a deadline passed), 500
	// for anything else; never the error's text, which may describe the
	// infrastructure. In shadow mode the request is served instead, but
	// for an ended context.
	OnError func(r *http.Request, err error)
}

// plan is a Plan ready to serve.
type plan struct {
	name   string
	prefix string // Name + ":" (+ plan name + ":")
	fields *ratefields.Set
}

// Middleware limits the requests that go through its Handler.
type Middleware struct {
	limiter         *redisrate.Limiter
	name            string  // Config.Name, or its default
	scopes          []scope // Config.Scopes, the broadest last
	plans           map[string]*plan
	single          *plan // without Plans
	choose          func(*http.Request) (string, error)
	cost            func(*http.Request) (int64, error)
	key             KeyFunc
	exempt          func(*http.Request) bool
	exemptPreflight bool
	omit            Headers
	shadow          bool
	shadowHeaders   bool
	onDenied        func(http.ResponseWriter, *http.Request, redisrate.Result)
	onError         func(*http.Request, error)
}

// New checks c and returns its Middleware. Every configuration error is
// reported here, never per request.
func New(c Config) (*Middleware, error) {
	if c.Limiter == nil {
		return nil, errors.New("httplimit: Config.Limiter is nil")
	}
	m := &Middleware{
		limiter:         c.Limiter,
		choose:          c.Plan,
		cost:            c.Cost,
		exempt:          c.Exempt,
		exemptPreflight: c.ExemptPreflight,
		omit:            c.Omit,
		shadow:          c.Shadow,
		shadowHeaders:   c.ShadowHeaders,
		onDenied:        c.OnDenied,
		onError:         c.OnError,
	}
	if c.FailurePolicy != 0 {
		m.limiter = m.limiter.With(redisrate.WithFailurePolicy(c.FailurePolicy))
	}
	if c.Shadow {
		m.limiter = m.limiter.With(redisrate.WithShadowMode())
	}
	name := c.Name
	if name == "" {
		name = "default"
	}
	if err := ratefields.CheckName(name); err != nil {
		return nil, fmt.Errorf("httplimit: invalid Config.Name: %w", err)
	}
	if err := ratefields.CheckKeyName(name); err != nil {
		return nil, fmt.Errorf("httplimit: invalid Config.Name %q: %w", name, err)
	}
	m.name = name
	scopes, scopeLimits, err := newScopes(c, name)
	if err != nil {
		return nil, err
	}
	m.scopes = scopes
	switch {
	case len(c.Plans) == 0 && c.Plan != nil:
		return nil, errors.New("httplimit: Config.Plan is set but Config.Plans is empty")
	case len(c.Plans) == 0:
		if len(c.Limits) == 0 {
			return nil, errors.New("httplimit: Config.Limits is empty: give at least one limit, or Plans")
		}
		p, err := newPlan(Plan{Name: name, Limits: c.Limits, PolicyNames: c.PolicyNames}, name+":", scopeLimits)
		if err != nil {
			return nil, fmt.Errorf("httplimit: Config.Limits: %w", err)
		}
		m.single = p
	default:
		if len(c.Limits) > 0 || len(c.PolicyNames) > 0 {
			return nil, errors.New("httplimit: Config has both Limits and Plans: put the limits in a Plan")
		}
		if c.Plan == nil {
			return nil, errors.New("httplimit: Config.Plans needs Config.Plan to choose a plan per request")
		}
		m.plans = map[string]*plan{}
		for i, pl := range c.Plans {
			if err := ratefields.CheckName(pl.Name); err != nil {
				return nil, fmt.Errorf("httplimit: Config.Plans[%d]: invalid Name: %w", i, err)
			}
			if err := ratefields.CheckKeyName(pl.Name); err != nil {
				return nil, fmt.Errorf("httplimit: invalid Config.Plans[%d].Name %q: %w", i, pl.Name, err)
			}
			if m.plans[pl.Name] != nil {
				return nil, fmt.Errorf("httplimit: Config.Plans has the plan %q twice", pl.Name)
			}
			p, err := newPlan(pl, name+":"+pl.Name+":", scopeLimits)
			if err != nil {
				return nil, fmt.Errorf("httplimit: Config.Plans[%d] (%q): %w", i, pl.Name, err)
			}
			m.plans[pl.Name] = p
		}
	}
	keyer := c.Key
	if keyer == nil {
		keyer = ClientIP{}
	}
	if m.key, err = keyFunc(keyer, "Config.Key"); err != nil {
		return nil, err
	}
	return m, nil
}

// keyOf is f's key for r. An empty key is an error (ErrNoKey): a missing
// identity must never mean "no limit".
func keyOf(f KeyFunc, r *http.Request) (string, error) {
	key, err := f(r)
	if err == nil && key == "" {
		err = fmt.Errorf("%w: the request's key is empty (use Config.Exempt to exempt requests)", ErrNoKey)
	}
	return key, err
}

// keyFunc is k's KeyFunc, checked; what names k in errors.
func keyFunc(k Keyer, what string) (KeyFunc, error) {
	f, err := k.KeyFunc()
	if err != nil {
		return nil, fmt.Errorf("httplimit: %s: %w", what, err)
	}
	if f == nil { // a Keyer of the caller's own: a nil f would panic per request
		return nil, fmt.Errorf("httplimit: %s gives a nil KeyFunc", what)
	}
	return f, nil
}

// newPlan readies p; with scopes, p's limit is one of a call of several
// keys, with theirs (ratefields.Scopes.NewSet).
func newPlan(p Plan, prefix string, scopes ratefields.Scopes) (*plan, error) {
	f, err := scopes.NewSet(p.Name, p.PolicyNames, p.Limits)
	if err != nil {
		return nil, err
	}
	return &plan{name: p.Name, prefix: prefix, fields: f}, nil
}

// IsPreflight reports whether r is a CORS preflight request: OPTIONS with
// an Access-Control-Request-Method header (Fetch standard).
func IsPreflight(r *http.Request) bool {
	return r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != ""
}

// Handler returns next limited: each request takes its cost from its
// client's key under every limit of its plan, or is denied.
func (m *Middleware) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if m.exemptPreflight && IsPreflight(r) {
			// Answered here, never by next: the header is the client's to
			// send, so it must not buy a call of the handler.
			w.WriteHeader(http.StatusNoContent)
			return
		}
		if m.exempt != nil && m.exempt(r) {
			next.ServeHTTP(w, r)
			return
		}
		key, err := keyOf(m.key, r)
		if err != nil {
			m.fail(w, r, next, err)
			return
		}
		p := m.single
		if p == nil {
			name, err := m.choose(r)
			if err != nil {
				m.fail(w, r, next, fmt.Errorf("httplimit: Config.Plan: %w", err))
				return
			}
			if p = m.plans[name]; p == nil {
				m.fail(w, r, next, fmt.Errorf("httplimit: Config.Plan chose %q, which is not in Config.Plans", name))
				return
			}
		}
		cost := int64(1)
		if m.cost != nil {
			if cost, err = m.cost(r); err != nil {
				m.fail(w, r, next, fmt.Errorf("httplimit: Config.Cost: %w", err))
				return
			}
			if cost < 1 {
				m.fail(w, r, next, fmt.Errorf("httplimit: Config.Cost returned %d: a cost is at least 1 (exempt requests with Config.Exempt)", cost))
				return
			}
		}
		res, err := m.decide(r, p, key, cost)
		if err != nil {
			m.fail(w, r, next, err)
			return
		}
		if res.Shadow && !m.shadowHeaders {
			next.ServeHTTP(w, r) // admitted: shadow mode changes nothing clients see
			return
		}
		m.setHeaders(w.Header(), p, res)
		switch {
		case res.Allowed:
			next.ServeHTTP(w, r)
		case res.Source == redisrate.SourceFailClosed:
			m.unavailable(w)
		case m.onDenied != nil:
			m.onDenied(w, r, res)
		default:
			m.deny(w, p, res)
		}
	})
}

// decide takes cost from key under p's limits, and from the keys of the
// scopes under theirs, in one call.
func (m *Middleware) decide(r *http.Request, p *plan, key string, cost int64) (redisrate.Result, error) {
	if len(m.scopes) == 0 {
		return m.limiter.Decide(r.Context(), redisrate.Request{Key: p.prefix + key, Limits: p.fields.Limits, N: cost})
	}
	keys, err := m.scopedKeys(r, p, key)
	if err != nil {
		return redisrate.Result{}, err
	}
	return m.limiter.Decide(r.Context(), redisrate.Request{Keys: keys, N: cost})
}

// fail answers a request whose limit could not be decided (see
// Config.OnError).
func (m *Middleware) fail(w http.ResponseWriter, r *http.Request, next http.Handler, err error) {
	if m.onError != nil {
		m.onError(r, err)
	}
	switch {
	case ratefields.CallerGaveUp(err):
		writeProblem(w, http.StatusServiceUnavailable, problem{
			Type: "about:blank", Title: "Service Unavailable",
			Detail: "The request ended before its rate limit was decided.",
		})
	case m.shadow:
		next.ServeHTTP(w, r)
	case errors.Is(err, ErrNoKey):
		writeProblem(w, http.StatusBadRequest, problem{Type: "about:blank", Title: "Bad Request", Detail: err.Error()})
	case errors.Is(err, redisrate.ErrUnavailable):
		if m.omit&RetryAfterHeader == 0 {
			w.Header().Set("Retry-After", "1")
		}
		m.unavailable(w)
	default:
		writeProblem(w, http.StatusInternalServerError, problem{
			Type: "about:blank", Title: "Internal Server Error",
			Detail: "The rate limit could not be decided.",
		})
	}
}

// setHeaders writes the headers res can vouch for: all of them for a
// decision of Redis (or of the deny cache, which repeats one); for a
// degraded decision only the policy, which is configuration, and
// Retry-After on a denial.
func (m *Middleware) setHeaders(h http.Header, p *plan, res redisrate.Result) {
	if m.omit&DraftHeaders == 0 {
		h.Set("RateLimit-Policy", p.fields.Policy())
		if !res.Degraded() {
			h.Set("RateLimit", p.fields.RateLimit(res))
		}
	}
	if m.omit&LegacyHeaders == 0 && !res.Degraded() {
		h.Set("X-RateLimit-Limit", strconv.FormatInt(res.Capacity, 10))
		h.Set("X-RateLimit-Remaining", strconv.FormatInt(max(res.Remaining, 0), 10))
		h.Set("X-RateLimit-Reset", strconv.FormatInt(ratefields.CeilSeconds(res.ResetAfter), 10))
	}
	if m.omit&RetryAfterHeader == 0 && !res.Allowed {
		if s, ok := ratefields.RetryAfter(res); ok {
			h.Set("Retry-After", strconv.FormatInt(s, 10))
		}
	}
}

// unavailable answers a denial by failure policy: 503, the headers set.
func (m *Middleware) unavailable(w http.ResponseWriter) {
	writeProblem(w, http.StatusServiceUnavailable, problem{
		Type: "about:blank", Title: "Service Unavailable",
		Detail: "The rate limiter is unavailable; try again later.",
	})
}

// deny is the default OnDenied.
func (m *Middleware) deny(w http.ResponseWriter, pl *plan, res redisrate.Result) {
	p := problem{
		Type:  "https://iana.org/assignments/http-problem-types#quota-exceeded",
		Title: "Quota Exceeded",
	}
	if !res.Degraded() {
		p.Violated = []string{pl.fields.Name(min(max(res.Binding, 0), len(pl.fields.Limits)-1))}
	}
	if s, ok := ratefields.RetryAfter(res); ok {
		p.Detail = fmt.Sprintf("Too many requests: retry in %d s.", s)
	} else {
		p.Detail = "This request costs more than the quota allows: it can never be admitted."
	}
	writeProblem(w, http.StatusTooManyRequests, p)
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
