package redistest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redisrate/redisrate"
)

// Bound is contract guarantee 4, the reference the tests hold a key's
// admissions to: the most units l may admit in span for a key that starts
// empty. gcra and leaky_bucket: burst + rate * span/period. token_bucket,
// whose refills are discrete: burst + rate * (1 + floor(span/period)).
// sliding_log: rate in any period, and a span is covered by 1 +
// floor(span/period) of them. fixed_window: rate per window, and a window
// opens on a request at least a period after the last one opened, the
// first within the span (the key starts empty), so at most 1 +
// floor(span/period) of them. sliding_window: rate per aligned window, of
// which a span meets at most 1 + ceil(span/period).
func Bound(l redisrate.Limit, span time.Duration) float64 {
	periods := float64(span) / float64(l.Period)
	whole := float64(span / l.Period)
	rate, capacity := float64(l.Rate), float64(l.Capacity())
	switch l.Algorithm {
	case redisrate.GCRA, redisrate.LeakyBucket:
		return capacity + rate*periods
	case redisrate.TokenBucket:
		return capacity + rate*(1+whole)
	case redisrate.SlidingLog, redisrate.FixedWindow:
		return rate * (1 + whole)
	case redisrate.SlidingWindow:
		ceil := whole
		if span%l.Period != 0 {
			ceil++
		}
		return rate * (1 + ceil)
	}
	panic("Bound: no guarantee 4 for algorithm " + l.Algorithm.String())
}

// Load is a load generator that keeps score: workers call a decision in a
// loop until Stop.
type Load struct {
	// Admitted and Denied count the decisions; Failed the calls that
	// returned an error, ByBreaker those of them the open circuit breaker
	// answered (ErrCircuitOpen) and Untyped those that do not match
	// ErrUnavailable.
	Admitted, Denied, Failed, ByBreaker, Untyped atomic.Int64

	mu          sync.Mutex
	first, last time.Time // the first call's start, the last call's end
	lastFailure time.Time
	errs        []error // the first few

	stop chan struct{}
	once sync.Once
	wg   sync.WaitGroup
}

// StartLoad starts workers goroutines that call decide, each call with a
// deadline of 2 s, pausing pause between calls (and at least a millisecond
// after a failure, as a client backs off), and hand each decision to
// observe (nil for none).
func StartLoad(workers int, pause time.Duration, decide func(context.Context) (redisrate.Result, error), observe func(redisrate.Result)) *Load {
	l := &Load{stop: make(chan struct{})}
	for range workers {
		l.wg.Go(func() {
			for {
				select {
				case <-l.stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				start := time.Now()
				res, err := decide(ctx)
				cancel()
				l.record(start, time.Now(), res, err)
				if err == nil && observe != nil {
					observe(res)
				}
				wait := pause
				if err != nil {
					wait = max(pause, time.Millisecond)
				}
				if wait > 0 {
					time.Sleep(wait)
				}
			}
		})
	}
	return l
}

func (l *Load) record(start, end time.Time, res redisrate.Result, err error) {
	switch {
	case err != nil:
		l.Failed.Add(1)
		if errors.Is(err, redisrate.ErrCircuitOpen) {
			l.ByBreaker.Add(1)
		}
		if !errors.Is(err, redisrate.ErrUnavailable) {
			l.Untyped.Add(1)
		}
	case res.Allowed:
		l.Admitted.Add(1)
	default:
		l.Denied.Add(1)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.first.IsZero() || start.Before(l.first) {
		l.first = start
	}
	if end.After(l.last) {
		l.last = end
	}
	if err != nil {
		if end.After(l.lastFailure) {
			l.lastFailure = end
		}
		if len(l.errs) < 5 {
			l.errs = append(l.errs, err)
		}
	}
}

// Stop stops the workers and waits for them; calling it again is harmless.
func (l *Load) Stop() {
	l.once.Do(func() {
		close(l.stop)
		l.wg.Wait()
	})
}

// Decisions is the calls that got a decision.
func (l *Load) Decisions() int64 { return l.Admitted.Load() + l.Denied.Load() }

// Calls is the calls made so far: decisions and failures.
func (l *Load) Calls() int64 { return l.Decisions() + l.Failed.Load() }

// AwaitCalls waits until the workers have made n calls more than they had
// when it was called, and fails t when they have not within the deadline:
// a phase of a test that lasts as many calls as it needs, however fast or
// slow the machine. what names the phase.
func (l *Load) AwaitCalls(t testing.TB, n int64, within time.Duration, what string) {
	t.Helper()
	want := l.Calls() + n
	WaitFor(t, within, fmt.Sprintf("%d calls %s", n, what), func() bool { return l.Calls() >= want })
}

// Span is from the first call's start to the last call's end.
func (l *Load) Span() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.last.Sub(l.first)
}

// Gap is how long after since calls kept failing: from since to the end of
// the last failed call, 0 if none failed after since.
func (l *Load) Gap(since time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lastFailure.Before(since) {
		return 0
	}
	return l.lastFailure.Sub(since)
}

// Errs are the first few errors of failed calls.
func (l *Load) Errs() []error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]error(nil), l.errs...)
}
