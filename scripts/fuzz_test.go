package scripts_test

import (
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redisrate/redisrate/internal/manifest"
	st "github.com/redisrate/redisrate/scripts/internal/scripttest"
)

// fuzzKinds names what the key holds before the fuzzed call, by kind.
var fuzzKinds = []string{
	"none", "string", "list", "set", "hash", "zset", "stream",
	"state",  // genuine state, made by calls of the script data[0] names, with limits (and modes) from data
	"tagged", // a string that starts with a state tag (v3, v2 or v1): tag + " " + data
	"zlog",   // a sorted set from data: member NUL score NUL ..., maybe with the marker
}

var fuzzTags = []string{"gcra:2", "tb:2", "lb:2", "sw:2", "fw:2", "gcra", "tb", "lb", "sw", "fw", "sliding_log:2", "sliding_log:3", "gcra:3", "lb:3", "tb:3", "gcra:4", "lb:4", "gcra:5"}

// fuzzInput is one fuzzed call.
type fuzzInput struct {
	algo, kind uint8
	data       string
	numkeys    uint8
	argv       string // NUL-separated; "" is no ARGV at all
	step       int64  // µs the clock moves after the key is set up (negative: back)
}

func (in fuzzInput) spec() manifest.Spec {
	s := manifest.Specs()
	return s[int(in.algo)%len(s)]
}

func (in fuzzInput) args() []string {
	if in.argv == "" {
		return nil
	}
	return strings.Split(in.argv, "\x00")
}

func (in fuzzInput) String() string {
	return fmt.Sprintf("%s on a key holding %s %.80q (a second key %s), keys %q, ARGV %q, clock %+dus",
		in.spec().Name, in.kindOf(0), in.data, in.kindOf(1), in.keys("k"), in.args(), in.step)
}

// kindOf is what key i (0 or 1) holds before the call: the first key by
// kind % 10, the second by kind / 20 (so "none" below 20).
func (in fuzzInput) kindOf(i int) string {
	if i == 0 {
		return fuzzKinds[int(in.kind)%len(fuzzKinds)]
	}
	return fuzzKinds[int(in.kind)/20%len(fuzzKinds)]
}

// keys is the call's keys: numkeys % 10 of them (0 to 9), key, then keys of
// its hash tag; when numkeys / 10 is odd, the last is key again.
func (in fuzzInput) keys(key string) []string {
	keys := make([]string, int(in.numkeys)%10)
	for i := range keys {
		keys[i] = fmt.Sprintf("{%s}:%d", key, i+1)
	}
	if len(keys) > 0 {
		keys[0] = key
	}
	if len(keys) > 1 && in.numkeys/10%2 == 1 {
		keys[len(keys)-1] = key
	}
	return keys
}

// setup fills key i (0 or 1) as in.kind says, at the clock's current time.
func (in fuzzInput) setup(t testing.TB, b *st.Backend, i int, key string) {
	c, data := b.Client, in.data
	var err error
	switch in.kindOf(i) {
	case "none":
	case "string":
		err = c.Set(st.Ctx, key, data, 0).Err()
	case "list":
		err = c.RPush(st.Ctx, key, data).Err()
	case "set":
		err = c.SAdd(st.Ctx, key, data).Err()
	case "hash":
		err = c.HSet(st.Ctx, key, "f", data).Err()
	case "zset":
		err = c.ZAdd(st.Ctx, key, redis.Z{Score: 1, Member: data}).Err()
	case "stream":
		err = c.XAdd(st.Ctx, &redis.XAddArgs{Stream: key, Values: []string{"f", data}}).Err()
	case "state":
		// data: script, then calls "limit period burst cost" separated by ';'
		s := manifest.Specs()[0]
		if data != "" {
			s = manifest.Specs()[int(data[0])%6]
			data = data[1:]
		}
		calls := strings.Split(data, ";")
		if len(calls) > 4 {
			calls = calls[:4]
		}
		for _, call := range calls {
			args := strings.Fields(call)
			if len(args) < 2 {
				args = []string{"5", "60000", "", "2"}
			}
			b.Eval(s, key, args...) // errors just leave the key as it is
			if b.Clocked() {
				b.Advance(time.Duration(len(call)) * 7 * time.Millisecond)
			}
		}
	case "tagged":
		tag := fuzzTags[0]
		if data != "" {
			tag = fuzzTags[int(data[0])%len(fuzzTags)]
			data = data[1:]
		}
		err = c.Set(st.Ctx, key, tag+" "+data, 0).Err()
	case "zlog":
		f := strings.Split(data, "\x00")
		var zs []redis.Z
		for i := 0; i+1 < len(f) && len(zs) < 64; i += 2 {
			sc, perr := strconv.ParseFloat(f[i+1], 64)
			if perr != nil || sc != sc {
				sc = 0
			}
			m := f[i]
			if m == "M" {
				m = manifest.Specs()[5].Tag
			}
			zs = append(zs, redis.Z{Score: sc, Member: m})
		}
		if len(zs) == 0 {
			zs = []redis.Z{{Score: -1, Member: manifest.Specs()[5].Tag}, {Score: 1, Member: data}}
		}
		err = c.ZAdd(st.Ctx, key, zs...).Err()
	}
	if err != nil {
		t.Fatal(err)
	}
	if kind := in.kindOf(i); kind != "none" && kind != "state" && int(in.kind)/len(fuzzKinds)%2 == 1 {
		// some keys carry a TTL of their own
		if err := c.PExpire(st.Ctx, key, time.Hour).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// checkCall runs in on b and holds the outcome to the contract: the exact
// argument error (ParseKeys) or state error (ExpectedStateError, for the
// first key at fault), else a reply of seven integers within their ranges
// and the rules of its mode; nothing written on any key on an error, a
// denial, a check, a cost of 0 or an upto that grants nothing; valid state
// with a TTL on every key after a write (a refund may delete a key it
// empties). A call of several keys in the empty mode or check
// is also held to the same history of one-key calls, on copies of its keys
// (each decided alone with its limit; if all admit, each recorded): the
// same admission, the same states and TTLs.
func checkCall(t testing.TB, b *st.Backend, in fuzzInput, key string) st.Reply {
	t.Helper()
	s := in.spec()
	argv := in.args()
	keys := in.keys(key)
	before := b.SnapAll(append(keys, key, "{"+key+"}:2")) // the keys set up, also when not passed
	call, argErr := st.ParseKeys(s, keys, argv)
	stateErr := ""
	for i, k := range keys {
		if argErr != "" || stateErr != "" {
			break
		}
		if stateErr = st.ExpectedStateError(s, b.KeyState(k)); stateErr != "" && len(keys) > 1 {
			stateErr = st.KeyAt(i+1, stateErr)
		}
	}
	if argErr == "" && stateErr == "" && len(keys) == 1 && b.KeyState(key).Type != "none" {
		changedLimits(t, b, in, key, call)
	}
	var shadows []string
	if argErr == "" && stateErr == "" && len(keys) > 1 && (call.Mode == "" || call.Mode == "check") {
		for _, k := range keys {
			shadows = append(shadows, k+":shadow")
			copyKey(t, b, k, k+":shadow")
		}
	}
	t0 := time.Now()
	r := b.EvalKeys(s.Source, s.SHA1, keys, argv...)
	fail := func(format string, a ...any) {
		t.Helper()
		t.Fatalf("%s: %s\n reply %v\n keys before %v\n keys after  %v", in, fmt.Sprintf(format, a...), r, before, b.SnapAll(keys))
	}
	if r.Err != "" {
		if !st.ContractError(r.Err) {
			fail("not a contract error (a Lua runtime error?)")
		}
		switch {
		case argErr != "" && !st.SameError(argErr, r.Err):
			fail("want argument error %q", argErr)
		case argErr == "" && stateErr == "":
			fail("an error for a valid call on valid state")
		case argErr == "" && !st.SameError(stateErr, r.Err):
			fail("want state error %q", stateErr)
		}
		b.UnchangedAll("error", before)
		return r
	}
	if argErr != "" {
		fail("want argument error %q", argErr)
	}
	if stateErr != "" {
		fail("want state error %q", stateErr)
	}
	v := r.Ints
	if len(v) != 7 {
		fail("not seven integers")
	}
	n := int64(len(call.Limits))
	if v[5] < 1 || v[5] > n {
		fail("binding out of 1..%d", n)
	}
	l := call.Limits[v[5]-1]
	capacity := l.Burst
	if s.Window {
		capacity = l.Limit
	}
	switch {
	case v[0] != 0 && v[0] != 1:
		fail("allowed not 0 or 1")
	case v[1] < 0 || v[1] > capacity:
		fail("remaining out of 0..capacity")
	case v[4] != capacity:
		fail("capacity is not the binding limit's %d", capacity)
	case v[3] < 0:
		fail("negative reset_after")
	case call.Cost == 0 && v[0] != 1:
		fail("a cost of 0 denied")
	case v[6] < 0 || v[6] > call.Cost:
		fail("units out of 0..cost")
	}
	settles := call.Mode == "refund" || call.Mode == "force"
	switch {
	case settles && v[2] < 0:
		fail("%s with retry_after %d: the wait for one unit is never -1", call.Mode, v[2])
	case call.Mode == "refund" && v[0] != 1:
		fail("a refund not allowed")
	case settles:
	case v[0] == 1 && v[2] != 0:
		fail("admitted with a retry_after")
	case v[0] == 0 && v[2] != -1 && v[2] < 1:
		fail("denied with retry_after %d", v[2])
	case v[2] == -1 && (call.Cost <= capacity || call.Mode == "upto"):
		fail("never, yet the cost fits the capacity (or upto)")
	case call.Mode == "upto" && v[0] != 1 && v[6] != 0, call.Mode == "upto" && call.Cost > 0 && (v[0] == 1) != (v[6] > 0):
		fail("upto: allowed exactly when it grants a unit")
	case call.Mode != "upto" && v[6] != call.Cost*v[0]:
		fail("units: the cost when admitted, else 0")
	}
	if shadows != nil {
		sameAsOneKeyCalls(t, b, in, keys, shadows, call, v[0] == 1, fail)
	}
	if call.Cost == 0 || call.Mode == "check" || (!settles && v[0] == 0) {
		b.UnchangedAll("denial, check, cost 0 or an upto of nothing", before)
		return r
	}
	for i, k := range keys {
		// On the machine's clock a TTL of a few ms may run out before the
		// key is read: the key's TTL is at least its limit's reset_after_ms,
		// at least the binding one's with one key.
		gone := func() bool {
			if b.Clocked() {
				return false
			}
			p := b.PTTL(k) // -2 gone, 0 going
			return (p == -2 || p == 0) && (len(keys) > 1 || v[3] <= time.Since(t0).Milliseconds()+1)
		}
		after := b.Snap(k)
		if settles && (after.Type == "none" || st.Same(before[k], after, 0)) {
			continue // a refund that emptied it, or a key the call left alone
		}
		if after.PTTL <= 0 && !gone() {
			fail("admitted, but key %d has no TTL", i+1)
		}
		if !s.Log && !st.ValidState(s, b.Get(k)) && !gone() {
			fail("admitted, but key %d holds no valid state", i+1)
		}
		if !s.Log && len(keys) > 1 && strings.Count(b.Get(k), " ") != s.Fields && !gone() {
			fail("admitted, but key %d holds other than its one limit's state", i+1)
		}
		if s.Log && b.Client.ZScore(st.Ctx, k, s.Tag).Err() != nil && !gone() {
			fail("admitted, but the log of key %d has no marker", i+1)
		}
	}
	return r
}

// sameAsOneKeyCalls holds a call of several keys, on keys whose copies are
// shadows, to the one-key calls it stands for, at the same moment: each
// shadow checked alone with its limit; the call admitted exactly when
// every one admits, and then each shadow recorded by a one-key call and
// left as the call left its key.
func sameAsOneKeyCalls(t testing.TB, b *st.Backend, in fuzzInput, keys, shadows []string, call st.Call, admitted bool, fail func(string, ...any)) {
	t.Helper()
	s := in.spec()
	one := func(i int, mode string) []string {
		l := call.Limits[i]
		return []string{strconv.FormatInt(l.Limit, 10), strconv.FormatInt(l.PeriodMS, 10), strconv.FormatInt(l.Burst, 10), strconv.FormatInt(call.Cost, 10), mode}
	}
	all := true
	for i, sh := range shadows {
		r := b.Eval(s, sh, one(i, "check")...)
		if r.Err != "" {
			fail("key %d's copy, alone with its limit: %v", i+1, r)
		}
		all = all && r.Ints[0] == 1
	}
	if all != admitted {
		fail("admitted %t, but the keys alone with their limits admit: %t", admitted, all)
	}
	if !admitted || call.Cost == 0 || call.Mode == "check" {
		return
	}
	for i, sh := range shadows {
		if r := b.Eval(s, sh, one(i, "")...); r.Err != "" || r.Ints[0] != 1 {
			fail("key %d's copy, alone with its limit: %v, want admitted", i+1, r)
		}
		got, alone := b.Snap(keys[i]), b.Snap(sh)
		if got.Type != alone.Type || got.Value != alone.Value || (b.Clocked() && got.PTTL != alone.PTTL) {
			fail("key %d holds %v, its copy after the one-key call %v", i+1, got, alone)
		}
	}
}

// copyKey makes to what from holds: a string or a sorted set (the types a
// valid state has), with its TTL.
func copyKey(t testing.TB, b *st.Backend, from, to string) {
	t.Helper()
	c := b.Client
	c.Del(st.Ctx, to)
	switch c.Type(st.Ctx, from).Val() {
	case "none":
		return
	case "string":
		c.Set(st.Ctx, to, c.Get(st.Ctx, from).Val(), 0)
	case "zset":
		c.ZAdd(st.Ctx, to, c.ZRangeWithScores(st.Ctx, from, 0, -1).Val()...)
	default:
		t.Fatalf("copyKey of a %s", c.Type(st.Ctx, from).Val())
	}
	if p := c.PTTL(st.Ctx, from).Val(); p > 0 {
		c.PExpire(st.Ctx, to, p)
	}
}

// changedLimits holds a valid call on existing state to guarantee 12: at
// the same moment, from the same state, the call's limits raised never
// deny what they admit, and lowered never admit what they deny. Raised
// doubles each limit and burst, lowered halves them, rounded up: every
// script, gcra and leaky_bucket included (contract v3).
func changedLimits(t testing.TB, b *st.Backend, in fuzzInput, key string, call st.Call) {
	t.Helper()
	s := in.spec()
	scaled := func(up bool) ([]string, bool) {
		var argv []string
		for i, l := range call.Limits {
			limit, burst := l.Limit, l.Burst
			if up {
				limit, burst = 2*limit, 2*burst
			} else {
				limit, burst = (limit+1)/2, (burst+1)/2
			}
			if s.Window {
				burst = limit
			}
			argv = append(argv, strconv.FormatInt(limit, 10), strconv.FormatInt(l.PeriodMS, 10), strconv.FormatInt(burst, 10))
			if i == 0 {
				argv = append(argv, strconv.FormatInt(call.Cost, 10), "check")
			}
		}
		_, bad := st.Parse(s, 1, argv)
		return argv, bad == ""
	}
	var old []string
	for i, l := range call.Limits {
		old = append(old, strconv.FormatInt(l.Limit, 10), strconv.FormatInt(l.PeriodMS, 10), strconv.FormatInt(l.Burst, 10))
		if s.Window {
			old[len(old)-1] = ""
		}
		if i == 0 {
			old = append(old, strconv.FormatInt(call.Cost, 10), "check")
		}
	}
	before := b.Eval(s, key, old...)
	if before.Err != "" {
		t.Fatalf("%s: the call as a check: %v", in, before)
	}
	for _, up := range []bool{true, false} {
		argv, ok := scaled(up)
		if !ok {
			continue
		}
		r := b.Eval(s, key, argv...)
		switch {
		case r.Err != "":
			t.Fatalf("%s: under changed limits %q: %v", in, argv, r)
		case up && before.Ints[0] == 1 && r.Ints[0] == 0 && !debtPast(b, s, key, call, call.Limits[0].Burst):
			t.Fatalf("%s: guarantee 12: raised limits %q deny what the call's admit", in, argv)
		case !up && before.Ints[0] == 0 && r.Ints[0] == 1 && !debtForgiven(b, s, key, call):
			t.Fatalf("%s: guarantee 12: lowered limits %q admit what the call's deny", in, argv)
		}
	}
}

// debtForgiven reports whether the state a bucket's call reads may hold a
// debt past twice the capacity of the lowered limits (each limit and
// burst halved, rounded up), as of the time the state records: guarantee
// 12's one exception, where the cap forgives the rest. It reads the key's
// value; a call of several limits is taken as yes.
func debtForgiven(b *st.Backend, s manifest.Spec, key string, call st.Call) bool {
	if len(call.Limits) > 1 {
		return true
	}
	return debtPast(b, s, key, call, (call.Limits[0].Burst+1)/2)
}

// debtPast reports whether the state of one limit on key holds a debt past
// twice a capacity of burst (the exception applies to both halves in v4:
// the raised half too, from a state past twice the call's own capacity).
func debtPast(b *st.Backend, s manifest.Spec, key string, call st.Call, burst int64) bool {
	if s.Window || s.Log {
		return false
	}
	if len(call.Limits) > 1 {
		return true
	}
	l := call.Limits[0]
	f := strings.Fields(b.Client.Get(st.Ctx, key).Val())
	if len(f) != 3 || f[0] != s.Tag {
		return true
	}
	v, ok := new(big.Int).SetString(f[1], 10)
	if !ok {
		return true
	}
	if s.Name == "token_bucket" {
		return v.Cmp(big.NewInt(-burst)) < 0
	}
	// gcra:4, lb:4: x, a level times period_us, up to 26 digits
	return v.Cmp(new(big.Int).Mul(big.NewInt(2*burst), big.NewInt(l.PeriodMS*1000))) > 0
}

var (
	fuzzOnce sync.Once
	fuzzB    *st.Backend
)

// FuzzScripts drives every script with hostile ARGV on hostile keys, on
// miniredis with a controlled clock, and holds each outcome to the
// contract (checkCall). The corpus is in testdata/fuzz/FuzzScripts.
func FuzzScripts(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s.algo, s.kind, s.data, s.numkeys, s.argv, s.step)
	}
	f.Fuzz(func(t *testing.T, algo, kind uint8, data string, numkeys uint8, argv string, step int64) {
		if len(argv) > 2000 || len(data) > 2000 || step > 1e13 || step < -1e13 {
			t.Skip()
		}
		fuzzOnce.Do(func() { fuzzB = st.Miniredis(&noCleanup{t}) })
		b := fuzzB
		b.Rebind(t)
		b.SetTime(st.Epoch)
		runFuzzInput(t, b, fuzzInput{algo, kind, data, numkeys, argv, step})
	})
}

// fuzzSeeds are FuzzScripts's seeds (issue 9's reproductions among them),
// replayed on real Redis with the corpus.
var fuzzSeeds = []fuzzInput{
	{0, 0, "", 1, "10\x001000", 0},
	{1, 0, "", 1, "10\x001000\x00\x005\x00check", 0},
	{2, 7, "\x025 1000 10 3;5 1000 10 3", 1, "5\x001000\x0010\x004", -2500},
	{3, 7, "\x03", 1, "10\x001000\x00\x00\x00\x00100\x0060000\x000", 900},
	{4, 8, "\x04 1 2", 1, "10\x001000", 0},
	{5, 9, "M\x00-3\x001\x001795348800123456\x002\x001795348800123456", 1, "3\x001000", 0},
	{5, 9, "x\x001", 1, "3\x001000", 0},
	{0, 8, "\x001.0e999 0", 1, "10\x001000", 0},
	{0, 0, "", 1, "100\x001000\x00\x00100.00000000000001", 0},
	{1, 0, "", 1, "1\x0060000\x00\x001e-0000000", 0},
	{0, 0, "", 1, "10\x001000\x001000000000000000.1", 0},
	{0, 0, "", 1, "3003\x001000000000000", 0},
	{3, 0, "", 1, "28059810762433\x00107", 0},
	{5, 0, "", 1, "10001\x001000", 0},
	{0, 0, "", 2, "1\x001", 0},
	{0, 0, "", 1, strings.Repeat("1\x00", 28) + "1", 0},
	{2, 1, "order 42", 1, "010\x00001000\x00\x00000", 0},
	{4, 7, "\x04" + "3 1000", 1, "3\x001000\x00\x003", -1500000},
	// several keys (issue 21); kind / 20 sets the second key up
	{0, 147, "\x005 1000 10 3;5 1000 10 3", 2, "5\x001000\x0010\x001\x00\x0010\x001000\x00", 0},
	{3, 147, "\x035 1000 5 2", 2, "5\x001000\x00\x002\x00\x008\x001000\x00", 500},
	{5, 147, "\x053 1000 3 2", 2, "3\x001000\x00\x001\x00\x003\x001000\x00", -200},
	{5, 147, "\x053 60000 3 1", 2, "3\x0060000\x00\x001\x00\x003\x001000\x00", 0}, // a longer period before a shorter
	{5, 27, "order 42", 2, "3\x001000\x00\x00\x00\x003\x001000\x00", 0},
	{1, 160, "\x01 1 2", 2, "5\x001000\x00\x00\x00\x005\x001000\x00", 0},
	{2, 147, "\x025 1000 10 3", 12, "5\x001000\x00\x00\x00\x005\x001000\x00", 0},
	{4, 7, "\x04", 3, "5\x001000\x00\x00\x00\x005\x001000\x00\x005\x001000\x00", 0},
	{0, 0, "", 9, "1\x001000", 0},
	{0, 0, "", 3, "1\x001000\x00\x00\x00\x001\x001000\x00", 0},
	// contract v3: the modes, on fresh keys, on state they made, and on :3,
	// :2 and token-debt states typed in
	{0, 7, "\x005 1000 10 3;5 1000 10 30 force", 1, "5\x001000\x0010\x004\x00upto", 300},
	{2, 7, "\x025 1000 10 8;5 1000 10 2 refund", 1, "5\x001000\x0010\x009\x00refund", 0},
	{1, 7, "\x015 1000 10 30 force", 1, "5\x001000\x0010\x001\x00force", -700},
	{3, 7, "\x035 1000 5 3", 1, "5\x001000\x00\x009\x00force", 1500},
	{4, 7, "\x045 1000 5 4", 1, "5\x001000\x00\x005\x00refund\x007\x0060000\x00", 0},
	{5, 7, "\x055 1000 5 5;5 1000 5 9 force", 1, "5\x001000\x00\x003\x00refund", 200},
	{5, 0, "", 1, "5\x001000\x00\x0012\x00force\x004\x0060000\x00", 0},
	{0, 8, "\x0b7000 1795348800123456", 1, "2\x001000\x005\x003\x00upto", 0},
	{2, 8, "\x0c3000000 1795348800123456 0 1795348800123456", 1, "3\x001000\x00\x001\x00refund\x001\x001000\x000", 0},
	{1, 8, "\x01-5 1795348800123456", 1, "5\x001000\x00\x002\x00upto", 0},
	{1, 8, "\x01-0 1795348800123456", 1, "5\x001000", 0},
	{0, 0, "", 1, "5\x001000\x00\x00\x00UPTO", 0},
	{5, 147, "\x053 1000 3 2", 2, "3\x001000\x00\x005001\x00\x003\x001000\x00", 0},
	{0, 147, "\x005 1000 10 3;5 1000 10 3", 2, "5\x001000\x0010\x009\x00upto\x0010\x001000\x00", 0},
	{3, 147, "\x035 1000 5 2", 2, "5\x001000\x00\x004\x00force\x008\x001000\x00", 0},
}

// runFuzzInput sets the key up on an empty database, moves the clock
// (miniredis) and checks the call.
func runFuzzInput(t *testing.T, b *st.Backend, in fuzzInput) {
	if err := b.Client.FlushAll(st.Ctx).Err(); err != nil {
		t.Fatal(err)
	}
	in.setup(t, b, 0, "k")
	in.setup(t, b, 1, "{k}:2")
	if !b.Clocked() { // the machine's clock runs on: no TTL runs out during the check
		b.Client.Persist(st.Ctx, "k")
		b.Client.Persist(st.Ctx, "{k}:2")
	} else {
		b.Advance(time.Duration(in.step) * time.Microsecond)
	}
	checkCall(t, b, in, "k")
}

// TestFuzzCorpusOnRedis replays FuzzScripts's seeds and its corpus
// (testdata/fuzz/FuzzScripts) on real Redis, whose Lua is not gopher-lua:
// the same checks, with the inputs' clock steps, on a server whose clock
// the test sets.
func TestFuzzCorpusOnRedis(t *testing.T) { onServers(t, st.RealClockServers, fuzzCorpusOnServer) }

func fuzzCorpusOnServer(t *testing.T, b *st.Backend) {
	files, err := filepath.Glob("testdata/fuzz/FuzzScripts/*")
	if err != nil || len(files) == 0 {
		t.Fatal("no corpus: ", err)
	}
	replay := func(name string, in fuzzInput) {
		t.Run(name, func(t *testing.T) {
			b.Rebind(t)
			b.SetTime(st.Epoch)
			runFuzzInput(t, b, in)
		})
	}
	for i, in := range fuzzSeeds {
		replay(fmt.Sprintf("seed#%d", i), in)
	}
	for _, f := range files {
		in, err := readCorpusEntry(f)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		replay(filepath.Base(f), in)
	}
	t.Logf("%d seeds and %d corpus entries replayed", len(fuzzSeeds), len(files))
}

// readCorpusEntry reads a "go test fuzz v1" file of FuzzScripts's arguments.
func readCorpusEntry(path string) (fuzzInput, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return fuzzInput{}, err
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 7 || lines[0] != "go test fuzz v1" {
		return fuzzInput{}, fmt.Errorf("not a FuzzScripts entry: %q", lines[0])
	}
	var vals []string
	for _, l := range lines[1:] {
		open, close := strings.IndexByte(l, '('), strings.LastIndexByte(l, ')')
		if open < 0 || close < open {
			return fuzzInput{}, fmt.Errorf("bad line %q", l)
		}
		typ, lit := l[:open], l[open+1:close]
		switch typ {
		case "byte", "uint8":
			if v, err := strconv.ParseUint(lit, 0, 8); err == nil {
				vals = append(vals, string(rune(v)))
				continue
			}
			r, err := strconv.Unquote(lit) // a rune literal: its rune, as a string
			if err != nil {
				return fuzzInput{}, fmt.Errorf("bad byte %q: %v", lit, err)
			}
			vals = append(vals, r)
		case "string":
			v, err := strconv.Unquote(lit)
			if err != nil {
				return fuzzInput{}, fmt.Errorf("bad string %q: %v", lit, err)
			}
			vals = append(vals, v)
		case "int64":
			vals = append(vals, lit)
		default:
			return fuzzInput{}, fmt.Errorf("bad type %q", typ)
		}
	}
	step, err := strconv.ParseInt(vals[5], 10, 64)
	if err != nil {
		return fuzzInput{}, err
	}
	byteOf := func(s string) uint8 { return uint8([]rune(s)[0]) }
	return fuzzInput{byteOf(vals[0]), byteOf(vals[1]), vals[2], byteOf(vals[3]), vals[4], step}, nil
}

// noCleanup is a testing.TB whose Cleanup never runs: the fuzz target's
// miniredis lives as long as the fuzzing process.
type noCleanup struct{ testing.TB }

func (noCleanup) Cleanup(func()) {}
