package redisrate

import (
	"log/slog"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
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
	noClient      error         // why rdb is nil, when NewLimiter was given something unusable (a nil client or Option, a bad key prefix)
	clock         clock         // the one clock of health, loader, deny cache and Wait; tests set a fake one
	hot           *hotKeys      // the calls in flight, to coalesce (coalesce.go); nil: off
	pipes         *pipes        // the calls in flight, to pipeline (pipe.go); nil: off
	life          *life         // closed by Close, with the leases and background work it ends (close.go)
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
//
// Give it a client with redis.Options.ContextTimeoutEnabled set: go-redis
// then stops a command at the decision deadline (WithDecisionTimeout), and
// each call is sent on its caller's goroutine. On a client without it the
// Limiter holds that deadline by handing each send to another goroutine,
// which costs a caller alone about a quarter of its decisions per second.
func NewLimiter(rdb redis.Scripter, opts ...Option) *Limiter {
	return newLimiter(rdb, realClock{}, opts)
}

// newLimiter is NewLimiter on clk, which the parts that keep time (the
// breaker, the loader, the deny cache, Wait) all read.
func newLimiter(rdb redis.Scripter, clk clock, opts []Option) *Limiter {
	l := &Limiter{rdb: rdb, timeout: defaultDecisionTimeout, clock: clk, health: newHealth(defaultProbeInterval, clk),
		hot: newHotKeys(), pipes: newPipes(), life: &life{}}
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
	if l.noClient == nil {
		l.noClient = checkPrefix(l.prefix)
	}
	if l.noClient != nil {
		l.rdb = nil // every call stops at the engine's first check
		return l
	}
	if rdb != nil {
		l.loader = newLoader(rdb, clk)
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
// Its calls are coalesced (WithCoalescing) among themselves, not with
// l's: its settings may answer them otherwise; and pipelined with l's
// only while it keeps l's decision timeout. l is not changed.
func (l *Limiter) With(opts ...Option) *Limiter {
	if l == nil {
		return nil
	}
	v := *l
	if v.hot != nil {
		v.hot = newHotKeys()
	}
	if l.life != nil {
		v.life = l.life.child()
	}
	for _, o := range opts {
		if o != nil {
			o(&v)
		}
	}
	if v.pipes != nil && v.pipes == l.pipes && v.timeout != l.timeout {
		// A queued call goes in its sender's pipeline, under the sender's
		// decision timeout: behind l's sends, v's calls would wait for
		// l's timeout (or for ever without one), not their own.
		v.pipes = newPipes()
	}
	if err := checkPrefix(v.prefix); err != nil {
		v.rdb, v.noClient = nil, err
	}
	return &v
}

// checkPrefix refuses a key prefix (WithKeyPrefix) with '{' or '}': every
// key starts with it, so on Redis Cluster its hash tag would be every
// key's, and the keys of a call of several would not share theirs.
func checkPrefix(prefix string) error {
	if strings.ContainsAny(prefix, "{}") {
		return invalidf("invalid key prefix %q (WithKeyPrefix): must hold no '{' or '}': on Redis Cluster a prefix's hash tag would put every key in one slot, "+
			"and a Request's Keys could not share their own; the Limiter decides nothing", prefix)
	}
	return nil
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
	if l != nil && l.rdb != nil {
		return closedError{}
	}
	return ErrNoClient
}

// WithKeyPrefix puts prefix in front of every key the Limiter touches, e.g.
// "redisrate:" to keep limiter state apart from other data (not "rate:",
// which go-redis/redis_rate uses: on a shared key each fails on the other's
// state). The default is none. A prefix with '{' or '}' is refused: every
// call returns an error matching ErrInvalid that says so.
func WithKeyPrefix(prefix string) Option {
	return func(l *Limiter) { l.prefix = prefix }
}

// WithReadOnlyCheck sends the calls that never write (KindCheck and
// KindPeek, alone or in a batch) with FCALL_RO or EVALSHA_RO, so that a
// client set up to read from replicas (ReadOnly, RouteByLatency,
// RouteRandomly) may serve them there. It needs Redis 7 or later. A
// replica answers as of its replication lag: a check there may not see the
// latest Allow or Reset yet, and the deny cache keeps none of its denials
// (see WithDenyCache).
func WithReadOnlyCheck() Option {
	return func(l *Limiter) { l.readOnlyCheck = true }
}

// Request is one decision for Decide and DecideBatch: what to do (Kind),
// on which key or keys, under which limits, for how many units (N).
//
// A request gives either Key and Limits (one key under one to 8 limits of
// one algorithm, all or nothing: 10 per second and 1000 per hour), or Keys
// (2 to 8 keys, each under its own limit, the limits of one algorithm, all
// or nothing across the keys: a user's limit and its organisation's).
//
// A key keeps the state of the limits it is called with, position by
// position: pass the same limits, in the same order, every time. A call
// with other limits reads the stored state in its own terms: a request
// with 10/s and 1000/h, then Allow with 10/s alone, silently drops the
// hourly count. Use another key for another set of limits.
//
// With Keys, each key keeps exactly the state a one-key call with its
// limit keeps, so a key that many calls share (the organisation's) may
// also be called alone, and reset alone. On Redis Cluster every key of one
// call must hash to the same slot: give them a common hash tag, e.g.
// "{org:7}:user:42" and "{org:7}" (keys of different slots get an error
// matching ErrInvalid that says so); the Limiter's prefix (WithKeyPrefix)
// is put in front of each key, so it must not hold '{'. A key that holds
// anything but this algorithm's state gets an error matching
// ErrForeignKey whose Error.Key is that key, and nothing is written on any
// key.
type Request struct {
	Kind   Kind       // what to do: KindAllow (the zero value), KindCheck, KindPeek, KindUpTo, KindRefund, KindForce, or KindWait (Decide only)
	Key    string     // the key, as for Allow (the Limiter's prefix is added)
	Limits []Limit    // Key's limits: 1 to 8, of one algorithm
	Keys   []KeyLimit // instead of Key and Limits: several keys, each with its limit
	N      int64      // the units: 0 means 1, except for KindPeek (which takes 0), KindRefund and KindForce (which need N from 1)

	// Lease is for Reserve only: how long Take may spend the reserved
	// units, after which the unspent ones are given back (see
	// Reservation). 0: no lifetime. Decide refuses a Lease.
	Lease time.Duration
}

// KeyLimit is one key of a Request of several keys, with the limit that
// guards it.
type KeyLimit struct {
	Key   string // the key, as for Allow (the Limiter's prefix is added)
	Limit Limit  // the limit on Key, as a one-key call of Key would pass it
}

// pipeliner is what every go-redis v9 client offers to send many commands
// in one round trip; a ClusterClient splits them by node itself.
type pipeliner interface {
	Pipeline() redis.Pipeliner
}
