package redisrate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
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
// error, not a deployment the server refuses, ErrMisconfigured, after which
// every call asks again so that the first after the fix is decided), the
// breaker opens: the calls that follow do not ask Redis, and
// are answered at once by the fallback or the failure policy, with an error
// that matches ErrUnavailable and wraps the failure. While it is open, the
// first call after each probe interval starts one probe in the background
// (one at a time: a cost-0 read of that call's key, which writes nothing);
// when a probe gets any answer from Redis, or a call sent before the
// failure succeeds, the breaker closes and calls go to Redis again. So
// decisions are Redis's again within about one interval of its return, and
// a Redis that is down costs a caller no wait after the first failure.
//
// A call whose context ends while it waits for Redis (a deadline shorter
// than the decision timeout, as gRPC clients send) is not a failure of
// Redis, but it may hide one: it starts a probe under the decision
// timeout (one at a time, at most one per interval), and a probe that gets
// no answer opens the breaker. So a stalled Redis opens it within about
// two decision timeouts whatever the callers' deadlines, and a caller's
// deadline alone never does. After a probe has timed out, the next one
// waits twice as long, up to 2 s or the decision timeout if that is longer
// (a probe may need a lookup, a dial and a handshake on a starved machine).
//
// The breaker is per Limiter, so per Redis client, and on a Cluster
// (*redis.ClusterClient) per primary: each node's calls open and close its
// own, so that one dead shard does not degrade the others.
func WithCircuitBreaker(probeEvery time.Duration) Option {
	return func(l *Limiter) { l.health = newHealth(max(probeEvery, 0), l.clock) }
}

// WithLogger logs, through logger, what an operator must know: when Redis
// starts failing (the first failure of a burst, at level Warn, with the
// error, its cause, e.g. "connection refused", the script, the node on a
// Cluster, and the key's name without who is limited: "ip:…", never the
// address) and when it answers again (at level Info, with how long it was
// away and how many calls it did not decide meanwhile: degraded, answered
// by the fallback or the failure policy, and errors, returned with an
// error matching ErrUnavailable, which the middleware answer with 503 or
// Unavailable): once per burst of failures, never once per request. A nil
// logger (the default) logs none of that. A deployment the server refuses
// (ErrMisconfigured: a wrong password, an ACL) is logged at level Error,
// through logger or, if it is nil, slog.Default: at its first occurrence,
// then once a minute while it lasts; limits must not be off unseen.
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
// WithLogger reports; one for a Limiter's client, and on a Cluster one
// more for each primary (of).
type health struct {
	probeEvery time.Duration // 0: no breaker
	now        func() time.Time
	node       string          // the Cluster primary it follows; "": the client as a whole
	nodes      *sync.Map       // address -> *health of a Cluster's primaries, shared by them
	probes     *sync.WaitGroup // probes and log lines in flight, shared: tests wait for them

	failing  atomic.Bool  // from a burst's first failure to the next success
	degraded atomic.Int64 // degraded decisions in the current burst
	errors   atomic.Int64 // calls that returned ErrUnavailable in the current burst

	misconf misconfLog // the log of configuration errors (ErrMisconfigured)

	mu        sync.Mutex
	since     time.Time // the burst's first failure
	lastErr   error
	lastProbe time.Time
	probing   bool
	probeWait time.Duration // a probe's deadline after one timed out; 0: the decision timeout
}

func newHealth(probeEvery time.Duration, clk clock) *health {
	return &health{probeEvery: probeEvery, now: orReal(clk).Now, nodes: new(sync.Map), probes: new(sync.WaitGroup)}
}

// of returns the health of the Cluster primary at addr, made on first use.
func (h *health) of(addr string) *health {
	if v, ok := h.nodes.Load(addr); ok {
		return v.(*health)
	}
	v, _ := h.nodes.LoadOrStore(addr, &health{probeEvery: h.probeEvery, now: h.now, node: addr, nodes: h.nodes, probes: h.probes})
	return v.(*health)
}

// noIO is a context that has ended: go-redis's lookup of a key's node
// under it reads the Cluster state it has, and fails at once while it has
// none, rather than ask the network.
var noIO = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()

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
// so, marks one in flight): while the breaker is open, one per interval.
func (h *health) probeDue() bool { return h.startProbe(true) }

// suspect is told that a caller's context ended while its call waited for
// Redis: not a failure of Redis (the deadline may be a microsecond), but
// Redis may be stalled. It reports whether the caller should start a probe
// under the decision timeout, whose outcome says which: at most one at a
// time and one per interval, so that callers cannot make it a load.
func (h *health) suspect() bool { return h.startProbe(false) }

// startProbe reports whether a probe is due, the breaker open (failing)
// or shut, and marks one in flight if so.
func (h *health) startProbe(failing bool) bool {
	if h.probeEvery <= 0 || h.failing.Load() != failing {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.now()
	if h.failing.Load() != failing || h.probing || now.Sub(h.lastProbe) < h.probeEvery {
		return false
	}
	h.probing, h.lastProbe = true, now
	h.probes.Add(1)
	return true
}

// failed records a call that Redis could not decide: err is Redis's error,
// without the call's key, which becomes the cause of the calls the open
// breaker answers; script and key are the call's, for the log line.
func (h *health) failed(l *Limiter, err error, script, key string) {
	if h.failing.Load() {
		h.mu.Lock()
		var known *unreachableError
		if !isTimeout(err) || !errors.As(h.lastErr, &known) {
			h.lastErr = err // a timeout says less than the cause a dial found
		}
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
	if first {
		l.warn(h, err, script, key)
	}
}

// unreachableError is what a dial of the node found behind a call that
// timed out: go-redis retries a refused dial until the deadline, and then
// reports only the deadline. It becomes the cause of the calls the open
// breaker answers, so that "connection refused" is reported as what it is.
type unreachableError struct {
	addr string
	err  error // the dial's
}

func (e *unreachableError) Error() string {
	return "cannot connect to Redis at " + e.addr + ": " + e.err.Error()
}

func (e *unreachableError) Unwrap() error { return e.err }

// explained is err, a call's failure, with the cause a dial found in this
// burst if err says only that no answer came in time: so that a Limiter
// without a breaker (every call asks Redis) reports it too.
func (h *health) explained(err error) error {
	if !h.failing.Load() || !isTimeout(err) {
		return err
	}
	h.mu.Lock()
	known, ok := h.lastErr.(*unreachableError)
	h.mu.Unlock()
	if !ok {
		return err
	}
	return &unreachableError{addr: known.addr, err: fmt.Errorf("%w (redialled until: %v)", known.err, err)}
}

// explain makes cause the error the open breaker answers with, in place of
// err, the timeout of the burst's first failure, if the burst goes on.
func (h *health) explain(err, cause error) {
	h.mu.Lock()
	if h.failing.Load() && h.lastErr == err {
		h.lastErr = cause
	}
	h.mu.Unlock()
}

// outageMsg is the message of the log line at a burst's first failure.
const outageMsg = "redisrate: Redis cannot decide; calls follow the fallback and the failure policy until it answers again"

// warn reports the first failure of a burst, err, of a call of script on
// key: in the log, if there is a logger, and, when err says only that no
// answer came in time, to the breaker, whose calls then carry the cause a
// dial of the node finds, in the background (go-redis keeps "connection
// refused" to itself while it retries its dials until the deadline).
func (l *Limiter) warn(h *health, err error, script, key string) {
	log := func(cause string) {
		if l.logger == nil {
			return
		}
		attrs := []any{slog.String("error", err.Error()), slog.String("cause", cause),
			slog.String("script", script), slog.String("key", keyName(l.prefix, key))}
		if h.node != "" {
			attrs = append(attrs, slog.String("node", h.node))
		}
		l.logger.Warn(outageMsg, append(attrs, slog.String("policy", l.failurePolicy().String()),
			slog.Bool("fallback", l.fallback != nil), slog.Duration("probe_every", h.probeEvery))...)
	}
	opts := l.nodeOptions(key)
	if !isTimeout(err) || opts == nil {
		log(causeOf(err))
		return
	}
	h.probes.Add(1)
	go func() {
		defer h.probes.Done()
		cause, dialErr := l.diagnose(opts)
		if dialErr != nil {
			h.explain(err, &unreachableError{addr: opts.Addr, err: dialErr})
		}
		log(cause)
	}()
}

// nodeOptions are the options of the go-redis client that sends key's
// calls (on a Cluster, its primary's), for a diagnostic dial; nil for
// other clients.
func (l *Limiter) nodeOptions(key string) *redis.Options {
	switch c := l.rdb.(type) {
	case *redis.Client:
		return c.Options()
	case *redis.ClusterClient:
		if m, err := c.MasterForKey(noIO, key); err == nil {
			return m.Options()
		}
	}
	return nil
}

// diagnose dials the node as go-redis does (its Dialer: TLS, a Sentinel's
// lookup of the primary) and says what stops it from answering, with the
// dial's error if the dial failed.
func (l *Limiter) diagnose(opts *redis.Options) (string, error) {
	wait := probeTimeout
	if l.timeout > 0 {
		wait = l.timeout
	}
	ctx, cancel := l.background(wait) // ended by Close
	defer cancel()
	conn, err := opts.Dialer(ctx, opts.Network, opts.Addr)
	if err != nil {
		if ended(ctx) != nil {
			return causeOf(err), nil // the dial timed out too: no cause beyond the timeout
		}
		return causeOf(err), err
	}
	_ = conn.Close()
	return "no answer: the server accepts connections but did not answer in time (paused, busy, or a proxy that does not forward)", nil
}

// isTimeout reports an error that says only that no answer came in time.
func isTimeout(err error) bool {
	var te *timeoutError
	return errors.As(err, &te) || errors.Is(err, context.DeadlineExceeded)
}

// causeOf is the innermost error of err's chain, e.g. "connection refused"
// or "i/o timeout" of a network error, or a Redis error reply.
func causeOf(err error) string {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err.Error()
		}
		err = next
	}
}

// keyName is what a log line says of a key: the Limiter's prefix and the
// key's first ':'-separated segment if it is a name ("ip", "login", a
// middleware's Name), never the rest, which says who is limited (an
// address, a user's id): logs, like spans, do not carry it.
func keyName(prefix, key string) string {
	name, _, ok := strings.Cut(strings.TrimPrefix(key, prefix), ":")
	name = strings.TrimPrefix(name, "{")
	if !ok || !isName(name) {
		return prefix + "…"
	}
	return prefix + name + ":…"
}

// isName reports a segment made of letters, digits, '_', '-' and '.', up
// to 32, with a letter past 'f': no number, address or hex id is a name.
func isName(s string) bool {
	named := false
	for _, c := range []byte(s) {
		switch {
		case c >= 'g' && c <= 'z', c >= 'G' && c <= 'Z':
			named = true
		case c >= 'a' && c <= 'f', c >= 'A' && c <= 'F', c >= '0' && c <= '9', c == '_', c == '-', c == '.':
		default:
			return false
		}
	}
	return named && len(s) <= 32
}

// misconfEvery is how often, at most, the log of configuration errors
// repeats while they last: often enough that nobody reads a log without
// it, seldom enough that a service's every request does not log.
const misconfEvery = time.Minute

// misconfMsg is the message of the log line of configuration errors.
const misconfMsg = "redisrate: Redis refused the call: the deployment is misconfigured, not down; every call fails with this error, whatever the failure policy, until it is fixed"

// misconfLog paces the log of configuration errors.
type misconfLog struct {
	mu     sync.Mutex
	last   time.Time // the last line; zero: none yet
	missed int64     // the errors since, not logged
}

// misconfigured records a call that the server refused for a reason of the
// deployment (ErrMisconfigured): Redis answered, so the breaker is not
// tripped (succeeded), and the error is logged at level Error, through
// WithLogger's logger or else slog.Default (silence would leave limits off
// unseen), at its first occurrence and then at most once per misconfEvery.
func (h *health) misconfigured(l *Limiter, err error, script, key string) {
	h.succeeded(l)
	m := &h.misconf
	m.mu.Lock()
	now := h.now()
	if !m.last.IsZero() && now.Sub(m.last) < misconfEvery {
		m.missed++
		m.mu.Unlock()
		return
	}
	missed := m.missed
	m.last, m.missed = now, 0
	m.mu.Unlock()
	logger := l.logger
	if logger == nil {
		logger = slog.Default()
	}
	attrs := []any{slog.String("error", err.Error()), slog.String("script", script), slog.String("key", keyName(l.prefix, key)),
		slog.Int64("since_last_line", missed), slog.Duration("repeats_every", misconfEvery)}
	if h.node != "" {
		attrs = append(attrs, slog.String("node", h.node))
	}
	logger.Error(misconfMsg, attrs...)
}

// succeeded records an answer from Redis: the end of a burst, if any.
func (h *health) succeeded(l *Limiter) {
	if !h.failing.Load() {
		return
	}
	h.mu.Lock()
	was := h.failing.Swap(false)
	since := h.since
	h.probeWait = 0
	h.mu.Unlock()
	if was && l.logger != nil {
		attrs := []any{slog.Duration("after", h.now().Sub(since)),
			slog.Int64("degraded", h.degraded.Load()), slog.Int64("errors", h.errors.Load())}
		if h.node != "" {
			attrs = append(attrs, slog.String("node", h.node))
		}
		l.logger.Info("redisrate: Redis answers again", attrs...)
	}
}

// nextProbeWait is a probe's deadline after a probe that waited wait
// timed out: twice as long, up to probeTimeout or the decision timeout
// (base) if that is longer.
func nextProbeWait(wait, base time.Duration) time.Duration {
	return min(2*wait, max(probeTimeout, base))
}

// probeTimeout bounds one probe of a Limiter without a decision timeout,
// and the longest a probe's deadline grows to after probes timed out.
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
