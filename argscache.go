package redisrate

import "sync"

// argsKey is everything the ARGV of a call depends on, comparable so that a
// map lookup needs no allocation.
type argsKey struct {
	n      float64
	check  bool
	count  int
	limits [maxLimits]Limit
}

// argsCache remembers the validated, formatted ARGV of recent calls: a
// service calls with a handful of limits, and formatting them anew (each
// number a string, each string boxed in an interface) was most of the
// client's allocations per decision. The cached slices are only read (go-redis
// copies them into its command), never handed to callers.
var argsCache = struct {
	sync.RWMutex
	m map[argsKey][]any
}{m: make(map[argsKey][]any)}

// maxCachedArgs bounds the cache; past it, it starts over, so a caller that
// never repeats itself costs a little memory, never a leak.
const maxCachedArgs = 1024

// callArgs is Args for the Limiter's own calls: validated and formatted once
// per distinct (cost, check, limits), then shared. The result must not be
// modified.
func callArgs(n float64, check bool, limits []Limit) ([]any, error) {
	if len(limits) == 0 || len(limits) > maxLimits {
		return Args(n, check, limits...)
	}
	if n == 0 {
		n = 0 // -0 and 0 are one map key: format both as "0"
	}
	k := argsKey{n: n, check: check, count: len(limits)}
	copy(k.limits[:], limits)
	argsCache.RLock()
	args, ok := argsCache.m[k]
	argsCache.RUnlock()
	if ok {
		return args, nil
	}
	args, err := Args(n, check, limits...)
	if err != nil {
		return nil, err // errors are not cached: they are rare and carry their words
	}
	argsCache.Lock()
	if len(argsCache.m) >= maxCachedArgs {
		clear(argsCache.m)
	}
	argsCache.m[k] = args
	argsCache.Unlock()
	return args, nil
}
