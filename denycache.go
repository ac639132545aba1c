package redisrate

import (
	"container/list"
	"hash/maphash"
	"strconv"
	"sync"
	"time"
)

// WithDenyCache keeps, in this process, up to size recent denials that carry
// a RetryAfter, and answers further requests for the same key, limits and
// cost locally until RetryAfter has passed. A flood of requests that Redis
// would deny then costs Redis nothing.
//
// Only the same cost is answered: a smaller one may fit now, and a larger
// one waits longer than the denied one by an amount only the algorithm's
// script can tell, so both go to Redis. (Answering a larger cost with the
// smaller one's wait sent clients back too early: over HTTP, clients that
// honoured the Retry-After were denied again.)
//
// The cache only ever denies: anything it does not hold goes to Redis. A
// locally answered Result is the cached denial with RetryAfter and
// ResetAfter shrunk by the time elapsed since it was sent; its Remaining is
// as of that denial (a lower bound: the bucket may have refilled a little).
// The only way it can deny what Redis would admit is a change this process
// does not see: a Reset from another process, or a key deleted by hand. The
// Limiter's own Reset clears the key from the cache, before it is sent and
// once it succeeds, and a denial sent before a Reset of this Limiter is not
// stored when it arrives after it. Units this Limiter takes on a key make
// its cached waits short, so they drop the key's denials, and a denial sent
// before such a call came back is not stored; units taken by other
// processes go unseen, as they do for Redis's own answer once given.
// A denial of a check that a replica may have served (WithReadOnlyCheck)
// is not cached either: a replica may not have seen that Reset yet.
// Denials that can never be admitted (RetryAfter is infDuration) are not
// cached, so a request whose cost is above a limit's capacity always goes
// to Redis, which answers that it can never be admitted. A cached answer
// has Source SourceDenyCache; it is not degraded.
//
// A call of several keys (a Request with Keys) is cached by all its keys,
// in order, with their limits and the cost, and a Reset of any one of them,
// or units this Limiter takes on any one of them, drops it: the binding
// key may be any of them.
//
// The least recently used entry is dropped beyond size entries; a size below
// 1 leaves the cache off. Each entry takes about 400 bytes plus the key.
func WithDenyCache(size int) Option {
	return func(l *Limiter) {
		l.deny = nil
		if size >= 1 {
			l.deny = newDenyCache(size, l.clock)
		}
	}
}

// denyIdentity is the identity of a call of several keys in the deny
// cache: the keys in order, each after its length, so that no two lists of
// keys share one.
func denyIdentity(keys []string) string {
	var b []byte
	for _, k := range keys {
		b = strconv.AppendInt(b, int64(len(k)), 10)
		b = append(b, ':')
		b = append(b, k...)
	}
	return string(b)
}

// denyKey identifies the requests a denial covers: the key (or the keys of
// a call of several, as denyIdentity writes them), the limits, all of them,
// in order (an array so that the map key needs no allocation), and the
// cost.
type denyKey struct {
	key     string
	several bool // key is the identity of a call of several keys
	cost    int64
	count   int
	limits  [maxLimits]Limit
}

type denyEntry struct {
	k     denyKey
	keys  []string  // a call of several keys: its keys, each of which indexes the entry in byKey; nil for one key
	res   Result    // the denial as Redis gave it
	until time.Time // sent + RetryAfter
	reset time.Time // sent + ResetAfter
}

// denyStripes is how many stripes of keys the cache tells apart when it
// remembers when units were last taken (tookAt).
const denyStripes = 256

// denyCache is a size-bounded LRU of denials, safe for concurrent use.
type denyCache struct {
	mu     sync.Mutex
	resets uint64 // Resets seen (forget calls): a denial sent before one is not stored
	size   int
	items  map[denyKey]*list.Element
	byKey  map[string][]*list.Element // each key's entries (those of the calls of several keys it is one of too), to forget them together
	order  *list.List                 // front: most recently used
	// tookAt is, per stripe of keys, when a call of this Limiter last came
	// back having taken units there. A denial sent before that may have
	// been decided before those units were taken, so its wait may be short:
	// it is not stored. (A key that shares the stripe only costs a store.)
	tookAt [denyStripes]time.Time
	seed   maphash.Seed
	now    func() time.Time // the Limiter's clock
}

func newDenyCache(size int, clk clock) *denyCache {
	return &denyCache{size: size, items: make(map[denyKey]*list.Element), byKey: make(map[string][]*list.Element),
		order: list.New(), seed: maphash.MakeSeed(), now: orReal(clk).Now}
}

func (c *denyCache) stripe(key string) int {
	return int(maphash.String(c.seed, key) % denyStripes)
}

func makeDenyKey(key string, several bool, cost int64, limits []Limit) (denyKey, bool) {
	if len(limits) > maxLimits {
		return denyKey{}, false
	}
	k := denyKey{key: key, several: several, cost: cost, count: len(limits)}
	copy(k.limits[:], limits)
	return k, true
}

func (c *denyCache) lookup(key string, several bool, n int64, limits []Limit, now time.Time) (Result, bool) {
	k, ok := makeDenyKey(key, several, n, limits)
	if !ok {
		return Result{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[k]
	if !ok {
		return Result{}, false
	}
	e := el.Value.(*denyEntry)
	if !now.Before(e.until) {
		c.remove(el)
		return Result{}, false
	}
	c.order.MoveToFront(el)
	// now was read before the lock: a denial stored meanwhile may have been
	// sent after it. Count from that send, so the answer never waits longer
	// than the one Redis gave.
	if sent := e.until.Add(-e.res.RetryAfter); now.Before(sent) {
		now = sent
	}
	res := e.res
	res.Source = SourceDenyCache
	res.RetryAfter = ceilMs(e.until.Sub(now))
	res.ResetAfter = max(ceilMs(e.reset.Sub(now)), res.RetryAfter)
	return res, true
}

// store keeps a denial sent at sent, when resets (the count of Resets at
// that time) is still the count and no units were taken on the key's stripe
// since (on any of keys' stripes, for a call of several keys): a Reset
// since, of any key, or an admission may have made it stale, and a cache
// entry is only ever an optimisation.
func (c *denyCache) store(key string, several bool, keys []string, n int64, limits []Limit, res Result, sent time.Time, resets uint64) {
	k, ok := makeDenyKey(key, several, n, limits)
	if !ok {
		return
	}
	e := &denyEntry{k: k, res: res, until: sent.Add(res.RetryAfter), reset: sent.Add(res.ResetAfter)}
	if several {
		e.keys = keys
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	// An admission decided after this denial comes back after the denial
	// was sent (strictly: Redis took time to decide it), so "after sent"
	// catches every admission the denial may not have seen.
	if resets != c.resets {
		return
	}
	for _, m := range e.members() {
		if c.tookAt[c.stripe(m)].After(sent) {
			return
		}
	}
	if el, ok := c.items[k]; ok {
		el.Value = e
		c.order.MoveToFront(el)
		return
	}
	el := c.order.PushFront(e)
	c.items[k] = el
	for _, m := range e.members() {
		c.byKey[m] = append(c.byKey[m], el)
	}
	for c.order.Len() > c.size {
		c.remove(c.order.Back())
	}
}

// members are the keys whose Reset or admission drops e: its key, or each
// key of its call of several keys.
func (e *denyEntry) members() []string {
	if e.keys != nil {
		return e.keys
	}
	return []string{e.k.key}
}

// remove drops one entry.
func (c *denyCache) remove(el *list.Element) {
	e := el.Value.(*denyEntry)
	c.order.Remove(el)
	delete(c.items, e.k)
	for _, m := range e.members() {
		els := c.byKey[m]
		for i, x := range els {
			if x == el {
				els = append(els[:i], els[i+1:]...)
				break
			}
		}
		if len(els) == 0 {
			delete(c.byKey, m)
		} else {
			c.byKey[m] = els
		}
	}
}

// forgetKey drops every denial held for key (under any limits and costs).
func (c *denyCache) forgetKey(key string) {
	for len(c.byKey[key]) > 0 {
		c.remove(c.byKey[key][0])
	}
}

// forget is a Reset of key: its denials go, and so do those of any key in
// flight now.
func (c *denyCache) forget(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.resets++
	c.forgetKey(key)
}

// took records that a call which came back at now took units from key: its
// denials, and those sent before now of its stripe, are stale.
func (c *denyCache) took(key string, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s := c.stripe(key); now.After(c.tookAt[s]) {
		c.tookAt[s] = now
	}
	c.forgetKey(key)
}

func (c *denyCache) resetCount() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.resets
}

func (c *denyCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}

// ceilMs rounds d up to the millisecond, as the scripts round their waits.
func ceilMs(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return (d + time.Millisecond - 1) / time.Millisecond * time.Millisecond
}
