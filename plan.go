package redisrate

import (
	"context"
	"sync"
	"time"
)

// The plan stage: a Request becomes an op, validated as the scripts would
// validate it (with their words), with its keys prefixed and its script,
// its access (write, read, read anywhere) and its ARGV's mode chosen. A
// call refused here never reaches Redis: its error matches ErrInvalid.

// op is one call to a script as it moves through the stages.
type op struct {
	dec    Decision        // what the observer is told, for the ops of a batch (single calls keep theirs apart)
	ctx    context.Context // the observer's context for this op (batches)
	kind   Kind            // what each attempt does: a request's Kind, but KindAllow for KindWait
	ukey   string          // the key as the caller passed it (a call of several keys: the first)
	key    string          // as sent: prefix + key
	ukeys  []string        // a call of several keys: the caller's keys, limit i guarding ukeys[i]; nil for one key
	keys   []string        // ... and as sent, prefixed (keys[0] == key); nil for one key
	denyID string          // a call of several keys: its identity in the deny cache (denyIdentity)
	cost   int64
	s      *script
	access access // writes, reads on the primary, or reads anywhere (*_RO)
	args   []any

	// limits are the call's limits, limits[i] guarding ukeys[i] with
	// several keys, in an array of o's own (argsKey's and denyKey's form),
	// so that a caller's slice never escapes and a call of several keys
	// allocates none; nlimits of them are used (0 for a Reset). As asked
	// until the plan, then as sent: a calendar limit resolved to its
	// window (planCalendar).
	limits  [maxLimits]Limit
	nlimits int

	sent   time.Time // when it was sent, for the deny cache
	resets uint64    // the deny cache's count of Resets when it was sent
	probe  bool      // the breaker chose this op to start a probe, after its failure stage
	node   *health   // the health of the Redis node it was sent to (healthOf)
	// carried is how many decisions the round trip that decided o carried
	// (Decision.Carried): 1 sent alone, more coalesced (coalesce.go) or
	// pipelined; 0 when none was sent.
	carried int

	res Result
	err error
}

// oneKey is the op of a call of one key under one limit (Allow, AllowN,
// Wait, WaitN).
func oneKey(kind Kind, key string, limit Limit, cost int64) op {
	return op{kind: kind, ukey: key, cost: cost, limits: [maxLimits]Limit{limit}, nlimits: 1}
}

// kindReset is the kind of a Reset's op: a kind of the engine's, past the
// request kinds (Kind.request), that no Request can ask and no Decision
// reports (Decision.Reset does).
const kindReset = KindForce + 1

// lims is o's limits, as asked or, once planned, as sent.
func (o *op) lims() []Limit { return o.limits[:o.nlimits] }

// shape reads r into o, before anything is validated, so that the observer
// sees the call as it was asked: its kind, key or keys, limits and cost (an
// N of 0 that means 1 as 1); a request of no known kind or form gets its
// error here, for plan to return. A request of more than maxLimits limits
// or keys (refused so) keeps its first maxLimits limits.
func (o *op) shape(r *Request) {
	o.kind, o.ukey, o.cost = r.Kind, r.Key, defaultN(*r)
	o.err = requestForm(r)
	switch {
	case len(r.Keys) == 1 && r.Key == "" && len(r.Limits) == 0:
		// One KeyLimit is a one-key call, which runs the one-key script's fast path.
		o.ukey = r.Keys[0].Key
		o.limits[0], o.nlimits = r.Keys[0].Limit, 1
	case len(r.Keys) > 0:
		// The Limiter's own slice: the caller may reuse r.Keys.
		o.ukeys = make([]string, len(r.Keys))
		for i, kl := range r.Keys {
			o.ukeys[i] = kl.Key
		}
		for i := range min(len(r.Keys), maxLimits) {
			o.limits[i] = r.Keys[i].Limit
		}
		o.nlimits = min(len(r.Keys), maxLimits)
		o.ukey = o.ukeys[0]
	default:
		o.nlimits = copy(o.limits[:], r.Limits)
	}
}

// decision is what the observer is told of o, asked as kind, once shaped.
// A Request may carry kindReset's number as its Kind: shape refused it
// (o.err), and it is told as the kind asked, not as a Reset.
func (o *op) decision(kind Kind) Decision {
	if kind == kindReset && o.err == nil {
		return Decision{Reset: true, Key: o.ukey}
	}
	return Decision{Kind: kind, Key: o.ukey, Keys: o.ukeys, Cost: o.cost}
}

// attemptOp is a new op for one attempt of o, as asked of another Limiter
// (the fallback), under the limits o sends: a wait's attempt is an allow.
func (o *op) attemptOp() *op {
	return &op{kind: o.kind, ukey: o.ukey, ukeys: o.ukeys, cost: o.cost, limits: o.limits, nlimits: o.nlimits}
}

// defaultN is r's cost: an N of 0 is 1 for the kinds that take units, so
// that a zero value never means "do not limit".
func defaultN(r Request) int64 {
	switch r.Kind {
	case KindAllow, KindCheck, KindUpTo, KindWait:
		if r.N == 0 {
			return 1
		}
	}
	return r.N
}

// plan validates o, shaped from a request, and picks its script; false
// (with o.err set) when the call is refused before any round trip. It
// leaves o's limits as the call sends them: with a calendar limit
// (Limit.Calendar), their window's (planCalendar), o's keys naming it. The
// ARGV waits for the send: a deny-cache hit needs none.
func (l *Limiter) plan(o *op) bool {
	if o.err == nil {
		o.err = l.planKeys(o)
	}
	if o.err == nil && o.kind != kindReset {
		o.err = l.planCalendar(o)
		if o.err == nil {
			o.err = planCost(o.kind, o.cost)
		}
		if o.err == nil {
			o.err = planNegative(o.kind, o.cost)
		}
		if o.err == nil {
			o.err = validateCall(o.cost, o.lims())
		}
	}
	if o.err != nil {
		return false
	}
	switch {
	case o.kind == kindReset:
		o.s = &resetScript
		return true
	case o.kind.writes():
		o.access = accessWrite
	case l.readOnlyCheck:
		o.access = accessReplica
	default:
		o.access = accessRead
	}
	o.s = &algoScripts[o.limits[0].Algorithm]
	return true
}

// planKeys checks o's keys as the scripts would (each key, then their
// limits' common algorithm; requestForm counted them), and prefixes them.
func (l *Limiter) planKeys(o *op) error {
	if o.ukeys == nil {
		if o.ukey == "" {
			// The scripts take any key; an empty one is almost always an
			// identity that was not found, and would hold every caller
			// without one to one shared limit.
			return invalidf("invalid key '': must not be empty")
		}
		o.key = l.prefix + o.ukey
		return nil
	}
	o.keys = make([]string, len(o.ukeys))
	for i, k := range o.ukeys {
		if k == "" {
			return invalidf("invalid key #%d '': must not be empty", i+1)
		}
		for j := range i {
			if o.ukeys[j] == k { // the same after the prefix, too
				return invalidf("invalid key #%d '%s': must differ from key #%d", i+1, k, j+1)
			}
		}
		o.keys[i] = l.prefix + k
	}
	limits := o.lims()
	for i, lim := range limits[1:] {
		if lim.Algorithm != limits[0].Algorithm {
			return invalidf("invalid algorithm #%d '%s' (key #%d '%s'): must be key #1's, %s: one call runs one algorithm's script",
				i+2, lim.Algorithm, i+2, o.ukeys[i+1], limits[0].Algorithm)
		}
	}
	o.key = o.keys[0]
	if l.deny != nil {
		o.denyID = denyIdentity(o.keys)
	}
	return nil
}

// requestForm refuses a request of no known kind, that does not give
// exactly one of its two forms (Key and Limits, or Keys), or that gives
// more limits or keys than one call takes.
func requestForm(r *Request) error {
	switch {
	case !r.Kind.request():
		// kindReset too: a Decide that deleted a key's state would answer
		// a Result that reads "denied"; Limiter.Reset resets.
		return invalidf("invalid kind %d: must be a request's kind, KindAllow to KindForce (Limiter.Reset resets a key)", int(r.Kind))
	case r.Lease != 0:
		return invalidf("invalid request: a Lease of %v given to a decision: a lease is a reservation; ask Limiter.Reserve", r.Lease)
	case len(r.Keys) > 0 && (r.Key != "" || len(r.Limits) > 0):
		return invalidf("invalid request: both Keys and Key/Limits given: give Key and Limits for one key, or Keys for several")
	case len(r.Keys) == 0 && len(r.Limits) == 0:
		return invalidf("invalid request: neither Limits nor Keys given: give Key and Limits for one key, or Keys for several")
	case len(r.Keys) > maxLimits:
		return invalidf("invalid numkeys '%d': must be at most %d keys, one limit each", len(r.Keys), maxLimits)
	case len(r.Limits) > maxLimits:
		return invalidf("too many limits (%d): must be at most %d", len(r.Limits), maxLimits)
	}
	return nil
}

// planCost checks a cost for its kind: a peek takes nothing, the others
// move at least one unit (a refund or a penalty of 0 is a mistake, and a
// cost of 0 is never "do not limit").
func planCost(kind Kind, cost int64) error {
	switch {
	case kind == KindPeek && cost != 0:
		return invalidf("invalid cost '%d': a peek takes nothing; leave N 0", cost)
	case kind != KindPeek && cost == 0:
		return invalidf("invalid cost '0': must be at least 1 to take units; ask with KindPeek to read the state without taking any")
	}
	return nil
}

// planNegative refuses a negative cost of a call's kind in its own words:
// the scripts' (and Args's) say "from 0", which is a peek's cost, and
// every other kind moves at least one unit.
func planNegative(kind Kind, cost int64) error {
	if kind != KindPeek && cost < 0 {
		return invalidf("invalid cost '%d': must be a whole number from 1 to 10^15 for kind %s", cost, kind)
	}
	return nil
}

// request reports whether k is a kind a Request may ask: KindAllow to
// KindForce, not the engine's kindReset.
func (k Kind) request() bool { return k <= KindForce }

// writes reports whether a decision of kind k records anything.
func (k Kind) writes() bool {
	switch k {
	case KindAllow, KindWait, KindUpTo, KindRefund, KindForce:
		return true
	}
	return false
}

// mode is ARGV[5] for kind k (CONTRACT.md, "Modes"); a peek is an allow of
// cost 0.
func (k Kind) mode() string {
	switch k {
	case KindCheck:
		return "check"
	case KindUpTo:
		return "upto"
	case KindRefund:
		return "refund"
	case KindForce:
		return "force"
	}
	return ""
}

// Args returns the ARGV the script of limits[0].Algorithm takes for a
// request of kind and cost units (KindPeek: a cost of 0), after
// validating them exactly as the script would: it refuses what the script
// refuses, with the script's words (without "ERR ", matching ErrInvalid),
// in the script's order (the first limit, the cost, then the further
// limits). It is how other clients of the scripts can build calls that
// match this package's. A call of several keys takes the same ARGV, limit
// i for KEYS[i].
//
// A calendar limit (Limit.Calendar) gets the ARGV of the window that holds
// now: fixed_window with period_ms the window's length plus an hour, for
// the key with the window's name appended; another window needs its own.
//
// Only the arguments the call needs are returned: a default (burst equal to
// the rate, cost 1, no mode) is left out at the end and written "" in the
// middle. Numbers are int64, "" and the mode strings, as go-redis takes them.
func Args(kind Kind, cost int64, limits ...Limit) ([]any, error) {
	if !kind.request() {
		return nil, invalidf("invalid kind %s: it has no ARGV of its own", kind)
	}
	if err := planCost(kind, cost); err != nil {
		return nil, err
	}
	if hasCalendar(limits) {
		now := time.Now()
		limits = append([]Limit(nil), limits...)
		for i, lim := range limits {
			if lim.Calendar != "" {
				var err error
				if limits[i], _, err = lim.resolveCalendar(now); err != nil {
					return nil, err
				}
			}
		}
	}
	return buildArgs(cost, kind.mode(), limits)
}

// argv returns o's ARGV, built once (Wait sends it again and again) and
// only when the op is sent: a deny-cache hit builds nothing.
func (o *op) argv() []any {
	if o.args == nil && o.kind != kindReset {
		o.args = cachedArgs(o.cost, o.kind.mode(), o.lims())
	}
	return o.args
}

// argsKey is everything an ARGV depends on, comparable so that a map
// lookup needs no allocation.
type argsKey struct {
	cost   int64
	mode   string
	count  int
	limits [maxLimits]Limit
}

// argsCache remembers the ARGV of recent calls: a service calls with a
// handful of limits, and boxing each number in an interface was a good part
// of the client's allocations per decision. The cached slices are only read
// (go-redis copies them into its command), never handed to callers. Past
// maxCachedArgs entries it starts over: a caller that never repeats itself
// costs a little memory, never a leak.
var argsCache = struct {
	sync.RWMutex
	m map[argsKey][]any
}{m: make(map[argsKey][]any)}

const maxCachedArgs = 1024

// cachedArgs is formatArgs through argsCache, for validated calls.
func cachedArgs(cost int64, mode string, limits []Limit) []any {
	k := argsKey{cost: cost, mode: mode, count: len(limits)}
	copy(k.limits[:], limits)
	for i := range limits {
		k.limits[i].Name = "" // not arguments: named limits share an ARGV
		k.limits[i].Calendar, k.limits[i].calEnd = "", 0
	}
	argsCache.RLock()
	args, ok := argsCache.m[k]
	argsCache.RUnlock()
	if ok {
		return args
	}
	args = formatArgs(cost, mode, limits)
	argsCache.Lock()
	if len(argsCache.m) >= maxCachedArgs {
		clear(argsCache.m)
	}
	argsCache.m[k] = args
	argsCache.Unlock()
	return args
}

func buildArgs(cost int64, mode string, limits []Limit) ([]any, error) {
	if err := validateCall(cost, limits); err != nil {
		return nil, err
	}
	return formatArgs(cost, mode, limits), nil
}

// validateCall checks a call's cost and limits as the scripts do, in their
// order.
func validateCall(cost int64, limits []Limit) error {
	if len(limits) == 0 {
		return invalidf("invalid call: no limit given; pass at least one Limit")
	}
	if len(limits) > maxLimits {
		return invalidf("too many limits (%d): must be at most %d", len(limits), maxLimits)
	}
	algo := limits[0].Algorithm
	for i, lim := range limits {
		if i == 1 {
			// The scripts check the cost and mode after the first triple.
			if cost < 0 || cost > maxNumber {
				return invalidf("invalid cost '%d': must be a whole number from 0 to 10^15", cost)
			}
		}
		if lim.Algorithm != algo {
			return invalidf("invalid algorithm #%d '%s': must be the first limit's, %s; one key holds one algorithm's state", i+1, lim.Algorithm, algo)
		}
		if err := lim.validate(i); err != nil {
			return err
		}
	}
	if len(limits) == 1 && (cost < 0 || cost > maxNumber) {
		return invalidf("invalid cost '%d': must be a whole number from 0 to 10^15", cost)
	}
	return nil
}

// formatArgs writes a validated call's ARGV, leaving out the defaults.
func formatArgs(cost int64, mode string, limits []Limit) []any {
	args := make([]any, 0, 5+3*(len(limits)-1))
	for i, lim := range limits {
		var burst any = ""
		if lim.Burst != 0 && lim.Burst != lim.Rate {
			burst = lim.Burst
		}
		args = append(args, lim.Rate, int64(lim.Period/time.Millisecond), burst)
		if i == 0 {
			var c any = ""
			if cost != 1 {
				c = cost
			}
			args = append(args, c, mode)
		}
	}
	if len(limits) == 1 { // leave out the defaults at the end
		for len(args) > 2 && args[len(args)-1] == "" {
			args = args[:len(args)-1]
		}
	}
	return args
}

// planCalendar resolves the calendar limits of o, planned with its keys,
// for the window that holds now (or the instant a reservation pinned), and
// appends each window's name to its key. A call of one key may hold
// several limits; their windows must then be one: the key names it. A
// limit of no calendar that shares a calendar key is sent as it is, marked
// with the window's end: its state goes with the key. o's limits become
// those the call sends; they are left as they are when none is a calendar
// one.
func (l *Limiter) planCalendar(o *op) error {
	limits := o.lims()
	if !hasCalendar(limits) {
		return nil
	}
	now := l.clock.Now()
	if o.keys == nil {
		var cal string
		var name string
		var end int64
		for i, lim := range limits {
			if lim.Calendar == "" {
				continue
			}
			if cal != "" && lim.Calendar != cal {
				return invalidf("invalid calendar #%d %q: must be limit #1's %q: one key holds one calendar window; give each calendar its own key (Request.Keys)", i+1, lim.Calendar, cal)
			}
			r, n, err := lim.resolveCalendar(now)
			if err != nil {
				return err
			}
			if cal == "" {
				cal, name, end = lim.Calendar, n, r.calEnd
			}
			limits[i] = r
		}
		for i := range limits {
			limits[i].calEnd = end
		}
		o.key += calendarKeySuffix(name)
		return nil
	}
	for i, lim := range limits {
		if lim.Calendar == "" {
			continue
		}
		r, n, err := lim.resolveCalendar(now)
		if err != nil {
			return err
		}
		limits[i] = r
		o.keys[i] += calendarKeySuffix(n)
	}
	o.key = o.keys[0]
	if l.deny != nil {
		o.denyID = denyIdentity(o.keys)
	}
	return nil
}

// pinCalendar fixes the calendar windows of r's limits (the reservation's
// own copies) to the windows that hold now, so that a reservation settles
// on the keys it took from, even after its window ended.
func (l *Limiter) pinCalendar(r *Request) {
	if l == nil || !hasCalendar(r.Limits) && !hasCalendarKey(r.Keys) {
		return
	}
	at := orReal(l.clock).Now().UnixMilli()
	for i := range r.Limits {
		if r.Limits[i].Calendar != "" {
			r.Limits[i].calAt = at
		}
	}
	for i := range r.Keys {
		if r.Keys[i].Limit.Calendar != "" {
			r.Keys[i].Limit.calAt = at
		}
	}
}
