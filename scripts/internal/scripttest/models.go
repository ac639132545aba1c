package scripttest

import (
	"fmt"
	"math/big"
	"sort"

	"github.com/redisrate/redisrate/internal/manifest"
)

// Model is a reference model of one script on one key, written from the
// contract in exact arithmetic (math/big rationals for the continuous
// buckets, int64 elsewhere), independently of the Lua. Times are
// microseconds since the epoch, as the scripts read TIME.
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

// mstate is one limit's state.
type mstate struct {
	tat   *big.Rat // gcra: theoretical arrival time, µs
	level *big.Rat // leaky_bucket: level in units at time t
	t     int64    // leaky_bucket, token_bucket: last update / refill (µs); fixed_window: window start (µs); sliding_window: window start (ms)
	n     int64    // token_bucket: tokens; fixed_window: count; sliding_window: current count
	prev  int64    // sliding_window: previous window's count
}

// NewModel is a model of s on an empty key; now is the clock.
func NewModel(s manifest.Spec, now int64) *Model { return &Model{Spec: s, tick: now} }

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

func rat(n int64) *big.Rat { return new(big.Rat).SetInt64(n) }

func ratAdd(x, y *big.Rat) *big.Rat { return new(big.Rat).Add(x, y) }
func ratSub(x, y *big.Rat) *big.Rat { return new(big.Rat).Sub(x, y) }
func ratMul(x, y *big.Rat) *big.Rat { return new(big.Rat).Mul(x, y) }
func ratQuo(x, y *big.Rat) *big.Rat { return new(big.Rat).Quo(x, y) }

// ceilRat is ceil(x), floorRat floor(x).
func ceilRat(x *big.Rat) int64 {
	q, r := new(big.Int).QuoRem(x.Num(), x.Denom(), new(big.Int))
	if r.Sign() > 0 {
		q.Add(q, big.NewInt(1))
	}
	return q.Int64()
}

func floorRat(x *big.Rat) int64 {
	q, r := new(big.Int).QuoRem(x.Num(), x.Denom(), new(big.Int))
	if r.Sign() < 0 {
		q.Sub(q, big.NewInt(1))
	}
	return q.Int64()
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

// outcome is one limit's part of a decision.
type outcome struct {
	ok      bool
	retryUS int64 // when denied; -1 never
	rem     int64
	left    *big.Rat // exact units left, for the binding choice
	resetUS int64
	cap     int64
	next    mstate
}

// Call decides c at now (call Clock(now) first, or let Call do it) and
// returns the reply the script must give; the model's state follows what
// the script must record.
func (m *Model) Call(now int64, c Call) []int64 {
	m.Clock(now)
	outs, record := m.decide(now, c)
	reply, allowed := verdict(outs)
	if allowed && c.Cost > 0 && !c.Check {
		record()
	}
	return reply
}

// CallKeys decides c, a call of several keys (c.Keys > 1), at now: limit i
// on models[i], each key decided as a one-key call with its one limit, all
// or nothing. It returns the reply the script must give; each model's state
// follows what the script must record on its key.
func CallKeys(models []*Model, now int64, c Call) []int64 {
	if len(models) != len(c.Limits) {
		panic(fmt.Sprintf("CallKeys: %d models for %d limits", len(models), len(c.Limits)))
	}
	outs := make([]outcome, len(models))
	records := make([]func(), len(models))
	for i, m := range models {
		m.Clock(now)
		var o []outcome
		o, records[i] = m.decide(now, Call{Limits: c.Limits[i : i+1], Cost: c.Cost, Check: c.Check, Keys: 1})
		outs[i] = o[0]
	}
	reply, allowed := verdict(outs)
	if allowed && c.Cost > 0 && !c.Check {
		for _, record := range records {
			record()
		}
	}
	return reply
}

// decide is each limit's outcome of c at now on m's key, and what records
// the call on it when the call is admitted.
func (m *Model) decide(now int64, c Call) ([]outcome, func()) {
	if m.Spec.Log {
		return m.decideLog(now, c)
	}
	outs := make([]outcome, len(c.Limits))
	for i, l := range c.Limits {
		var st *mstate
		if m.has && i < len(m.lims) {
			st = &m.lims[i]
		}
		switch m.Spec.Name {
		case "gcra":
			outs[i] = gcraStep(st, l, now, c.Cost)
		case "leaky_bucket":
			outs[i] = leakyStep(st, l, now, c.Cost)
		case "token_bucket":
			outs[i] = tokenStep(st, l, now, c.Cost)
		case "sliding_window":
			outs[i] = windowStep(st, l, now, c.Cost)
		case "fixed_window":
			outs[i] = fixedStep(st, l, now, c.Cost)
		default:
			panic("no model for " + m.Spec.Name)
		}
	}
	return outs, func() {
		var ttl int64
		m.lims = m.lims[:0]
		for _, o := range outs {
			ttl = max(ttl, o.resetUS)
			m.lims = append(m.lims, o.next)
		}
		m.has = true
		m.expireAt(now, CeilDiv(ttl, 1000))
	}
}

// verdict is the reply for the limits' outcomes: the binding limit.
func verdict(outs []outcome) ([]int64, bool) {
	a, d := -1, -1
	for i, o := range outs {
		if o.ok {
			if a < 0 || o.left.Cmp(outs[a].left) < 0 {
				a = i
			}
			continue
		}
		if d < 0 {
			d = i
			continue
		}
		dr := outs[d].retryUS
		if dr != -1 && (o.retryUS == -1 || CeilDiv(o.retryUS, 1000) > CeilDiv(dr, 1000)) {
			d = i
		}
	}
	ms := func(us int64) int64 {
		if us <= 0 {
			return 0
		}
		return CeilDiv(us, 1000)
	}
	if d < 0 {
		o := outs[a]
		return []int64{1, o.rem, 0, ms(o.resetUS), o.cap, int64(a + 1)}, true
	}
	o := outs[d]
	retry := int64(-1)
	if o.retryUS != -1 {
		retry = CeilDiv(o.retryUS, 1000)
	}
	return []int64{0, o.rem, retry, ms(o.resetUS), o.cap, int64(d + 1)}, false
}

// gcraStep: units spaced T = period/limit apart on a theoretical arrival
// time; admitted while the TAT stays within burst*T of now.
func gcraStep(st *mstate, l Limit, now, cost int64) outcome {
	T := new(big.Rat).SetFrac64(l.PeriodMS*1000, l.Limit)
	nowR := rat(now)
	tat := nowR
	if st != nil && st.tat.Cmp(nowR) > 0 {
		tat = st.tat
	}
	tau := ratMul(rat(l.Burst), T)
	o := outcome{cap: l.Burst, retryUS: -1}
	if cost <= l.Burst {
		// retry = tat + cost*T - tau - now
		need := ratSub(ratAdd(tat, ratMul(rat(cost), T)), ratAdd(tau, nowR))
		o.retryUS = ceilRat(need)
		o.ok = need.Sign() <= 0 || cost == 0
	}
	if o.ok {
		tat = ratAdd(tat, ratMul(rat(cost), T))
	}
	ahead := ratSub(tat, nowR)
	left := ratQuo(ratSub(tau, ahead), T)
	if left.Sign() < 0 {
		left = rat(0)
	}
	o.left, o.rem = left, floorRat(left)
	o.resetUS = max(0, ceilRat(ahead))
	o.next = mstate{tat: tat}
	return o
}

// leakyStep: the level drains continuously at limit per period; a request
// fits when level + cost <= burst. A clock behind the last update decides
// as of that update.
func leakyStep(st *mstate, l Limit, now, cost int64) outcome {
	rate := new(big.Rat).SetFrac64(l.Limit, l.PeriodMS*1000) // units per µs
	level, t := rat(0), now
	if st != nil {
		level, t = st.level, st.t
		if now > t {
			level = ratSub(level, ratMul(rat(now-t), rate))
			if level.Sign() < 0 {
				level = rat(0)
			}
			t = now
		}
	}
	o := outcome{cap: l.Burst, retryUS: -1}
	if cost <= l.Burst {
		over := ratSub(ratAdd(level, rat(cost)), rat(l.Burst))
		o.ok = over.Sign() <= 0 || cost == 0
		o.retryUS = t - now + ceilRat(ratQuo(over, rate))
	}
	if o.ok {
		level = ratAdd(level, rat(cost))
	}
	left := ratSub(rat(l.Burst), level)
	if left.Sign() < 0 {
		left = rat(0)
	}
	o.left, o.rem = left, floorRat(left)
	o.resetUS = t - now + ceilRat(ratQuo(level, rate))
	o.next = mstate{level: level, t: t}
	return o
}

// tokenStep: a bucket of burst tokens, limit more every period_ms counted
// from the call that created it.
func tokenStep(st *mstate, l Limit, now, cost int64) outcome {
	P := l.PeriodMS * 1000
	tokens, t := l.Burst, now
	if st != nil {
		tokens, t = min(st.n, l.Burst), st.t
		if now > t {
			k := (now - t) / P
			t += k * P
			tokens = min(l.Burst, tokens+k*l.Limit)
		}
	}
	o := outcome{cap: l.Burst, retryUS: -1}
	if cost <= l.Burst {
		o.ok = cost <= tokens
		if !o.ok {
			o.retryUS = t + CeilDiv(cost-tokens, l.Limit)*P - now
		}
	}
	if o.ok {
		tokens -= cost
	}
	o.rem, o.left = tokens, rat(tokens)
	if tokens < l.Burst {
		o.resetUS = t + CeilDiv(l.Burst-tokens, l.Limit)*P - now
	}
	o.next = mstate{n: tokens, t: t}
	return o
}

// windowStep: windows aligned to multiples of period_ms since the epoch
// (time in whole ms, rounded down); used = prev * (p - into) / p + cur. A
// clock behind the stored window decides as of its start.
func windowStep(st *mstate, l Limit, now, cost int64) outcome {
	p := l.PeriodMS
	nowMS := floorDiv(now, 1000)
	at := nowMS
	if st != nil && st.t > at {
		at = st.t
	}
	start := at - at%p
	var prev, cur int64
	if st != nil {
		switch st.t {
		case start:
			prev, cur = st.prev, st.n
		case start - p:
			prev = st.n
		}
	}
	usedP := func() *big.Rat { // used, exact
		return new(big.Rat).Add(new(big.Rat).SetFrac64(prev*(p-(at-start)), p), rat(cur))
	}
	o := outcome{cap: l.Limit, retryUS: -1}
	if cost <= l.Limit {
		o.ok = cost == 0 || ratAdd(usedP(), rat(cost)).Cmp(rat(l.Limit)) <= 0
		if !o.ok {
			// the first whole ms when the weighted count leaves room
			target := int64(-1)
			for w := start; target < 0; w += p {
				pv, cu := prev, cur
				if w > start {
					pv, cu = cur, 0
					if w > start+p {
						pv = 0
					}
				}
				// need pv*(p-d)/p + cu + cost <= limit for d in [0, p)
				room := l.Limit - cost - cu
				if room < 0 {
					continue
				}
				from := int64(0)
				if w == start {
					from = at - start
				}
				if pv == 0 {
					target = w + from
					break
				}
				// pv*(p-d) <= room*p  <=>  d >= p - room*p/pv
				d := max(from, p-floorDiv(room*p, pv))
				if d < p {
					target = w + d
				}
			}
			o.retryUS = target*1000 - now
		}
	}
	if o.ok {
		cur += cost
	}
	left := ratSub(rat(l.Limit), usedP())
	if left.Sign() < 0 {
		left = rat(0)
	}
	o.left, o.rem = left, floorRat(left)
	switch {
	case cur > 0:
		o.resetUS = (start+2*p)*1000 - now
	case prev > 0:
		o.resetUS = (start+p)*1000 - now
	}
	o.next = mstate{t: start, prev: prev, n: cur}
	return o
}

// fixedStep: a window opens at the first request and lasts period_ms.
func fixedStep(st *mstate, l Limit, now, cost int64) outcome {
	P := l.PeriodMS * 1000
	start, count := now, int64(0)
	if st != nil {
		start, count = st.t, st.n
		if now >= start+P {
			start, count = now, 0
		}
	}
	o := outcome{cap: l.Limit, retryUS: -1}
	if cost <= l.Limit {
		o.ok = cost == 0 || count+cost <= l.Limit
		if !o.ok {
			o.retryUS = start + P - now
		}
	}
	if o.ok {
		count += cost
	}
	o.rem = max(0, l.Limit-count)
	o.left = rat(o.rem)
	if count > 0 {
		o.resetUS = start + P - now
	}
	o.next = mstate{t: start, n: count}
	return o
}

// decideLog: one entry per admitted unit, at the call's time (or the
// newest entry's, when the clock stepped back behind it).
func (m *Model) decideLog(now int64, c Call) ([]outcome, func()) {
	at := now
	if n := len(m.log); n > 0 && m.log[n-1] > at {
		at = m.log[n-1]
	}
	outs := make([]outcome, len(c.Limits))
	var longest int64
	for i, l := range c.Limits {
		P := l.PeriodMS * 1000
		longest = max(longest, P)
		lo := max(0, at-P)
		in := m.log[sort.Search(len(m.log), func(j int) bool { return m.log[j] > lo }):]
		count := int64(len(in))
		o := outcome{cap: l.Limit, retryUS: -1}
		if c.Cost <= l.Limit {
			o.ok = c.Cost == 0 || count+c.Cost <= l.Limit
			if !o.ok {
				o.retryUS = in[count+c.Cost-l.Limit-1] + P - now
			}
		}
		after := count
		if o.ok {
			after += c.Cost
		}
		o.rem = max(0, l.Limit-after)
		o.left = rat(o.rem)
		if o.ok && c.Cost > 0 {
			o.resetUS = at + P - now
		} else if count > 0 {
			o.resetUS = m.log[len(m.log)-1] + P - now
		}
		outs[i] = o
	}
	return outs, func() {
		for range c.Cost {
			m.log = append(m.log, at)
		}
		cut := sort.Search(len(m.log), func(j int) bool { return m.log[j] > at-longest })
		m.log = append([]int64(nil), m.log[cut:]...)
		m.has = true
		m.expireAt(now, CeilDiv(at-now+longest, 1000))
	}
}

// String describes the model's state, for failure messages.
func (m *Model) String() string {
	if !m.has {
		return "no key"
	}
	if m.Spec.Log {
		return fmt.Sprintf("log %v expiry %d", m.log, m.expiry)
	}
	s := ""
	for _, l := range m.lims {
		switch {
		case l.tat != nil:
			s += " tat=" + l.tat.FloatString(3)
		case l.level != nil:
			s += fmt.Sprintf(" level=%s t=%d", l.level.FloatString(3), l.t)
		default:
			s += fmt.Sprintf(" t=%d n=%d prev=%d", l.t, l.n, l.prev)
		}
	}
	return fmt.Sprintf("%s expiry %d", s, m.expiry)
}
