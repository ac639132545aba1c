package otelrate_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/extra/redisotel/v9"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/redisrate/redisrate"
	"github.com/redisrate/redisrate/otelrate"
)

// telemetry is an SDK that keeps everything in memory.
type telemetry struct {
	reader *sdkmetric.ManualReader
	spans  *tracetest.InMemoryExporter
	mp     *sdkmetric.MeterProvider
	tp     *sdktrace.TracerProvider
}

func newTelemetry(t *testing.T) *telemetry {
	t.Helper()
	tel := &telemetry{reader: sdkmetric.NewManualReader(), spans: tracetest.NewInMemoryExporter()}
	tel.mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(tel.reader))
	tel.tp = sdktrace.NewTracerProvider(sdktrace.WithSyncer(tel.spans))
	t.Cleanup(func() {
		_ = tel.mp.Shutdown(context.Background())
		_ = tel.tp.Shutdown(context.Background())
	})
	return tel
}

func (tel *telemetry) observer(t *testing.T, opts ...otelrate.Option) *otelrate.Observer {
	t.Helper()
	o, err := otelrate.New(append([]otelrate.Option{otelrate.WithMeterProvider(tel.mp), otelrate.WithTracerProvider(tel.tp)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// attrString writes a set as "k=v,k=v", sorted, for comparisons.
func attrString(s attribute.Set) string {
	var parts []string
	for _, kv := range s.ToSlice() {
		parts = append(parts, string(kv.Key)+"="+fmt.Sprint(kv.Value.AsInterface()))
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// counters returns each int64 sum as "name{attrs}" -> value.
func (tel *telemetry) counters(t *testing.T) map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := tel.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != otelrate.ScopeName {
			t.Errorf("scope %q", sm.Scope.Name)
		}
		for _, m := range sm.Metrics {
			switch data := m.Data.(type) {
			case metricdata.Sum[int64]:
				if !data.IsMonotonic {
					t.Errorf("%s is not monotonic", m.Name)
				}
				for _, dp := range data.DataPoints {
					out[m.Name+"{"+attrString(dp.Attributes)+"}"] = dp.Value
				}
			case metricdata.Histogram[float64]:
				if m.Unit != "s" {
					t.Errorf("%s unit %q; want s", m.Name, m.Unit)
				}
				for _, dp := range data.DataPoints {
					out[m.Name+".count{"+attrString(dp.Attributes)+"}"] = int64(dp.Count)
					if dp.Sum < 0 {
						t.Errorf("%s: negative sum %v", m.Name, dp.Sum)
					}
				}
			case metricdata.Histogram[int64]:
				for _, dp := range data.DataPoints {
					out[m.Name+".count{"+attrString(dp.Attributes)+"}"] = int64(dp.Count)
					out[m.Name+".sum{"+attrString(dp.Attributes)+"}"] = dp.Sum
				}
			default:
				t.Errorf("%s: unexpected data %T", m.Name, m.Data)
			}
		}
	}
	return out
}

func wantCounters(t *testing.T, got, want map[string]int64) {
	t.Helper()
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %d; want %d", k, got[k], v)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("unexpected %s = %d", k, got[k])
		}
	}
}

func spanAttrs(s sdktrace.ReadOnlySpan) map[string]string {
	m := map[string]string{}
	for _, kv := range s.Attributes() {
		m[string(kv.Key)] = fmt.Sprint(kv.Value.AsInterface())
	}
	return m
}

var (
	perMinute3  = redisrate.PerMinute(3)
	errInjected = errors.New("dial tcp 127.0.0.1:6379: connect: connection refused")
)

// The Observer on its own, fed the four decisions of the brief (admitted,
// denied, a deny-cache hit, a fail-open) and an error: the names,
// attributes and values it exports.
func TestObserverRecords(t *testing.T) {
	tel := newTelemetry(t)
	o := tel.observer(t)
	ctx := context.Background()
	d := redisrate.Decision{Kind: redisrate.KindAllow, Key: "login:ip:192.0.2.1", Limits: []redisrate.Limit{redisrate.PerSecond(10), perMinute3}, Cost: 1}
	for _, c := range []struct {
		res redisrate.Result
		err error
	}{
		{redisrate.Result{Allowed: true, Remaining: 2, Capacity: 3, Binding: 1, ResetAfter: 20 * time.Second}, nil},
		{redisrate.Result{Remaining: 0, Capacity: 3, Binding: 1, RetryAfter: 1500 * time.Millisecond}, nil},
		{redisrate.Result{Remaining: 0, Capacity: 3, Binding: 1, RetryAfter: 1200 * time.Millisecond, Source: redisrate.SourceDenyCache}, nil},
		{redisrate.Result{Allowed: true, Source: redisrate.SourceFailOpen, Cause: errInjected}, nil},
		{redisrate.Result{}, fmt.Errorf("redisrate: gcra: %w", errors.Join(redisrate.ErrUnavailable, errInjected))},
	} {
		o.End(o.Start(ctx, d), d, c.res, c.err)
	}

	base := "redisrate.algorithm=gcra,redisrate.kind=allow,"
	wantCounters(t, tel.counters(t), map[string]int64{
		"redisrate.decisions{" + base + "redisrate.outcome=allowed,redisrate.source=redis}":                           1,
		"redisrate.decisions{" + base + "redisrate.outcome=denied,redisrate.source=redis}":                            1,
		"redisrate.decisions{" + base + "redisrate.outcome=denied,redisrate.source=deny-cache}":                       1,
		"redisrate.decisions{" + base + "redisrate.outcome=allowed,redisrate.source=fail-open}":                       1,
		"redisrate.decisions{error.type=unavailable," + base + "redisrate.outcome=error}":                             1,
		"redisrate.decision.duration.count{" + base + "redisrate.outcome=allowed,redisrate.source=redis}":             1,
		"redisrate.decision.duration.count{" + base + "redisrate.outcome=denied,redisrate.source=redis}":              1,
		"redisrate.decision.duration.count{" + base + "redisrate.outcome=denied,redisrate.source=deny-cache}":         1,
		"redisrate.decision.duration.count{" + base + "redisrate.outcome=allowed,redisrate.source=fail-open}":         1,
		"redisrate.decision.duration.count{error.type=unavailable," + base + "redisrate.outcome=error}":               1,
		"redisrate.decisions.degraded{redisrate.algorithm=gcra,redisrate.outcome=allowed,redisrate.source=fail-open}": 1,
		"redisrate.deny_cache.hits{redisrate.algorithm=gcra}":                                                         1,
	})

	spans := tel.spans.GetSpans()
	if len(spans) != 5 {
		t.Fatalf("%d spans; want 5", len(spans))
	}
	common := map[string]string{
		"redisrate.kind": "allow", "redisrate.algorithm": "gcra", "redisrate.key.prefix": "login",
		"redisrate.cost": "1", "redisrate.limits": "2",
	}
	for i, want := range []map[string]string{
		{"redisrate.outcome": "allowed", "redisrate.source": "redis", "redisrate.remaining": "2", "redisrate.binding": "1", "redisrate.binding.limit": perMinute3.String()},
		{"redisrate.outcome": "denied", "redisrate.source": "redis", "redisrate.remaining": "0", "redisrate.binding": "1", "redisrate.binding.limit": perMinute3.String(), "redisrate.retry_after_ms": "1500"},
		{"redisrate.outcome": "denied", "redisrate.source": "deny-cache", "redisrate.remaining": "0", "redisrate.binding": "1", "redisrate.binding.limit": perMinute3.String(), "redisrate.retry_after_ms": "1200"},
		{"redisrate.outcome": "allowed", "redisrate.source": "fail-open", "redisrate.remaining": "0", "redisrate.binding": "0", "redisrate.binding.limit": redisrate.PerSecond(10).String(), "redisrate.circuit_open": "false"},
		{"redisrate.outcome": "error", "error.type": "unavailable"},
	} {
		s := spans[i].Snapshot()
		if s.Name() != "redisrate.allow" {
			t.Errorf("span %d: name %q", i, s.Name())
		}
		got := spanAttrs(s)
		for k, v := range common {
			want[k] = v
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("span %d: %s = %q; want %q", i, k, got[k], v)
			}
		}
		for k := range got {
			if _, ok := want[k]; !ok {
				t.Errorf("span %d: unexpected attribute %s = %q", i, k, got[k])
			}
		}
		for _, v := range got {
			if strings.Contains(v, "192.0.2.1") {
				t.Errorf("span %d carries the raw key: %v", i, got)
			}
		}
		// The Redis error, on the fail-open decision and the failed call.
		failed := i >= 3
		if (s.Status().Code == codes.Error) != failed || (len(s.Events()) == 1) != failed {
			t.Errorf("span %d: status %v, events %v", i, s.Status(), s.Events())
		}
		if failed && !strings.Contains(fmt.Sprint(s.Events()[0].Attributes), "connection refused") {
			t.Errorf("span %d: event %v does not hold the Redis error", i, s.Events()[0].Attributes)
		}
	}
}

// The decisions each round trip carried (Decision.Carried) make a
// histogram per algorithm and limit; a decision no round trip made (the
// deny cache, the open breaker) is not in it.
func TestObserverRoundTrips(t *testing.T) {
	tel := newTelemetry(t)
	o := tel.observer(t)
	ctx := context.Background()
	lim := redisrate.PerSecond(10).WithName("api")
	for _, carried := range []int{1, 7, 7, 0} {
		d := redisrate.Decision{Kind: redisrate.KindAllow, Key: "k", Limits: []redisrate.Limit{lim}, Cost: 1, Carried: carried}
		o.End(o.Start(ctx, d), d, redisrate.Result{Allowed: true, Capacity: 10}, nil)
	}
	got := tel.counters(t)
	for k, v := range map[string]int64{
		"redisrate.round_trip.decisions.count{redisrate.algorithm=gcra,redisrate.limit=api}": 3,
		"redisrate.round_trip.decisions.sum{redisrate.algorithm=gcra,redisrate.limit=api}":   15,
	} {
		if got[k] != v {
			t.Errorf("%s = %d; want %d (all: %v)", k, got[k], v, got)
		}
	}
}

// In shadow mode an outage is not the limit: a decision that Redis could
// not make, admitted only because of shadow mode, is counted apart from
// the limit's would_deny, so that a rollout's dashboard is not ruined by a
// blip.
func TestShadowOutageOutcome(t *testing.T) {
	tel := newTelemetry(t)
	o := tel.observer(t)
	d := redisrate.Decision{Kind: redisrate.KindAllow, Key: "k", Limits: []redisrate.Limit{perMinute3}, Cost: 1}
	for _, res := range []redisrate.Result{
		{Allowed: true, Shadow: true, WouldDeny: true, Capacity: 3, RetryAfter: time.Second},                                                         // the limit
		{Allowed: true, Shadow: true, WouldDeny: true, Capacity: 3, RetryAfter: time.Second, Source: redisrate.SourceFailClosed, Cause: errInjected}, // the outage
	} {
		o.End(o.Start(context.Background(), d), d, res, nil)
	}
	got := tel.counters(t)
	base := "redisrate.decisions{redisrate.algorithm=gcra,redisrate.kind=allow,"
	for k, want := range map[string]int64{
		base + "redisrate.outcome=would_deny,redisrate.source=redis}":      1,
		base + "redisrate.outcome=undecided,redisrate.source=fail-closed}": 1,
	} {
		if got[k] != want {
			t.Errorf("%s = %d; want %d (all: %v)", k, got[k], want, got)
		}
	}
}

// Batches count as their requests, each with a span under the batch's.
func TestObserverBatch(t *testing.T) {
	tel := newTelemetry(t)
	o := tel.observer(t, otelrate.WithKeyPrefix(func(key string) string { return "tenant" }))
	ctx := context.Background()
	batch := redisrate.Decision{WholeBatch: true, Batch: 2}
	bctx := o.Start(ctx, batch)
	for i := range 2 {
		window := perMinute3
		window.Algorithm = redisrate.SlidingWindow
		d := redisrate.Decision{Kind: redisrate.KindCheck, Key: "t1", Limits: []redisrate.Limit{window}, Cost: 1, Batch: 2, Index: i}
		o.End(o.Start(bctx, d), d, redisrate.Result{Allowed: true, Remaining: 2, Capacity: 3}, nil)
	}
	o.End(bctx, batch, redisrate.Result{}, nil)
	reset := redisrate.Decision{Reset: true, Key: "t1"}
	o.End(o.Start(ctx, reset), reset, redisrate.Result{}, nil)

	wantCounters(t, tel.counters(t), map[string]int64{
		"redisrate.decisions{redisrate.algorithm=sliding_window,redisrate.kind=check,redisrate.outcome=allowed,redisrate.source=redis}":               2,
		"redisrate.decision.duration.count{redisrate.algorithm=sliding_window,redisrate.kind=check,redisrate.outcome=allowed,redisrate.source=redis}": 2,
	})
	spans := tel.spans.GetSpans()
	var names []string
	for _, s := range spans {
		names = append(names, s.Name)
	}
	if !slices.Equal(names, []string{"redisrate.check", "redisrate.check", "redisrate.batch", "redisrate.reset"}) {
		t.Fatalf("spans %v", names)
	}
	for i := range 2 {
		if spans[i].Parent.SpanID() != spans[2].SpanContext.SpanID() {
			t.Errorf("request %d is not under the batch's span", i)
		}
		if a := spanAttrs(spans[i].Snapshot()); a["redisrate.batch.index"] != fmt.Sprint(i) || a["redisrate.batch.size"] != "2" || a["redisrate.key.prefix"] != "tenant" {
			t.Errorf("request %d: %v", i, a)
		}
	}
}

// Through a real Limiter: an admitted call, a denial, a deny-cache hit and
// a fail-open call, with go-redis's span (redisotel) under the decision's.
func TestLimiter(t *testing.T) {
	tel := newTelemetry(t)
	mr := miniredis.RunT(t)
	mr.SetTime(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC))
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	if err := redisotel.InstrumentTracing(rdb, redisotel.WithTracerProvider(tel.tp)); err != nil {
		t.Fatal(err)
	}
	limiter := testLimiter(rdb, redisrate.WithObserver(tel.observer(t)), redisrate.WithDenyCache(16),
		redisrate.WithFailurePolicy(redisrate.FailOpen))
	ctx := context.Background()
	limit := redisrate.PerMinute(1)

	for i, want := range []bool{true, false, false} { // admitted, denied by Redis, denied by the cache
		res, err := limiter.Allow(ctx, "api:user:42", limit)
		if err != nil || res.Allowed != want {
			t.Fatalf("call %d: %v, %v", i, res, err)
		}
	}
	mr.SetError("ERR errInjected failure")
	if res, err := limiter.Allow(ctx, "api:user:43", limit); err != nil || !res.Allowed || res.Source != redisrate.SourceFailOpen {
		t.Fatalf("fail-open call: %v, %v", res, err)
	}
	// The next call is answered by the open circuit breaker, without Redis.
	if res, err := limiter.Allow(ctx, "api:user:44", limit); err != nil || res.Source != redisrate.SourceFailOpen || !errors.Is(res.Cause, redisrate.ErrCircuitOpen) {
		t.Fatalf("call while the breaker is open: %v, %v", res, err)
	}

	base := "redisrate.algorithm=gcra,redisrate.kind=allow,"
	got := tel.counters(t)
	for k, v := range map[string]int64{
		"redisrate.decisions{" + base + "redisrate.outcome=allowed,redisrate.source=redis}":                           1,
		"redisrate.decisions{" + base + "redisrate.outcome=denied,redisrate.source=redis}":                            1,
		"redisrate.decisions{" + base + "redisrate.outcome=denied,redisrate.source=deny-cache}":                       1,
		"redisrate.decisions{" + base + "redisrate.outcome=allowed,redisrate.source=fail-open}":                       2,
		"redisrate.decisions.degraded{redisrate.algorithm=gcra,redisrate.outcome=allowed,redisrate.source=fail-open}": 2,
		"redisrate.deny_cache.hits{redisrate.algorithm=gcra}":                                                         1,
	} {
		if got[k] != v {
			t.Errorf("%s = %d; want %d (all: %v)", k, got[k], v, got)
		}
	}

	// Every script command's span is under a decision span (connection
	// set-up spans such as redis.dial and hello may sit elsewhere).
	spans := tel.spans.GetSpans()
	byID := map[string]tracetest.SpanStub{}
	for _, s := range spans {
		byID[s.SpanContext.SpanID().String()] = s
	}
	decisions, commands := 0, 0
	var circuitOpen []string // of the degraded decisions, in order
	for _, s := range spans {
		name := strings.ToLower(strings.Fields(s.Name + " x")[0])
		if f := strings.Fields(strings.ToLower(s.Name)); name == "redis.pipeline" && len(f) == 2 {
			name = f[1] // a call sent alone: a pipeline of its one command, which go-redis never resends
		}
		switch name {
		case "redisrate.allow":
			decisions++
			a := spanAttrs(s.Snapshot())
			if a["redisrate.key.prefix"] != "api" || strings.Contains(fmt.Sprint(a), "user:42") {
				t.Errorf("decision span attributes %v", a)
			}
			if v, ok := a["redisrate.circuit_open"]; ok {
				circuitOpen = append(circuitOpen, v)
			}
		case "evalsha", "evalsha_ro", "eval", "eval_ro", "fcall", "fcall_ro":
			commands++
			parent, ok := byID[s.Parent.SpanID().String()]
			if !ok || parent.Name != "redisrate.allow" {
				t.Errorf("Redis span %q is not under a decision span (parent %q)", s.Name, parent.Name)
			}
		}
	}
	if decisions != 5 || commands < 3 {
		t.Errorf("%d decision spans, %d Redis spans; want 5 and at least 3 (the cache hit and the open breaker send nothing)", decisions, commands)
	}
	if fmt.Sprint(circuitOpen) != "[false true]" {
		t.Errorf("redisrate.circuit_open of the two degraded decisions: %v; want [false true]", circuitOpen)
	}
}
