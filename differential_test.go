package redisrate

import (
	"flag"
	"fmt"
	"math/big"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// The differential test runs seeded random sequences of (time step, cost,
// check) against each script on the fake clock and, step by step, against a
// small reference model of the algorithm written here from the contract, in
// exact rational arithmetic: every reply field and the key's TTL must agree.
// The models share no code with the scripts: the sliding window model finds
// retry_after by searching for the first millisecond that admits, where the
// script solves for it.

// dlimit is one limit of a sequence, as the script gets it and as numbers.
type dlimit struct {
	limit, period, burst string // ARGV
	lim, cap             *big.Rat
	periodUs             int64
}

func newDLimit(limit, period, burst string) dlimit {
	l := dlimit{limit: limit, period: period, burst: burst, lim: ratOf(limit)}
	l.cap = l.lim
	if burst != "" {
		l.cap = ratOf(burst)
	}
	p, _ := new(big.Rat).SetString(period)
	l.periodUs = p.Num().Int64() * 1000
	return l
}

func ratOf(s string) *big.Rat {
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		panic("bad number " + s)
	}
	return r
}

func ri(n int64) *big.Rat { return new(big.Rat).SetInt64(n) }

func add(a, b *big.Rat) *big.Rat { return new(big.Rat).Add(a, b) }
func sub(a, b *big.Rat) *big.Rat { return new(big.Rat).Sub(a, b) }
func mul(a, b *big.Rat) *big.Rat { return new(big.Rat).Mul(a, b) }
func quo(a, b *big.Rat) *big.Rat { return new(big.Rat).Quo(a, b) }
func maxRat(a, b *big.Rat) *big.Rat {
	if a.Cmp(b) >= 0 {
		return a
	}
	return b
}

// floorRat and ceilRat round toward -inf and +inf.
func floorRat(r *big.Rat) int64 {
	q, m := new(big.Int).DivMod(r.Num(), r.Denom(), new(big.Int))
	_ = m
	return q.Int64() // Euclidean division with a positive denominator is floor
}

func ceilRat(r *big.Rat) int64 {
	f := floorRat(r)
	if ri(f).Cmp(r) == 0 {
		return f
	}
	return f + 1
}

// usToMs is a duration in µs as a reply gives it: whole ms, rounded up.
func usToMs(us *big.Rat) int64 {
	if us.Sign() <= 0 {
		return 0
	}
	return ceilRat(quo(us, ri(1000)))
}

// verdict is one limit's judgement, as the contract describes it.
type verdict struct {
	ok, never bool
	retryUs   *big.Rat // when denied and not never
	left      *big.Rat // exact units available after (admitted) or now
	resetUs   *big.Rat // until the limit is empty, likewise
	capacity  *big.Rat
}

// combine is the contract's "Several limits": all or nothing, and the binding
// limit: on a denial the one with the longest retry_after_ms (-1 longest),
// on an admission the fewest exact units left; ties to the earlier.
func combine(vs []verdict) (bool, [6]int64) {
	allowed := true
	for _, v := range vs {
		allowed = allowed && v.ok
	}
	pick := -1
	retryMs := func(v verdict) int64 {
		if v.never {
			return -1
		}
		return usToMs(v.retryUs)
	}
	longer := func(a, b int64) bool { // a waits longer than b
		if b == -1 {
			return false
		}
		return a == -1 || a > b
	}
	for i, v := range vs {
		switch {
		case allowed:
			if pick < 0 || v.left.Cmp(vs[pick].left) < 0 {
				pick = i
			}
		case !v.ok:
			if pick < 0 || longer(retryMs(v), retryMs(vs[pick])) {
				pick = i
			}
		}
	}
	v := vs[pick]
	var r [6]int64
	if allowed {
		r[0] = 1
	} else {
		r[2] = retryMs(v)
	}
	r[1] = max(floorRat(v.left), 0)
	r[3] = usToMs(v.resetUs)
	r[4] = floorRat(v.capacity)
	r[5] = int64(pick + 1)
	return allowed, r
}

// model is a reference implementation of one algorithm over one key.
type model interface {
	// decide judges cost at now (µs) against the current state and returns
	// the verdicts and a function that records the request.
	decide(now int64, cost *big.Rat) ([]verdict, func())
	// empty reports whether there is no state (the key does not exist).
	empty() bool
	clear()
	// ttlUs is the TTL a write sets, from its verdicts.
	ttlUs(vs []verdict) *big.Rat
}

func maxReset(vs []verdict) *big.Rat {
	m := ri(0)
	for _, v := range vs {
		m = maxRat(m, v.resetUs)
	}
	return m
}

// continuous is GCRA and the leaky bucket: a level draining at limit per
// period, at most burst.
type continuous struct {
	limits []dlimit
	level  []*big.Rat
	at     int64
}

func (m *continuous) empty() bool                 { return m.level == nil }
func (m *continuous) clear()                      { m.level = nil }
func (m *continuous) ttlUs(vs []verdict) *big.Rat { return maxReset(vs) }

func (m *continuous) decide(now int64, cost *big.Rat) ([]verdict, func()) {
	vs := make([]verdict, len(m.limits))
	after := make([]*big.Rat, len(m.limits))
	for i, l := range m.limits {
		rate := quo(l.lim, ri(l.periodUs)) // units per µs
		level := ri(0)
		if m.level != nil {
			level = maxRat(ri(0), sub(m.level[i], mul(rate, ri(now-m.at))))
		}
		v := verdict{capacity: l.cap}
		switch {
		case cost.Cmp(l.cap) > 0:
			v.never = true
		case add(level, cost).Cmp(l.cap) <= 0:
			v.ok = true
			level = add(level, cost)
		default:
			v.retryUs = quo(sub(add(level, cost), l.cap), rate)
		}
		after[i] = level
		v.left = sub(l.cap, level)
		v.resetUs = quo(level, rate)
		vs[i] = v
	}
	return vs, func() { m.level, m.at = after, now }
}

// tokenBucket refills limit tokens every period, counted from the call that
// created the state, up to burst.
type tokenBucket struct {
	limits []dlimit
	tokens []*big.Rat
	last   []int64
}

func (m *tokenBucket) empty() bool                 { return m.tokens == nil }
func (m *tokenBucket) clear()                      { m.tokens, m.last = nil, nil }
func (m *tokenBucket) ttlUs(vs []verdict) *big.Rat { return maxReset(vs) }

func (m *tokenBucket) decide(now int64, cost *big.Rat) ([]verdict, func()) {
	vs := make([]verdict, len(m.limits))
	tokens := make([]*big.Rat, len(m.limits))
	last := make([]int64, len(m.limits))
	for i, l := range m.limits {
		tk, ls := l.cap, now
		if m.tokens != nil {
			tk, ls = m.tokens[i], m.last[i]
			if n := (now - ls) / l.periodUs; now > ls && n > 0 {
				tk = add(tk, mul(ri(n), l.lim))
				ls += n * l.periodUs
			}
			if tk.Cmp(l.cap) > 0 {
				tk = l.cap
			}
		}
		// the time until need more tokens have arrived, in whole refills
		until := func(need *big.Rat) *big.Rat {
			return ri(ls + ceilRat(quo(need, l.lim))*l.periodUs - now)
		}
		v := verdict{capacity: l.cap}
		switch {
		case cost.Cmp(l.cap) > 0:
			v.never = true
		case cost.Cmp(tk) <= 0:
			v.ok = true
			tk = sub(tk, cost)
		default:
			v.retryUs = until(sub(cost, tk))
		}
		v.left = tk
		v.resetUs = ri(0)
		if tk.Cmp(l.cap) < 0 {
			v.resetUs = until(sub(l.cap, tk))
		}
		tokens[i], last[i] = tk, ls
		vs[i] = v
	}
	return vs, func() { m.tokens, m.last = tokens, last }
}

// fixedWindow counts units in a window that opens with the first request and
// lasts period.
type fixedWindow struct {
	limits []dlimit
	start  []int64
	count  []*big.Rat
}

func (m *fixedWindow) empty() bool                 { return m.start == nil }
func (m *fixedWindow) clear()                      { m.start, m.count = nil, nil }
func (m *fixedWindow) ttlUs(vs []verdict) *big.Rat { return maxReset(vs) }

func (m *fixedWindow) decide(now int64, cost *big.Rat) ([]verdict, func()) {
	vs := make([]verdict, len(m.limits))
	start := make([]int64, len(m.limits))
	count := make([]*big.Rat, len(m.limits))
	for i, l := range m.limits {
		s, c := now, ri(0)
		if m.start != nil && now < m.start[i]+l.periodUs {
			s, c = m.start[i], m.count[i]
		}
		v := verdict{capacity: l.lim}
		switch {
		case cost.Cmp(l.lim) > 0:
			v.never = true
		case add(c, cost).Cmp(l.lim) <= 0:
			v.ok = true
			c = add(c, cost)
		default:
			v.retryUs = ri(s + l.periodUs - now)
		}
		v.left = maxRat(ri(0), sub(l.lim, c))
		v.resetUs = ri(0)
		if c.Sign() > 0 {
			v.resetUs = ri(s + l.periodUs - now)
		}
		start[i], count[i] = s, c
		vs[i] = v
	}
	return vs, func() { m.start, m.count = start, count }
}

// slidingWindow weighs the previous aligned window by its overlap with the
// sliding window that ends now, at millisecond resolution.
type slidingWindow struct {
	limits    []dlimit
	start     []int64 // ms
	prev, cur []*big.Rat
}

func (m *slidingWindow) empty() bool                 { return m.start == nil }
func (m *slidingWindow) clear()                      { m.start, m.prev, m.cur = nil, nil, nil }
func (m *slidingWindow) ttlUs(vs []verdict) *big.Rat { return maxReset(vs) }

func (m *slidingWindow) decide(now int64, cost *big.Rat) ([]verdict, func()) {
	vs := make([]verdict, len(m.limits))
	start := make([]int64, len(m.limits))
	prev := make([]*big.Rat, len(m.limits))
	cur := make([]*big.Rat, len(m.limits))
	nowMs := now / 1000
	for i, l := range m.limits {
		p := l.periodUs / 1000
		s := nowMs - nowMs%p
		pr, cu := ri(0), ri(0)
		if m.start != nil {
			switch m.start[i] {
			case s:
				pr, cu = m.prev[i], m.cur[i]
			case s - p:
				pr = m.cur[i]
			}
		}
		// usedAt is the weighted count at ms t >= nowMs with nothing added.
		usedAt := func(t int64, pr, cu *big.Rat) *big.Rat {
			ws := t - t%p
			switch ws {
			case s:
				return add(mul(pr, quo(ri(p-(t-s)), ri(p))), cu)
			case s + p:
				return mul(cu, quo(ri(p-(t-ws)), ri(p)))
			}
			return ri(0)
		}
		used := usedAt(nowMs, pr, cu)
		v := verdict{capacity: l.lim}
		switch {
		case cost.Cmp(l.lim) > 0:
			v.never = true
		case add(used, cost).Cmp(l.lim) <= 0:
			v.ok = true
			cu = add(cu, cost)
			used = add(used, cost)
		default:
			// the first ms that admits: search, don't solve
			lo, hi := nowMs+1, s+2*p
			for lo < hi {
				mid := (lo + hi) / 2
				if add(usedAt(mid, pr, cu), cost).Cmp(l.lim) <= 0 {
					hi = mid
				} else {
					lo = mid + 1
				}
			}
			v.retryUs = ri(lo*1000 - now)
		}
		v.left = maxRat(ri(0), sub(l.lim, used))
		switch {
		case cu.Sign() > 0:
			v.resetUs = ri((s+2*p)*1000 - now)
		case pr.Sign() > 0:
			v.resetUs = ri((s+p)*1000 - now)
		default:
			v.resetUs = ri(0)
		}
		start[i], prev[i], cur[i] = s, pr, cu
		vs[i] = v
	}
	return vs, func() { m.start, m.prev, m.cur = start, prev, cur }
}

// slidingLog keeps the time of every admitted unit.
type slidingLog struct {
	limits []dlimit
	log    []int64 // µs, oldest first, one per unit
}

func (m *slidingLog) empty() bool { return len(m.log) == 0 }
func (m *slidingLog) clear()      { m.log = nil }
func (m *slidingLog) ttlUs([]verdict) *big.Rat {
	longest := int64(0)
	for _, l := range m.limits {
		longest = max(longest, l.periodUs)
	}
	return ri(longest)
}

func (m *slidingLog) decide(now int64, cost *big.Rat) ([]verdict, func()) {
	n := cost.Num().Int64()
	vs := make([]verdict, len(m.limits))
	for i, l := range m.limits {
		var in []int64 // the entries in (now - period, now]
		for _, t := range m.log {
			if t > now-l.periodUs {
				in = append(in, t)
			}
		}
		limit := l.lim.Num().Int64()
		v := verdict{capacity: l.lim}
		count := int64(len(in))
		switch {
		case n > limit:
			v.never = true
		case count+n <= limit:
			v.ok = true
			count += n
		default:
			// wait until the oldest count+n-limit entries have left
			v.retryUs = ri(in[count+n-limit-1] + l.periodUs - now)
		}
		v.left = ri(max(limit-count, 0))
		switch {
		case v.ok && n > 0:
			v.resetUs = ri(l.periodUs)
		case len(in) > 0:
			v.resetUs = ri(in[len(in)-1] + l.periodUs - now)
		default:
			v.resetUs = ri(0)
		}
		vs[i] = v
	}
	return vs, func() {
		for range n {
			m.log = append(m.log, now)
		}
	}
}

func newModel(a Algorithm, limits []dlimit) model {
	switch a {
	case GCRA, LeakyBucket:
		return &continuous{limits: limits}
	case TokenBucket:
		return &tokenBucket{limits: limits}
	case FixedWindow:
		return &fixedWindow{limits: limits}
	case SlidingWindow:
		return &slidingWindow{limits: limits}
	default:
		return &slidingLog{limits: limits}
	}
}

// admission is one recorded request, for the bound of guarantee 4.
type admission struct {
	at   int64 // µs
	cost *big.Rat
}

// diffSets are the limit sets of the sequences: rates like 3/s and 7/min,
// bursts above and below the rate, fractional rates, up to three limits.
func diffSets(a Algorithm) [][]dlimit {
	l := newDLimit
	if specs[a].window {
		sets := [][]dlimit{
			{l("3", "1000", "")},
			{l("7", "60000", "7")},
			{l("3", "1000", ""), l("7", "60000", "")},
			{l("5", "250", ""), l("2", "100", "0"), l("20", "5000", "")},
			{l("1", "700", "")},
		}
		if !specs[a].whole {
			sets = append(sets, []dlimit{l("2.5", "1000", ""), l("7.25", "3000", "")}, []dlimit{l("0.3", "100", ""), l("1.1", "1000", "")})
		}
		return sets
	}
	return [][]dlimit{
		{l("3", "1000", "")},
		{l("7", "60000", "10")},
		{l("3", "1000", "5"), l("7", "60000", "7")},
		{l("2.5", "1000", "4"), l("10", "3000", ""), l("1", "500", "2")},
		{l("1000", "1000", "")},
		{l("3", "1000", "1.5")},
		{l("0.3", "100", "0.3"), l("1.1", "1000", "0.7")},
	}
}

// diffCosts are the costs a sequence draws from.
func diffCosts(a Algorithm) []string {
	if specs[a].whole {
		return []string{"0", "1", "1", "1", "1", "2", "3", "1", "8"}
	}
	// 0.1, 0.2, 0.3 and 0.7 are not exact in binary: sums of them must still
	// be exact (guarantee 6)
	return []string{"0", "1", "1", "1", "0.5", "0.25", "2", "1.5", "3", "0.75", "1", "11", "1.25", "0.1", "0.2", "0.3", "0.7", "0.1"}
}

// runDifferential plays one seeded sequence of steps on a fresh key and
// returns the replies and the admissions.
func runDifferential(t *testing.T, f *fakeRedis, a Algorithm, key string, limits []dlimit, seed uint64, steps int) ([][]int64, []admission) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	m := newModel(a, limits)
	costs := diffCosts(a)
	p0, pmax := limits[0].periodUs, int64(0)
	for _, l := range limits {
		p0 = min(p0, l.periodUs)
		pmax = max(pmax, l.periodUs)
	}
	nowUs := f.now.UnixMicro()
	expireAt := int64(0)
	var last []int64
	var replies [][]int64
	var admitted []admission
	for step := range steps {
		var dt int64
		switch r := rng.IntN(100); {
		case r < 25:
		case r < 40:
			dt = 1 + rng.Int64N(999)
		case r < 70:
			dt = 1000 * (1 + rng.Int64N(max(p0/2000, 1)))
		case r < 80:
			dt = rng.Int64N(2 * pmax)
		case r < 88 && last != nil && last[2] > 0:
			dt = last[2] * 1000 // exactly retry_after
		case r < 92 && last != nil && last[2] > 1:
			dt = (last[2] - 1) * 1000 // 1 ms before
		case r < 96 && last != nil && last[3] > 0:
			dt = last[3] * 1000 // exactly reset_after
		default:
			dt = p0
		}
		if dt > 0 {
			f.advance(time.Duration(dt) * time.Microsecond)
			nowUs += dt
		}
		if !m.empty() && nowUs >= expireAt {
			m.clear() // the TTL ran out
		}
		costS := costs[rng.IntN(len(costs))]
		check := rng.IntN(10) == 0
		args := []any{limits[0].limit, limits[0].period, limits[0].burst, costS, ""}
		if check {
			args[4] = "check"
		}
		for _, l := range limits[1:] {
			args = append(args, l.limit, l.period, l.burst)
		}
		got := f.mustEval(a, key, args...)
		cost := ratOf(costS)
		vs, record := m.decide(nowUs, cost)
		allowed, want := combine(vs)
		if !equalInts(got, want[:]) {
			t.Fatalf("%s seed %d step %d (t=%dµs, dt %dµs, cost %s, check %v, limits %v):\n  got  %v\n  want %v",
				a, seed, step, nowUs, dt, costS, check, limitsString(limits), got, want)
		}
		if allowed && cost.Sign() > 0 && !check {
			ttl := usToMs(m.ttlUs(vs))
			record()
			expireAt = nowUs + ttl*1000
			admitted = append(admitted, admission{nowUs, cost})
		}
		wantTTL := int64(-2)
		if !m.empty() {
			wantTTL = (expireAt - nowUs) / 1000
		}
		if ttl := f.rdb.PTTL(t.Context(), key).Val(); ttl != time.Duration(wantTTL)*time.Millisecond && !(wantTTL == -2 && ttl == -2) {
			t.Fatalf("%s seed %d step %d: PTTL %v, want %d ms", a, seed, step, ttl, wantTTL)
		}
		last = got
		replies = append(replies, got)
	}
	return replies, admitted
}

func limitsString(ls []dlimit) string {
	var parts []string
	for _, l := range ls {
		parts = append(parts, fmt.Sprintf("%s/%sms burst %q", l.limit, l.period, l.burst))
	}
	return strings.Join(parts, ", ")
}

// diffStepsFlag plays longer sequences: go test -run Differential -diffsteps 20000.
var diffStepsFlag = flag.Int("diffsteps", 0, "steps per sequence of TestDifferential (default 400, 80 with -race)")

func diffStepCount() int {
	switch {
	case *diffStepsFlag > 0:
		return *diffStepsFlag
	case raceEnabled:
		return 80
	}
	return 400
}

// TestDifferential plays seeded random sequences on every script and its
// reference model. GCRA and the leaky bucket, both continuous buckets, play
// the same sequences and must agree on every decision and every field.
func TestDifferential(t *testing.T) {
	diffSteps := diffStepCount()
	groups := [][]Algorithm{{GCRA, LeakyBucket}, {TokenBucket}, {SlidingWindow}, {FixedWindow}, {SlidingLog}}
	for _, g := range groups {
		var names []string
		for _, a := range g {
			names = append(names, a.String())
		}
		t.Run(strings.Join(names, "+"), func(t *testing.T) {
			t.Parallel()
			for si, limits := range diffSets(g[0]) {
				seed := uint64(1000*int(g[0]) + si)
				var first [][]int64
				for ai, a := range g {
					f := newFakeRedis(t)
					f.advance(time.Duration(seed%997) * time.Microsecond)
					replies, admitted := runDifferential(t, f, a, "diff", limits, seed, diffSteps)
					checkBound(t, a, limits, admitted)
					if len(admitted) < diffSteps/10 {
						t.Errorf("%s set %d: only %d of %d steps admitted: the sequence explores too little", a, si, len(admitted), diffSteps)
					}
					if ai == 0 {
						first = replies
						continue
					}
					for i := range replies {
						if !equalInts(replies[i], first[i]) {
							t.Fatalf("set %d step %d: %s %v, %s %v", si, i, g[0], first[i], a, replies[i])
						}
					}
				}
			}
		})
	}
}

// checkBound checks guarantee 4 of the contract on the admissions of a
// sequence, for every limit.
func checkBound(t *testing.T, a Algorithm, limits []dlimit, adm []admission) {
	t.Helper()
	for li, l := range limits {
		switch a {
		case GCRA, LeakyBucket, TokenBucket:
			// any span from one admission to a later one, in exact integers:
			// every number of the sets is a multiple of 1/100
			c100 := func(r *big.Rat) int64 { return floorRat(mul(r, ri(100))) }
			cap100, lim100, p := c100(l.cap), c100(l.lim), l.periodUs
			costs := make([]int64, len(adm))
			for i, x := range adm {
				costs[i] = c100(x.cost)
			}
			for i := range adm {
				sum := int64(0)
				for j := i; j < len(adm); j++ {
					sum += costs[j]
					span := adm[j].at - adm[i].at
					var over bool
					if a == TokenBucket {
						over = sum > cap100+lim100*(1+span/p)
					} else {
						over = sum*p > cap100*p+lim100*span
					}
					if over {
						t.Fatalf("%s limit #%d: %d/100 units admitted in %d µs, more than guarantee 4 allows", a, li+1, sum, span)
					}
				}
			}
		case SlidingLog:
			for j := range adm {
				sum := ri(0)
				for i := j; i >= 0 && adm[i].at > adm[j].at-l.periodUs; i-- {
					sum = add(sum, adm[i].cost)
				}
				if sum.Cmp(l.lim) > 0 {
					t.Fatalf("%s limit #%d: %s units in the %d µs up to %d", a, li+1, sum.FloatString(0), l.periodUs, adm[j].at)
				}
			}
		case SlidingWindow, FixedWindow:
			// sliding window: per aligned window; fixed window: per window,
			// each opened by the first admission at or after the last one's end
			per := map[int64]*big.Rat{}
			open := int64(-1 << 62)
			for _, x := range adm {
				var w int64
				if a == SlidingWindow {
					ms := x.at / 1000
					w = ms - ms%(l.periodUs/1000)
				} else {
					if x.at >= open+l.periodUs {
						open = x.at
					}
					w = open
				}
				if per[w] == nil {
					per[w] = ri(0)
				}
				per[w] = add(per[w], x.cost)
				if per[w].Cmp(l.lim) > 0 {
					t.Fatalf("%s limit #%d: %s units in the window from %d", a, li+1, per[w].FloatString(2), w)
				}
			}
		}
	}
}
