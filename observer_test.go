package redisrate

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/redisrate/redisrate/internal/hooktest"
)

type spanKey struct{}

// recorder is an Observer that records every Start and End, and marks the
// context it returns, so that the test can see where that context goes.
type recorder struct {
	mu     sync.Mutex
	events []string
	open   int
}

// asked labels what d asked: its Kind, or a Reset, or a DecideBatch as a
// whole, which ask no request's kind.
func asked(d Decision) string {
	switch {
	case d.Reset:
		return "reset"
	case d.WholeBatch:
		return "batch"
	}
	return d.Kind.String()
}

func (r *recorder) Start(ctx context.Context, d Decision) context.Context {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.open++
	r.events = append(r.events, fmt.Sprintf("start %s %s %s %v cost=%d batch=%d/%d", asked(d), d.Key, algorithmOf(d), d.Limits, d.Cost, d.Index, d.Batch))
	return context.WithValue(ctx, spanKey{}, asked(d)+":"+d.Key)
}

func (r *recorder) End(ctx context.Context, d Decision, res Result, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.open--
	span, _ := ctx.Value(spanKey{}).(string)
	e := "nil"
	switch {
	case errors.Is(err, ErrInvalid):
		e = "invalid"
	case errors.Is(err, ErrUnavailable):
		e = "unavailable"
	case err != nil:
		e = "error"
	}
	r.events = append(r.events, fmt.Sprintf("end %s %s allowed=%v source=%s err=%s ctx=%s", asked(d), d.Key, res.Allowed, res.Source, e, span))
}

func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.events
	r.events = nil
	return out
}

// ctxLog is a go-redis hook that records the observer's mark on the
// context of each script call.
type ctxLog struct {
	mu    sync.Mutex
	spans []string
}

func (h *ctxLog) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *ctxLog) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if strings.HasPrefix(cmd.Name(), "eval") {
			span, _ := ctx.Value(spanKey{}).(string)
			h.mu.Lock()
			h.spans = append(h.spans, cmd.Name()+" in "+span)
			h.mu.Unlock()
		}
		return next(ctx, cmd)
	}
}
func (h *ctxLog) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	alone := hooktest.AsCommand(h.ProcessHook, next)
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if n := cmds[0].Name(); n == "hello" || n == "client" { // a new connection's handshake
			return next(ctx, cmds)
		}
		if len(cmds) == 1 {
			return alone(ctx, cmds)
		}
		span, _ := ctx.Value(spanKey{}).(string)
		names := make([]string, len(cmds))
		for i, c := range cmds {
			names[i] = c.Name()
		}
		h.mu.Lock()
		h.spans = append(h.spans, fmt.Sprintf("pipeline %v in %s", names, span))
		h.mu.Unlock()
		return next(ctx, cmds)
	}
}

func (h *ctxLog) take() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := h.spans
	h.spans = nil
	return out
}

// TestObserverSeesEveryDecision: each kind of call is reported as the
// Observer's documentation says, with the context Start returned carried to
// the Redis command and to End.
func TestObserverSeesEveryDecision(t *testing.T) {
	ctx := context.Background()
	f := newFakeRedis(t)
	hook := &ctxLog{}
	f.rdb.AddHook(hook)
	rec := &recorder{}
	l := testLimiter(f.rdb, WithObserver(rec), WithDenyCache(10), WithKeyPrefix("p:"))
	_ = f.rdb.ScriptLoad(ctx, specs[GCRA].Source).Err()
	lim := PerMinute(1)
	_, _ = l.Allow(ctx, "a", lim)
	_, _ = l.Allow(ctx, "a", lim)
	_, _ = l.Allow(ctx, "a", lim) // the deny cache answers
	_, _ = l.Decide(ctx, Request{Kind: KindCheck, Key: "b", Limits: []Limit{lim}, N: 2})
	_, _ = l.Decide(ctx, Request{Kind: KindPeek, Key: "b", Limits: []Limit{lim, PerHour(5)}})
	_, _ = l.AllowN(ctx, "b", lim, 0)
	_, _ = l.Wait(ctx, "c", lim)
	_, _ = l.DecideBatch(ctx, []Request{{Key: "d", Limits: []Limit{lim}}, {Key: "e", Limits: []Limit{lim}, Kind: KindCheck}})
	_, _ = l.DecideBatch(ctx, []Request{{Key: "f", Limits: []Limit{lim}}}) // one request: no pipeline
	_ = l.Reset(ctx, "a")
	_, _ = l.Decide(ctx, Request{Kind: kindReset, Key: "g", Limits: []Limit{lim}}) // refused: a Request's kind, told as asked, not as a Reset
	want := []string{
		"start allow a gcra [1/m] cost=1 batch=0/0",
		"end allow a allowed=true source=redis err=nil ctx=allow:a",
		"start allow a gcra [1/m] cost=1 batch=0/0",
		"end allow a allowed=false source=redis err=nil ctx=allow:a",
		"start allow a gcra [1/m] cost=1 batch=0/0",
		"end allow a allowed=false source=deny-cache err=nil ctx=allow:a",
		"start check b gcra [1/m] cost=2 batch=0/0",
		"end check b allowed=false source=redis err=nil ctx=check:b",
		"start peek b gcra [1/m 5/h] cost=0 batch=0/0",
		"end peek b allowed=true source=redis err=nil ctx=peek:b",
		"start allow b gcra [1/m] cost=0 batch=0/0",
		"end allow b allowed=false source=redis err=invalid ctx=allow:b",
		"start wait c gcra [1/m] cost=1 batch=0/0",
		"end wait c allowed=true source=redis err=nil ctx=wait:c",
		"start batch  - [] cost=0 batch=0/2",
		"start allow d gcra [1/m] cost=1 batch=0/2",
		"start check e gcra [1/m] cost=1 batch=1/2",
		"end allow d allowed=true source=redis err=nil ctx=allow:d",
		"end check e allowed=true source=redis err=nil ctx=check:e",
		"end batch  allowed=false source=redis err=nil ctx=batch:",
		"start batch  - [] cost=0 batch=0/1",
		"start allow f gcra [1/m] cost=1 batch=0/1",
		"end allow f allowed=true source=redis err=nil ctx=allow:f",
		"end batch  allowed=false source=redis err=nil ctx=batch:",
		"start reset a - [] cost=0 batch=0/0",
		"end reset a allowed=false source=redis err=nil ctx=reset:a",
		"start Kind(7) g gcra [1/m] cost=0 batch=0/0",
		"end Kind(7) g allowed=false source=redis err=invalid ctx=Kind(7):g",
	}
	if got := rec.take(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	wantSpans := []string{
		"evalsha in allow:a", "evalsha in allow:a", "evalsha in check:b", "evalsha in peek:b",
		"evalsha in wait:c", "pipeline [evalsha evalsha] in batch:", "evalsha in allow:f", "evalsha in reset:a", "eval in reset:a",
	}
	if got := hook.take(); fmt.Sprint(got) != fmt.Sprint(wantSpans) {
		t.Errorf("Redis commands ran in\n  %q\nwant\n  %q", got, wantSpans)
	}
	if rec.open != 0 {
		t.Errorf("%d decisions started and never ended", rec.open)
	}
}

// TestObserverSeesDegradedDecisions: a fail-open decision reaches End with
// its Source and the Redis error as Cause; the call that fails and the
// calls the breaker answers alike.
func TestObserverSeesDegradedDecisions(t *testing.T) {
	rec := &recorder{}
	var causes []error
	l := testLimiter(downRedis(t), WithObserver(observerFuncs{rec, func(res Result) { causes = append(causes, res.Cause) }}), WithFailurePolicy(FailOpen))
	for range 2 {
		if res, err := l.Allow(context.Background(), "k", PerMinute(1)); err != nil || res.Source != SourceFailOpen {
			t.Fatalf("%+v %v", res, err)
		}
	}
	want := "[start allow k gcra [1/m] cost=1 batch=0/0 end allow k allowed=true source=fail-open err=nil ctx=allow:k " +
		"start allow k gcra [1/m] cost=1 batch=0/0 end allow k allowed=true source=fail-open err=nil ctx=allow:k]"
	if got := fmt.Sprint(rec.take()); got != want {
		t.Errorf("events %s\nwant %s", got, want)
	}
	for _, c := range causes {
		if !errors.Is(c, ErrUnavailable) {
			t.Errorf("Cause %v, want the Redis error", c)
		}
	}
}

// observerFuncs adds a look at each Result to a recorder.
type observerFuncs struct {
	*recorder
	onEnd func(Result)
}

func (o observerFuncs) End(ctx context.Context, d Decision, res Result, err error) {
	o.onEnd(res)
	o.recorder.End(ctx, d, res, err)
}

// TestObserverLimitsAreACopy: the observer may keep Decision.Limits; they
// are not the caller's slice.
func TestObserverLimitsAreACopy(t *testing.T) {
	f := newFakeRedis(t)
	var kept []Limit
	l := testLimiter(f.rdb, WithObserver(observerFuncs{&recorder{}, func(Result) {}}))
	l.observer = keepLimits{&kept}
	limits := []Limit{PerSecond(1), PerHour(5)}
	_, _ = l.Decide(context.Background(), Request{Key: "k", Limits: limits})
	limits[0] = PerDay(9)
	if len(kept) != 2 || kept[0] != PerSecond(1) {
		t.Errorf("kept %v", kept)
	}
}

type keepLimits struct{ into *[]Limit }

func (k keepLimits) Start(ctx context.Context, d Decision) context.Context {
	*k.into = d.Limits
	return nil // a nil context means: carry on with the caller's
}
func (k keepLimits) End(context.Context, Decision, Result, error) {}

// TestNoObserverNoAllocations: without an observer the hook costs no
// allocation: a decision answered by the deny cache allocates nothing at
// all, end to end through the engine. (With an observer, the limits are
// copied for it: one allocation, plus the observer's own.)
func TestNoObserverNoAllocations(t *testing.T) {
	if RaceEnabled {
		t.Skip("the race detector allocates")
	}
	ctx := context.Background()
	f := newFakeRedis(t)
	for _, multi := range []bool{false, true} {
		l := testLimiter(f.rdb, WithDenyCache(10))
		lim := PerHour(1)
		// A Request's limits are the caller's, held as a service holds its
		// configuration: a slice literal per call would be the caller's
		// allocation.
		multiReq := Request{Key: "d", Limits: []Limit{lim, PerDay(5)}}
		call := func() (Result, error) {
			if multi {
				return l.Decide(ctx, multiReq)
			}
			return l.Allow(ctx, "d", lim)
		}
		_ = l.Reset(ctx, "d")
		_, _ = call()
		if r, _ := call(); r.Allowed {
			t.Fatal("the second unit of 1 per hour was admitted")
		}
		if n := testing.AllocsPerRun(200, func() {
			if r, _ := call(); r.Source != SourceDenyCache {
				t.Fatal("not a deny-cache hit")
			}
		}); n != 0 {
			t.Errorf("multi %v: a deny-cache hit without an observer allocates %v times, want 0", multi, n)
		}
		l.observer = nopObserver{}
		if n := testing.AllocsPerRun(200, func() { _, _ = call() }); n != 1 {
			t.Errorf("multi %v: with a no-op observer %v allocations, want 1 (the copy of the limits)", multi, n)
		}
	}
}

type nopObserver struct{}

func (nopObserver) Start(ctx context.Context, _ Decision) context.Context { return ctx }
func (nopObserver) End(context.Context, Decision, Result, error)          {}

func TestKindStrings(t *testing.T) {
	for k, want := range map[Kind]string{KindAllow: "allow", KindCheck: "check", KindPeek: "peek", KindWait: "wait", KindUpTo: "upto", KindRefund: "refund", KindForce: "force", kindReset: "Kind(7)", Kind(42): "Kind(42)"} {
		if got := k.String(); got != want {
			t.Errorf("%d: %q, want %q", k, got, want)
		}
	}
}

// BenchmarkObserver is one decision with and without an observer, answered
// by the deny cache (the engine alone) and by Redis: run it with -benchmem
// to see that "none" adds no allocation.
func BenchmarkObserver(b *testing.B) {
	ctx := context.Background()
	rdb := benchRedis(b)
	for _, obs := range []struct {
		name string
		o    Observer
	}{{"none", nil}, {"noop", nopObserver{}}} {
		b.Run("deny_cache/"+obs.name, func(b *testing.B) {
			l := testLimiter(rdb, WithDenyCache(10), WithObserver(obs.o))
			lim := PerHour(1)
			_ = l.Reset(ctx, "bench:obs:denied")
			_, _ = l.Allow(ctx, "bench:obs:denied", lim)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if r, _ := l.Allow(ctx, "bench:obs:denied", lim); r.Allowed {
					b.Fatal("admitted")
				}
			}
		})
		b.Run("redis/"+obs.name, func(b *testing.B) {
			l := testLimiter(rdb, WithObserver(obs.o))
			lim := PerSecond(1e9)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if _, err := l.Allow(ctx, "bench:obs", lim); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// algorithmOf is the algorithm of d's limits, "-" when it has none.
func algorithmOf(d Decision) string {
	if len(d.Limits) == 0 {
		return "-"
	}
	return d.Limits[0].Algorithm.String()
}
