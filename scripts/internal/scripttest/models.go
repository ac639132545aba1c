package scripttest

import (
	"fmt"
	"math/big"
	"sort"
	"strings"

	"github.com/redisrate/redisrate/internal/manifest"
)

// Model is a reference model of one script on one key under contract v4,
// written from the contract (and, where it leaves a choice, the scripts'
// documented choices) in exact integer and math/big arithmetic,
// independently of the Lua. Times are microseconds since the epoch, as
// the scripts read TIME.
//
// It also keeps the key's expiry time, absolute as Redis keeps it (a clock
// that steps back lengthens the TTL), so that the key's existence and PTTL
// can be compared.
type Model struct {
	Spec manifest.Spec

	has    bool // the key exists
	lims   []mstate
	log    []int64 // sliding_log: entry times, oldest first
	expiry int64   // µs: when the key expires
	// MsClock models Redis's keyspace, which keeps an expiry in whole
	// milliseconds from the write's millisecond (floored) and expires a
	// key once the millisecond clock has passed it; miniredis keeps the
	// exact time. Set it for a real Redis.
	MsClock bool
	tick    int64 // the clock at the last call or Clock
}

// mstate is one limit's stored state.
type mstate struct {
	// gcra, leaky_bucket (:4): x = level * period_us (up to 26 digits,
	// never changed in place); t its time (µs). token_bucket: n tokens, t
	// last refill (µs). fixed_window: t window start (µs), n count.
	// sliding_window: t window start (ms), n current count, prev the
	// previous window's.
	x          *big.Int
	t, n, prev int64
}

// NewModel is a model of s on an empty key; now is the clock.
func NewModel(s manifest.Spec, now int64) *Model { return &Model{Spec: s, tick: now} }

// Clone is an independent copy of m.
func (m *Model) Clone() *Model {
	c := *m
	c.lims = append([]mstate(nil), m.lims...)
	c.log = append([]int64(nil), m.log...)
	return &c
}

// Exists reports whether the model's key exists.
func (m *Model) Exists() bool { return m.has }

// TTL is the key's remaining TTL in ms as PTTL shows it, -2 when absent.
func (m *Model) TTL() int64 {
	if !m.has {
		return -2
	}
	if m.MsClock {
		return m.expiry/1000 - m.tick/1000
	}
	return (m.expiry - m.tick) / 1000
}

// expireAt sets the key's expiry: ttlMs after now.
func (m *Model) expireAt(now, ttlMs int64) {
	if m.MsClock {
		m.expiry = (now/1000 + ttlMs) * 1000
		return
	}
	m.expiry = now + ttlMs*1000
}

// Clock moves the model's clock to now, expiring the key when its TTL runs out.
func (m *Model) Clock(now int64) {
	expired := now >= m.expiry
	if m.MsClock {
		expired = now/1000 > m.expiry/1000
	}
	if m.has && expired {
		m.has, m.lims, m.log = false, nil, nil
	}
	m.tick = now
}

// Load makes the model's key hold a string state, as SET would (no TTL
// until a call writes one): "gcra:4 x t", "lb:4 x t", "tb:2 tokens t"
// (tokens may be negative), "fw:2 start count",
// "sw:2 start prev cur". It panics on anything else.
func (m *Model) Load(value string) {
	f := strings.Fields(value)
	if len(f) < 2 || m.Spec.Log {
		panic("Load: " + value)
	}
	name, _, _ := strings.Cut(f[0], ":")
	if name != strings.SplitN(m.Spec.Tag, ":", 2)[0] {
		panic("Load: " + value + " is not " + m.Spec.Name + " state")
	}
	per := m.Spec.Fields
	nums := make([]int64, len(f)-1)
	bigs := make([]*big.Int, len(f)-1)
	for i, s := range f[1:] {
		v, ok := new(big.Int).SetString(s, 10)
		if !ok {
			panic("Load: " + value)
		}
		bigs[i] = v
		if v.IsInt64() {
			nums[i] = v.Int64()
		}
	}
	m.lims = nil
	for i := 0; i+per <= len(nums); i += per {
		a, b := nums[i], nums[i+1]
		var s mstate
		switch m.Spec.Name {
		case "gcra", "leaky_bucket":
			s = mstate{x: bigs[i], t: b}
		case "token_bucket":
			s = mstate{n: a, t: b}
		case "fixed_window":
			s = mstate{t: a, n: b}
		case "sliding_window":
			s = mstate{t: a, prev: b, n: nums[i+2]}
		}
		m.lims = append(m.lims, s)
	}
	m.has, m.expiry = true, 1<<62
}

// CeilDiv is ceil(n / d) for d > 0.
func CeilDiv(n, d int64) int64 {
	q := n / d
	if n%d != 0 && (n > 0) == (d > 0) {
		q++
	}
	return q
}

func floorDiv(n, d int64) int64 {
	q := n / d
	if n%d != 0 && (n < 0) != (d < 0) {
		q--
	}
	return q
}

func rat(n int64) *big.Rat { return new(big.Rat).SetInt64(n) }

func floorRat(x *big.Rat) int64 {
	q, r := new(big.Int).QuoRem(x.Num(), x.Denom(), new(big.Int))
	if r.Sign() < 0 {
		q.Sub(q, big.NewInt(1))
	}
	return q.Int64()
}

// lim is one limit's state as a call reads it, at the moment it decides
// (the clock, or a later time its state records): a value, so that a
// check works on a copy (its big.Ints are replaced, never changed).
type lim struct {
	alg string
	l   Limit
	now int64 // µs, the clock read
	// gcra, leaky_bucket: x the read level times P (at most twice the
	// capacity as of t, drained), rx the state's own level, drained, which
	// refund and force change; t their time. token_bucket: n tokens (read),
	// rn the state's own, refilled; t last refill. fixed_window: t start, n
	// count. sliding_window: t window start (ms), at the decision's µs, n
	// and prev the read counts (at most twice the limit), rn and rprev the
	// stored ones.
	x, rx          *big.Int
	t, n, prev, at int64
	rn, rprev      int64
}

// p is the period in µs.
func (v *lim) p() int64 { return v.l.PeriodMS * 1000 }

func (v *lim) capacity() int64 {
	if v.alg == "sliding_window" || v.alg == "fixed_window" {
		return v.l.Limit
	}
	return v.l.Burst
}

func bi(n int64) *big.Int { return big.NewInt(n) }

func mul(a, b int64) *big.Int { return new(big.Int).Mul(bi(a), bi(b)) }

func minBig(a, b *big.Int) *big.Int {
	if a.Cmp(b) <= 0 {
		return a
	}
	return b
}

// ceilBig is ceil(n / d) for n >= 0, d > 0.
func ceilBig(n *big.Int, d int64) *big.Int {
	q, r := new(big.Int).QuoRem(n, bi(d), new(big.Int))
	if r.Sign() > 0 {
		q.Add(q, bi(1))
	}
	return q
}

// drainBig is x less e * limit, never below 0.
func drainBig(x *big.Int, e, limit int64) *big.Int {
	y := new(big.Int).Sub(x, mul(e, limit))
	if y.Sign() < 0 {
		return new(big.Int)
	}
	return y
}

// twoCap is twice the capacity of a gcra or leaky_bucket limit, times P.
func (v *lim) twoCap() *big.Int { return mul(2*v.l.Burst, v.p()) }

// readLim reads st (nil: no state) under l at now.
func readLim(alg string, st *mstate, l Limit, now int64) lim {
	v := lim{alg: alg, l: l, now: now}
	P := v.p()
	switch alg {
	case "gcra", "leaky_bucket":
		v.t = now
		v.x, v.rx = new(big.Int), new(big.Int)
		if st != nil {
			v.t = st.t
			x := st.x
			// the state's own level: past 2^44 units, 2^44 (no limit writes it)
			if new(big.Int).Quo(x, bi(P)).Cmp(bi(1<<44)) > 0 {
				x = mul(1<<44, P)
			}
			v.rx = x
			v.x = minBig(x, v.twoCap()) // read at most twice the capacity, as of t
			if P >= 1<<47 {             // (a period past 4 years: the script refunds and forces on the read)
				v.rx = v.x
			}
		}
		if now > v.t {
			v.x = drainBig(v.x, now-v.t, l.Limit)
			v.rx = drainBig(v.rx, now-v.t, l.Limit)
			v.t = now
		}
	case "token_bucket":
		v.n, v.t = l.Burst, now
		v.rn = v.n
		if st != nil {
			v.n, v.t = max(-l.Burst, min(st.n, l.Burst)), st.t
			v.rn = st.n
			if now > v.t {
				k := (now - v.t) / P
				v.t += k * P
				if k > 0 {
					if k >= CeilDiv(l.Burst-v.n, l.Limit) {
						v.n = l.Burst
					} else {
						v.n += k * l.Limit
					}
					if v.rn < l.Burst {
						if new(big.Int).Mul(bi(k), bi(l.Limit)).Cmp(bi(l.Burst-v.rn)) >= 0 {
							v.rn = l.Burst
						} else {
							v.rn += k * l.Limit
						}
					}
				}
			}
		}
	case "fixed_window":
		v.t = now
		if st != nil && st.n > 0 && now < st.t+P {
			v.t, v.n = st.t, st.n
		}
	case "sliding_window":
		p := l.PeriodMS
		v.at = now
		if st != nil && st.t*1000 > now {
			v.at = st.t * 1000
		}
		atMS := floorDiv(v.at, 1000)
		v.t = atMS - atMS%p
		if st != nil {
			switch st.t {
			case v.t:
				v.rprev, v.rn = st.prev, st.n
			case v.t - p:
				v.rprev = st.n
			}
		}
		v.capWindow()
	default:
		panic("no model for " + alg)
	}
	return v
}

// capWindow reads sliding_window's stored counts as at most twice the limit.
func (v *lim) capWindow() {
	v.n, v.prev = min(v.rn, 2*v.l.Limit), min(v.rprev, 2*v.l.Limit)
}

// clampTokens reads token_bucket's own tokens between -burst and burst.
func (v *lim) clampTokens() { v.n = max(-v.l.Burst, min(v.rn, v.l.Burst)) }

// admits reports whether an empty-mode call of cost fits, else the µs
// until it would (-1 never).
func (v *lim) admits(cost int64) (bool, int64) {
	if cost == 0 {
		return true, 0
	}
	if cost > v.capacity() {
		return false, -1
	}
	P := v.p()
	switch v.alg {
	case "gcra", "leaky_bucket":
		need := new(big.Int).Add(v.x, mul(cost-v.l.Burst, P))
		if need.Sign() <= 0 {
			return true, 0
		}
		return false, v.t - v.now + ceilBig(need, v.l.Limit).Int64()
	case "token_bucket":
		if cost <= v.n {
			return true, 0
		}
		return false, v.t + CeilDiv(cost-v.n, v.l.Limit)*P - v.now
	case "fixed_window":
		if v.n+cost <= v.l.Limit {
			return true, 0
		}
		return false, v.t + P - v.now
	}
	return v.windowAdmits(cost)
}

// used is sliding_window's weighted count at its decision's µs: the
// previous count weighted by the microseconds of overlap.
func (v *lim) used() *big.Rat {
	P := v.p()
	e := v.at - v.t*1000
	return new(big.Rat).Add(new(big.Rat).SetFrac(mul(v.prev, P-e), bi(P)), rat(v.n))
}

// windowAdmits: the first µs when the weighted count leaves room.
func (v *lim) windowAdmits(cost int64) (bool, int64) {
	P, limit := v.p(), v.l.Limit
	if new(big.Rat).Add(v.used(), rat(cost)).Cmp(rat(limit)) <= 0 {
		return true, 0
	}
	start := v.t * 1000
	target := int64(-1)
	for w := start; target < 0; w += P {
		pv, cu := v.prev, v.n
		if w > start {
			pv, cu = v.n, 0
			if w > start+P {
				pv = 0
			}
		}
		// need pv*(P-d)/P + cu + cost <= limit for d in [0, P)
		room := limit - cost - cu
		if room < 0 {
			continue
		}
		from := int64(0)
		if w == start {
			from = v.at - start
		}
		if pv == 0 {
			target = w + from
			break
		}
		// pv*(P-d) <= room*P  <=>  d >= P - floor(room*P/pv)
		q := new(big.Int).Quo(mul(room, P), bi(pv))
		if q.Cmp(bi(P)) >= 0 {
			target = w + from
			break
		}
		if d := max(from, P-q.Int64()); d < P {
			target = w + d
		}
	}
	return false, target - v.now
}

// left is the exact units left, never below 0.
func (v *lim) left() *big.Rat {
	var l *big.Rat
	switch v.alg {
	case "gcra", "leaky_bucket":
		l = new(big.Rat).SetFrac(new(big.Int).Sub(mul(v.l.Burst, v.p()), v.x), bi(v.p()))
	case "token_bucket":
		l = rat(v.n)
	case "fixed_window":
		l = rat(v.l.Limit - v.n)
	default:
		l = new(big.Rat).Sub(rat(v.l.Limit), v.used())
	}
	if l.Sign() < 0 {
		return rat(0)
	}
	return l
}

// resetUS is the µs until the limit is back to no state.
func (v *lim) resetUS() int64 {
	P := v.p()
	switch v.alg {
	case "gcra", "leaky_bucket":
		if v.x.Sign() == 0 { // empty now, also as of a time ahead of the clock
			return 0
		}
		return v.t - v.now + ceilBig(v.x, v.l.Limit).Int64()
	case "token_bucket":
		if v.n < v.l.Burst {
			return v.t + CeilDiv(v.l.Burst-v.n, v.l.Limit)*P - v.now
		}
	case "fixed_window":
		if v.n > 0 {
			return v.t + P - v.now
		}
	default:
		switch {
		case v.n > 0:
			return (v.t+2*v.l.PeriodMS)*1000 - v.now
		case v.prev > 0:
			return (v.t+v.l.PeriodMS)*1000 - v.now
		}
	}
	return 0
}

// empty reports a limit equal to no state: the state it writes.
func (v *lim) empty() bool {
	switch v.alg {
	case "gcra", "leaky_bucket":
		return v.rx.Sign() == 0
	case "token_bucket":
		return v.rn >= v.l.Burst
	case "sliding_window":
		return v.rn == 0 && v.rprev == 0
	}
	return v.n == 0
}

// take records cost admitted units, on the read: what an admission writes.
func (v *lim) take(cost int64) {
	switch v.alg {
	case "gcra", "leaky_bucket":
		v.x = new(big.Int).Add(v.x, mul(cost, v.p()))
		v.rx = v.x
	case "token_bucket":
		v.n -= cost
		v.rn = v.n
	case "sliding_window":
		v.n += cost
		v.rn, v.rprev = v.n, v.prev
	default:
		v.n += cost
	}
}

// refund gives back up to cost units, on the state's own level or counts:
// the units given back, a unit partly drained counting as one.
func (v *lim) refund(cost int64) int64 {
	switch v.alg {
	case "gcra", "leaky_bucket":
		P := v.p()
		given := v.rx
		if c := mul(cost, P); c.Cmp(v.rx) < 0 {
			given = c
		}
		v.rx = new(big.Int).Sub(v.rx, given)
		v.x = minBig(v.rx, v.twoCap())
		return ceilBig(given, P).Int64()
	case "token_bucket":
		g := max(0, min(cost, v.l.Burst-v.rn))
		v.rn += g
		v.clampTokens()
		return g
	case "fixed_window":
		g := min(v.n, cost)
		v.n -= g
		return g
	}
	a := min(v.rn, cost)
	b := min(v.rprev, cost-a)
	v.rn -= a
	v.rprev -= b
	v.capWindow()
	return a + b
}

// force records cost units as far as a debt of one capacity, on the
// state's own level or count: the units recorded.
func (v *lim) force(cost int64) int64 {
	var g int64
	switch v.alg {
	case "gcra", "leaky_bucket":
		P := v.p()
		room := new(big.Int).Sub(v.twoCap(), v.rx)
		if room.Sign() > 0 {
			g = min(cost, new(big.Int).Quo(room, bi(P)).Int64())
		}
		v.rx = new(big.Int).Add(v.rx, mul(g, P))
		v.x = minBig(v.rx, v.twoCap())
		return g
	case "token_bucket":
		g = max(0, min(cost, v.rn+v.l.Burst))
		v.rn -= g
		v.clampTokens()
		return g
	case "sliding_window":
		g = max(0, min(cost, 2*v.l.Limit-v.rn))
		v.rn += g
		v.capWindow()
		return g
	}
	g = max(0, min(cost, 2*v.l.Limit-v.n))
	v.n += g
	return g
}

// state is what a write stores.
func (v *lim) state() mstate {
	switch v.alg {
	case "gcra", "leaky_bucket":
		return mstate{x: v.rx, t: v.t}
	case "token_bucket":
		return mstate{t: v.t, n: v.rn}
	case "sliding_window":
		return mstate{t: v.t, prev: v.rprev, n: v.rn}
	}
	return mstate{t: v.t, n: v.n}
}

// group is one key's limits as a call reads them: a string state's
// limits, each on its own, or a sliding log's, one log for all.
type group struct {
	m    *Model
	lims []lim // string states
	// sliding_log
	log []int64 // entries, oldest first
	at  int64   // the decision's time: the clock, or the newest entry's
	ls  []Limit
	now int64
}

func (g *group) n() int {
	if g.m.Spec.Log {
		return len(g.ls)
	}
	return len(g.lims)
}

func (g *group) clone() *group {
	c := *g
	c.lims = append([]lim(nil), g.lims...)
	c.log = append([]int64(nil), g.log...)
	return &c
}

// readGroup reads m's key for the limits ls at now.
func (m *Model) readGroup(ls []Limit, now int64) *group {
	m.Clock(now)
	g := &group{m: m, ls: ls, now: now}
	if m.Spec.Log {
		g.log = append([]int64(nil), m.log...)
		g.at = now
		if n := len(g.log); n > 0 && g.log[n-1] > now {
			g.at = g.log[n-1]
		}
		return g
	}
	for i, l := range ls {
		var st *mstate
		if m.has && i < len(m.lims) {
			st = &m.lims[i]
		}
		g.lims = append(g.lims, readLim(m.Spec.Name, st, l, now))
	}
	return g
}

// inWindow is the log's entries within limit i's period, oldest first.
func (g *group) inWindow(i int) []int64 {
	lo := g.at - g.ls[i].PeriodMS*1000
	return g.log[sort.Search(len(g.log), func(j int) bool { return g.log[j] > lo }):]
}

func (g *group) admits(i int, cost int64) (bool, int64) {
	if !g.m.Spec.Log {
		return g.lims[i].admits(cost)
	}
	l, in := g.ls[i], g.inWindow(i)
	count := int64(len(in))
	switch {
	case cost == 0 || count+cost <= l.Limit:
		return true, 0
	case cost > l.Limit:
		return false, -1
	}
	return false, in[count+cost-l.Limit-1] + l.PeriodMS*1000 - g.now
}

func (g *group) left(i int) *big.Rat {
	if !g.m.Spec.Log {
		return g.lims[i].left()
	}
	return rat(max(0, g.ls[i].Limit-int64(len(g.inWindow(i)))))
}

// avail is the whole units an empty-mode call admits now on limit i.
func (g *group) avail(i int) int64 { return floorRat(g.left(i)) }

func (g *group) resetUS(i int) int64 {
	if !g.m.Spec.Log {
		return g.lims[i].resetUS()
	}
	if len(g.inWindow(i)) == 0 {
		return 0
	}
	return g.log[len(g.log)-1] + g.ls[i].PeriodMS*1000 - g.now
}

func (g *group) capacity(i int) int64 {
	if !g.m.Spec.Log {
		return g.lims[i].capacity()
	}
	return g.ls[i].Limit
}

// take records cost units on every limit.
func (g *group) take(cost int64) {
	if !g.m.Spec.Log {
		for i := range g.lims {
			g.lims[i].take(cost)
		}
		return
	}
	for range cost {
		g.log = append(g.log, g.at)
	}
}

// refund gives back up to cost units on every limit: the units per limit.
func (g *group) refund(cost int64) []int64 {
	units := make([]int64, g.n())
	if !g.m.Spec.Log {
		for i := range g.lims {
			units[i] = g.lims[i].refund(cost)
		}
		return units
	}
	for i := range g.ls {
		units[i] = min(cost, int64(len(g.inWindow(i))))
	}
	g.log = g.log[:int64(len(g.log))-min(cost, int64(len(g.log)))]
	return units
}

// force records cost units on every limit, as far as a debt of one
// capacity: the units per limit (one log: the least any of its limits
// takes, for all).
func (g *group) force(cost int64) []int64 {
	units := make([]int64, g.n())
	if !g.m.Spec.Log {
		for i := range g.lims {
			units[i] = g.lims[i].force(cost)
		}
		return units
	}
	k := cost
	for i, l := range g.ls {
		k = min(k, 2*l.Limit-int64(len(g.inWindow(i))))
	}
	k = max(k, 0)
	g.take(k)
	for i := range units {
		units[i] = k
	}
	return units
}

// commit writes g as the key's state: deleted when it is equal to no state.
func (g *group) commit() {
	m, now := g.m, g.now
	if m.Spec.Log {
		var longest int64
		for _, l := range g.ls {
			longest = max(longest, l.PeriodMS*1000)
		}
		cut := sort.Search(len(g.log), func(j int) bool { return g.log[j] > g.at-longest })
		m.log = append([]int64(nil), g.log[cut:]...)
		if len(m.log) == 0 {
			m.has, m.log = false, nil
			return
		}
		m.has = true
		m.expireAt(now, CeilDiv(m.log[len(m.log)-1]+longest-now, 1000))
		return
	}
	var ttl int64
	empty := true
	m.lims = m.lims[:0]
	for i := range g.lims {
		v := &g.lims[i]
		ttl = max(ttl, v.resetUS())
		empty = empty && v.empty()
		m.lims = append(m.lims, v.state())
	}
	if empty {
		m.has, m.lims = false, nil
		return
	}
	m.has = true
	m.expireAt(now, CeilDiv(ttl, 1000))
}

// Call decides c on the model's key at now and returns the reply the
// script must give (seven fields); the model's state follows what the
// script must record.
func (m *Model) Call(now int64, c Call) []int64 {
	return decideGroups([]*group{m.readGroup(c.Limits, now)}, c)
}

// CallKeys decides c, a call of several keys (c.Keys > 1), at now: limit i
// on models[i], each key holding its one limit's state as a one-key call
// does, all or nothing. It returns the reply the script must give; each
// model's state follows what the script must record on its key.
func CallKeys(models []*Model, now int64, c Call) []int64 {
	if len(models) != len(c.Limits) {
		panic(fmt.Sprintf("CallKeys: %d models for %d limits", len(models), len(c.Limits)))
	}
	gs := make([]*group, len(models))
	for i, m := range models {
		gs[i] = m.readGroup(c.Limits[i:i+1], now)
	}
	return decideGroups(gs, c)
}

// at is a limit of a call: its group (key) and position in it.
type at struct{ g, i int }

func positions(gs []*group) []at {
	var out []at
	for gi, g := range gs {
		for i := range g.n() {
			out = append(out, at{gi, i})
		}
	}
	return out
}

// decideGroups decides c on its keys' groups, commits what it records and
// returns the reply.
func decideGroups(gs []*group, c Call) []int64 {
	switch c.Mode {
	case "refund", "force":
		return settle(gs, c.Mode, c.Cost)
	case "upto":
		if c.Cost == 0 {
			return admission(gs, 0, false)
		}
		g := c.Cost
		for _, p := range positions(gs) {
			g = min(g, gs[p.g].avail(p.i))
		}
		if g == 0 {
			return admission(gs, 1, false) // a denial: the reply of a check of one unit
		}
		return admission(gs, g, true)
	}
	return admission(gs, c.Cost, c.Mode == "")
}

func ms(us int64) int64 {
	if us <= 0 {
		return 0
	}
	return CeilDiv(us, 1000)
}

// admission decides an all-or-nothing call of cost (empty mode, check, or
// upto's grant), recording it when record and admitted.
func admission(gs []*group, cost int64, record bool) []int64 {
	d, dRetry := -1, int64(0)
	ps := positions(gs)
	for k, p := range ps {
		ok, retry := gs[p.g].admits(p.i, cost)
		if ok {
			continue
		}
		if d < 0 || (dRetry != -1 && (retry == -1 || CeilDiv(retry, 1000) > CeilDiv(dRetry, 1000))) {
			d, dRetry = k, retry
		}
	}
	if d >= 0 {
		p := ps[d]
		g := gs[p.g]
		retry := int64(-1)
		if dRetry != -1 {
			retry = CeilDiv(dRetry, 1000)
		}
		return []int64{0, g.avail(p.i), retry, ms(g.resetUS(p.i)), g.capacity(p.i), int64(d + 1), 0}
	}
	after := make([]*group, len(gs))
	for i, g := range gs {
		after[i] = g.clone()
		after[i].take(cost)
	}
	b := fewestLeft(after, ps)
	p := ps[b]
	g := after[p.g]
	if record && cost > 0 {
		for _, a := range after {
			a.commit()
		}
	}
	return []int64{1, g.avail(p.i), 0, ms(g.resetUS(p.i)), g.capacity(p.i), int64(b + 1), cost}
}

// fewestLeft is the position with the fewest exact units left, ties to the
// earlier.
func fewestLeft(gs []*group, ps []at) int {
	b := 0
	for k, p := range ps {
		if gs[p.g].left(p.i).Cmp(gs[ps[b].g].left(ps[b].i)) < 0 {
			b = k
		}
	}
	return b
}

// settle is refund or force on every limit of every key: a key whose
// limits all stay as they were is not written; fields 2 to 4 describe the
// binding limit after the call, field 3 the wait for one unit.
func settle(gs []*group, mode string, cost int64) []int64 {
	ps := positions(gs)
	allowed := int64(1)
	if mode == "force" {
		for _, p := range ps {
			if ok, _ := gs[p.g].admits(p.i, cost); !ok {
				allowed = 0
			}
		}
	}
	units := make([][]int64, len(gs))
	for i, g := range gs {
		if mode == "refund" {
			units[i] = g.refund(cost)
		} else {
			units[i] = g.force(cost)
		}
		changed := false
		for _, u := range units[i] {
			changed = changed || u > 0
		}
		if changed {
			g.clone().commit()
		}
	}
	// the binding limit: the longest wait for one unit, in whole ms as
	// reported, then the fewest units left; ties to the earlier
	b, bWait := 0, int64(-1)
	for k, p := range ps {
		_, one := gs[p.g].admits(p.i, 1)
		w := ms(one)
		switch {
		case w > bWait:
			b, bWait = k, w
		case w == bWait && w == 0 && gs[p.g].left(p.i).Cmp(gs[ps[b].g].left(ps[b].i)) < 0:
			b = k
		}
	}
	p := ps[b]
	g := gs[p.g]
	return []int64{allowed, g.avail(p.i), bWait, ms(g.resetUS(p.i)), g.capacity(p.i), int64(b + 1), units[p.g][p.i]}
}

// String describes the model's state, for failure messages.
func (m *Model) String() string {
	if !m.has {
		return "no key"
	}
	if m.Spec.Log {
		return fmt.Sprintf("log %v expiry %d", m.log, m.expiry)
	}
	return fmt.Sprintf("%+v expiry %d", m.lims, m.expiry)
}

// Value is the string state the model's key holds, as GET returns it: ""
// when there is no key (and for sliding_log, whose state is a sorted set).
func (m *Model) Value() string {
	if !m.has || m.Spec.Log {
		return ""
	}
	var b strings.Builder
	b.WriteString(m.Spec.Tag)
	for _, s := range m.lims {
		switch m.Spec.Name {
		case "gcra", "leaky_bucket":
			fmt.Fprintf(&b, " %s %d", s.x, s.t)
		case "token_bucket":
			fmt.Fprintf(&b, " %d %d", s.n, s.t)
		case "fixed_window":
			fmt.Fprintf(&b, " %d %d", s.t, s.n)
		case "sliding_window":
			fmt.Fprintf(&b, " %d %d %d", s.t, s.prev, s.n)
		}
	}
	return b.String()
}
