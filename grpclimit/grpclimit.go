// Package grpclimit is gRPC server middleware that rate-limits calls with
// redisrate: unary and stream server interceptors, keyed by a function of
// the call (the peer's address, metadata such as an API key, the method),
// with limits and costs per method, and further keys with limits of their
// own decided in the same atomic call (Config.Scopes): an API key's limit
// and its account's, all or nothing.
//
// A call denied by its limit fails with codes.ResourceExhausted and the
// details gRPC clients and Google's APIs read: a google.rpc.RetryInfo with
// the wait (absent when waiting cannot help: the cost is more than the
// capacity) and a google.rpc.QuotaFailure naming the policy. Every call the
// limiter decided carries the response metadata ratelimit-policy and
// ratelimit, with the values of the HTTP fields of
// draft-ietf-httpapi-ratelimit-headers-10 that the httplimit package sends
// (see its documentation for q, w, r and t).
//
// When Redis fails (or does not answer within the Limiter's decision
// timeout, redisrate.WithDecisionTimeout), the failure policy decides: the
// Limiter's (redisrate.WithFailurePolicy, WithFallback), or
// Config.FailurePolicy, in the same words; and the interceptors tell the
// truth about it: a call admitted by policy (redisrate.FailOpen) goes
// through without ratelimit metadata (there is no quota to report); a call
// refused by policy (redisrate.FailClosed, or redisrate.FailError, the
// default) fails with codes.Unavailable and a RetryInfo, never
// ResourceExhausted, which would tell the client it spent its quota; a
// decision of the fallback is kept, without ratelimit metadata. In shadow
// mode (Config.Shadow) every call is decided and recorded as usual, and
// goes through.
package grpclimit

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/redisrate/redisrate"
	"github.com/redisrate/redisrate/ratefields"
)

// The response metadata keys.
const (
	PolicyMetadata    = "ratelimit-policy" // the RateLimit-Policy value: each limit's quota and window
	RateLimitMetadata = "ratelimit"        // the RateLimit value: the binding limit, units left, seconds to more
)

// ErrNoKey is matched by KeyFunc errors that mean the call carries no
// usable key, such as missing API key metadata: the client's fault, which
// the interceptors answer with codes.InvalidArgument.
var ErrNoKey = errors.New("no rate-limit key")

// KeyFunc returns the key that identifies the client of a call to the full
// method name method ("/package.Service/Method"), from its context (peer,
// incoming metadata). An empty key is an error (it wraps ErrNoKey): to
// exempt calls, use Config.Exempt.
type KeyFunc func(ctx context.Context, method string) (string, error)

// KeyFunc returns f itself, so that a KeyFunc is a Keyer.
func (f KeyFunc) KeyFunc() (KeyFunc, error) {
	if f == nil {
		return nil, errors.New("grpclimit: nil KeyFunc")
	}
	return f, nil
}

// Keyer is a configuration of a KeyFunc, checked once by New: PeerIP,
// APIKey, or a KeyFunc itself.
type Keyer interface {
	// KeyFunc returns the function that keys calls, or why the
	// configuration is wrong.
	KeyFunc() (KeyFunc, error)
}

// PeerIP keys calls by the IP address of the connection's peer, such as
// "ip:192.0.2.1", and IPv6 peers by their /64. Behind a proxy every call
// comes from the proxy: key by something the proxy vouches for instead.
type PeerIP struct{}

// KeyFunc returns PeerIP's KeyFunc.
func (PeerIP) KeyFunc() (KeyFunc, error) {
	return func(ctx context.Context, _ string) (string, error) {
		p, ok := peer.FromContext(ctx)
		if !ok || p.Addr == nil {
			return "", errors.New("grpclimit: the call has no peer address")
		}
		s := p.Addr.String()
		if host, _, err := net.SplitHostPort(s); err == nil {
			s = host
		}
		a, err := netip.ParseAddr(s)
		if err != nil {
			return "", fmt.Errorf("grpclimit: cannot parse the peer address %q: %w", p.Addr.String(), err)
		}
		a = a.Unmap().WithZone("")
		if a.Is6() {
			pre, _ := a.Prefix(64)
			return "ip:" + pre.String(), nil
		}
		return "ip:" + a.String(), nil
	}, nil
}

// MinSecretLen is the shortest APIKey.Secret accepted: 16 bytes.
const MinSecretLen = 16

// APIKey keys calls by an API key in the incoming metadata, such as
// "x-api-key". Only HMAC-SHA256(Secret, API key) reaches Redis, so that
// API keys cannot be read or recovered from it. A call without the key, or
// with it more than once, gets an error that wraps ErrNoKey.
type APIKey struct {
	// Metadata is the metadata key that holds the API key. Required.
	Metadata string
	// Secret keys the HMAC: at least MinSecretLen random bytes, kept out
	// of the code.
	Secret []byte
}

// KeyFunc checks k and returns its KeyFunc. Keys look like "key:" and 32
// hex digits.
func (k APIKey) KeyFunc() (KeyFunc, error) {
	name := strings.ToLower(strings.TrimSpace(k.Metadata))
	if name == "" {
		return nil, errors.New("grpclimit: APIKey has no Metadata: name the metadata key that holds the API key")
	}
	if len(k.Secret) < MinSecretLen {
		return nil, fmt.Errorf("grpclimit: APIKey.Secret has %d bytes: give at least %d random bytes, kept out of the code", len(k.Secret), MinSecretLen)
	}
	secret := append([]byte(nil), k.Secret...)
	return func(ctx context.Context, _ string) (string, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		values := md.Get(name)
		switch {
		case len(values) == 0 || values[0] == "":
			return "", fmt.Errorf("%w: the call has no %s metadata", ErrNoKey, name)
		case len(values) > 1:
			return "", fmt.Errorf("%w: the call has %d %s values; send one", ErrNoKey, len(values), name)
		}
		mac := hmac.New(sha256.New, secret)
		mac.Write([]byte(values[0]))
		return "key:" + hex.EncodeToString(mac.Sum(nil)[:16]), nil
	}, nil
}

// Method is the limits and cost of a method.
type Method struct {
	// Limits are the method's own limits, with state of their own; nil
	// means Config.Limits, shared with every method without limits of its
	// own.
	Limits []redisrate.Limit
	// PolicyNames name each of Limits in the metadata. Default: the
	// method's name for a single limit, with "-1", "-2", ... for several.
	PolicyNames []string
	// Cost is the units a call takes; 0 means 1.
	Cost int64
}

// Config configures an Interceptor. Limiter is required, and Limits
// unless every limited method has its own.
type Config struct {
	// Limiter decides, in Redis; its failure policy decides without it,
	// unless FailurePolicy says otherwise.
	Limiter *redisrate.Limiter
	// FailurePolicy decides a call when Redis cannot: let it through
	// (redisrate.FailOpen) or fail it with codes.Unavailable
	// (redisrate.FailClosed, redisrate.FailError). Zero: the Limiter's
	// policy, so that one setting, on the Limiter, holds for gRPC and
	// HTTP alike.
	FailurePolicy redisrate.FailurePolicy
	// Shadow decides and records every call as usual and lets it through
	// whatever the decision: the way to roll a limit out. Metrics and
	// traces (redisrate.Observer, otelrate) report what would have been
	// denied (redisrate.Result.WouldDeny). No call is failed, not even one
	// that the limit could not be decided for (OnError is told). See
	// redisrate.WithShadowMode.
	Shadow bool
	// ShadowHeaders sends the ratelimit response metadata in shadow mode
	// too: off by default, so that a limit being rolled out changes
	// nothing clients see.
	ShadowHeaders bool
	// Limits are the limits of every method without limits of its own.
	// Without them, only the methods in Methods are limited.
	Limits []redisrate.Limit
	// PolicyNames name each of Limits in the metadata. Default: Name for
	// a single limit; Name-1, Name-2, ... for several.
	PolicyNames []string
	// Methods holds the methods with limits or a cost of their own, by
	// full method name ("/package.Service/Method").
	Methods map[string]Method
	// Key identifies the client. Nil means PeerIP{}.
	Key Keyer
	// Exempt, when it reports true, lets a call through without a limit
	// and without metadata (health checks, reflection, an allowlist).
	Exempt func(ctx context.Context, method string) bool
	// Name keeps the state apart in Redis: a client's key is Name + ":" +
	// the KeyFunc's key, with the method's name in between for a method
	// with limits of its own (with Scopes, see there); under Config.Limits
	// a key that starts with '/' or '%' gets a '%' in front, so that it
	// never reads as a method's. It may not hold ':', '{' or '}', so the
	// keys of two Names never meet. Default "grpc".
	Name string
	// Scopes hold every limited call to further keys, each with a limit
	// of its own, in the same atomic call as its own limit (Key and
	// Limits, or its method's): per API key at 10/s and per account at
	// 1000/s, say. The call is admitted only if every limit admits it; a
	// call that one limit denies takes nothing from the others. The
	// metadata list every limit and describe the binding one by its policy
	// name, and so do the QuotaFailure and the RetryInfo of a denial.
	//
	// The last scope is the broadest: every other key of a call belongs
	// to one of its keys (an account holds API keys), and its key is the
	// Redis Cluster hash tag of all of them, so that one call may hold
	// them: the account's state is "{Name:account:42}", shared by all its
	// API keys and every method, and an API key's
	// "{Name:account:42}:Name:key" (the method's name instead of the
	// second Name for a method with limits of its own). A client's key
	// cannot leave its tag: '%' and '}' in the broadest key are
	// percent-encoded.
	//
	// So the scopes must nest, and the broadest scope's key must follow
	// from the request's own key on the server (the account that owns an
	// API key, looked up), never from what a client sends: the own key's
	// state is kept under the broadest key's tag, so a client that could
	// choose that key (a header of its own), or a scope that does not
	// hold the own key (a peer address for an API key), would get a
	// fresh own-key limit for every value it sends. For limits that do not
	// nest (per API key and per address), use two interceptors.
	//
	// httplimit builds the same keys: an HTTP API and a gRPC one of the
	// same Name and scopes share an account's state.
	//
	// With Scopes the call's own key holds one limit (Limits, and each
	// method's): a key holds one limit in a call of several keys. Hold it
	// to a further limit with a Scope of the same Key. At most 7 scopes,
	// all limits of one algorithm.
	Scopes []Scope
	// OnError, if set, is told of every call whose limit could not be
	// decided, before it is answered: to log the errors that are bugs (a
	// key holding other data, a failing KeyFunc). Redis being down is
	// logged by the Limiter (redisrate.WithLogger), once per outage: skip
	// errors that match redisrate.ErrUnavailable. The answer is the
	// interceptor's: codes.InvalidArgument for a call without its key
	// (ErrNoKey, the error's text shown), codes.Unavailable with a
	// RetryInfo of one second when Redis could not decide
	// (redisrate.ErrUnavailable), the context's code when the call's
	// deadline passed (or it was cancelled) first, codes.Internal for
	// anything else; never the error's text, which may describe the
	// infrastructure. In shadow mode the call goes through instead, but
	// for an ended context.
	OnError func(ctx context.Context, method string, err error)
}

type rule struct {
	prefix  string
	base    bool   // Config.Limits' rule: its keys go through baseKey
	segment string // with Scopes: the name of its key after the hash tag
	fields  *ratefields.Set
	cost    int64
}

// Interceptor limits the calls that go through its interceptors.
type Interceptor struct {
	limiter       *redisrate.Limiter
	name          string  // Config.Name, or its default
	scopes        []scope // Config.Scopes, the broadest last
	base          *rule   // nil without Config.Limits
	methods       map[string]*rule
	key           KeyFunc
	exempt        func(context.Context, string) bool
	shadow        bool
	shadowHeaders bool
	onError       func(context.Context, string, error)
}

// New checks c and returns its Interceptor. Every configuration error is
// reported here, never per call.
func New(c Config) (*Interceptor, error) {
	if c.Limiter == nil {
		return nil, errors.New("grpclimit: Config.Limiter is nil")
	}
	name := c.Name
	if name == "" {
		name = "grpc"
	}
	if err := ratefields.CheckName(name); err != nil {
		return nil, fmt.Errorf("grpclimit: invalid Config.Name: %w", err)
	}
	// ':' ends the name in a client's key (Name:method:key): with it,
	// Name "grpc:/a.S/M" would share the keys of Name "grpc"'s method.
	if err := ratefields.CheckKeyName(name); err != nil {
		return nil, fmt.Errorf("grpclimit: invalid Config.Name %q: %w", name, err)
	}
	scopes, scopeLimits, err := newScopes(c, name)
	if err != nil {
		return nil, err
	}
	i := &Interceptor{limiter: c.Limiter, name: name, scopes: scopes, methods: map[string]*rule{}, exempt: c.Exempt,
		shadow: c.Shadow, shadowHeaders: c.ShadowHeaders, onError: c.OnError}
	if c.FailurePolicy != 0 {
		i.limiter = i.limiter.With(redisrate.WithFailurePolicy(c.FailurePolicy))
	}
	if c.Shadow {
		i.limiter = i.limiter.With(redisrate.WithShadowMode())
	}
	if len(c.Limits) > 0 {
		r, err := newRule(name, c.Limits, c.PolicyNames, 1, name+":", scopeLimits)
		if err != nil {
			return nil, fmt.Errorf("grpclimit: Config.Limits: %w", err)
		}
		r.base = true
		i.base = r
	} else if len(c.PolicyNames) > 0 {
		return nil, errors.New("grpclimit: Config.PolicyNames without Config.Limits")
	}
	for m, spec := range c.Methods {
		if !strings.HasPrefix(m, "/") || strings.Count(m, "/") != 2 {
			return nil, fmt.Errorf("grpclimit: Config.Methods: %q is not a full method name such as /package.Service/Method", m)
		}
		// The name is part of the method's keys (Name:method:key, or the
		// segment of scoped keys).
		if err := ratefields.CheckKeyName(m); err != nil {
			return nil, fmt.Errorf("grpclimit: Config.Methods: %q is not a full method name such as /package.Service/Method: %w", m, err)
		}
		cost := spec.Cost
		switch {
		case cost < 0:
			return nil, fmt.Errorf("grpclimit: Config.Methods[%q]: negative Cost %d", m, cost)
		case cost == 0:
			cost = 1
		}
		if m == name {
			// Both would be the segment of their keys under Scopes.
			return nil, fmt.Errorf("grpclimit: Config.Methods[%q]: the method's name is Config.Name: give the interceptor another Name", m)
		}
		if len(spec.Limits) == 0 {
			if i.base == nil {
				return nil, fmt.Errorf("grpclimit: Config.Methods[%q] has no Limits, and there are no Config.Limits", m)
			}
			if len(spec.PolicyNames) > 0 {
				return nil, fmt.Errorf("grpclimit: Config.Methods[%q] has PolicyNames but no Limits", m)
			}
			r := *i.base
			r.cost = cost
			i.methods[m] = &r
			continue
		}
		r, err := newRule(m, spec.Limits, spec.PolicyNames, cost, name+":"+m+":", scopeLimits)
		if err != nil {
			return nil, fmt.Errorf("grpclimit: Config.Methods[%q]: %w", m, err)
		}
		i.methods[m] = r
	}
	if i.base == nil && len(i.methods) == 0 {
		return nil, errors.New("grpclimit: no limits: give Config.Limits or Config.Methods with Limits")
	}
	keyer := c.Key
	if keyer == nil {
		keyer = PeerIP{}
	}
	if i.key, err = keyFunc(keyer, "Config.Key"); err != nil {
		return nil, err
	}
	return i, nil
}

// keyOf is f's key for a call. An empty key is an error (ErrNoKey): a
// missing identity must never mean "no limit".
func keyOf(ctx context.Context, f KeyFunc, method string) (string, error) {
	key, err := f(ctx, method)
	if err == nil && key == "" {
		err = fmt.Errorf("%w: the call's key is empty (use Config.Exempt to exempt calls)", ErrNoKey)
	}
	return key, err
}

// keyFunc is k's KeyFunc, checked; what names k in errors.
func keyFunc(k Keyer, what string) (KeyFunc, error) {
	f, err := k.KeyFunc()
	if err != nil {
		return nil, fmt.Errorf("grpclimit: %s: %w", what, err)
	}
	if f == nil { // a Keyer of the caller's own: a nil f would panic per call
		return nil, fmt.Errorf("grpclimit: %s gives a nil KeyFunc", what)
	}
	return f, nil
}

// newRule readies the limits of name (Name or a method); with scopes, its
// limit is one of a call of several keys, with theirs
// (ratefields.Scopes.NewSet).
func newRule(name string, limits []redisrate.Limit, names []string, cost int64, prefix string, scopes ratefields.Scopes) (*rule, error) {
	f, err := scopes.NewSet(name, names, limits)
	if err != nil {
		return nil, err
	}
	return &rule{prefix: prefix, segment: name, fields: f, cost: cost}, nil
}

// Unary returns the unary server interceptor.
func (i *Interceptor) Unary() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		md, err := i.decide(ctx, info.FullMethod)
		if md != nil {
			_ = grpc.SetHeader(ctx, md)
		}
		if err != nil {
			return nil, err
		}
		return handler(ctx, req)
	}
}

// Stream returns the stream server interceptor: a stream is one call, and
// takes its cost once, when it opens.
func (i *Interceptor) Stream() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		md, err := i.decide(ss.Context(), info.FullMethod)
		if md != nil {
			_ = ss.SetHeader(md)
		}
		if err != nil {
			return err
		}
		return handler(srv, ss)
	}
}

// decide is the decision for a call: the metadata to send, and the error
// that fails the call, or nil.
func (i *Interceptor) decide(ctx context.Context, method string) (metadata.MD, error) {
	r := i.methods[method]
	if r == nil {
		r = i.base
	}
	if r == nil || (i.exempt != nil && i.exempt(ctx, method)) {
		return nil, nil
	}
	key, err := keyOf(ctx, i.key, method)
	if err != nil {
		return nil, i.fail(ctx, method, err)
	}
	res, err := i.allow(ctx, method, r, key)
	if err != nil {
		return nil, i.fail(ctx, method, err)
	}
	if res.Shadow && !i.shadowHeaders {
		return nil, nil // admitted: shadow mode changes nothing clients see
	}
	md := metadata.Pairs(PolicyMetadata, r.fields.Policy())
	if !res.Degraded() {
		md.Set(RateLimitMetadata, r.fields.RateLimit(res))
	}
	switch {
	case res.Allowed:
		return md, nil
	case res.Source == redisrate.SourceFailClosed:
		return md, withRetry(codes.Unavailable, "the rate limiter is unavailable; try again later", max(res.RetryAfter, time.Second), nil)
	}
	b := min(max(res.Binding, 0), len(r.fields.Limits)-1)
	qf := &errdetails.QuotaFailure{Violations: []*errdetails.QuotaFailure_Violation{{
		Subject:     r.fields.Name(b),
		Description: fmt.Sprintf("limit %v", r.fields.Limits[b]),
	}}}
	if res.Never() {
		qf.Violations[0].Description += ": the call costs more than the quota allows and can never be admitted"
		st, _ := status.New(codes.ResourceExhausted, "rate limit exceeded: this call can never be admitted").WithDetails(qf)
		return md, st.Err()
	}
	return md, withRetry(codes.ResourceExhausted, fmt.Sprintf("rate limit exceeded: retry in %v", res.RetryAfter), res.RetryAfter, qf)
}

// allow takes r's cost from key under r's limits, and from the keys of the
// scopes under theirs, in one call.
func (i *Interceptor) allow(ctx context.Context, method string, r *rule, key string) (redisrate.Result, error) {
	if len(i.scopes) == 0 {
		if r.base {
			key = baseKey(key)
		}
		return i.limiter.Decide(ctx, redisrate.Request{Key: r.prefix + key, Limits: r.fields.Limits, N: r.cost})
	}
	keys, err := i.scopedKeys(ctx, method, r, key)
	if err != nil {
		return redisrate.Result{}, err
	}
	return i.limiter.Decide(ctx, redisrate.Request{Keys: keys, N: r.cost})
}

// baseKey is key as the rule of Config.Limits keeps it after Name + ":".
// The keys of a method with limits of its own continue there with the
// method's name, which starts with '/': a key that starts with '/' (or '%',
// the escape) gets a '%' in front, so that no client's key of one rule is
// another client's key of the other. Keys that start otherwise (PeerIP's,
// APIKey's) are kept as they are.
func baseKey(key string) string {
	if key != "" && (key[0] == '/' || key[0] == '%') {
		return "%" + key
	}
	return key
}

// fail is the answer to a call whose limit could not be decided (see
// Config.OnError): the status error that fails it, or nil.
func (i *Interceptor) fail(ctx context.Context, method string, err error) error {
	if i.onError != nil {
		i.onError(ctx, method, err)
	}
	switch {
	case ratefields.CallerGaveUp(err):
		return status.FromContextError(err).Err()
	case i.shadow:
		return nil
	case errors.Is(err, ErrNoKey):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, redisrate.ErrUnavailable):
		return withRetry(codes.Unavailable, "the rate limiter is unavailable; try again later", time.Second, nil)
	}
	return status.Error(codes.Internal, "the rate limit could not be decided")
}

// withRetry is a status error with a RetryInfo of wait (and qf, if any).
func withRetry(c codes.Code, msg string, wait time.Duration, qf *errdetails.QuotaFailure) error {
	details := []protoadapt.MessageV1{&errdetails.RetryInfo{RetryDelay: durationpb.New(wait)}}
	if qf != nil {
		details = append(details, qf)
	}
	st, err := status.New(c, msg).WithDetails(details...)
	if err != nil { // cannot happen with these messages
		return status.Error(c, msg)
	}
	return st.Err()
}
