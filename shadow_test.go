package redisrate

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// outcomes is an Observer that keeps what each decision ended with.
type outcomes struct{ ends []Result }

func (o *outcomes) Start(ctx context.Context, _ Decision) context.Context { return ctx }
func (o *outcomes) End(_ context.Context, d Decision, res Result, err error) {
	if !d.WholeBatch && !d.Reset && err == nil {
		o.ends = append(o.ends, res)
	}
}

// TestShadowModeEveryCallKind: in shadow mode every kind of call on an
// exhausted key is admitted, says it would have been denied, and records
// nothing that Redis would not have recorded; the observer sees the same.
func TestShadowModeEveryCallKind(t *testing.T) {
	ctx := context.Background()
	f := newFakeRedis(t)
	var obs outcomes
	l := testLimiter(f.rdb, WithShadowMode(), WithObserver(&obs), WithDenyCache(10))
	lim := PerMinute(3)
	if res, err := l.AllowN(ctx, "k", lim, 3); err != nil || !res.Allowed || res.WouldDeny || !res.Shadow {
		t.Fatalf("the key's 3 units: %+v %v", res, err)
	}
	// The same calls on an enforcing Limiter of the same Redis deny.
	enforcing := testLimiter(f.rdb)
	before := f.dump("k")
	for name, call := range callKinds(l) {
		if name == "Reset" || strings.HasPrefix(name, "DecideBatch/two") {
			continue
		}
		res, err := call(ctx)
		wouldDeny := !strings.Contains(name, "Peek")
		if err != nil || !res.Allowed || !res.Shadow || res.WouldDeny != wouldDeny || res.Source == SourceFailOpen {
			t.Errorf("%s in shadow mode: %+v, %v; want admitted, WouldDeny %v", name, res, err, wouldDeny)
		}
		if wouldDeny && (res.RetryAfter <= 0 || !strings.Contains(res.String(), "would deny")) {
			t.Errorf("%s: %+v (%s): want the denial's RetryAfter", name, res, res)
		}
		if got := f.dump("k"); got != before {
			t.Fatalf("%s in shadow mode changed the key: %s, then %s", name, before, got)
		}
	}
	if res, _ := enforcing.Allow(ctx, "k", lim); res.Allowed {
		t.Fatal("the enforcing Limiter admitted: shadow mode took units it was denied")
	}
	var denied int
	for _, r := range obs.ends {
		if !r.Allowed || !r.Shadow {
			t.Errorf("the observer saw %+v: want what the caller got", r)
		}
		if r.WouldDeny {
			denied++
		}
	}
	if denied == 0 {
		t.Error("the observer saw no WouldDeny")
	}
}

// TestShadowModeRedisDown: in shadow mode a call Redis cannot decide is
// admitted whatever the policy; FailClosed and FailError would have
// refused it, and say so. Reset still fails: nothing else can reset.
func TestShadowModeRedisDown(t *testing.T) {
	for _, c := range []struct {
		policy    FailurePolicy
		source    Source
		wouldDeny bool
	}{
		{FailError, SourceFailClosed, true},
		{FailClosed, SourceFailClosed, true},
		{FailOpen, SourceFailOpen, false},
	} {
		l := testLimiter(downRedis(t), WithShadowMode(), WithFailurePolicy(c.policy))
		for name, call := range callKinds(l) {
			res, err := call(context.Background())
			if name == "Reset" {
				if !errors.Is(err, ErrUnavailable) {
					t.Errorf("%v: Reset: %v; want ErrUnavailable", c.policy, err)
				}
				continue
			}
			if err != nil || !res.Allowed || res.Source != c.source || res.WouldDeny != c.wouldDeny || !errors.Is(res.Cause, ErrUnavailable) {
				t.Errorf("%v, %s: %+v, %v; want admitted by %v, WouldDeny %v", c.policy, name, res, err, c.source, c.wouldDeny)
			}
		}
	}
}

// TestWithSharesTheBreaker: a Limiter of With shares its parent's circuit
// breaker (one outage, seen once) and keeps its own policy; the parent is
// unchanged; WithCircuitBreaker gives it a breaker of its own.
func TestWithSharesTheBreaker(t *testing.T) {
	ctx := context.Background()
	base := testLimiter(downRedis(t), WithFailurePolicy(FailOpen))
	strict := base.With(WithFailurePolicy(FailClosed), WithShadowMode())
	own := base.With(WithCircuitBreaker(defaultProbeInterval))
	if res, _ := base.Allow(ctx, "k", PerMinute(1)); res.Source != SourceFailOpen || errors.Is(res.Cause, ErrCircuitOpen) {
		t.Fatalf("base: %+v", res)
	}
	res, _ := strict.Allow(ctx, "k", PerMinute(1))
	if res.Source != SourceFailClosed || !res.WouldDeny || !errors.Is(res.Cause, ErrCircuitOpen) {
		t.Errorf("With: %+v; want its own policy, answered by the shared open breaker", res)
	}
	if res, _ := own.Allow(ctx, "k", PerMinute(1)); errors.Is(res.Cause, ErrCircuitOpen) {
		t.Errorf("With(WithCircuitBreaker): %+v; want a breaker of its own, still shut", res)
	}
	if base.policy != FailOpen || base.shadow {
		t.Errorf("base changed: %v, shadow %v", base.policy, base.shadow)
	}
	if (*Limiter)(nil).With(WithShadowMode()) != nil {
		t.Error("nil.With is not nil")
	}
}

// TestFailurePolicyZero: the zero FailurePolicy is no choice: the
// default, FailError.
func TestFailurePolicyZero(t *testing.T) {
	var p FailurePolicy
	l := testLimiter(downRedis(t), WithFailurePolicy(FailOpen)).With(WithFailurePolicy(p))
	if l.failurePolicy() != FailError || l.policy != 0 {
		t.Errorf("WithFailurePolicy(0): %v (set: %v); want FailError, and no choice left for the middleware to resolve", l.failurePolicy(), l.policy)
	}
	if _, err := l.Allow(context.Background(), "k", PerSecond(1)); !errors.Is(err, ErrUnavailable) {
		t.Errorf("no policy, Redis down: %v; want the error (FailError)", err)
	}
	if p.String() != "default" || FailurePolicy(9).String() != "FailurePolicy(9)" {
		t.Errorf("%q, %q", p.String(), FailurePolicy(9).String())
	}
}
