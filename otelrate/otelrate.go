// Package otelrate reports the decisions of a redisrate.Limiter to
// OpenTelemetry: metrics (how many decisions, by algorithm, outcome and
// source; how long they take; how many were degraded; deny-cache hits) and
// traces (a span per decision, or per batch, under the caller's span, with
// go-redis's own span under it when redisotel is on).
//
//	obs, err := otelrate.New() // the global MeterProvider and TracerProvider
//	if err != nil { ... }
//	limiter := redisrate.NewLimiter(rdb, redisrate.WithObserver(obs))
//
// It is a module of its own, so that the root module keeps go-redis as its
// only dependency.
//
// # Metrics
//
//	redisrate.decisions           counter    {decision}  every decision
//	redisrate.decision.duration   histogram  s           from the call to its answer
//	redisrate.decisions.degraded  counter    {decision}  decided without Redis
//	redisrate.deny_cache.hits     counter    {decision}  denials answered from the deny cache
//	redisrate.round_trip.decisions histogram {decision}  per decision Redis decided: how many its round trip carried
//
// with the attributes redisrate.kind (allow, check, peek, wait),
// redisrate.algorithm (gcra, token_bucket, ...), redisrate.limit (the name
// of the binding limit, redisrate.Limit.Name: the middleware's policy
// name, or a name given to a direct call; the first limit's on an error;
// absent for a limit without a name), redisrate.outcome (allowed, denied,
// would_deny: admitted only because of shadow mode, undecided: admitted in
// shadow mode while Redis could not decide and the failure policy would
// have refused, or error) and
// redisrate.source (redis, deny-cache, fallback, fail-open, fail-closed;
// absent on an error), and, on an error, error.type (circuit_open,
// unavailable, misconfigured, invalid, foreign_key, bad_reply, canceled,
// deadline_exceeded, other). The degraded counter carries the algorithm,
// limit, source and outcome; the deny-cache counter the algorithm and
// limit. A batch (DecideBatch) counts as its requests; a Reset is traced,
// not counted. The round-trip histogram (redisrate.Decision.Carried: 1 for
// a call sent alone, more for the calls of a hot key decided together or
// the requests of one pipeline) carries the algorithm and limit;: mass at 1
// says each call went alone; mass near the callers' count says a hot key's
// round trips carry them all.
//
// # Traces
//
// One span per decision, named "redisrate.allow", "redisrate.check",
// "redisrate.peek", "redisrate.wait", "redisrate.batch" (with a span per
// request under it) or "redisrate.reset", with the attributes above and
// redisrate.key.prefix (the key up to its first ":", never the key itself
// by default: keys hold user ids and IP addresses; see WithKeyPrefix),
// redisrate.cost, redisrate.limits (how many), and on the answer
// redisrate.remaining, redisrate.retry_after_ms, redisrate.binding (the
// index of the binding limit) and redisrate.binding.limit (such as
// "10/s"), and redisrate.shadow on a decision in shadow mode. A Redis
// error is recorded on the span, with an error status: the call's error,
// or the cause of a degraded decision, whose span also says whether the
// circuit breaker answered it without asking Redis
// (redisrate.circuit_open).
package otelrate

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/redisrate/redisrate"
)

// ScopeName is the instrumentation scope of the meter and the tracer.
const ScopeName = "github.com/redisrate/redisrate/otelrate"

// The attribute keys and values (see the package documentation).
const (
	kindKey           = attribute.Key("redisrate.kind")
	algorithmKey      = attribute.Key("redisrate.algorithm")
	limitKey          = attribute.Key("redisrate.limit")
	shadowKey         = attribute.Key("redisrate.shadow")
	outcomeKey        = attribute.Key("redisrate.outcome")
	sourceKey         = attribute.Key("redisrate.source")
	errorTypeKey      = attribute.Key("error.type")
	circuitOpenKey    = attribute.Key("redisrate.circuit_open")
	keyPrefixKey      = attribute.Key("redisrate.key.prefix")
	costKey           = attribute.Key("redisrate.cost")
	limitsKey         = attribute.Key("redisrate.limits")
	remainingKey      = attribute.Key("redisrate.remaining")
	retryAfterKey     = attribute.Key("redisrate.retry_after_ms")
	bindingKey        = attribute.Key("redisrate.binding")
	bindingLimitKey   = attribute.Key("redisrate.binding.limit")
	batchSizeKey      = attribute.Key("redisrate.batch.size")
	batchIndexKey     = attribute.Key("redisrate.batch.index")
	outcomeAllowed    = "allowed"
	outcomeDenied     = "denied"
	outcomeWouldDeny  = "would_deny"
	outcomeUndecided  = "undecided"
	outcomeError      = "error"
	errTypeOther      = "other"
	durationHistogram = "redisrate.decision.duration"
)

// Option configures an Observer.
type Option func(*config)

type config struct {
	mp        metric.MeterProvider
	tp        trace.TracerProvider
	keyPrefix func(string) string
}

// WithMeterProvider sets the MeterProvider; default otel.GetMeterProvider().
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) { c.mp = mp }
}

// WithTracerProvider sets the TracerProvider; default
// otel.GetTracerProvider().
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) { c.tp = tp }
}

// WithKeyPrefix sets what of a key goes on spans as redisrate.key.prefix:
// f returns it, or "" for nothing. The default keeps the key up to its
// first ":" ("login" for "login:ip:192.0.2.1"; nothing for a key without
// ":"). Keys hold user ids and IP addresses: return what names the kind of
// limit, never who was limited.
func WithKeyPrefix(f func(key string) string) Option {
	return func(c *config) { c.keyPrefix = f }
}

// keyPrefix is the default of WithKeyPrefix: the key up to its first ":";
// "" for a key without ":".
func keyPrefix(key string) string {
	if i := strings.IndexByte(key, ':'); i > 0 {
		return key[:i]
	}
	return ""
}

// Observer is a redisrate.Observer that reports to OpenTelemetry. Make it
// with New and pass it to redisrate.WithObserver. It is safe for
// concurrent use.
type Observer struct {
	tracer    trace.Tracer
	keyPrefix func(string) string
	decisions metric.Int64Counter
	duration  metric.Float64Histogram
	degraded  metric.Int64Counter
	denyHits  metric.Int64Counter
	carried   metric.Int64Histogram

	mu   sync.RWMutex
	opts map[optKey]*measureOpts // attribute sets, built once per combination
}

// optKey is a combination of metric attributes.
type optKey struct {
	kind      redisrate.Kind
	algorithm string // the limits' algorithm; "" for a call without limits
	limit     string // the binding limit's name
	outcome   string
	source    redisrate.Source // when outcome is not an error
	errType   string           // when it is
}

// measureOpts are the options of one combination, for each instrument.
type measureOpts struct {
	decision metric.MeasurementOption // decisions and duration
	degraded metric.MeasurementOption
	which    metric.MeasurementOption // the algorithm and limit: deny-cache hits, round trips
}

// options returns the options of k, built the first time k is seen.
func (o *Observer) options(k optKey) *measureOpts {
	o.mu.RLock()
	m := o.opts[k]
	o.mu.RUnlock()
	if m != nil {
		return m
	}
	which := []attribute.KeyValue{algorithmKey.String(k.algorithm)}
	if k.limit != "" {
		which = append(which, limitKey.String(k.limit))
	}
	result := []attribute.KeyValue{outcomeKey.String(k.outcome)}
	if k.outcome == outcomeError {
		result = append(result, errorTypeKey.String(k.errType))
	} else {
		result = append(result, sourceKey.String(k.source.String()))
	}
	m = &measureOpts{
		decision: metric.WithAttributeSet(attribute.NewSet(slices.Concat([]attribute.KeyValue{kindKey.String(k.kind.String())}, which, result)...)),
		degraded: metric.WithAttributeSet(attribute.NewSet(slices.Concat(which, result)...)),
		which:    metric.WithAttributeSet(attribute.NewSet(which...)),
	}
	o.mu.Lock()
	if o.opts == nil {
		o.opts = map[optKey]*measureOpts{}
	}
	o.opts[k] = m
	o.mu.Unlock()
	return m
}

var _ redisrate.Observer = (*Observer)(nil)

// New returns an Observer on the providers of opts.
func New(opts ...Option) (*Observer, error) {
	c := config{keyPrefix: keyPrefix}
	for _, o := range opts {
		o(&c)
	}
	if c.mp == nil {
		c.mp = otel.GetMeterProvider()
	}
	if c.tp == nil {
		c.tp = otel.GetTracerProvider()
	}
	if c.keyPrefix == nil {
		c.keyPrefix = func(string) string { return "" }
	}
	meter := c.mp.Meter(ScopeName)
	o := &Observer{tracer: c.tp.Tracer(ScopeName), keyPrefix: c.keyPrefix}
	var err, e error
	o.decisions, e = meter.Int64Counter("redisrate.decisions",
		metric.WithUnit("{decision}"), metric.WithDescription("Rate-limit decisions, by algorithm, outcome and source."))
	err = errors.Join(err, e)
	o.duration, e = meter.Float64Histogram(durationHistogram, metric.WithUnit("s"),
		metric.WithDescription("Time from a call to its decision."),
		metric.WithExplicitBucketBoundaries(0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5))
	err = errors.Join(err, e)
	o.degraded, e = meter.Int64Counter("redisrate.decisions.degraded",
		metric.WithUnit("{decision}"), metric.WithDescription("Decisions made without Redis: by the fallback or the failure policy."))
	err = errors.Join(err, e)
	o.denyHits, e = meter.Int64Counter("redisrate.deny_cache.hits",
		metric.WithUnit("{decision}"), metric.WithDescription("Denials answered from the deny cache, without a round trip."))
	err = errors.Join(err, e)
	o.carried, e = meter.Int64Histogram("redisrate.round_trip.decisions", metric.WithUnit("{decision}"),
		metric.WithDescription("For each decision Redis made, how many decisions its round trip carried: more than 1 when a hot key's calls were coalesced, or a batch pipelined."),
		metric.WithExplicitBucketBoundaries(1, 2, 4, 8, 16, 32, 64, 128, 256))
	err = errors.Join(err, e)
	if err != nil {
		return nil, err
	}
	return o, nil
}

// started is the context of a decision: the span's, with the start time.
type started struct {
	context.Context
	span trace.Span
	at   time.Time
}

type startKey struct{}

func (c *started) Value(key any) any {
	if key == (startKey{}) {
		return c
	}
	return c.Context.Value(key)
}

// spanNames are the span names by request kind, built once.
var spanNames = func() (n [redisrate.KindForce + 1]string) {
	for k := range n {
		n[k] = "redisrate." + redisrate.Kind(k).String()
	}
	return n
}()

// kindName is what d did, as the kind attribute names it: its Kind, or
// "batch" and "reset" for the decisions that ask no request's kind.
func kindName(d redisrate.Decision) string {
	switch {
	case d.WholeBatch:
		return "batch"
	case d.Reset:
		return "reset"
	}
	return d.Kind.String()
}

func spanName(d redisrate.Decision) string {
	if !d.WholeBatch && !d.Reset && int(d.Kind) < len(spanNames) {
		return spanNames[d.Kind]
	}
	return "redisrate." + kindName(d)
}

// Start opens the decision's span and notes the time.
func (o *Observer) Start(ctx context.Context, d redisrate.Decision) context.Context {
	ctx, span := o.tracer.Start(ctx, spanName(d), trace.WithSpanKind(trace.SpanKindInternal))
	if span.IsRecording() {
		attrs := make([]attribute.KeyValue, 0, 8)
		attrs = append(attrs, kindKey.String(kindName(d)))
		if !d.WholeBatch && !d.Reset {
			attrs = append(attrs, algorithmKey.String(algorithmOf(d)), costKey.Int64(d.Cost), limitsKey.Int(len(d.Limits)))
		}
		if p := o.keyPrefix(d.Key); p != "" && !d.WholeBatch {
			attrs = append(attrs, keyPrefixKey.String(p))
		}
		if d.Batch > 0 {
			attrs = append(attrs, batchSizeKey.Int(d.Batch))
			if !d.WholeBatch {
				attrs = append(attrs, batchIndexKey.Int(d.Index))
			}
		}
		span.SetAttributes(attrs...)
	}
	return &started{Context: ctx, span: span, at: time.Now()}
}

// End closes the span and records the metrics.
func (o *Observer) End(ctx context.Context, d redisrate.Decision, res redisrate.Result, err error) {
	s, ok := ctx.Value(startKey{}).(*started)
	if !ok { // not a context of Start: nothing to end or time
		return
	}
	elapsed := time.Since(s.at)
	counted := !d.WholeBatch && !d.Reset // a DecideBatch's requests count, not the batch; a Reset decides nothing
	k := optKey{kind: d.Kind, algorithm: algorithmOf(d), limit: limitName(d, res, err), outcome: outcomeDenied, source: res.Source}
	switch {
	case err != nil:
		k.outcome, k.source, k.errType = outcomeError, 0, errorType(err)
	case res.WouldDeny && res.Degraded():
		// An outage, not the limit: a rollout's would_deny stays the
		// limit's own.
		k.outcome = outcomeUndecided
	case res.WouldDeny:
		k.outcome = outcomeWouldDeny
	case res.Allowed:
		k.outcome = outcomeAllowed
	}
	if s.span.IsRecording() {
		o.annotate(s.span, d, res, err, k, counted)
	}
	s.span.End()
	if !counted {
		return
	}
	m := o.options(k)
	o.decisions.Add(ctx, 1, m.decision)
	o.duration.Record(ctx, elapsed.Seconds(), m.decision)
	if err == nil && res.Degraded() {
		o.degraded.Add(ctx, 1, m.degraded)
	}
	if err == nil && res.Source == redisrate.SourceDenyCache {
		o.denyHits.Add(ctx, 1, m.which)
	}
	if d.Carried > 0 {
		o.carried.Record(ctx, int64(d.Carried), m.which)
	}
}

// limitName is the name of the limit a decision is counted under: the
// binding limit's, or the first's when there is no Result to say which.
func limitName(d redisrate.Decision, res redisrate.Result, err error) string {
	switch {
	case err == nil && res.Binding >= 0 && res.Binding < len(d.Limits):
		return d.Limits[res.Binding].Name
	case len(d.Limits) > 0:
		return d.Limits[0].Name
	}
	return ""
}

// annotate sets the span's attributes and status from the decision.
func (o *Observer) annotate(span trace.Span, d redisrate.Decision, res redisrate.Result, err error, k optKey, counted bool) {
	if k.limit != "" {
		span.SetAttributes(limitKey.String(k.limit))
	}
	if err != nil {
		span.SetAttributes(outcomeKey.String(outcomeError), errorTypeKey.String(k.errType))
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
		return
	}
	if counted {
		span.SetAttributes(outcomeKey.String(k.outcome), sourceKey.String(res.Source.String()),
			remainingKey.Int64(res.Remaining), bindingKey.Int(res.Binding))
		if res.Shadow {
			span.SetAttributes(shadowKey.Bool(true))
		}
		if !res.Allowed || res.WouldDeny {
			ms := int64(-1)
			if !res.Never() {
				ms = res.RetryAfter.Milliseconds()
			}
			span.SetAttributes(retryAfterKey.Int64(ms))
		}
		if res.Binding >= 0 && res.Binding < len(d.Limits) {
			span.SetAttributes(bindingLimitKey.String(d.Limits[res.Binding].String()))
		}
	}
	if res.Cause != nil {
		span.SetAttributes(circuitOpenKey.Bool(errors.Is(res.Cause, redisrate.ErrCircuitOpen)))
		span.RecordError(res.Cause)
		span.SetStatus(codes.Error, "decided without Redis ("+res.Source.String()+"): "+res.Cause.Error())
	}
}

// errorType names the kind of a Limiter's error for error.type.
func errorType(err error) string {
	switch {
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline_exceeded"
	case errors.Is(err, redisrate.ErrInvalid):
		return "invalid"
	case errors.Is(err, redisrate.ErrForeignKey):
		return "foreign_key"
	case errors.Is(err, redisrate.ErrMisconfigured):
		return "misconfigured"
	case errors.Is(err, redisrate.ErrBadReply):
		return "bad_reply"
	case errors.Is(err, redisrate.ErrCircuitOpen):
		return "circuit_open"
	case errors.Is(err, redisrate.ErrUnavailable):
		return "unavailable"
	}
	return errTypeOther
}

// algorithmOf names the algorithm of d's limits, "" when it has none (a
// Reset, a DecideBatch as a whole, a request refused for having none).
func algorithmOf(d redisrate.Decision) string {
	if len(d.Limits) == 0 {
		return ""
	}
	return d.Limits[0].Algorithm.String()
}
