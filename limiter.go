package redisrate

import (
	"context"
	"log/slog"
	"reflect"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redisrate/redisrate/internal/testtimeout"
)

// Limiter decides rate limits in Redis. It is safe for concurrent use; make
// one per Redis client and share it. The zero Limiter returns ErrNoClient.
type Limiter struct {
	rdb           redis.Scripter
	loader        *loader
	prefix        string
	readOnlyCheck bool
	deny          *denyCache // nil: no deny cache
	policy        FailurePolicy
	shadow        bool
	fallback      *Limiter
	health        *health // shared with the Limiters of With
	observer      Observer
	logger        *slog.Logger
	timeout       time.Duration // the decision deadline; 0: none but the caller's
	honoursCtx    bool          // rdb stops a command at its context's deadline
	noClient      error         // why rdb is nil, when NewLimiter was given something unusable
}

// Option configures a Limiter.
type Option func(*Limiter)

// NewLimiter returns a Limiter that runs the scripts on rdb: any go-redis
// v9 client (*redis.Client, *redis.ClusterClient, *redis.Ring, the client
// of redis.NewFailoverClient, every redis.UniversalClient), or anything
// with its scripting commands, such as a wrapper that adds tracing. FCALL,
// pipelines and transactions are used when rdb has them. A nil rdb (also a
// nil *redis.Client in the interface) or a nil Option gives a Limiter
// whose every call returns an error matching ErrNoClient that says which.
func NewLimiter(rdb redis.Scripter, opts ...Option) *Limiter {
	l := &Limiter{rdb: rdb, timeout: testtimeout.DecisionTimeout, policy: FailError, health: newHealth(defaultProbeInterval)}
	for i, o := range opts {
		if o == nil {
			l.noClient = &noClientError{why: "option " + strconv.Itoa(i+1) + " of NewLimiter is nil"}
			continue
		}
		o(l)
	}
	if isNil(rdb) && l.noClient == nil {
		l.noClient = &noClientError{why: "NewLimiter was given a nil " + reflect.TypeOf(rdb).String()}
	}
	if l.noClient != nil {
		l.rdb = nil // every call stops at the engine's first check
		return l
	}
	if rdb != nil {
		l.loader = newLoader(rdb)
		l.honoursCtx = honoursDeadlines(rdb)
	}
	return l
}

// With returns a Limiter for one part of a service: it decides on l's Redis
// client, with l's circuit breaker, deny cache and script loader (so one
// outage of Redis is seen, logged and probed once), and with l's settings
// but for opts, e.g. a stricter failure policy for a login form, or shadow
// mode for a limit being rolled out. An option that builds state of its
// own (WithCircuitBreaker, WithDenyCache) gives the new Limiter its own.
// l is not changed.
func (l *Limiter) With(opts ...Option) *Limiter {
	if l == nil {
		return nil
	}
	v := *l
	for _, o := range opts {
		if o != nil {
			o(&v)
		}
	}
	return &v
}

// isNil reports a nil pointer (or map, func, ...) inside a non-nil
// interface, such as (*redis.Client)(nil): go-redis would panic on it.
func isNil(rdb redis.Scripter) bool {
	if rdb == nil {
		return false // a nil interface is the zero Limiter's case: ErrNoClient as is
	}
	v := reflect.ValueOf(rdb)
	switch v.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Func, reflect.Chan, reflect.Slice, reflect.Interface:
		return v.IsNil()
	}
	return false
}

// noClientErr is the error of a call on a Limiter without a usable client.
func (l *Limiter) noClientErr() error {
	if l != nil && l.noClient != nil {
		return l.noClient
	}
	return ErrNoClient
}

// WithKeyPrefix puts prefix in front of every key the Limiter touches, e.g.
// "rate:" to keep limiter state apart from other data. The default is none.
func WithKeyPrefix(prefix string) Option {
	return func(l *Limiter) { l.prefix = prefix }
}

// WithReadOnlyCheck makes Check, CheckN, CheckMulti, CheckKeys, Peek,
// PeekKeys and the checks and peeks of AllowBatch use FCALL_RO or
// EVALSHA_RO, so that a client set up to read from replicas (ReadOnly,
// RouteByLatency, RouteRandomly) may serve them there. It needs Redis 7 or
// later. A replica answers as of its replication lag: a check there may not
// see the latest Allow or Reset yet, and the deny cache keeps none of its
// denials (see WithDenyCache).
func WithReadOnlyCheck() Option {
	return func(l *Limiter) { l.readOnlyCheck = true }
}

// Allow takes one unit from key under limit. An empty key is refused
// (ErrInvalid), by every call: it is almost always an identity not found,
// and would hold every caller without one to one shared limit.
//
// A key keeps the state of the limits it is called with, position by
// position: call a key with the same limits each time. A call with other
// limits than last time reads the stored state in its own terms; in
// particular Allow(key, 10/s) after AllowMulti(key, 1, 10/s, 1000/h) keeps
// only the first limit's state, and the hourly count is lost. Use one key
// per set of limits (e.g. "user:42" and "user:42:hourly") when calls differ.
func (l *Limiter) Allow(ctx context.Context, key string, limit Limit) (Result, error) {
	return l.call(ctx, KindAllow, key, 1, []Limit{limit})
}

// AllowN takes n units from key under limit, n from 1. To read the state
// without taking anything, use Peek: an n of 0 is refused (ErrInvalid), so
// that a forgotten cost never means "do not limit".
func (l *Limiter) AllowN(ctx context.Context, key string, limit Limit, n int64) (Result, error) {
	return l.call(ctx, KindAllow, key, n, []Limit{limit})
}

// Check decides whether one unit would be admitted from key under limit,
// exactly as Allow would, but records nothing.
func (l *Limiter) Check(ctx context.Context, key string, limit Limit) (Result, error) {
	return l.call(ctx, KindCheck, key, 1, []Limit{limit})
}

// CheckN is Check for n units, n from 1.
func (l *Limiter) CheckN(ctx context.Context, key string, limit Limit, n int64) (Result, error) {
	return l.call(ctx, KindCheck, key, n, []Limit{limit})
}

// Peek reads the state of key under limits, taking nothing: the Result
// says what remains now and when the key is full again (a cost of 0, which
// Redis always admits; a FailClosed answer while Redis is down denies). Pass
// the limits the key is called with.
func (l *Limiter) Peek(ctx context.Context, key string, limits ...Limit) (Result, error) {
	return l.call(ctx, KindPeek, key, 0, limits)
}

// AllowMulti takes n units (from 1) from key under every one of limits,
// all or nothing: the request is admitted only if every limit admits it,
// and then it is recorded against each. Up to 8 limits, all of the same
// algorithm, e.g. 10 per second and 1000 per hour. The Result describes the
// binding limit (Result.Binding).
//
// The key keeps the state of all the limits together, position by position:
// pass the same limits, in the same order, every time. A call with other
// limits reads the stored state in its own terms: AllowMulti(10/s, 1000/h)
// then Allow(10/s) silently drops the hourly count, and AllowMulti(1000/h,
// 10/s) reads the per-second state as hourly. Use another key for another
// set of limits.
func (l *Limiter) AllowMulti(ctx context.Context, key string, n int64, limits ...Limit) (Result, error) {
	return l.call(ctx, KindAllow, key, n, limits)
}

// CheckMulti is AllowMulti without recording anything.
func (l *Limiter) CheckMulti(ctx context.Context, key string, n int64, limits ...Limit) (Result, error) {
	return l.call(ctx, KindCheck, key, n, limits)
}

// Reset deletes the state kept under key, so that its next request finds
// every limit at full capacity, and forgets the key's cached denials. A
// key that holds anything but redisrate state is left untouched, and the
// error matches ErrForeignKey. Resetting a key that does not exist is not
// an error. When Redis cannot be reached the error matches ErrUnavailable
// whatever the failure policy: nothing else can reset Redis's state.
func (l *Limiter) Reset(ctx context.Context, key string) error {
	_, err := l.call(ctx, KindReset, key, 0, nil)
	return err
}
