// Package hardening holds the production-hardening tests of issue 12: TLS,
// a least-privilege ACL user, clocks that disagree across a failover,
// eviction and OOM, resharding under load, and fast answers while Redis is
// down (the circuit breaker). Every server is a local redis-server started
// by the test on a free 127.0.0.1 port (internal/redistest) and stopped by
// it; figures are logged as "FIGURE name: value" lines and recorded in
// docs/reliability.md.
package hardening

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redisrate/redisrate"
	"github.com/redisrate/redisrate/integration_test/internal/redistest"
)

var algorithms = []redisrate.Algorithm{
	redisrate.GCRA, redisrate.TokenBucket, redisrate.LeakyBucket,
	redisrate.SlidingWindow, redisrate.FixedWindow, redisrate.SlidingLog,
}

// needLocal skips (or, in CI, fails) a test that needs local redis-server
// processes.
func needLocal(t testing.TB) {
	t.Helper()
	if !redistest.Local() {
		if os.Getenv("CI") == "true" {
			t.Fatal("needs redis-server on PATH (CI=true: CI must install it)")
		}
		t.Skip("needs redis-server on PATH (these tests start, stop, pause and reconfigure servers): " + redistest.HowTo)
	}
}

// report logs a figure in the one greppable format of the reliability
// tests: "FIGURE name: value".
func report(t testing.TB, name, format string, args ...any) {
	t.Helper()
	t.Logf("FIGURE %s: %s", name, fmt.Sprintf(format, args...))
}

// bound is the most units contract guarantee 4 lets lim admit in a span of
// span: for gcra and leaky_bucket burst + rate*t/period; token_bucket
// burst + rate*(1+floor(t/period)); sliding_log rate per period span;
// fixed_window rate per window; sliding_window rate per aligned window.
func bound(lim redisrate.Limit, span time.Duration) int64 {
	P := float64(lim.Period)
	t := float64(span)
	rate := float64(lim.Rate)
	burst := float64(lim.Capacity())
	var b float64
	switch lim.Algorithm {
	case redisrate.GCRA, redisrate.LeakyBucket:
		b = burst + rate*t/P
	case redisrate.TokenBucket:
		b = burst + rate*(1+math.Floor(t/P))
	case redisrate.SlidingLog:
		b = rate * math.Max(1, math.Ceil(t/P))
	default: // FixedWindow, SlidingWindow: a span of t meets at most 1+ceil(t/P) windows
		b = rate * (1 + math.Ceil(t/P))
	}
	return int64(math.Floor(b + 1e-9))
}

// hot is one key under load: what it admitted, from its first call's start
// to its last call's end.
type hot struct {
	key      string
	lim      redisrate.Limit
	admitted atomic.Int64
	denied   atomic.Int64
	failed   atomic.Int64
	mu       sync.Mutex
	first    time.Time
	last     time.Time
	errs     []error
}

func (h *hot) record(start, end time.Time, res redisrate.Result, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.first.IsZero() || start.Before(h.first) {
		h.first = start
	}
	if end.After(h.last) {
		h.last = end
	}
	switch {
	case err != nil:
		h.failed.Add(1)
		if len(h.errs) < 3 {
			h.errs = append(h.errs, err)
		}
	case res.Allowed:
		h.admitted.Add(1)
	default:
		h.denied.Add(1)
	}
}

func (h *hot) span() time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.last.Sub(h.first)
}

// hammer runs workers per key calling allow until stop is closed, pacing
// each worker by pause between calls.
func hammer(keys []*hot, workers int, pause time.Duration, allow func(ctx context.Context, h *hot) (redisrate.Result, error)) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	for _, h := range keys {
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-done:
						return
					default:
					}
					ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
					start := time.Now()
					res, err := allow(ctx, h)
					h.record(start, time.Now(), res, err)
					cancel()
					if pause > 0 {
						time.Sleep(pause)
					}
				}
			}()
		}
	}
	var once sync.Once
	return func() { once.Do(func() { close(done); wg.Wait() }) }
}

// checkBounds fails t for a key that failed calls or admitted more than
// bound over its span (plus extra, for a clock that jumped ahead), and
// logs each key's figures.
func checkBounds(t *testing.T, name string, keys []*hot, extra time.Duration, allowFailures bool) {
	t.Helper()
	for _, h := range keys {
		span := h.span()
		b := bound(h.lim, span+extra)
		adm := h.admitted.Load()
		report(t, name+" "+h.lim.Algorithm.String(), "%d admitted (bound %d over %v%s), %d denied, %d failed",
			adm, b, span.Round(time.Millisecond), map[bool]string{true: fmt.Sprintf(" + %v clock step", extra), false: ""}[extra > 0],
			h.denied.Load(), h.failed.Load())
		if adm > b {
			t.Errorf("%s %s: %d admitted, above the bound %d for %v", name, h.key, adm, b, span+extra)
		}
		if adm == 0 {
			t.Errorf("%s %s: nothing admitted: the load did not run", name, h.key)
		}
		if f := h.failed.Load(); f > 0 && !allowFailures {
			t.Errorf("%s %s: %d failed calls, e.g. %v", name, h.key, f, h.errs)
		}
		h.mu.Lock()
		for _, err := range h.errs {
			if !errors.Is(err, redisrate.ErrUnavailable) {
				t.Errorf("%s %s: a failed call's error does not match ErrUnavailable: %v", name, h.key, err)
			}
		}
		h.mu.Unlock()
	}
}

// loadFor is how long a load phase runs: short, unless REDISRATE_SOAK
// (e.g. 10m) asks for a soak, as the first round's reliability tests do.
func loadFor(short time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv("REDISRATE_SOAK")); err == nil && d > 0 {
		return d
	}
	return short
}

// grepStats keeps the INFO lines that start with one of prefixes.
func grepStats(info string, prefixes ...string) string {
	var out []string
	for _, line := range strings.Split(info, "\r\n") {
		for _, p := range prefixes {
			if strings.HasPrefix(line, p) {
				out = append(out, line)
			}
		}
	}
	return strings.Join(out, " ")
}

// statCalls is the calls= count of an INFO commandstats line ("cmdstat_asking"), 0 when absent.
func statCalls(info, stat string) int {
	for _, line := range strings.Split(info, "\r\n") {
		if rest, ok := strings.CutPrefix(line, stat+":calls="); ok {
			n, _ := strconv.Atoi(strings.SplitN(rest, ",", 2)[0])
			return n
		}
	}
	return 0
}
