// Package ratecore is the protocol-neutral core of redisrate's middleware:
// the rules of a limited service (its name, limits and their policy names,
// scopes, failure policy and shadow mode), checked once; the decision for a
// request's key and its scopes' keys, in one call of the Limiter; and the
// rate-limit fields of the answer. The httplimit middleware and the
// grpclimit interceptors are its HTTP and gRPC transports: they turn a
// request into a key, and an Answer into status codes and headers or
// metadata. Middleware for another protocol can do the same.
//
// R is the transport's request: *http.Request for httplimit, the call (its
// context and method) for grpclimit. Key functions take it.
//
// The package also holds what both transports key clients by, declared
// once with their documentation: the client address behind trusted
// proxies (IP: httplimit.ClientIP, grpclimit.PeerIP) and the HMAC of an
// API key (APIKey: httplimit.APIKey, grpclimit.APIKey).
//
// # The fields
//
// Answer.Policy and Answer.RateLimit are the values of the RateLimit-Policy
// and RateLimit fields of draft-ietf-httpapi-ratelimit-headers-10, which
// httplimit sends as HTTP headers and grpclimit as the metadata
// ratelimit-policy and ratelimit; Answer.RetryAfter is the wait of
// Retry-After (or of gRPC's RetryInfo).
//
// A RateLimit-Policy item is a policy name with q, the quota, and w, the
// window in whole seconds: q units every w seconds is the limit's long-run
// rate. When the limit refills its whole capacity in a whole number of
// seconds, q is that capacity (the burst of a bucket, the limit of a
// window) and w that time; otherwise (a sub-second period, a refill time
// such as 1.5 s) w is the shortest whole number of seconds that holds a
// whole number of periods, and q what those periods replenish. A RateLimit
// item is the name of the binding limit with r, the units left, and t, the
// seconds until more quota comes (absent at full capacity).
package ratecore

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/redisrate/redisrate"
	"github.com/redisrate/redisrate/internal/policyof"
)

// ErrNoKey is matched by key errors that mean the request carries no
// usable key, such as a missing API key (header or metadata): the
// client's fault, which httplimit answers 400 Bad Request and grpclimit
// codes.InvalidArgument, the error's text shown. An empty key wraps it
// too: a missing identity must never mean "no limit".
var ErrNoKey = errors.New("no rate-limit key")

// Scope is a further key that a request is held to, with a limit of its
// own, in the same atomic call as the request's own limit (contract v2.1,
// several keys): per API key and per account, say. The request is
// admitted only if every limit admits it, and then recorded on every key;
// a request that one limit denies takes nothing from the others.
//
// K is how the scope's key is given: a transport's Keyer
// (httplimit.Scope and grpclimit.Scope are Scope[Keyer]), or in Config
// a function of the request.
type Scope[K any] struct {
	// Name names the scope: part of its Redis keys, and its policy name in
	// the fields and metrics unless its Limit has a Name of its own. Printable ASCII without ':', '{' or '}',
	// other than Config.Name, the names of the rules (plans, methods) and
	// the other scopes'.
	Name string
	// Key gives the scope's key for a request, e.g. the account that owns
	// the request's API key, looked up on the server. Its errors, and an
	// empty key, are answered as the request's own key's are.
	//
	// The scopes must nest, and the broadest (the last) scope's key must
	// follow from the request's own key on the server, never from what a
	// client sends: its key is the Redis Cluster hash tag of the request's
	// every key, the own key's included, so a client that could choose it
	// (a header of its own), or a scope that does not hold the own key (a
	// client address for an API key), would get a fresh own-key limit for
	// every value it sends. For limits that do not nest (per API key and
	// per address), use two middlewares.
	Key K
	// Limit is the scope's limit, of the algorithm of the request's own
	// limit: one call runs one algorithm's script.
	Limit redisrate.Limit
}

// Config is what every transport configures alike. Limiter, Name and Key
// are required.
type Config[R any] struct {
	// Limiter decides, in Redis, with its fallback (redisrate.WithFallback)
	// first when Redis cannot, and its failure policy if it has one (see
	// FailurePolicy).
	Limiter *redisrate.Limiter
	// FailurePolicy decides a request when Redis cannot, after the
	// Limiter's fallback. An explicit redisrate.FailClosed or FailError,
	// here or on the Limiter (redisrate.WithFailurePolicy), is never served
	// open. Zero: the Limiter's policy, or if it has none FailOpen, the
	// middleware's default (docs/reliability.md): an outage of the limiter
	// must not become an outage of the service. FailOpen here with a
	// refusing policy on the Limiter is an error of New: choose one.
	FailurePolicy redisrate.FailurePolicy
	// Shadow decides and records every request and serves it.
	Shadow bool
	// ShadowHeaders sends the fields in shadow mode too.
	ShadowHeaders bool
	// Name keeps the middleware's state apart in Redis; printable ASCII
	// without ':', '{' or '}'.
	Name string
	// Unit is what the middleware limits, for errors: "request" (when
	// empty) or "call".
	Unit string
	// Key identifies the client of a request. An empty key is an error
	// that wraps ErrNoKey.
	Key func(R) (string, error)
	// Scopes are the further keys, the broadest last.
	Scopes []Scope[func(R) (string, error)]
	// Quota, when not nil, is a limit every request shares, spent from
	// leases (see Quota), after the request's own limits.
	Quota *Quota
}

// Rules are a checked Config, with the limits of its rules: New returns
// them, Rule adds a rule, Decide decides a request.
type Rules[R any] struct {
	limiter       *redisrate.Limiter
	name          string
	unit          string
	key           func(R) (string, error)
	scopes        []Scope[func(R) (string, error)]
	shadow        bool
	shadowHeaders bool
	names         map[string]string // the names in keys, and what uses each
	quota         *quota            // nil: none
	closed        atomic.Bool       // by Close
}

// New checks c. Its errors name the fields of the transports' Config.
func New[R any](c Config[R]) (*Rules[R], error) {
	if c.Limiter == nil {
		return nil, errors.New("Config.Limiter is nil")
	}
	if err := checkKeyName(c.Name); err != nil {
		return nil, fmt.Errorf("invalid Config.Name %q: %w", c.Name, err)
	}
	if c.Key == nil {
		return nil, errors.New("Config.Key gives a nil key function")
	}
	unit := c.Unit
	if unit == "" {
		unit = "request"
	}
	policy, err := resolvePolicy(c.FailurePolicy, redisrate.FailurePolicy(policyof.Of(c.Limiter)))
	if err != nil {
		return nil, err
	}
	opts := []redisrate.Option{redisrate.WithFailurePolicy(policy)}
	if c.Shadow {
		opts = append(opts, redisrate.WithShadowMode())
	}
	r := &Rules[R]{
		limiter: c.Limiter.With(opts...), name: c.Name, unit: unit, key: c.Key,
		shadow: c.Shadow, shadowHeaders: c.ShadowHeaders,
		names: map[string]string{c.Name: "Config.Name"},
	}
	if err := r.checkScopes(c.Scopes); err != nil {
		return nil, err
	}
	if c.Quota != nil {
		q, err := newQuota(c.Name, *c.Quota)
		if err != nil {
			return nil, err
		}
		r.quota = q
	}
	return r, nil
}

// resolvePolicy is the one failure policy of a middleware whose Config
// says own and whose Limiter says lim (0: no choice): an explicit
// FailClosed or FailError on either side is never served open. With no
// choice on either side, FailOpen; with one, that one; with both, the
// Config's, unless it would serve what the Limiter refuses: then an error,
// since one of the two says what the service will not do.
func resolvePolicy(own, lim redisrate.FailurePolicy) (redisrate.FailurePolicy, error) {
	switch {
	case own == redisrate.FailOpen && lim != 0 && lim != redisrate.FailOpen:
		return 0, fmt.Errorf("Config.FailurePolicy is FailOpen, and the Config.Limiter's own policy is %v: a request Redis cannot decide would be served, which the Limiter refuses; "+
			"leave Config.FailurePolicy zero to follow the Limiter, or give the middleware a Limiter of its own policy (Limiter.With(redisrate.WithFailurePolicy(redisrate.FailOpen)))", lim)
	case own != 0:
		return own, nil
	case lim != 0:
		return lim, nil
	}
	return redisrate.FailOpen, nil
}

// checkScopes checks the scopes of a Config: how many one call takes,
// their names, limits and keys.
func (r *Rules[R]) checkScopes(scopes []Scope[func(R) (string, error)]) error {
	if len(scopes) > maxKeys-1 {
		return fmt.Errorf("Config.Scopes has %d scopes: at most %d, for %d keys in one call with the %s's own", len(scopes), maxKeys-1, maxKeys, r.unit)
	}
	for i, s := range scopes {
		what := fmt.Sprintf("Config.Scopes[%d]", i)
		if err := checkKeyName(s.Name); err != nil {
			return fmt.Errorf("invalid %s.Name %q: %w", what, s.Name, err)
		}
		if other, ok := r.names[s.Name]; ok {
			// The name tells the scope's keys apart from the others'
			// under one hash tag.
			return fmt.Errorf("%s has the Name %q of %s: give each scope a name of its own", what, s.Name, other)
		}
		r.names[s.Name] = what
		if err := s.Limit.Validate(); err != nil {
			return fmt.Errorf("%s (%q): invalid Limit: %w", what, s.Name, err)
		}
		if s.Key == nil {
			return fmt.Errorf("%s (%q) has no Key", what, s.Name)
		}
	}
	r.scopes = append([]Scope[func(R) (string, error)](nil), scopes...)
	return nil
}

// Rule is a set of limits that a request can be held to: the limits of
// every request, or of a plan or a method, with the scopes' limits after
// them. Its state is its own.
type Rule struct {
	fields *fieldSet // the limits of the rule and of the scopes, with their policy names
	prefix string    // the own key's, without scopes
	name   string    // the own key's segment, with scopes
	base   bool      // the rule without a name
}

// Rule checks and returns the rule of limits. Each limit's policy name is
// its Name (redisrate.Limit.Name); one without is named name (a single
// limit) or name-1, name-2, ... by its place. An empty name is the rule
// of every request, named Config.Name, whose keys are Name:key; any other
// is a plan or method of that name, with keys Name:name:key, which what
// names in errors (such as `the plan "free"`). With scopes, the rule holds
// one limit, of the scopes' algorithm. The errors do not say which rule:
// the transport does.
func (r *Rules[R]) Rule(name, what string, limits []redisrate.Limit) (*Rule, error) {
	rule := &Rule{name: name, prefix: r.name + ":" + name + ":", base: name == ""}
	if rule.base {
		rule.name, rule.prefix = r.name, r.name+":"
	} else {
		if err := checkKeyName(name); err != nil {
			return nil, err
		}
		if other, ok := r.names[name]; ok {
			return nil, fmt.Errorf("the name %q is that of %s: their keys would meet", name, other)
		}
	}
	f, err := r.fieldsOf(rule.name, limits)
	if err != nil {
		return nil, err
	}
	rule.fields = f
	if !rule.base {
		r.names[name] = what
	}
	return rule, nil
}

// fieldsOf is the fieldSet of a rule's limits followed by the scopes',
// each named by its policy name: its own Name, or the default (see Rule);
// a scope's limit without a Name by the scope's. It refuses what could never serve:
// no limits; with scopes, several limits or another algorithm than
// theirs; limits that one call cannot hold (redisrate.Args's errors, which
// match redisrate.ErrInvalid); names the fields cannot carry, or a name
// twice, the quota's (Quota.Key) included.
func (r *Rules[R]) fieldsOf(name string, limits []redisrate.Limit) (*fieldSet, error) {
	if len(limits) == 0 {
		return nil, errors.New("no limits: give at least one")
	}
	names := make([]string, len(limits))
	for i, l := range limits {
		switch {
		case l.Name != "":
			names[i] = l.Name
		case len(limits) == 1:
			names[i] = name
		default:
			names[i] = fmt.Sprintf("%s-%d", name, i+1)
		}
	}
	if len(r.scopes) > 0 {
		if len(limits) != 1 {
			return nil, fmt.Errorf("%d limits with Config.Scopes: with scopes, each key holds one limit (a call of several keys, CONTRACT.md); hold the %s's key to a further limit with a Scope of the same Key", len(limits), r.unit)
		}
		limits = append([]redisrate.Limit(nil), limits...)
		for i, s := range r.scopes {
			if s.Limit.Algorithm != limits[0].Algorithm {
				return nil, fmt.Errorf("Config.Scopes[%d] (%q) has a %s limit, and the %s's own is %s: the limits of one call run one algorithm's script; give every limit the same algorithm", i, s.Name, s.Limit.Algorithm, r.unit, limits[0].Algorithm)
			}
			n := s.Name
			if s.Limit.Name != "" {
				n = s.Limit.Name // a limit's policy name is its own, here as in a rule
			}
			names, limits = append(names, n), append(limits, s.Limit)
		}
	}
	if r.quota != nil {
		for _, n := range names {
			if n == r.quota.fields.name(0) {
				return nil, fmt.Errorf("policy name %q is Config.Quota.Key's too: a response naming both policies could not tell them apart; rename the limit (Limit.Name) or the quota", n)
			}
		}
	}
	if _, err := redisrate.Args(redisrate.KindAllow, 1, limits...); err != nil {
		return nil, err
	}
	f, err := newFieldSet(names, limits)
	if err != nil {
		return nil, fmt.Errorf("a limit's Name: %w", err)
	}
	return f, nil
}

// checkKeyName accepts a name that middleware puts in its Redis keys (its
// own name, a plan's or method's, a scope's) as scopedKeys lays them out:
// a policy name (checkPolicyName) without ':', which separates the
// names in a key, and without '{' or '}', which mark the hash tag of
// scoped keys. With them, the keys of two names could meet: Name "api:free"
// would share the keys of Name "api" with plan "free".
func checkKeyName(name string) error {
	if err := checkPolicyName(name); err != nil {
		return err
	}
	if strings.Contains(name, ":") {
		return errors.New("':' separates the names in a client's Redis key, so with it the keys of two names could meet; use another character, such as '-'")
	}
	if strings.ContainsAny(name, "{}") {
		return errors.New("'{' and '}' mark the Redis Cluster hash tag of scoped keys, so with them the keys of two names could meet; use another character, such as '-'")
	}
	return nil
}
