package redisrate

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// The circuit breaker: after a call fails because Redis cannot decide, it
// stops asking a Redis that is down for every request, lets one call probe
// it every so often, and logs each burst of failures once.

// defaultProbeInterval is how often, by default, a Limiter whose circuit
// breaker is open lets one call probe Redis (see WithCircuitBreaker).
const defaultProbeInterval = 200 * time.Millisecond

// WithCircuitBreaker sets how often the circuit breaker probes Redis while
// it is open; 0 turns the breaker off (every call asks Redis). It is on by
// default, probing every 200 ms.
//
// After a call fails because Redis cannot decide (ErrUnavailable: refused,
// timed out, loading, ...; not a caller's cancellation, not an argument
// error), the breaker opens: the calls that follow do not ask Redis, and
// are answered at once by the fallback or the failure policy, with an error
// that matches ErrUnavailable and wraps the failure. While it is open, the
// first call after each probe interval starts one probe in the background
// (one at a time: a cost-0 read of that call's key, which writes nothing);
// when a probe gets any answer from Redis, or a call sent before the
// failure succeeds, the breaker closes and calls go to Redis again. So
// decisions are Redis's again within about one interval of its return, and
// a Redis that is down costs a caller no wait after the first failure.
//
// The breaker is per Limiter, so per Redis client: on a Cluster, one
// failing node opens it for every key.
func WithCircuitBreaker(probeEvery time.Duration) Option {
	return func(l *Limiter) { l.health = newHealth(max(probeEvery, 0), l.clock) }
}

// WithLogger logs, through logger, what an operator must know: when Redis
// starts failing (the first failure of a burst, with its error, at level
// Warn) and when it answers again (at level Info, with how long it was
// away and how many calls it did not decide meanwhile: degraded, answered
// by the fallback or the failure policy, and errors, returned with an
// error matching ErrUnavailable, which the middleware answer with 503 or
// Unavailable): once per burst of failures, never once per request. A nil
// logger (the default) logs nothing.
//
// go-redis logs on its own (each failed dial, to stderr by default): route
// its lines with redis.SetLogger, e.g. to the same logger at level Debug,
// so that an outage logs once (see the example of go-redis's logs).
func WithLogger(logger *slog.Logger) Option {
	return func(l *Limiter) { l.logger = logger }
}

// minOutageRetry is the shortest retry hint while Redis is down.
const minOutageRetry = time.Second

// health follows Redis's failures: the circuit breaker and the bursts that
// WithLogger reports.
type health struct {
	probeEvery time.Duration // 0: no breaker
	now        func() time.Time

	failing  atomic.Bool  // from a burst's first failure to the next success
	degraded atomic.Int64 // degraded decisions in the current burst
	errors   atomic.Int64 // calls that returned ErrUnavailable in the current burst

	mu        sync.Mutex
	since     time.Time // the burst's first failure
	lastErr   error
	lastProbe time.Time
	probing   bool
	probes    sync.WaitGroup // tests wait for probes
}

func newHealth(probeEvery time.Duration, clk clock) *health {
	return &health{probeEvery: probeEvery, now: orReal(clk).Now}
}

// retryAfter is the retry hint of a denial by policy while Redis is down:
// when a decision of Redis can be expected again, the breaker probing once
// per interval (never under minOutageRetry, so that clients do not hammer
// the service meanwhile).
func (h *health) retryAfter() time.Duration {
	return max(minOutageRetry, h.probeEvery)
}

// skip reports whether the breaker is open: do not ask Redis.
func (h *health) skip() bool {
	return h.probeEvery > 0 && h.failing.Load()
}

// openErr is the error of a call the open breaker kept from Redis.
func (h *health) openErr() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return &breakerError{since: h.since, last: h.lastErr}
}

// probeDue reports whether the caller should start a probe now (and, if
// so, marks one in flight).
func (h *health) probeDue() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.now()
	if !h.failing.Load() || h.probing || now.Sub(h.lastProbe) < h.probeEvery {
		return false
	}
	h.probing, h.lastProbe = true, now
	h.probes.Add(1)
	return true
}

// failed records a call that Redis could not decide: err is Redis's error,
// which becomes the cause of the calls the open breaker answers, and
// logged the call's whole error, for the log line.
func (h *health) failed(l *Limiter, err, logged error) {
	if h.failing.Load() {
		h.mu.Lock()
		h.lastErr = err
		h.mu.Unlock()
		return
	}
	h.mu.Lock()
	first := !h.failing.Load()
	if first {
		h.since, h.lastProbe, h.lastErr = h.now(), h.now(), err
		h.degraded.Store(0)
		h.errors.Store(0)
		h.failing.Store(true)
	}
	h.mu.Unlock()
	if first && l.logger != nil {
		l.logger.Warn("redisrate: Redis cannot decide; calls follow the fallback and the failure policy until it answers again",
			slog.Any("error", logged), slog.String("policy", l.policy.String()),
			slog.Bool("fallback", l.fallback != nil), slog.Duration("probe_every", h.probeEvery))
	}
}

// succeeded records an answer from Redis: the end of a burst, if any.
func (h *health) succeeded(l *Limiter) {
	if !h.failing.Load() {
		return
	}
	h.mu.Lock()
	was := h.failing.Swap(false)
	since := h.since
	h.mu.Unlock()
	if was && l.logger != nil {
		l.logger.Info("redisrate: Redis answers again",
			slog.Duration("after", h.now().Sub(since)),
			slog.Int64("degraded", h.degraded.Load()), slog.Int64("errors", h.errors.Load()))
	}
}

// probe asks Redis, in the background, whether it answers again: a cost-0
// read of key, which writes nothing. Any answer closes the breaker, even an
// error reply (a foreign key): Redis is up.
func (l *Limiter) probe(key string) {
	h := l.health
	defer h.probes.Done()
	// A probe waits as long as a call would: a Redis that answers only
	// after the decision timeout would fail the calls again. A client that
	// does not stop at its context's deadline is left to finish in the
	// background (detached), as a call's is.
	timeout := probeTimeout
	if l.timeout > 0 {
		timeout = l.timeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	lim := []Limit{PerSecond(1)}
	args, _ := buildArgs(0, "", lim)
	_, err := l.detached(ctx, &algoScripts[GCRA], accessRead, []string{key}, args)
	h.mu.Lock()
	h.probing = false
	h.mu.Unlock()
	if err == nil || classify(err) != ErrUnavailable {
		h.succeeded(l)
	}
}

// probeTimeout bounds one probe of a Limiter without a decision timeout.
const probeTimeout = 2 * time.Second

// breakerError is the cause of a call the open breaker answered.
type breakerError struct {
	since time.Time
	last  error
}

func (e *breakerError) Error() string {
	return fmt.Sprintf("circuit breaker open: Redis failed at %s and has not answered a probe since: %v",
		e.since.Format(time.RFC3339Nano), e.last)
}

func (e *breakerError) Unwrap() error { return e.last }

// Is makes the cause match ErrCircuitOpen.
func (e *breakerError) Is(target error) bool { return target == ErrCircuitOpen }
