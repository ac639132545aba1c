package redisrate

import (
	"context"
	"fmt"
	"strconv"
	"strings"
)

// KeyLimit is one key of a call of several keys (AllowKeys), with the
// limit that guards it.
type KeyLimit struct {
	Key   string // the key, as for Allow (the Limiter's prefix is added)
	Limit Limit  // the limit on Key, as a one-key call of Key would pass it
}

// AllowKeys takes n units (from 1) from every one of keys, each under its
// own limit, all or nothing, in one atomic call: the request is admitted
// only if every limit admits it, and then it is recorded on every key;
// otherwise nothing is written on any key. It is the way to hold a request
// to a user's limit and to its organisation's at once, without taking the
// organisation's quota for a request the user's limit denies (contract
// v2.1, "Several keys").
//
// Up to 8 keys, all different, whose limits share one algorithm. Each key
// keeps exactly the state a one-key call with its limit keeps, so a key
// that many calls share (the organisation's) may also be called alone,
// with Allow and its limit, and reset alone with Reset. The Result
// describes the binding limit: Result.Binding is its index in keys and
// Result.Key its key. A single KeyLimit is a plain AllowN.
//
// On Redis Cluster every key of one call must hash to the same slot: give
// them a common hash tag, e.g. "{org:7}:user:42" and "{org:7}". Keys of
// different slots get an error matching ErrInvalid that says so. The
// Limiter's prefix (WithKeyPrefix) is put in front of each key, so a prefix
// must not hold '{': the tag would be the prefix's.
//
// A key that holds anything but this algorithm's state gets an error
// matching ErrForeignKey whose Error.Key is that key, and nothing is
// written on any key.
func (l *Limiter) AllowKeys(ctx context.Context, n int64, keys ...KeyLimit) (Result, error) {
	return l.callKeyLimits(ctx, KindAllow, n, keys)
}

// CheckKeys is AllowKeys without recording anything: whether n units (from
// 1) would be admitted on every one of keys, decided exactly as AllowKeys
// would.
func (l *Limiter) CheckKeys(ctx context.Context, n int64, keys ...KeyLimit) (Result, error) {
	return l.callKeyLimits(ctx, KindCheck, n, keys)
}

// PeekKeys reads the state of keys, each under its limit, taking nothing,
// as Peek does for one key: the Result describes the limit with the fewest
// units remaining (its Key and Binding say which).
func (l *Limiter) PeekKeys(ctx context.Context, keys ...KeyLimit) (Result, error) {
	return l.callKeyLimits(ctx, KindPeek, 0, keys)
}

// callKeyLimits is the engine's entry for a call of several keys; a single
// key is a one-key call, which runs the one-key script's fast path.
func (l *Limiter) callKeyLimits(ctx context.Context, kind Kind, n int64, keys []KeyLimit) (Result, error) {
	if len(keys) == 1 {
		return l.call(ctx, kind, keys[0].Key, n, []Limit{keys[0].Limit})
	}
	ukeys, limits := splitKeys(keys)
	var first string
	if len(keys) > 0 {
		first = keys[0].Key
	}
	return l.callKeys(ctx, kind, first, ukeys, n, limits)
}

// splitKeys returns the keys and limits of a call of several keys, in
// slices of the Limiter's own: the caller may reuse keys. Never nil, so
// that even no key at all is a call of several keys (and refused as one).
func splitKeys(keys []KeyLimit) ([]string, []Limit) {
	ukeys, limits := make([]string, len(keys)), make([]Limit, len(keys))
	for i, kl := range keys {
		ukeys[i], limits[i] = kl.Key, kl.Limit
	}
	return ukeys, limits
}

// planKeys is plan's part for a call of several keys: it validates them as
// the scripts would (the count, then each key, then their limits' common
// algorithm), with the scripts' words, and prefixes them. False, with o.err
// set, for a call refused.
func (l *Limiter) planKeys(o *op, limits []Limit) bool {
	o.err = validateKeys(o.ukeys, limits)
	if o.err != nil {
		return false
	}
	o.keys = make([]string, len(o.ukeys))
	for i, k := range o.ukeys {
		o.keys[i] = l.prefix + k
	}
	o.key = o.keys[0]
	if l.deny != nil {
		o.denyID = denyIdentity(o.keys)
	}
	return true
}

// validateKeys checks the keys of a call of several keys and that their
// limits share one algorithm; validateCall checks the limits themselves.
func validateKeys(ukeys []string, limits []Limit) error {
	if len(ukeys) == 0 {
		return invalidf("invalid call: no key given; pass at least one KeyLimit")
	}
	if len(ukeys) > maxLimits {
		return invalidf("invalid numkeys '%d': must be at most %d keys, one limit each", len(ukeys), maxLimits)
	}
	for i, k := range ukeys {
		if k == "" {
			return invalidf("invalid key #%d '': must not be empty", i+1)
		}
		for j := range i {
			if ukeys[j] == k { // the same after the prefix, too
				return invalidf("invalid key #%d '%s': must differ from key #%d", i+1, k, j+1)
			}
		}
	}
	for i, lim := range limits[1:] {
		if lim.Algorithm != limits[0].Algorithm {
			return invalidf("invalid algorithm #%d '%s' (key #%d '%s'): must be key #1's, %s: one call runs one algorithm's script",
				i+2, lim.Algorithm, i+2, ukeys[i+1], limits[0].Algorithm)
		}
	}
	return nil
}

// sentKeys are the keys o is sent with: its keys, or its one key in one,
// which the caller keeps on its stack so that a one-key call allocates
// nothing for them.
func (o *op) sentKeys(one *[1]string) []string {
	if o.keys != nil {
		return o.keys
	}
	one[0] = o.key
	return one[:]
}

// bindingKey is the caller's key that the binding limit of o's Result
// guards: o's key for a one-key call.
func (o *op) bindingKey() string {
	if b := o.res.Binding; b >= 0 && b < len(o.ukeys) {
		return o.ukeys[b]
	}
	return o.ukey
}

// failed is o's *Error for a call that failed with err, classified kind.
// An error about a key's value names it (Error.Key): with several keys,
// the key at the position the script's words give ("ERR key #2 holds
// ..."). CROSSSLOT, Redis Cluster's refusal of keys of different slots,
// says how to make them share one.
func (o *op) failed(err, kind error) *Error {
	e := &Error{Script: o.s.name, Key: o.key, Err: err, kind: kind}
	if i := foreignKeyIndex(err.Error()); i >= 1 && i <= len(o.keys) {
		e.Key = o.keys[i-1]
	}
	if isCrossSlot(err) {
		e.Err = fmt.Errorf("keys %q: the keys of one call must hash to one Redis Cluster slot: give them a common hash tag, "+
			"e.g. {org:7}:user:42 and {org:7} (and a key prefix must hold no '{'): %w", o.keys, err)
	}
	return e
}

// foreignKeyIndex is the position a script's error about the value of a
// key of several names ("ERR key #2 holds ..."), or 0.
func foreignKeyIndex(msg string) int {
	if !foreignKeyAt(msg) {
		return 0
	}
	rest := strings.TrimPrefix(msg, "ERR key #")
	i, err := strconv.Atoi(rest[:strings.IndexByte(rest, ' ')])
	if err != nil {
		return 0
	}
	return i
}

// isCrossSlot matches Redis Cluster's refusal of a call whose keys hash to
// different slots.
func isCrossSlot(err error) bool {
	return strings.HasPrefix(err.Error(), "CROSSSLOT")
}
