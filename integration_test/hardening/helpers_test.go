// Package hardening holds the production-hardening tests of issue 12: TLS,
// a least-privilege ACL user, clocks that disagree across a failover,
// eviction and OOM, resharding under load, and fast answers while Redis is
// down (the circuit breaker). Every server is a local redis-server started
// by the test on a free 127.0.0.1 port (internal/redistest) and stopped by
// it; figures are logged as "FIGURE name: value" lines and recorded in
// docs/reliability.md. What they share with the module's other tests is in
// internal/redistest.
package hardening

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redisrate/redisrate"
	"github.com/redisrate/redisrate/integration_test/internal/redistest"
)

// hot is one key under load.
type hot struct {
	key string
	lim redisrate.Limit
	*redistest.Load
}

// hammer starts workers per key calling allow, each pausing pause between
// calls, and returns what stops them all.
func hammer(keys []*hot, workers int, pause time.Duration, allow func(ctx context.Context, h *hot) (redisrate.Result, error)) (stop func()) {
	for _, h := range keys {
		h.Load = redistest.StartLoad(workers, pause, func(ctx context.Context) (redisrate.Result, error) { return allow(ctx, h) }, nil)
	}
	return func() {
		for _, h := range keys {
			h.Stop()
		}
	}
}

// checkBounds fails t for a key that failed calls or admitted more than
// contract guarantee 4 allows over its span (plus extra, for a clock that
// jumped ahead), and logs each key's figures.
func checkBounds(t *testing.T, name string, keys []*hot, extra time.Duration, allowFailures bool) {
	t.Helper()
	for _, h := range keys {
		span := h.Span()
		b := redistest.Bound(h.lim, span+extra)
		adm := h.Admitted.Load()
		step := ""
		if extra > 0 {
			step = fmt.Sprintf(" + %v clock step", extra)
		}
		redistest.Report(t, name+" "+h.lim.Algorithm.String(), "%d admitted (bound %.1f over %v%s), %d denied, %d failed",
			adm, b, span.Round(time.Millisecond), step, h.Denied.Load(), h.Failed.Load())
		if float64(adm) > b {
			t.Errorf("%s %s: %d admitted, above the bound %.1f for %v", name, h.key, adm, b, span+extra)
		}
		if adm == 0 {
			t.Errorf("%s %s: nothing admitted: the load did not run", name, h.key)
		}
		if f := h.Failed.Load(); f > 0 && !allowFailures {
			t.Errorf("%s %s: %d failed calls, e.g. %v", name, h.key, f, h.Errs())
		}
		if n := h.Untyped.Load(); n > 0 {
			t.Errorf("%s %s: %d failed calls' errors do not match ErrUnavailable, e.g. %v", name, h.key, n, h.Errs())
		}
	}
}
