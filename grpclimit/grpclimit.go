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
// timeout, redisrate.WithDecisionTimeout), the Limiter's fallback decides
// (redisrate.WithFallback), or else the failure policy: Config.FailurePolicy
// or the Limiter's (an explicit FailClosed or FailError on either is never
// served open), by default redisrate.FailOpen; and the interceptors tell the
// truth about it: a call admitted by policy goes through without ratelimit
// metadata (there is no quota to report); a call refused by policy
// (redisrate.FailClosed or redisrate.FailError) fails with
// codes.Unavailable and a RetryInfo, never ResourceExhausted, which would
// tell the client it spent its quota; a decision of the fallback is kept,
// without ratelimit metadata. A server that refuses the deployment
// (redisrate.ErrMisconfigured: a wrong password, an ACL, no scripting) is
// no outage and no policy answers it: every call fails with codes.Internal
// and OnError is told. In shadow mode (Config.Shadow) every call is
// decided and recorded as usual, and goes through.
//
// The interceptors are gRPC's transport of the package ratecore, which
// httplimit shares: the rules, the decision and the fields are the same.
package grpclimit

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/redisrate/redisrate"
	"github.com/redisrate/redisrate/ratecore"
)

// The response metadata keys: the RateLimit-Policy value (each limit's
// quota and window) and the RateLimit value (the binding limit, units
// left, seconds to more).
const (
	policyMetadata    = "ratelimit-policy"
	rateLimitMetadata = "ratelimit"
)

// Method is the limits and cost of a method.
type Method struct {
	// Limits are the method's own limits, with state of their own; nil
	// means Config.Limits, shared with every method without limits of its
	// own. Each is named in the metadata, and in metrics, by its Name
	// (redisrate.Limit.WithName); one without is named by the method's
	// name for a single limit, with "-1", "-2", ... for several.
	Limits []redisrate.Limit
	// Cost is the units a call takes; 0 means 1.
	Cost int64
}

// Config configures an Interceptor. Limiter is required, and Limits
// unless every limited method has its own.
type Config struct {
	// Limiter decides, in Redis. When Redis cannot, its fallback
	// (redisrate.WithFallback) decides, or else the failure policy: its
	// own (redisrate.WithFailurePolicy) unless FailurePolicy is set; an
	// explicit FailClosed or FailError on it is never served open.
	Limiter *redisrate.Limiter
	// Limits are the limits of every method without limits of its own.
	// Without them, only the methods in Methods are limited. Each is named
	// in the metadata by its Name, as in Method.Limits (by default Name,
	// or Name-1, Name-2, ...).
	Limits []redisrate.Limit
	// Methods holds the methods with limits or a cost of their own, by
	// full method name ("/package.Service/Method").
	Methods map[string]Method
	// Key identifies the client: PeerIP (behind proxies, with their
	// addresses), APIKey, or any KeyFunc. Nil means PeerIP{}.
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
	// from the call's own key on the server (the account that owns an API
	// key, looked up), never from what a client sends: ratecore.Scope's
	// Key says why, and what to do for limits that do not nest.
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
	// errors that match redisrate.ErrUnavailable. A deployment the server
	// refuses (redisrate.ErrMisconfigured) is told on every call: alert on
	// it. The answer is the interceptor's: codes.InvalidArgument for a
	// call without its key (ratecore.ErrNoKey, the error's text shown),
	// codes.Unavailable with a RetryInfo of one second when Redis could
	// not decide (redisrate.ErrUnavailable), the context's code when the
	// call's deadline passed (or it was cancelled) first, codes.Internal
	// for anything else (a misconfiguration included); never the error's text, which may describe the
	// infrastructure. In shadow mode the call goes through instead, but
	// for an ended context.
	OnError func(ctx context.Context, method string, err error)
	// FailurePolicy decides a call when Redis cannot (after the
	// Limiter's fallback, redisrate.WithFallback, if it has one): let it
	// through (redisrate.FailOpen) or fail it with codes.Unavailable
	// (redisrate.FailClosed, redisrate.FailError). Zero: the Limiter's own
	// policy if it was given one, else FailOpen, so that an outage of the
	// limiter is not an outage of the service (docs/reliability.md); the
	// Limiter's metrics (source fail-open) and its log line
	// (redisrate.WithLogger) say so. A limit that must hold through an
	// outage sets FailClosed here or on its Limiter. FailOpen here with a
	// FailClosed or FailError Limiter is an error of New: one of them
	// would not be what the service does.
	FailurePolicy redisrate.FailurePolicy
	// Shadow decides and records every call as usual and lets it through
	// whatever the decision: the way to roll a limit out. Metrics and
	// traces (redisrate.Observer, otelrate) report what would have been
	// denied (redisrate.Result.WouldDeny). No call is failed, not even one
	// that the limit could not be decided for (OnError is told). See
	// redisrate.WithShadowMode.
	Shadow bool

	// Quota, when not nil, is a limit that every call shares across every
	// process serving it (an upstream's own limit), spent from leases
	// after each call's own limits: see ratecore.Quota. A call it refuses
	// gets ResourceExhausted with its RetryInfo and a QuotaFailure whose
	// subject is the quota's Key, and its own units go back; while Redis
	// cannot decide the quota, FailurePolicy answers (Unavailable or let
	// through), never ResourceExhausted. A method without limits (none in
	// Methods, and no Limits) is held to the quota alone, whatever its
	// client: so a Config with a Quota and no limits holds every call to
	// it. Close the Interceptor on shutdown to give its lease back.
	Quota *ratecore.Quota
	// ShadowHeaders sends the ratelimit response metadata in shadow mode
	// too: off by default, so that a limit being rolled out changes
	// nothing clients see.
	ShadowHeaders bool
}

// Scope is a further key that a call is held to, with a limit of its own,
// in the same atomic call as the call's own limit: per API key and per
// account, say (see Config.Scopes, and ratecore.Scope for its fields). Its
// Key is a Keyer, whose errors, and an empty key, are answered as
// Config.Key's are.
type Scope = ratecore.Scope[Keyer]

// call is a call as the core sees it: its context and full method name.
type call struct {
	ctx    context.Context
	method string
}

// method is a limited method: its rule, Config.Limits' or its own, and
// its cost.
type method struct {
	rule *ratecore.Rule
	cost int64
}

// Interceptor limits the calls that go through its interceptors.
type Interceptor struct {
	rules   *ratecore.Rules[call]
	base    method // Config.Limits' rule, nil without them
	methods map[string]method
	exempt  func(context.Context, string) bool
	onError func(context.Context, string, error)
	quota   bool // a Config.Quota: methods without limits are held to it alone
}

// New checks c and returns its Interceptor. Every configuration error is
// reported here, never per call.
func New(c Config) (*Interceptor, error) {
	core, err := newCore(c)
	if err != nil {
		return nil, fmt.Errorf("grpclimit: %w", err)
	}
	i := &Interceptor{rules: core, base: method{cost: 1}, methods: map[string]method{}, exempt: c.Exempt, onError: c.OnError}
	if len(c.Limits) > 0 {
		if i.base.rule, err = core.Rule("", "", c.Limits); err != nil {
			return nil, fmt.Errorf("grpclimit: Config.Limits: %w", err)
		}
	}
	for name, spec := range c.Methods {
		if i.methods[name], err = i.method(name, spec); err != nil {
			return nil, fmt.Errorf("grpclimit: Config.Methods[%q]: %w", name, err)
		}
	}
	if i.base.rule == nil && len(i.methods) == 0 && c.Quota == nil {
		return nil, errors.New("grpclimit: no limits: give Config.Limits, Config.Methods with Limits, or Config.Quota")
	}
	i.quota = c.Quota != nil
	return i, nil
}

// Close gives back what the Config.Quota's lease has not spent and stops
// the interceptors' timers, for a graceful shutdown: call it once the
// server has stopped (grpc.Server.GracefulStop). A call after it fails
// with codes.Unavailable and a RetryInfo (another instance can serve it),
// and OnError is told with an error matching redisrate.ErrNoClient. It
// does not close Config.Limiter, which others may share: close that after
// (redisrate.Limiter.Close), then its Redis client. ctx bounds the wait.
func (i *Interceptor) Close(ctx context.Context) error {
	return i.rules.Close(ctx)
}

// method readies the method name of Config.Methods.
func (i *Interceptor) method(name string, spec Method) (method, error) {
	if !strings.HasPrefix(name, "/") || strings.Count(name, "/") != 2 {
		return method{}, errors.New("not a full method name such as /package.Service/Method")
	}
	m := method{rule: i.base.rule, cost: max(spec.Cost, 1)}
	switch {
	case spec.Cost < 0:
		return method{}, fmt.Errorf("negative Cost %d", spec.Cost)
	case len(spec.Limits) > 0:
		var err error
		m.rule, err = i.rules.Rule(name, fmt.Sprintf("the method %q", name), spec.Limits)
		return m, err
	case m.rule == nil:
		return method{}, errors.New("no Limits, and there are no Config.Limits")
	}
	return m, nil
}

// newCore is the protocol-neutral part of c, checked: its keyers become
// key functions of a call.
func newCore(c Config) (*ratecore.Rules[call], error) {
	cc := ratecore.Config[call]{Limiter: c.Limiter, FailurePolicy: c.FailurePolicy, Shadow: c.Shadow,
		ShadowHeaders: c.ShadowHeaders, Name: c.Name, Unit: "call", Quota: c.Quota}
	if cc.Name == "" {
		cc.Name = "grpc"
	}
	var err error
	if cc.Key, err = keyOf(c.Key, "Config.Key"); err != nil {
		return nil, err
	}
	for n, s := range c.Scopes {
		scope := ratecore.Scope[func(call) (string, error)]{Name: s.Name, Limit: s.Limit}
		if s.Key != nil { // without, ratecore.New names it
			if scope.Key, err = keyOf(s.Key, fmt.Sprintf("Config.Scopes[%d] (%q).Key", n, s.Name)); err != nil {
				return nil, err
			}
		}
		cc.Scopes = append(cc.Scopes, scope)
	}
	return ratecore.New(cc)
}

// keyOf is the core's key function of k (nil: PeerIP{}), checked; what
// names k in errors.
func keyOf(k Keyer, what string) (func(call) (string, error), error) {
	if k == nil {
		k = PeerIP{}
	}
	f, err := k.KeyFunc()
	switch {
	case err != nil:
		return nil, fmt.Errorf("%s: %w", what, err)
	case f == nil: // a Keyer of the caller's own: a nil f would panic per call
		return nil, fmt.Errorf("%s gives a nil KeyFunc", what)
	}
	return func(k call) (string, error) { return f(k.ctx, k.method) }, nil
}

// Unary returns the unary server interceptor.
func (i *Interceptor) Unary() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		md, err := i.decide(ctx, info.FullMethod, 0)
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
// takes its cost once, when it opens. To charge what a stream carries,
// use StreamMessages.
func (i *Interceptor) Stream() grpc.StreamServerInterceptor {
	return i.StreamMessages(func(string, any) int64 { return 0 })
}

// StreamMessages returns a stream server interceptor that charges what a
// stream carries: the stream takes its cost when it opens, as with Stream,
// and then every message the handler receives takes cost(method, message)
// units of the same limits (nil cost: 1 each; 0: nothing). A message that
// its limit denies fails RecvMsg with the denial's status
// (codes.ResourceExhausted with its RetryInfo and QuotaFailure, or
// codes.Unavailable by failure policy), which the handler returns to end
// the stream; the message is not handed on. The key functions run for
// every charged message.
func (i *Interceptor) StreamMessages(cost func(method string, m any) int64) grpc.StreamServerInterceptor {
	if cost == nil {
		cost = func(string, any) int64 { return 1 }
	}
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		md, err := i.decide(ss.Context(), info.FullMethod, 0)
		if md != nil {
			_ = ss.SetHeader(md)
		}
		if err != nil {
			return err
		}
		return handler(srv, &chargedStream{ServerStream: ss, i: i, method: info.FullMethod, cost: cost})
	}
}

// chargedStream charges each message it receives (StreamMessages).
type chargedStream struct {
	grpc.ServerStream
	i      *Interceptor
	method string
	cost   func(string, any) int64
}

// RecvMsg receives m, then takes its cost.
func (s *chargedStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	n := s.cost(s.method, m)
	if n < 1 {
		return nil
	}
	_, err := s.i.decide(s.Context(), s.method, n)
	return err
}

// decide is the decision for a call, at cost units (0: the method's): the
// metadata to send, and the error that fails the call, or nil.
func (i *Interceptor) decide(ctx context.Context, name string, cost int64) (metadata.MD, error) {
	m, ok := i.methods[name]
	if !ok {
		m = i.base
	}
	if m.rule == nil && !i.quota || (i.exempt != nil && i.exempt(ctx, name)) {
		return nil, nil
	}
	if cost == 0 {
		cost = m.cost
	}
	a := i.rules.Decide(ctx, call{ctx, name}, m.rule, cost)
	if a.Err != nil && i.onError != nil {
		i.onError(ctx, name, a.Err)
	}
	var md metadata.MD
	if p := a.Policy(); p != "" {
		md = metadata.Pairs(policyMetadata, p)
		if rl := a.RateLimit(); rl != "" {
			md.Set(rateLimitMetadata, rl)
		}
	}
	return md, statusOf(a)
}

// statusOf is the status error of a, or nil for a call to serve.
func statusOf(a ratecore.Answer) error {
	wait, waits := a.RetryAfter()
	switch a.Verdict {
	case ratecore.Serve:
		return nil
	case ratecore.Unavailable:
		return withRetry(codes.Unavailable, "the rate limiter is unavailable; try again later", wait, nil)
	case ratecore.Ended:
		return status.FromContextError(a.Err).Err()
	case ratecore.NoKey:
		return status.Error(codes.InvalidArgument, a.Err.Error())
	case ratecore.Internal:
		return status.Error(codes.Internal, "the rate limit could not be decided")
	}
	name, limit := a.Binding()
	qf := &errdetails.QuotaFailure{Violations: []*errdetails.QuotaFailure_Violation{{
		Subject:     name,
		Description: fmt.Sprintf("limit %v", limit),
	}}}
	if !waits {
		qf.Violations[0].Description += ": the call costs more than the quota allows and can never be admitted"
		st, _ := status.New(codes.ResourceExhausted, "rate limit exceeded: this call can never be admitted").WithDetails(qf)
		return st.Err()
	}
	return withRetry(codes.ResourceExhausted, fmt.Sprintf("rate limit exceeded: retry in %v", wait), wait, qf)
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
