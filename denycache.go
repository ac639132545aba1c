package redisrate

import (
	"container/list"
	"sync"
	"time"
)

// WithDenyCache keeps, in this process, up to size recent denials that carry
// a RetryAfter, and answers further requests for the same key, limits and a
// cost at least as large as the denied one locally until RetryAfter has
// passed. A flood of requests that Redis would deny then costs Redis nothing.
//
// The cache only ever denies: anything it does not hold goes to Redis. A
// locally answered Result is the cached denial with RetryAfter and
// ResetAfter shrunk by the time elapsed since it was sent; its Remaining is
// as of that denial (a lower bound: the bucket may have refilled a little).
// The only way it can deny what Redis would admit is a change this process
// does not see: a Reset from another process, or a key deleted by hand. The
// Limiter's own Reset clears the key from the cache, before it is sent and
// once it succeeds, and a denial sent before a Reset of this Limiter is not
// stored when it arrives after it. Denials that can never be admitted
// (RetryAfter is InfDuration) are not cached, and a request whose cost is
// above a limit's capacity always goes to Redis, which answers that it can
// never be admitted. A cached answer
// has Source SourceDenyCache; it is not degraded.
//
// The least recently used entry is dropped beyond size entries; a size below
// 1 leaves the cache off. Each entry takes about 400 bytes plus the key.
func WithDenyCache(size int) Option {
	return func(l *Limiter) {
		l.deny = nil
		if size >= 1 {
			l.deny = newDenyCache(size)
		}
	}
}

// denyStage is the engine's deny-cache stage, before the send: true when
// the cache answered o (o.res, Source SourceDenyCache). A Reset forgets
// the key instead.
func (l *Limiter) denyStage(o *op, limits []Limit) bool {
	if l.deny == nil || o.kind == KindPeek {
		return false
	}
	if o.kind == KindReset {
		l.deny.forget(o.key)
		return false
	}
	for _, lim := range limits {
		if o.cost > lim.Capacity() {
			return false // never admitted: Redis says so, with RetryAfter InfDuration
		}
	}
	res, hit := l.deny.lookup(o.key, o.cost, limits, l.deny.now())
	if hit {
		o.res = res
	}
	return hit
}

// sentAt is the time a call is sent, for the deny cache: taken before the
// request goes to Redis, so that a cached denial never outlasts the one
// Redis gave; and the cache's count of Resets then, so that a denial sent
// before a Reset is not stored after it. Zero without a deny cache.
func (l *Limiter) sentAt() (time.Time, uint64) {
	if l.deny == nil {
		return time.Time{}, 0
	}
	return l.deny.now(), l.deny.resetCount()
}

// denyStore remembers o's result if it is a denial that a wait can end.
func (l *Limiter) denyStore(o *op, limits []Limit) {
	if l.deny == nil || o.res.Allowed || o.res.RetryAfter <= 0 || o.res.RetryAfter == InfDuration || o.sent.IsZero() {
		return
	}
	l.deny.store(o.key, o.cost, limits, o.res, o.sent, o.resets)
}

// denyReset forgets o's key once its Reset has succeeded: a denial stored
// while the Reset was on its way is older than the Reset.
func (l *Limiter) denyReset(o *op) {
	if l.deny != nil {
		l.deny.forget(o.key)
	}
}

// denyKey identifies the requests a denial covers: the key and the limits,
// all of them, in order (an array so that the map key needs no allocation).
type denyKey struct {
	key    string
	count  int
	limits [maxLimits]Limit
}

type denyEntry struct {
	k     denyKey
	cost  int64     // the denied cost: larger costs are denied too
	res   Result    // the denial as Redis gave it
	until time.Time // sent + RetryAfter
	reset time.Time // sent + ResetAfter
}

// denyCache is a size-bounded LRU of denials, safe for concurrent use.
type denyCache struct {
	mu     sync.Mutex
	resets uint64 // Resets seen (forget calls): a denial sent before one is not stored
	size   int
	items  map[denyKey]*list.Element
	order  *list.List       // front: most recently used
	now    func() time.Time // time.Now; tests move it by hand
}

func newDenyCache(size int) *denyCache {
	return &denyCache{size: size, items: make(map[denyKey]*list.Element), order: list.New(), now: time.Now}
}

func makeDenyKey(key string, limits []Limit) (denyKey, bool) {
	if len(limits) > maxLimits {
		return denyKey{}, false
	}
	k := denyKey{key: key, count: len(limits)}
	copy(k.limits[:], limits)
	return k, true
}

func (c *denyCache) lookup(key string, n int64, limits []Limit, now time.Time) (Result, bool) {
	k, ok := makeDenyKey(key, limits)
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
		c.order.Remove(el)
		delete(c.items, k)
		return Result{}, false
	}
	if n < e.cost {
		return Result{}, false // a smaller cost may fit: ask Redis
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
// that time) is still the count: a Reset since, of any key, may have made it
// stale, and a cache entry is only ever an optimisation.
func (c *denyCache) store(key string, n int64, limits []Limit, res Result, sent time.Time, resets uint64) {
	k, ok := makeDenyKey(key, limits)
	if !ok {
		return
	}
	e := &denyEntry{k: k, cost: n, res: res, until: sent.Add(res.RetryAfter), reset: sent.Add(res.ResetAfter)}
	c.mu.Lock()
	defer c.mu.Unlock()
	if resets != c.resets {
		return
	}
	if el, ok := c.items[k]; ok {
		old := el.Value.(*denyEntry)
		// Keep the denial of the smaller cost: it covers more requests.
		if old.cost < n && sent.Before(old.until) {
			return
		}
		el.Value = e
		c.order.MoveToFront(el)
		return
	}
	c.items[k] = c.order.PushFront(e)
	for c.order.Len() > c.size {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.items, last.Value.(*denyEntry).k)
	}
}

// forget drops every denial held for key (under any limits).
func (c *denyCache) forget(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.resets++
	for k, el := range c.items {
		if k.key == key {
			c.order.Remove(el)
			delete(c.items, k)
		}
	}
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
