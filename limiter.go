package redisrate

import (
	"context"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Client is the part of a go-redis v9 client the Limiter uses: its scripting
// commands. *redis.Client, *redis.ClusterClient, *redis.Ring, the client of
// redis.NewFailoverClient, every redis.UniversalClient and a redis.Pipeliner
// implement it.
type Client interface {
	redis.Scripter
}

// Limiter decides rate limits in Redis. It is safe for concurrent use; make
// one per Redis client and share it. The zero Limiter returns ErrNoClient.
type Limiter struct {
	rdb           Client
	prefix        string
	readOnlyCheck bool
	failure       failure // see failure.go
	observer      Observer
}

// Option configures a Limiter.
type Option func(*Limiter)

// WithKeyPrefix puts prefix in front of every key the Limiter touches, e.g.
// "rate:" to keep limiter state apart from other data. The default is none.
func WithKeyPrefix(prefix string) Option {
	return func(l *Limiter) { l.prefix = prefix }
}

// WithReadOnlyCheck makes Check and CheckMulti use EVALSHA_RO, so that a
// client set up to read from replicas (ReadOnly, RouteByLatency,
// RouteRandomly) may serve them there. It needs Redis 7 or later.
func WithReadOnlyCheck() Option {
	return func(l *Limiter) { l.readOnlyCheck = true }
}

// NewLimiter returns a Limiter that runs the scripts on rdb.
func NewLimiter(rdb Client, opts ...Option) *Limiter {
	l := &Limiter{rdb: rdb}
	for _, o := range opts {
		o(l)
	}
	return l
}

// Allow takes one unit from key under limit.
func (l *Limiter) Allow(ctx context.Context, key string, limit Limit) (Result, error) {
	return l.do(ctx, key, 1, false, limit)
}

// AllowN takes n units from key under limit; n may be fractional except for
// FixedWindow and SlidingLog. An n of 0 reads the state and takes nothing.
func (l *Limiter) AllowN(ctx context.Context, key string, limit Limit, n float64) (Result, error) {
	return l.do(ctx, key, n, false, limit)
}

// Check decides whether one unit would be admitted from key under limit,
// exactly as Allow would, but records nothing.
func (l *Limiter) Check(ctx context.Context, key string, limit Limit) (Result, error) {
	return l.do(ctx, key, 1, true, limit)
}

// CheckN is Check for n units.
func (l *Limiter) CheckN(ctx context.Context, key string, limit Limit, n float64) (Result, error) {
	return l.do(ctx, key, n, true, limit)
}

// AllowMulti takes n units from key under every one of limits, all or
// nothing: the request is admitted only if every limit admits it, and then it
// is recorded against each. The limits share one algorithm and the key keeps
// their state together; pass the same limits, in the same order, every time.
// Up to 8 limits, e.g. 10 per second and 1000 per hour.
func (l *Limiter) AllowMulti(ctx context.Context, key string, n float64, limits ...Limit) (Result, error) {
	return l.do(ctx, key, n, false, limits...)
}

// CheckMulti is AllowMulti without recording anything.
func (l *Limiter) CheckMulti(ctx context.Context, key string, n float64, limits ...Limit) (Result, error) {
	return l.do(ctx, key, n, true, limits...)
}

const maxLimits = 8

// Args returns the ARGV the script of limits[0].Algorithm takes for a request
// of cost n (check: record nothing), after validating them as the script
// would. It is how other clients of the scripts can build calls that match
// this package's.
func Args(n float64, check bool, limits ...Limit) ([]any, error) {
	if len(limits) == 0 {
		return nil, invalidf("no limit given: pass at least one Limit")
	}
	if len(limits) > maxLimits {
		return nil, invalidf("too many limits (%d): must be at most %d", len(limits), maxLimits)
	}
	// The scripts' order: the cost, then each limit, then the range checks.
	algo := limits[0].Algorithm
	if algo < 0 || algo >= numAlgorithms {
		return nil, limits[0].validate("")
	}
	if err := validateCost(algo, n); err != nil {
		return nil, err
	}
	scaled := make([]scaledLimit, len(limits))
	for i, lim := range limits {
		suffix := limitSuffix(i)
		if lim.Algorithm != algo {
			return nil, invalidf("invalid limit%s: its algorithm %s differs from %s; one key holds one algorithm's state", suffix, lim.Algorithm, algo)
		}
		if err := lim.validate(suffix); err != nil {
			return nil, err
		}
		s, err := lim.scale(suffix)
		if err != nil {
			return nil, err
		}
		scaled[i] = s
	}
	for i, lim := range limits {
		if err := lim.checkRange(limitSuffix(i), scaled[i]); err != nil {
			return nil, err
		}
	}
	if err := checkLogCost(n, limits); err != nil {
		return nil, err
	}
	args := make([]any, 0, 5+3*(len(limits)-1))
	for i, lim := range limits {
		burst := ""
		if lim.Burst != 0 {
			burst = formatNumber(lim.Burst)
		}
		args = append(args, formatNumber(lim.Rate), formatPeriodMs(lim.Period), burst)
		if i == 0 {
			mode := ""
			if check {
				mode = "check"
			}
			args = append(args, formatNumber(n), mode)
		}
	}
	return args, nil
}

// limitSuffix is how the scripts name the arguments of the i-th limit (from
// 0): "" for the first, " #2" for the second.
func limitSuffix(i int) string {
	if i == 0 {
		return ""
	}
	return " #" + strconv.Itoa(i+1)
}

func (l *Limiter) do(ctx context.Context, key string, n float64, check bool, limits ...Limit) (Result, error) {
	if l == nil || l.rdb == nil {
		return Result{}, ErrNoClient
	}
	args, err := callArgs(n, check, limits)
	if err != nil {
		return Result{}, err
	}
	s := &scripts[limits[0].Algorithm]
	key = l.prefix + key
	sent, cached, hit := l.lookupDenial(key, n, limits)
	if hit {
		return cached, nil
	}
	v, err := run(ctx, l.rdb, s, check && l.readOnlyCheck, []string{key}, args)
	if err == nil {
		var res Result
		if res, err = decodeReply(v, limits); err == nil {
			l.storeDenial(key, n, limits, res, sent)
			return res, nil
		}
	}
	return l.onFailure(ctx, &Error{Script: s.Name, Key: key, Err: err, kind: classify(err)}, n, check, limits)
}

// run calls the script by SHA1 and, when the server does not have it (a new
// node, a failover, SCRIPT FLUSH), by source: EVAL also caches it there, so
// the next EVALSHA succeeds.
func run(ctx context.Context, rdb redis.Scripter, s *Script, readOnly bool, keys []string, args []any) (any, error) {
	var cmd *redis.Cmd
	if readOnly {
		cmd = rdb.EvalShaRO(ctx, s.SHA1, keys, args...)
	} else {
		cmd = rdb.EvalSha(ctx, s.SHA1, keys, args...)
	}
	v, err := cmd.Result()
	if err != nil && isNoScript(err) {
		if readOnly {
			v, err = rdb.EvalRO(ctx, s.Source, keys, args...).Result()
		} else {
			v, err = rdb.Eval(ctx, s.Source, keys, args...).Result()
		}
	}
	return v, err
}

// isNoScript matches NOSCRIPT anywhere in the message: proxies and some
// managed services wrap the server's error text.
func isNoScript(err error) bool {
	return strings.Contains(err.Error(), "NOSCRIPT")
}
