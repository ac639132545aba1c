// Package httplimit is net/http middleware that rate-limits requests with
// redisrate: per client IP (behind trusted proxies only), per API key, or
// per any key a function derives from the request, under one or several
// limits at once.
//
// Every limited response carries the rate-limit headers of
// draft-ietf-httpapi-ratelimit-headers-10 and the legacy X-RateLimit-*
// headers; a denied request gets 429 Too Many Requests with Retry-After and
// an RFC 9457 problem+json body. Each set of headers can be switched off
// (Config.Omit).
//
// Headers, for a policy named "api" of 100 requests per minute:
//
//	RateLimit-Policy: "api";q=100;w=60
//	RateLimit: "api";r=42;t=35
//	X-RateLimit-Limit: 100
//	X-RateLimit-Remaining: 42
//	X-RateLimit-Reset: 35
//	Retry-After: 2                    (on 429 only)
//
// RateLimit-Policy lists every limit: q is its capacity (the burst, or the
// limit of a window) and w the seconds in which that capacity replenishes,
// rounded up (the period for windows and for a burst equal to the rate). The
// RateLimit field reports the binding limit (redisrate.Result.Binding): r is
// the units left; t is the seconds until the limit is back to full capacity,
// rounded up, or on a denial the seconds until the request can be retried,
// so that it never points past Retry-After. X-RateLimit-Limit and
// X-RateLimit-Remaining are the binding limit's capacity and units left, and
// X-RateLimit-Reset is a number of seconds from now until full capacity,
// rounded up: a delay, not a Unix timestamp. Retry-After is in whole seconds,
// rounded up, so a client that honours it is admitted.
//
// When Redis fails, Config.OnError decides: FailClosed (the default)
// answers 503 Service Unavailable, FailOpen serves the request unlimited.
// The middleware never panics on a Redis error.
package httplimit

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/redisrate/redisrate"
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
	// RetryAfterHeader is Retry-After on 429 responses, in whole seconds.
	RetryAfterHeader
)

// ErrorHandler answers a request whose limit could not be decided: err is
// the KeyFunc's error or the Limiter's (Redis unreachable, a timeout, a key
// that holds other data). next is the limited handler, for a policy that
// serves the request anyway.
type ErrorHandler func(w http.ResponseWriter, r *http.Request, next http.Handler, err error)

// FailClosed is the default ErrorHandler: when the limit cannot be decided,
// the request is refused. A KeyFunc error that wraps ErrNoKey gets 400 Bad
// Request, naming what is missing; any other error gets 503 Service
// Unavailable, without the error's text (which may describe the
// infrastructure). This is the safe default for limits that protect against
// abuse (logins, costly endpoints, paid third-party calls): an outage of
// Redis must not switch them off. Wrap it to log the error first.
func FailClosed(w http.ResponseWriter, r *http.Request, next http.Handler, err error) {
	if errors.Is(err, ErrNoKey) {
		writeProblem(w, http.StatusBadRequest, problem{Type: "about:blank", Title: "Bad Request", Detail: err.Error()})
		return
	}
	writeProblem(w, http.StatusServiceUnavailable, problem{
		Type: "about:blank", Title: "Service Unavailable",
		Detail: "The rate limiter is unavailable; try again later.",
	})
}

// FailOpen serves the request without a limit when Redis (or a KeyFunc,
// with an error that does not wrap ErrNoKey) fails: availability first, for
// limits that only smooth load. A request without its key (ErrNoKey) is
// still refused with 400, as with FailClosed: leaving the key out must not
// be a way around the limit. Wrap it to log the error first.
func FailOpen(w http.ResponseWriter, r *http.Request, next http.Handler, err error) {
	if errors.Is(err, ErrNoKey) {
		FailClosed(w, r, next, err)
		return
	}
	next.ServeHTTP(w, r)
}

// Config configures a Middleware. Limiter and Limits are required.
type Config struct {
	// Limiter decides, in Redis.
	Limiter *redisrate.Limiter

	// Limits are the limits every request is held to, all at once (see
	// redisrate.Limiter.AllowMulti): 1 to 8 limits of one algorithm, each of
	// a capacity of at least 1.
	Limits []redisrate.Limit

	// Key identifies the client. Nil means ClientIP{}: the connection's
	// address, which is right only without proxies in front.
	Key KeyFunc

	// Name names the policy in the headers and keeps its state apart in
	// Redis: the key of a client is Name + ":" + the KeyFunc's key. Give
	// each Middleware with its own limits its own Name. Default "default".
	Name string

	// PolicyNames name each limit in RateLimit-Policy and RateLimit, in the
	// order of Limits. Default: Name for a single limit; Name-1, Name-2, ...
	// for several.
	PolicyNames []string

	// Omit switches sets of headers off, e.g. LegacyHeaders.
	Omit Headers

	// OnDenied writes the response to a denied request, after the rate-limit
	// headers (and Retry-After) are set. Default: 429 with a problem+json
	// body (RFC 9457) of the draft's "quota-exceeded" type.
	OnDenied func(w http.ResponseWriter, r *http.Request, res redisrate.Result)

	// OnError answers a request whose limit could not be decided. Default:
	// FailClosed.
	OnError ErrorHandler
}

// Middleware limits the requests that go through its Handler.
type Middleware struct {
	limiter  *redisrate.Limiter
	limits   []redisrate.Limit
	key      KeyFunc
	name     string
	policies []string // quoted sf-strings, one per limit
	policy   string   // the RateLimit-Policy value
	omit     Headers
	onDenied func(http.ResponseWriter, *http.Request, redisrate.Result)
	onError  ErrorHandler
}

// New checks c and returns its Middleware.
func New(c Config) (*Middleware, error) {
	if c.Limiter == nil {
		return nil, errors.New("httplimit: Config.Limiter is nil")
	}
	if len(c.Limits) == 0 {
		return nil, errors.New("httplimit: Config.Limits is empty: give at least one limit")
	}
	if _, err := redisrate.Args(1, false, c.Limits...); err != nil {
		return nil, fmt.Errorf("httplimit: Config.Limits: %w", err)
	}
	for i, l := range c.Limits {
		if l.Capacity() < 1 {
			return nil, fmt.Errorf("httplimit: Config.Limits[%d] %v has a capacity below 1: it could never admit a request", i, l)
		}
	}
	m := &Middleware{
		limiter:  c.Limiter,
		limits:   append([]redisrate.Limit(nil), c.Limits...),
		key:      c.Key,
		name:     c.Name,
		omit:     c.Omit,
		onDenied: c.OnDenied,
		onError:  c.OnError,
	}
	if m.name == "" {
		m.name = "default"
	}
	if err := checkName(m.name); err != nil {
		return nil, fmt.Errorf("httplimit: invalid Config.Name: %w", err)
	}
	names := c.PolicyNames
	switch {
	case len(names) == 0 && len(c.Limits) == 1:
		names = []string{m.name}
	case len(names) == 0:
		for i := range c.Limits {
			names = append(names, m.name+"-"+strconv.Itoa(i+1))
		}
	case len(names) != len(c.Limits):
		return nil, fmt.Errorf("httplimit: Config.PolicyNames has %d names for %d limits", len(names), len(c.Limits))
	}
	seen := map[string]bool{}
	var items []string
	for i, n := range names {
		if err := checkName(n); err != nil {
			return nil, fmt.Errorf("httplimit: invalid Config.PolicyNames[%d]: %w", i, err)
		}
		if seen[n] {
			return nil, fmt.Errorf("httplimit: Config.PolicyNames has %q twice", n)
		}
		seen[n] = true
		q := sfString(n)
		m.policies = append(m.policies, q)
		l := c.Limits[i]
		items = append(items, fmt.Sprintf("%s;q=%d;w=%d", q, int64(l.Capacity()), ceilSeconds(refillTime(l))))
	}
	m.policy = strings.Join(items, ", ")
	if m.key == nil {
		k, err := ClientIP{}.KeyFunc()
		if err != nil {
			return nil, err
		}
		m.key = k
	}
	if m.onDenied == nil {
		m.onDenied = m.deny
	}
	if m.onError == nil {
		m.onError = FailClosed
	}
	return m, nil
}

// Handler returns next limited: each request takes one unit from its
// client's key under every limit, or is denied.
func (m *Middleware) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key, err := m.key(r)
		if err != nil {
			m.onError(w, r, next, err)
			return
		}
		if key == "" {
			next.ServeHTTP(w, r)
			return
		}
		res, err := m.limiter.AllowMulti(r.Context(), m.name+":"+key, 1, m.limits...)
		if err != nil {
			m.onError(w, r, next, err)
			return
		}
		m.setHeaders(w.Header(), res)
		if !res.Allowed {
			m.onDenied(w, r, res)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (m *Middleware) setHeaders(h http.Header, res redisrate.Result) {
	reset := ceilSeconds(res.ResetAfter)
	t := reset
	if !res.Allowed {
		t = retryAfterSeconds(res)
	}
	if m.omit&DraftHeaders == 0 {
		h.Set("RateLimit-Policy", m.policy)
		item := fmt.Sprintf("%s;r=%d", m.policies[res.Binding], res.Remaining)
		if t >= 0 {
			item += ";t=" + strconv.FormatInt(t, 10)
		}
		h.Set("RateLimit", item)
	}
	if m.omit&LegacyHeaders == 0 {
		h.Set("X-RateLimit-Limit", strconv.FormatInt(res.Capacity, 10))
		h.Set("X-RateLimit-Remaining", strconv.FormatInt(res.Remaining, 10))
		h.Set("X-RateLimit-Reset", strconv.FormatInt(reset, 10))
	}
	if m.omit&RetryAfterHeader == 0 && !res.Allowed && !res.Never() {
		h.Set("Retry-After", strconv.FormatInt(retryAfterSeconds(res), 10))
	}
}

// deny is the default OnDenied.
func (m *Middleware) deny(w http.ResponseWriter, r *http.Request, res redisrate.Result) {
	p := problem{
		Type:     "https://iana.org/assignments/http-problem-types#quota-exceeded",
		Title:    "Quota Exceeded",
		Violated: []string{unquoteName(m.policies[res.Binding])},
	}
	if res.Never() {
		p.Detail = "This request costs more than the quota allows: it can never be admitted."
	} else {
		p.Detail = fmt.Sprintf("Too many requests: retry in %d s.", retryAfterSeconds(res))
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

// refillTime is how long limit l takes to go from empty to full capacity.
func refillTime(l redisrate.Limit) time.Duration {
	switch l.Algorithm {
	case redisrate.SlidingWindow, redisrate.FixedWindow, redisrate.SlidingLog:
		return l.Period
	case redisrate.TokenBucket: // whole refills of Rate every Period
		return time.Duration(ceilDiv(l.Capacity(), l.Rate) * float64(l.Period))
	}
	return time.Duration(l.Capacity() / l.Rate * float64(l.Period))
}

func ceilDiv(a, b float64) float64 {
	q := a / b
	if f := float64(int64(q)); f < q {
		return f + 1
	}
	return q
}

// ceilSeconds rounds d up to whole seconds, at least 1 for a positive d.
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}

// retryAfterSeconds is the Retry-After of a denial, at least 1 second, or
// -1 for one that waiting cannot help.
func retryAfterSeconds(res redisrate.Result) int64 {
	if res.Never() {
		return -1
	}
	return max(ceilSeconds(res.RetryAfter), 1)
}

// checkName accepts what an sf-string can hold: printable ASCII.
func checkName(s string) error {
	if s == "" {
		return errors.New("empty name")
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return fmt.Errorf("%q: a policy name must be printable ASCII", s)
		}
	}
	return nil
}

// sfString quotes s as a structured-field string (RFC 8941 section 3.3.3).
func sfString(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

func unquoteName(q string) string {
	return strings.NewReplacer(`\\`, `\`, `\"`, `"`).Replace(q[1 : len(q)-1])
}
