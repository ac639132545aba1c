// Package contracttest holds the contract's tables (../shared/CONTRACT.md) as
// data, and runs them against any Redis: the fake-clock miniredis of the unit
// tests and the real Redis of integration_test/, so that the scripts are shown
// to answer the same on gopher-lua and on Redis's own Lua.
//
// Every call goes through the raw scripts of redisrate.Scripts with EVALSHA
// (EVAL on NOSCRIPT), exactly as a client in any other language would call
// them, never through the Go Limiter.
package contracttest

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redisrate/redisrate"
)

// Engine is a Redis server to run the tables on.
type Engine struct {
	// Client talks to the server.
	Client *redis.Client
	// Advance moves the server's clock forward by d (and lets TTLs run out
	// accordingly). It is nil on a real server, whose clock cannot be moved:
	// cases that need time travel are then skipped, and durations in replies
	// are compared with a tolerance for the wall time that passed.
	Advance func(d time.Duration)
	// NoReadOnlyScripts skips the EVALSHA_RO cases, for a server that
	// cannot run the scripts read-only (miniredis counts TIME as a write;
	// Redis 7 does not).
	NoReadOnlyScripts bool
}

// algo is what the tables need to know of one script.
type algo struct {
	name   string
	whole  bool // limit, burst and cost are whole numbers
	window bool // burst is only absent, 0 or the limit
	zset   bool // the state is a sorted set, not a string
}

var algos = []algo{
	{name: "gcra"},
	{name: "token_bucket"},
	{name: "leaky_bucket"},
	{name: "sliding_window", window: true},
	{name: "fixed_window", whole: true, window: true},
	{name: "sliding_log", whole: true, window: true, zset: true},
}

// tcase is one row of the tables: a name, whether it moves the clock, and
// what it does with a fresh set of keys.
type tcase struct {
	name   string
	travel bool
	run    func(h *H)
}

// Run runs every table on e, each case as a subtest named
// "<script>/<case>".
func Run(t *testing.T, e Engine) {
	t.Helper()
	if e.Client == nil {
		t.Fatal("contracttest: Engine.Client is nil")
	}
	scripts := map[string]redisrate.Script{}
	for _, s := range redisrate.Scripts() {
		scripts[s.Name] = s
	}
	prefix := fmt.Sprintf("contracttest:%d:", time.Now().UnixNano())
	for _, a := range algos {
		s, ok := scripts[a.name]
		if !ok {
			t.Fatalf("redisrate.Scripts() has no %s script", a.name)
		}
		t.Run(a.name, func(t *testing.T) {
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					if c.travel && e.Advance == nil {
						t.Skip("needs time travel (Engine.Advance): a real server's clock cannot be moved")
					}
					h := newH(t, e, a, s, scripts, prefix+a.name+":"+c.name+":")
					c.run(h)
				})
			}
		})
	}
}

// H runs one case: it calls the script under test, remembers the keys it
// used (and deletes them at the end) and compares replies with the
// tolerance a real clock needs.
type H struct {
	t       *testing.T
	e       Engine
	a       algo
	s       redisrate.Script
	scripts map[string]redisrate.Script
	ctx     context.Context
	prefix  string
	start   time.Time // wall clock when the case started
	nowUs   int64     // the server's clock when the case started, in µs
	keys    []string
	// symmetric: a duration may also exceed its want by the slack, when want
	// comes from other calls at other (real) times rather than from the start
	symmetric bool
}

func newH(t *testing.T, e Engine, a algo, s redisrate.Script, scripts map[string]redisrate.Script, prefix string) *H {
	h := &H{t: t, e: e, a: a, s: s, scripts: scripts, ctx: context.Background(), prefix: prefix}
	t.Cleanup(func() {
		if len(h.keys) > 0 {
			_ = e.Client.Del(context.Background(), h.keys...).Err()
		}
	})
	h.start = time.Now()
	tm, err := e.Client.Time(h.ctx).Result()
	if err != nil {
		t.Fatalf("TIME: %v", err)
	}
	h.nowUs = tm.UnixMicro()
	return h
}

// key returns a fresh key for this case.
func (h *H) key(name string) string {
	k := h.prefix + name
	h.keys = append(h.keys, k)
	return k
}

// advance moves the server's clock (only in travel cases).
func (h *H) advance(d time.Duration) {
	h.t.Helper()
	h.e.Advance(d)
	h.nowUs += d.Microseconds()
}

// slack is how many ms a duration in a reply may be short of the value
// computed at the start of the case: none on a fake clock, the wall time
// that passed (plus 1 ms of rounding) on a real one.
func (h *H) slack() int64 {
	if h.e.Advance != nil {
		return 0
	}
	return time.Since(h.start).Milliseconds() + 2
}

// evalScript calls s on key with ARGV args: EVALSHA, then EVAL on NOSCRIPT.
func (h *H) evalScript(s redisrate.Script, key string, args ...string) ([]int64, error) {
	argv := make([]any, len(args))
	for i, a := range args {
		argv[i] = a
	}
	v, err := h.e.Client.EvalSha(h.ctx, s.SHA1, []string{key}, argv...).Result()
	if err != nil && strings.Contains(err.Error(), "NOSCRIPT") {
		v, err = h.e.Client.Eval(h.ctx, s.Source, []string{key}, argv...).Result()
	}
	if err != nil {
		return nil, err
	}
	return toInts(v)
}

func toInts(v any) ([]int64, error) {
	arr, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("reply is %T %v, not an array", v, v)
	}
	out := make([]int64, len(arr))
	for i, x := range arr {
		n, ok := x.(int64)
		if !ok {
			return nil, fmt.Errorf("reply field %d is %T %v, not an integer", i+1, x, x)
		}
		out[i] = n
	}
	return out, nil
}

// call runs the script under test.
func (h *H) call(key string, args ...string) ([]int64, error) {
	return h.evalScript(h.s, key, args...)
}

// must runs the script under test and fails the case on an error.
func (h *H) must(key string, args ...string) []int64 {
	h.t.Helper()
	r, err := h.call(key, args...)
	if err != nil {
		h.t.Fatalf("%s %v: %v", h.a.name, args, err)
	}
	return r
}

// reply is the contract's six fields.
type reply [6]int64

func (r reply) String() string {
	return fmt.Sprintf("{allowed %d remaining %d retry_after %d reset_after %d limit %d binding %d}", r[0], r[1], r[2], r[3], r[4], r[5])
}

// expect runs the script and compares the reply with want.
func (h *H) expect(what string, key string, args []string, want reply) []int64 {
	h.t.Helper()
	got, err := h.call(key, args...)
	if err != nil {
		h.t.Errorf("%s: %s %q: error %v, want %v", what, h.a.name, args, err, want)
		return nil
	}
	h.check(what+fmt.Sprintf(" (args %q)", args), got, want)
	return got
}

// check compares a reply with want: exactly on a fake clock; on a real one,
// retry_after and reset_after may be short by the wall time that passed.
func (h *H) check(what string, got []int64, want reply) {
	h.t.Helper()
	if len(got) < 6 {
		h.t.Errorf("%s: reply %v has %d fields, want 6", what, got, len(got))
		return
	}
	if len(got) != 6 {
		h.t.Errorf("%s: reply %v has %d fields; contract v1 has 6", what, got, len(got))
	}
	ok := true
	for i := range 6 {
		if i == 2 && want[i] == -2 {
			if got[i] <= 0 {
				ok = false
			}
			continue
		}
		if (i == 2 || i == 3) && want[i] > 0 {
			hi := want[i]
			if h.symmetric {
				hi += h.slack()
			}
			if got[i] > hi || got[i] < want[i]-h.slack() {
				ok = false
			}
			continue
		}
		if got[i] != want[i] {
			ok = false
		}
	}
	if !ok {
		var g reply
		copy(g[:], got)
		h.t.Errorf("%s: %s\n  got  %v\n  want %v", what, h.a.name, g, want)
	}
}

// expectErr runs the script and wants an error reply starting with prefix.
// It returns the error text ("" when there was none).
func (h *H) expectErr(what, key string, args []string, prefix string) string {
	h.t.Helper()
	got, err := h.call(key, args...)
	if err == nil {
		h.t.Errorf("%s: %s %q: reply %v, want error %q...", what, h.a.name, args, got, prefix)
		return ""
	}
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		h.t.Errorf("%s: %s %q: %v is not an error reply", what, h.a.name, args, err)
		return ""
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, "ERR ") || !strings.HasPrefix(msg, prefix) {
		h.t.Errorf("%s: %s %q:\n  got error  %q\n  want prefix %q", what, h.a.name, args, msg, prefix)
	}
	return msg
}

// snap is what a key holds: its type, its DUMP and its PTTL.
type snap struct {
	typ, dump string
	pttl      int64
}

func (h *H) snap(key string) snap {
	h.t.Helper()
	typ, err := h.e.Client.Type(h.ctx, key).Result()
	if err != nil {
		h.t.Fatalf("TYPE %s: %v", key, err)
	}
	// DUMP where the server has it for the type (miniredis: strings only),
	// and the contents read out by type, so both engines compare the same.
	dump, err := h.e.Client.Dump(h.ctx, key).Result()
	if err != nil {
		dump, err = "", nil
	}
	var val any
	c := h.e.Client
	switch typ {
	case "string":
		val, err = c.Get(h.ctx, key).Result()
	case "list":
		val, err = c.LRange(h.ctx, key, 0, -1).Result()
	case "hash":
		var m map[string]string
		m, err = c.HGetAll(h.ctx, key).Result()
		val = sortedPairs(m)
	case "set":
		var m []string
		m, err = c.SMembers(h.ctx, key).Result()
		sort.Strings(m)
		val = m
	case "zset":
		val, err = c.ZRangeWithScores(h.ctx, key, 0, -1).Result()
	}
	if err != nil {
		h.t.Fatalf("reading %s %s: %v", typ, key, err)
	}
	return snap{typ: typ, dump: fmt.Sprintf("%q %v", dump, val), pttl: h.pttl(key)}
}

func sortedPairs(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

func (h *H) pttl(key string) int64 {
	h.t.Helper()
	n, err := h.e.Client.Do(h.ctx, "PTTL", key).Int64()
	if err != nil {
		h.t.Fatalf("PTTL %s: %v", key, err)
	}
	return n
}

// unchanged fails the case when key no longer holds what before recorded
// (its TTL may have run down by the wall time that passed on a real server).
func (h *H) unchanged(what, key string, before snap) {
	h.t.Helper()
	now := h.snap(key)
	if now.typ != before.typ || now.dump != before.dump {
		h.t.Errorf("%s: key %s changed: type %s -> %s, DUMP %q -> %q", what, key, before.typ, now.typ, before.dump, now.dump)
	}
	if before.pttl < 0 || h.e.Advance != nil {
		if now.pttl != before.pttl {
			h.t.Errorf("%s: key %s PTTL changed: %d -> %d", what, key, before.pttl, now.pttl)
		}
	} else if now.pttl > before.pttl || now.pttl < before.pttl-h.slack() {
		h.t.Errorf("%s: key %s PTTL changed: %d -> %d", what, key, before.pttl, now.pttl)
	}
}

// expectTTL wants key to expire in want ms (less the wall time that passed
// on a real server); want -2 means the key must not exist.
func (h *H) expectTTL(what, key string, want int64) {
	h.t.Helper()
	got := h.pttl(key)
	if want <= 0 {
		if got != want {
			h.t.Errorf("%s: PTTL %s = %d, want %d", what, key, got, want)
		}
		return
	}
	if got > want || got < want-h.slack() {
		h.t.Errorf("%s: PTTL %s = %d, want %d (the reply's reset_after, rounded up)", what, key, got, want)
	}
}

// absent fails the case when key exists.
func (h *H) absent(what, key string) {
	h.t.Helper()
	if n := h.e.Client.Exists(h.ctx, key).Val(); n != 0 {
		h.t.Errorf("%s: key %s exists (%s), want nothing written", what, key, h.snap(key).typ)
	}
}

func ceilDiv(n, d int64) int64 {
	if n <= 0 {
		return 0
	}
	return (n + d - 1) / d
}

// resetAfter is the reply's reset_after_ms, seen from the start of the
// case, for a fresh key of limit num/den units per p ms from which n whole
// units were taken at the start of the case.
func (h *H) resetAfter(num, den, p, n int64) int64 {
	return h.resetAfterQ(num, den, p, n, 1)
}

// resetAfterQ is resetAfter for nNum/nDen units taken.
func (h *H) resetAfterQ(num, den, p, nNum, nDen int64) int64 {
	if nNum == 0 {
		return 0
	}
	switch h.a.name {
	case "gcra", "leaky_bucket":
		return ceilDiv(nNum*p*den, nDen*num) // n units drain at num/den per p ms
	case "token_bucket":
		return ceilDiv(nNum*den, nDen*num) * p // whole refills of num/den units
	case "sliding_window":
		return h.swEnd(p, 2)
	default:
		return p
	}
}

// retryAfter is the reply's retry_after_ms for c more units after n were
// taken, at the start of the case (n + c > limit, c <= limit).
func (h *H) retryAfter(num, den, p, n, c int64) int64 {
	switch h.a.name {
	case "gcra", "leaky_bucket":
		return ceilDiv((n*den+c*den-num)*p, num)
	case "token_bucket":
		return ceilDiv(n*den+c*den-num, num) * p
	case "sliding_window":
		// In the next window this one weighs (p-into)/p: the first whole ms
		// into it where n*(p-into)/p + c <= limit.
		nowMs := h.nowUs / 1000
		start := nowMs - nowMs%p
		into := p - ((num-c*den)*p)/(n*den)
		target := start + p + into
		return ceilDiv(target*1000-h.nowUs, 1000)
	default:
		return p
	}
}

// swEnd is the time, in ms from the start of the case, to the end of the
// k-th aligned window of p ms counted from the current one (k=1: its end).
func (h *H) swEnd(p, k int64) int64 {
	nowMs := h.nowUs / 1000
	start := nowMs - nowMs%p
	return ceilDiv((start+k*p)*1000-h.nowUs, 1000)
}

const hour = "3600000"

func args(a ...string) []string { return a }

var cases = []tcase{
	{name: "first call", run: func(h *H) {
		k := h.key("k")
		r := h.resetAfter(10, 1, 3600000, 1)
		h.expect("first call", k, args("10", hour), reply{1, 9, 0, r, 10, 1})
		h.expectTTL("after the first call", k, r)
	}},
	{name: "burst exhausted", run: func(h *H) {
		k := h.key("k")
		for i := int64(1); i <= 10; i++ {
			r := h.resetAfter(10, 1, 3600000, i)
			h.expect(fmt.Sprintf("call %d", i), k, args("10", hour), reply{1, 10 - i, 0, r, 10, 1})
			h.expectTTL(fmt.Sprintf("after call %d", i), k, r)
		}
		before := h.snap(k)
		h.expect("call 11", k, args("10", hour), reply{0, 0, h.retryAfter(10, 1, 3600000, 10, 1), h.resetAfter(10, 1, 3600000, 10), 10, 1})
		h.unchanged("a denial", k, before)
	}},
	{name: "cost over capacity", run: func(h *H) {
		k := h.key("k")
		h.expect("cost 11 on a fresh key", k, args("10", hour, "", "11"), reply{0, 10, -1, 0, 10, 1})
		h.expect("check cost 11 on a fresh key", k, args("10", hour, "", "11", "check"), reply{0, 10, -1, 0, 10, 1})
		h.absent("cost over capacity", k)
		r := h.resetAfter(10, 1, 3600000, 1)
		h.expect("cost 1", k, args("10", hour), reply{1, 9, 0, r, 10, 1})
		before := h.snap(k)
		h.expect("cost 11 after 1", k, args("10", hour, "", "11"), reply{0, 9, -1, r, 10, 1})
		h.expect("cost 1000000 after 1", k, args("10", hour, "", "1000000"), reply{0, 9, -1, r, 10, 1})
		h.unchanged("cost over capacity", k, before)
		h.expect("cost 10 (the capacity) on a fresh key", h.key("full"), args("10", hour, "", "10"), reply{1, 0, 0, h.resetAfter(10, 1, 3600000, 10), 10, 1})
	}},
	{name: "cost 0 check and denials write nothing", run: func(h *H) {
		k := h.key("k")
		const p = 3600000
		h.expect("cost 0 on a fresh key", k, args("10", hour, "", "0"), reply{1, 10, 0, 0, 10, 1})
		h.expect("check on a fresh key", k, args("10", hour, "", "1", "check"), reply{1, 9, 0, h.resetAfter(10, 1, p, 1), 10, 1})
		h.expect("check cost 0 on a fresh key", k, args("10", hour, "0", "0", "check"), reply{1, 10, 0, 0, 10, 1})
		h.absent("cost 0 and check on a fresh key", k)
		h.expect("cost 3", k, args("10", hour, "", "3"), reply{1, 7, 0, h.resetAfter(10, 1, p, 3), 10, 1})
		before := h.snap(k)
		h.expect("cost 0", k, args("10", hour, "", "0"), reply{1, 7, 0, h.resetAfter(10, 1, p, 3), 10, 1})
		h.expect("check cost 2", k, args("10", hour, "", "2", "check"), reply{1, 5, 0, h.resetAfter(10, 1, p, 5), 10, 1})
		deny := reply{0, 7, h.retryAfter(10, 1, p, 3, 8), h.resetAfter(10, 1, p, 3), 10, 1}
		h.expect("check cost 8", k, args("10", hour, "", "8", "check"), deny)
		h.expect("cost 8 (denied)", k, args("10", hour, "", "8"), deny)
		h.expect("cost 0 check", k, args("10", hour, "", "0", "check"), reply{1, 7, 0, h.resetAfter(10, 1, p, 3), 10, 1})
		h.unchanged("cost 0, check and a denial", k, before)
		h.expect("cost 2 after its check", k, args("10", hour, "", "2"), reply{1, 5, 0, h.resetAfter(10, 1, p, 5), 10, 1})
	}},
	{name: "fractional cost", run: func(h *H) {
		k := h.key("k")
		if h.a.whole {
			for _, c := range []string{"0.5", "1.5", "2.5e-1"} {
				h.expectErr("fractional cost", k, args("10", hour, "", c), "ERR invalid cost '"+c+"': must be a whole number")
			}
			h.absent("fractional cost", k)
			return
		}
		// 2.5 + 2.5 + 5 = 10 exactly: the capacity, with nothing lost to rounding.
		h.expect("cost 2.5", k, args("10", hour, "", "2.5"), reply{1, 7, 0, h.resetAfterQ(10, 1, 3600000, 5, 2), 10, 1})
		h.expect("cost 2.5 again", k, args("10", hour, "", "2.5"), reply{1, 5, 0, h.resetAfter(10, 1, 3600000, 5), 10, 1})
		h.expect("cost 5", k, args("10", hour, "", "5"), reply{1, 0, 0, h.resetAfter(10, 1, 3600000, 10), 10, 1})
		h.expect("cost 0.001 more", k, args("10", hour, "", "0.001", "check"), reply{0, 0, -2, h.resetAfter(10, 1, 3600000, 10), 10, 1}.retryUnknown())
	}},
	{name: "several limits all or nothing", run: func(h *H) {
		k := h.key("k")
		const p = 3600000
		two := args("10", hour, "", "1", "", "3", hour, "")
		for i := int64(1); i <= 3; i++ {
			r := h.expect(fmt.Sprintf("call %d", i), k, two, reply{1, 3 - i, 0, h.resetAfter(3, 1, p, i), 3, 2})
			_ = r
			h.expectTTL(fmt.Sprintf("after call %d", i), k, max(h.resetAfter(3, 1, p, i), h.resetAfter(10, 1, p, i)))
		}
		before := h.snap(k)
		h.expect("call 4, denied by limit #2", k, two, reply{0, 0, h.retryAfter(3, 1, p, 3, 1), h.resetAfter(3, 1, p, 3), 3, 2})
		five := append(args("10", hour, "", "5"), two[4:]...)
		h.expect("cost 5, never under limit #2", k, five, reply{0, 0, -1, h.resetAfter(3, 1, p, 3), 3, 2})
		h.unchanged("denials by limit #2", k, before)
		// limit #1 holds exactly the 3 admitted units: nothing of the denials
		h.expect("limit #1 alone", k, args("10", hour, "", "0"), reply{1, 7, 0, h.resetAfter(10, 1, p, 3), 10, 1})
		h.unchanged("cost 0 with limit #1 alone", k, before)
		// eight limits are allowed
		eight := args("10", hour, "", "1", "")
		for i := 2; i <= 8; i++ {
			eight = append(eight, fmt.Sprint(10+i), hour, "")
		}
		h.expect("eight limits", h.key("eight"), eight, reply{1, 9, 0, h.resetAfter(10, 1, p, 1), 10, 1})
	}},
	{name: "binding on admission", run: func(h *H) {
		const p = 3600000
		tie := args("10", hour, "", "1", "", "10", hour, "")
		h.expect("equal limits: the earlier binds", h.key("tie"), tie, reply{1, 9, 0, h.resetAfter(10, 1, p, 1), 10, 1})
		if h.a.whole {
			h.expect("fewer left: #2 binds", h.key("fewer2"), args("10", hour, "", "1", "", "9", hour, ""), reply{1, 8, 0, h.resetAfter(9, 1, p, 1), 9, 2})
			h.expect("fewer left: #1 binds", h.key("fewer1"), args("9", hour, "", "1", "", "10", hour, ""), reply{1, 8, 0, h.resetAfter(9, 1, p, 1), 9, 1})
			return
		}
		// 8.5 and 8.2 left both show as 8: the exact amounts decide.
		h.expect("exact amounts: #2 binds", h.key("exact2"), args("9.5", hour, "", "1", "", "9.2", hour, ""), reply{1, 8, 0, h.resetAfter(92, 10, p, 1), 9, 2})
		h.expect("exact amounts: #1 binds", h.key("exact1"), args("9.2", hour, "", "1", "", "9.5", hour, ""), reply{1, 8, 0, h.resetAfter(92, 10, p, 1), 9, 1})
	}},
	{name: "binding on denial", run: func(h *H) {
		const p = 3600000
		ab := args("3", hour, "", "1", "", "3", "7200000", "")
		ba := args("3", "7200000", "", "1", "", "3", hour, "")
		for _, c := range []struct {
			name    string
			args    []string
			binding int64
		}{{"longest retry is #2", ab, 2}, {"longest retry is #1", ba, 1}} {
			k := h.key(c.name)
			for range 3 {
				h.must(k, c.args...)
			}
			h.expect(c.name, k, c.args, reply{0, 0, h.retryAfter(3, 1, 2*p, 3, 1), h.resetAfter(3, 1, 2*p, 3), 3, c.binding})
		}
		tie := args("3", hour, "", "1", "", "3", hour, "")
		k := h.key("tie")
		for range 3 {
			h.must(k, tie...)
		}
		h.expect("equal retry: the earlier binds", k, tie, reply{0, 0, h.retryAfter(3, 1, p, 3, 1), h.resetAfter(3, 1, p, 3), 3, 1})

		// limit 3 denies with a wait, limit 2 never admits cost 3: never binds
		k = h.key("never2")
		h.must(k, "3", hour, "", "1", "", "2", hour, "")
		h.expect("never beats a wait (#2)", k, args("3", hour, "", "3", "", "2", hour, ""), reply{0, 1, -1, h.resetAfter(2, 1, p, 1), 2, 2})
		k = h.key("never1")
		h.must(k, "2", hour, "", "1", "", "3", hour, "")
		h.expect("never beats a wait (#1)", k, args("2", hour, "", "3", "", "3", hour, ""), reply{0, 1, -1, h.resetAfter(2, 1, p, 1), 2, 1})
		h.expect("never twice: the earlier binds", h.key("nevers"), args("2", hour, "", "3", "", "1", hour, ""), reply{0, 2, -1, 0, 2, 1})
	}},
	{name: "check through EVALSHA_RO", run: func(h *H) {
		if h.e.NoReadOnlyScripts {
			h.t.Skip("the server cannot run the scripts with EVALSHA_RO (Engine.NoReadOnlyScripts)")
		}
		if err := h.e.Client.ScriptLoad(h.ctx, h.s.Source).Err(); err != nil {
			h.t.Fatalf("SCRIPT LOAD: %v", err)
		}
		ro := func(key string, args ...string) []int64 {
			h.t.Helper()
			argv := make([]any, len(args))
			for i, a := range args {
				argv[i] = a
			}
			v, err := h.e.Client.EvalShaRO(h.ctx, h.s.SHA1, []string{key}, argv...).Result()
			if err != nil {
				h.t.Fatalf("EVALSHA_RO %q: %v", args, err)
			}
			r, err := toInts(v)
			if err != nil {
				h.t.Fatal(err)
			}
			return r
		}
		const p = 3600000
		k := h.key("k")
		h.check("EVALSHA_RO check on a fresh key", ro(k, "10", hour, "", "1", "check"), reply{1, 9, 0, h.resetAfter(10, 1, p, 1), 10, 1})
		h.check("EVALSHA_RO cost 0 on a fresh key", ro(k, "10", hour, "", "0"), reply{1, 10, 0, 0, 10, 1})
		h.absent("EVALSHA_RO", k)
		h.must(k, "10", hour, "", "3")
		before := h.snap(k)
		h.check("EVALSHA_RO check cost 2", ro(k, "10", hour, "", "2", "check"), reply{1, 5, 0, h.resetAfter(10, 1, p, 5), 10, 1})
		h.check("EVALSHA_RO check cost 8", ro(k, "10", hour, "", "8", "check"), reply{0, 7, h.retryAfter(10, 1, p, 3, 8), h.resetAfter(10, 1, p, 3), 10, 1})
		h.unchanged("EVALSHA_RO", k, before)
		k2 := h.key("two")
		h.check("EVALSHA_RO check, two limits", ro(k2, "10", hour, "", "1", "check", "5", hour, ""), reply{1, 4, 0, h.resetAfter(5, 1, p, 1), 5, 2})
		h.absent("EVALSHA_RO, two limits", k2)
	}},
	{name: "bad arguments", run: runBadArgs},
	{name: "empty optional arguments mean defaults", run: func(h *H) {
		groups := [][][]string{
			{args("10", hour), args("10", hour, ""), args("10", hour, "", ""), args("10", hour, "", "", ""), args("10", hour, "0", "1", ""), args("10", hour, "10")},
			{args("10", hour, "", "", "", "5", hour, "5"), args("10", hour, "", "", "", "5", hour, ""), args("10", hour, "", "", "", "5", hour, "0")},
		}
		if !h.a.window {
			groups = append(groups, [][]string{args("10", hour, "20", "", "", "5", hour, "8"), args("10", hour, "20", "1", "", "5", hour, "8")})
		}
		for gi, g := range groups {
			h.sameAs(fmt.Sprintf("group %d", gi+1), g, 3)
		}
	}},
	{name: "accepted number syntaxes", run: func(h *H) {
		groups := [][][]string{
			{args("10", hour), args("1e+01", hour), args("10.0", hour), args("1.0E1", hour), args("1e1", hour), args("0010", hour), args("10e0", hour)},
			// over 1e9 ms, a unit drains in a second: stable on a real, loaded clock
			{args("1000000", "1000000000"), args("1e+06", "1000000000"), args("1.0E6", "1e9"), args("1E6", "1000000000")},
			{args("10", hour), args("10", "3.6e6"), args("10", "3600000.0"), args("10", "3.6E+06"), args("10", "36e5")},
			{args("10", hour, "", "2"), args("10", hour, "", "2.0"), args("10", hour, "", "2E0"), args("10", hour, "", "0.2e1")},
			{args("10", hour, "", "1"), args("10", hour, "", "1e+00"), args("10", hour, "", "1.000")},
		}
		if h.a.window {
			groups = append(groups, [][]string{args("10", hour, "10"), args("10", hour, "1e1"), args("10", hour, "10.0"), args("10", hour, "0.0")})
		} else {
			groups = append(groups, [][]string{args("10", hour, "20"), args("10", hour, "2e1"), args("10", hour, "20.0"), args("10", hour, "2.0E+1")})
		}
		if !h.a.whole {
			groups = append(groups,
				[][]string{args("10", hour, "", "0.0025"), args("10", hour, "", "2.5e-3"), args("10", hour, "", "25E-4")},
				[][]string{args("0.0025", "1000"), args("2.5e-3", "1000"), args("0.25e-2", "1000")},
				[][]string{args("2.5", hour, "", "1.5"), args("2.50", hour, "", "1.50"), args("25e-1", hour, "", "15e-1")},
			)
		}
		for gi, g := range groups {
			h.sameAs(fmt.Sprintf("group %d", gi+1), g, 2)
		}
		// the bounds themselves are accepted
		for _, a := range [][]string{
			args("1e15", "1"), args("1000000000000000", "1"), args("10", "1e12"), args("10", "1000000000000"),
			args("10", hour, "", "1e15"), args("10", hour, "", "1000000000000000", "check"),
		} {
			if _, err := h.call(h.key("bound"+fmt.Sprint(a)), a...); err != nil {
				h.t.Errorf("args %q at the bounds: %v, want a reply", a, err)
			}
		}
	}},
	{name: "foreign keys left untouched", run: runForeign},
	{name: "other scripts' state left untouched", run: func(h *H) {
		for _, o := range algos {
			if o.name == h.a.name {
				continue
			}
			k := h.key(o.name)
			if _, err := h.evalScript(h.scripts[o.name], k, "10", hour); err != nil {
				h.t.Fatalf("%s: %v", o.name, err)
			}
			h.refused(o.name+" state", k)
		}
	}},
	{name: "retry_after honest", travel: true, run: func(h *H) {
		k := h.key("k")
		const p = 3600000
		for range 10 {
			h.must(k, "10", hour)
		}
		retry := h.retryAfter(10, 1, p, 10, 1)
		h.expect("denied", k, args("10", hour), reply{0, 0, retry, h.resetAfter(10, 1, p, 10), 10, 1})
		h.advance(time.Duration(retry-1) * time.Millisecond)
		if r := h.must(k, "10", hour); r[0] != 0 || r[2] != 1 {
			h.t.Errorf("1 ms before retry_after: %v, want denied with retry_after 1", r)
		}
		h.advance(time.Millisecond)
		if r := h.must(k, "10", hour); r[0] != 1 {
			h.t.Errorf("at retry_after: %v, want admitted", r)
		}

		// several limits, a cost above 1, denied by limit #2
		k = h.key("multi")
		two := args("10", hour, "", "2", "", "3", "1800000", "")
		h.must(k, "10", hour, "", "1", "", "3", "1800000", "")
		h.must(k, "10", hour, "", "1", "", "3", "1800000", "")
		r := h.must(k, two...)
		if r[0] != 0 || r[5] != 2 || r[2] <= 0 {
			h.t.Fatalf("cost 2 after 2 of 3: %v, want denied by limit #2", r)
		}
		h.advance(time.Duration(r[2]-1) * time.Millisecond)
		if r := h.must(k, two...); r[0] != 0 {
			h.t.Errorf("1 ms before retry_after: %v, want denied", r)
		}
		h.advance(time.Millisecond)
		if r := h.must(k, two...); r[0] != 1 {
			h.t.Errorf("at retry_after: %v, want admitted", r)
		}
	}},
	{name: "reset_after honest", travel: true, run: func(h *H) {
		for _, c := range []struct {
			name  string
			args  []string
			probe []string // cost 0; the limit that empties last binds
			cap   int64
			bind  int64
		}{
			{"one limit", args("10", hour, "", "4"), args("10", hour, "", "0"), 10, 1},
			{"two limits", args("10", hour, "", "4", "", "5", "7200000", ""), args("10", hour, "", "0", "", "5", "7200000", ""), 5, 2},
		} {
			k := h.key(c.name)
			r := h.must(k, c.args...)
			// the key lives until every limit is empty: as long as the
			// slowest limit's reset_after, and no longer
			reset := h.pttl(k)
			if r[3] > reset || r[3] <= 0 {
				h.t.Errorf("%s: reset_after %d, PTTL %d: want 0 < reset_after <= PTTL", c.name, r[3], reset)
			}
			if r := h.must(k, c.probe...); r[3] != reset {
				h.t.Errorf("%s: PTTL %d, but the slowest limit's reset_after is %d: want them equal", c.name, reset, r[3])
			}
			h.advance(time.Duration(reset-1) * time.Millisecond)
			if r := h.must(k, c.probe...); r[1] >= r[4] || r[3] != 1 {
				h.t.Errorf("%s: 1 ms before reset_after: %v, want less than full, reset_after 1", c.name, r)
			}
			h.expectTTL(c.name+": 1 ms before reset_after", k, 1)
			h.advance(time.Millisecond)
			h.absent(c.name+": at reset_after", k)
			h.expect(c.name+": at reset_after", k, c.probe, reply{1, c.cap, 0, 0, c.cap, c.bind})
		}
	}},
}

// retryUnknown marks a reply whose retry_after is only known to be positive.
func (r reply) retryUnknown() reply { r[2] = -2; return r }

// sameAs runs each argument list of group on its own fresh key, n times,
// and wants the same replies (and, on a fake clock, the same state) as the
// first list's.
func (h *H) sameAs(what string, group [][]string, n int) {
	h.t.Helper()
	h.symmetric = true
	defer func() { h.symmetric = false }()
	var ref [][]int64
	var refSnap snap
	for gi, a := range group {
		k := h.key(fmt.Sprintf("%s-%d", what, gi))
		for i := range n {
			got, err := h.call(k, a...)
			if err != nil {
				h.t.Errorf("%s: args %q: %v", what, a, err)
				return
			}
			if gi == 0 {
				ref = append(ref, got)
				continue
			}
			var want reply
			copy(want[:], ref[i])
			h.check(fmt.Sprintf("%s: call %d with %q (as %q)", what, i+1, a, group[0]), got, want)
		}
		s := h.snap(k)
		if gi == 0 {
			refSnap = s
		} else if h.e.Advance != nil && (s.typ != refSnap.typ || s.dump != refSnap.dump || s.pttl != refSnap.pttl) {
			h.t.Errorf("%s: args %q leave other state than %q", what, a, group[0])
		}
	}
}
