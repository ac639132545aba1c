package scripts_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/redisrate/redisrate/internal/manifest"
	st "github.com/redisrate/redisrate/scripts/internal/scripttest"
)

// The audit of the v3 scripts (issue 36: 8.15 M calls, Redis 7 and Valkey
// 8, EVALSHA and FCALL), each finding as a test that fails under v3. The
// clock is held still unless a test moves it.

// kindsOf is the call kinds of b: EVALSHA, and FCALL on a real server.
func kindsOf(b *st.Backend) []string {
	if b.Real {
		b.LoadLibrary()
		return []string{"EVALSHA", "FCALL"}
	}
	return []string{"EVALSHA"}
}

// callAs runs argv on keys by kind.
func callAs(b *st.Backend, s manifest.Spec, kind string, keys []string, argv ...string) st.Reply {
	if kind == "FCALL" {
		return b.FCall(s, keys, argv...)
	}
	return b.EvalKeys(s.Source, s.SHA1, keys, argv...)
}

// auditSeq runs the calls in turn on fresh keys, once per kind, and holds
// each reply to its want.
func auditSeq(t *testing.T, b *st.Backend, s manifest.Spec, name string, nkeys int, calls [][]string, want [][]int64) map[string][]string {
	t.Helper()
	keys := map[string][]string{}
	for _, kind := range kindsOf(b) {
		ks := []string{fmt.Sprintf("{audit:%s:%s}", name, kind)}
		for i := 2; i <= nkeys; i++ {
			ks = append(ks, fmt.Sprintf("%s:%d", ks[0], i))
		}
		keys[kind] = ks
		for i, argv := range calls {
			if r := callAs(b, s, kind, ks, argv...); !r.Equal(st.Reply{Ints: want[i]}) {
				t.Errorf("%s %s %s: call %d %q: %v, want %v", b.Name, s.Name, kind, i+1, argv, r, want[i])
			}
		}
	}
	return keys
}

// Finding 1: fixed_window's force on a count above twice the call's limit
// answered field 7 = -4 and, with a second limit, wrote the count lowered
// (10 to 6), so the first limit then admitted 14 in a window of 10. v4:
// force never records negative units and never lowers a count.
func TestAuditFixedWindowForce(t *testing.T) {
	fw := spec("fixed_window")
	for _, b := range st.BothClocked(t) {
		b.SetTime(st.Epoch)
		T := st.Epoch.UnixMicro()
		calls := [][]string{
			a("10", "60000", "", "10", "", "100", "3600000", ""),
			a("3", "60000", "", "1", "force", "100", "3600000", ""),
			a("10", "60000", "", "4", "", "100", "3600000", ""),
		}
		want := [][]int64{{1, 0, 0, 60000, 10, 1, 10}, {0, 0, 60000, 60000, 3, 1, 0}, {0, 0, 60000, 60000, 10, 1, 0}}
		for kind, ks := range auditSeq(t, b, fw, "fw1", 1, calls, want) {
			if v, w := b.Get(ks[0]), fmt.Sprintf("fw:2 %d 10 %d 11", T, T); v != w {
				t.Errorf("%s %s: one key holds %q, want %q (the first limit's count kept, the second's raised by 1)", b.Name, kind, v, w)
			}
		}
		// the same with two keys: key 1's count is kept and not written
		keyed := [][]string{
			keyArgs([][3]string{{"10", "60000", ""}, {"100", "3600000", ""}}, "10", ""),
			keyArgs([][3]string{{"3", "60000", ""}, {"100", "3600000", ""}}, "1", "force"),
			keyArgs([][3]string{{"10", "60000", ""}, {"100", "3600000", ""}}, "4", ""),
		}
		for kind, ks := range auditSeq(t, b, fw, "fw2", 2, keyed, want) {
			if v, w := b.Get(ks[0]), fmt.Sprintf("fw:2 %d 10", T); v != w {
				t.Errorf("%s %s: key 1 holds %q, want %q", b.Name, kind, v, w)
			}
			if v, w := b.Get(ks[1]), fmt.Sprintf("fw:2 %d 11", T); v != w {
				t.Errorf("%s %s: key 2 holds %q, want %q", b.Name, kind, v, w)
			}
		}
	}
}

// Finding 2: refund and force answered the limit with the fewest units
// left: 4 per hour (burst 6) and 3 per 2 hours, force 5 twice, answered a
// wait of 4,500 s where the key denied for 9,600 s. v4 binds them to the
// limit with the longest wait for one unit (then the fewest left).
func TestAuditSettleBindsLongestWait(t *testing.T) {
	for _, b := range st.BothClocked(t) {
		for _, s := range []manifest.Spec{spec("gcra"), spec("leaky_bucket")} {
			b.SetTime(st.Epoch)
			force := a("4", "3600000", "6", "5", "force", "3", "7200000", "3")
			want := [][]int64{{0, 0, 7200000, 12000000, 3, 2, 5}, {0, 0, 9600000, 14400000, 3, 2, 1}}
			for kind, ks := range auditSeq(t, b, s, "bind:"+s.Name, 1, [][]string{force, force}, want) {
				check := a("4", "3600000", "6", "1", "check", "3", "7200000", "3")
				if r := b.Probe(ks[0], 9600*time.Second-time.Microsecond, func() st.Reply { return callAs(b, s, kind, ks, check...) }); r.Err != "" || r.Ints[0] != 0 {
					t.Errorf("%s %s %s: a unit 1 us before the wait answered: %v, want denied", b.Name, s.Name, kind, r)
				}
				if r := b.Probe(ks[0], 9600*time.Second, func() st.Reply { return callAs(b, s, kind, ks, check...) }); r.Err != "" || r.Ints[0] != 1 {
					t.Errorf("%s %s %s: a unit after the wait answered: %v, want admitted (guarantee 5)", b.Name, s.Name, kind, r)
				}
			}
		}
	}
}

// TestSettleWaitHonest: the probes of finding 2 (480 of 3,366 were denied
// at the promised time under v3): random limits (two or three, on one key
// or one per key), random refunds and forces; after every refund or force
// that answers a wait, a unit is admitted at that wait, for every script.
func TestSettleWaitHonest(t *testing.T) {
	rng := rand.New(rand.NewPCG(36, 2))
	for _, b := range st.BothClocked(t) {
		probes := 0
		for _, s := range manifest.Specs() {
			for q := range 40 {
				b.SetTime(st.Epoch.Add(time.Duration(q) * time.Hour))
				n := 2 + rng.IntN(2)
				lims := make([][3]string, n)
				for i := range lims {
					l := rangeLimit(rng, s)
					if s.Log {
						l = [3]string{fmt.Sprint(1 + rng.IntN(20)), fmt.Sprint(logUniform(rng, 1, 3600000)), ""}
					}
					lims[i] = l
				}
				keys := []string{fmt.Sprintf("{honest:%s:%d}", s.Name, q)}
				if rng.IntN(2) == 0 {
					for i := 2; i <= n; i++ {
						keys = append(keys, fmt.Sprintf("%s:%d", keys[0], i))
					}
				}
				first, _ := st.Parse(s, 1, lims[0][:])
				capacity := first.Limits[0].Burst
				for range 6 {
					mode := []string{"force", "force", "refund", ""}[rng.IntN(4)]
					cost := fmt.Sprint(logUniform(rng, 1, min(2*capacity, 10000/int64(len(keys)))))
					argv := keyArgs(lims, cost, mode)
					if len(keys) == 1 {
						argv = append(a(lims[0][0], lims[0][1], lims[0][2], cost, mode), argv[5:]...)
					}
					r := b.EvalKeys(s.Source, s.SHA1, keys, argv...)
					if r.Err != "" {
						t.Fatalf("%s %s %v: %v", b.Name, s.Name, argv, r)
					}
					if (mode == "force" || mode == "refund") && r.Ints[2] > 0 {
						check := keyArgs(lims, "1", "check")
						if len(keys) == 1 {
							check = append(a(lims[0][0], lims[0][1], lims[0][2], "1", "check"), check[5:]...)
						}
						probes++
						if p := b.Probe(keys[0], time.Duration(r.Ints[2])*time.Millisecond, func() st.Reply { return b.EvalKeys(s.Source, s.SHA1, keys, check...) }); p.Err != "" || p.Ints[0] != 1 {
							t.Errorf("%s %s %v on %d keys: %v; a unit after its wait of %d ms: %v, want admitted", b.Name, s.Name, argv, len(keys), r, r.Ints[2], p)
						}
					}
					b.Advance(time.Duration(logUniform(rng, 1, 1_000_000)) * time.Microsecond)
				}
			}
		}
		t.Logf("%s: %d waits of refund and force probed", b.Name, probes)
	}
}

// Finding 3: sliding_log's force added up to twice the burst (20,000
// entries, 28 to 71 ms). v4: a call whose cost times its keys passes
// 10,000 is refused naming cost in every mode; force adds at most that.
func TestAuditSlidingLogEntries(t *testing.T) {
	s := spec("sliding_log")
	for _, b := range st.Both(t) {
		for _, mode := range []string{"", "check", "upto", "refund", "force"} {
			if r := b.Eval(s, "log:10001:"+mode, "10000", "60000", "", "10001", mode); r.Err != "ERR invalid cost '10001': must be at most 10000 for sliding_log" {
				t.Errorf("%s: cost 10001, mode %q: %v", b.Name, mode, r)
			}
			keys := []string{"{log8}:1", "{log8}:2", "{log8}:3", "{log8}:4", "{log8}:5", "{log8}:6", "{log8}:7", "{log8}:8"}
			lims := make([][3]string, 8)
			for i := range lims {
				lims[i] = [3]string{"10000", "60000", ""}
			}
			if r := evalKeys(b, s, keys, keyArgs(lims, "1251", mode)...); r.Err != "ERR invalid cost '1251': with 8 keys must be at most 1250" {
				t.Errorf("%s: 8 keys, cost 1251, mode %q: %v", b.Name, mode, r)
			}
		}
		// a full log of 10,000: force 10,000 adds 10,000, the most one call adds
		if r := b.Eval(s, "log:full", "10000", "60000", "", "10000"); r.Err != "" || r.Ints[0] != 1 {
			t.Fatalf("%s: %v", b.Name, r)
		}
		if r := b.Eval(s, "log:full", "10000", "60000", "", "10000", "force"); r.Err != "" || r.Ints[6] != 10000 {
			t.Errorf("%s: force 10000 on a full log: %v, want 10000 recorded", b.Name, r)
		}
		if n := b.Client.ZCard(st.Ctx, "log:full").Val(); n != 20001 {
			t.Errorf("%s: the log holds %d members, want 20,000 entries and the marker", b.Name, n)
		}
	}
}

// Finding 4: forgiveness was written back: under burst 2 a refund of 1 on
// gcra's level of 10 units wrote the level read capped (4), less 1, so the
// burst-10 limit that wrote it granted 7 more at the same microsecond.
// token_bucket and sliding_window did the same. v4: refund and force
// change the state's own level by their units.
func TestAuditForgivenessNotWrittenBack(t *testing.T) {
	for _, b := range st.BothClocked(t) {
		b.SetTime(st.Epoch)
		T := st.Epoch.UnixMicro()
		for _, c := range []struct {
			algo  string
			calls [][]string
			want  [][]int64
			state string
		}{
			{"gcra", [][]string{a("1", "1000", "10", "10"), a("1", "1000", "2", "1", "refund"), a("1", "1000", "10", "10", "upto")},
				[][]int64{{1, 0, 0, 10000, 10, 1, 10}, {1, 0, 3000, 4000, 2, 1, 1}, {1, 0, 0, 10000, 10, 1, 1}}, fmt.Sprintf("gcra:4 10000000 %d", T)},
			{"leaky_bucket", [][]string{a("1", "1000", "10", "10"), a("1", "1000", "2", "1", "refund"), a("1", "1000", "10", "10", "upto")},
				[][]int64{{1, 0, 0, 10000, 10, 1, 10}, {1, 0, 3000, 4000, 2, 1, 1}, {1, 0, 0, 10000, 10, 1, 1}}, fmt.Sprintf("lb:4 10000000 %d", T)},
			{"token_bucket", [][]string{a("1", "1000", "10", "10"), a("1", "1000", "10", "10", "force"), a("1", "1000", "2", "1", "refund"), a("1", "1000", "10", "1", "check")},
				[][]int64{{1, 0, 0, 10000, 10, 1, 10}, {0, 0, 11000, 20000, 10, 1, 10}, {1, 0, 3000, 4000, 2, 1, 1}, {0, 0, 10000, 19000, 10, 1, 0}}, fmt.Sprintf("tb:2 -9 %d", T)},
			{"sliding_window", [][]string{a("10", "1000", "", "10"), a("10", "1000", "", "10", "force"), a("2", "1000", "", "1", "refund"), a("10", "1000", "", "0", "check")},
				nil, ""},
		} {
			s := spec(c.algo)
			if c.want == nil { // sliding_window: its replies from the model (the window's start is the clock's)
				m := st.NewModel(s, T)
				for _, argv := range c.calls {
					call, _ := st.Parse(s, 1, argv)
					c.want = append(c.want, m.Call(T, call))
				}
				start := st.Epoch.UnixMilli() - st.Epoch.UnixMilli()%1000
				c.state = fmt.Sprintf("sw:2 %d 0 19", start)
			}
			for kind, ks := range auditSeq(t, b, s, "wb:"+c.algo, 1, c.calls, c.want) {
				if v := b.Get(ks[0]); v != c.state {
					t.Errorf("%s %s %s: the key holds %q, want %q (the level the refund changed by its own unit)", b.Name, c.algo, kind, v, c.state)
				}
			}
		}
	}
}

// Finding 5: guarantee 12's one exception, a debt past twice a capacity
// forgiven, applies to both halves: after force 20 under burst 10 (a level
// of 20 units), burst 2 reads 4 and burst 5 reads 10, so 3 s later burst 2
// admits where burst 5 denies. Within twice both capacities the raised
// limit never denies what the lower admits.
func TestAuditGuarantee12BothHalves(t *testing.T) {
	s := spec("gcra")
	for _, b := range st.BothClocked(t) {
		b.SetTime(st.Epoch)
		for _, c := range []struct {
			force     string
			forgiven  bool // burst 2 admits where burst 5 denies, at some time
			admitLow  int  // how often burst 2 admits, of the probes
			admitHigh int
		}{{"20", true, 0, 0}, {"3", false, 0, 0}} {
			key := "g12both:" + c.force
			if r := b.Eval(s, key, "1", "1000", "10", c.force, "force"); r.Err != "" {
				t.Fatal(r)
			}
			seen := false
			for ms := int64(0); ms <= 20000; ms += 250 {
				low := b.Probe(key, time.Duration(ms)*time.Millisecond, func() st.Reply { return b.Eval(s, key, "1", "1000", "2", "1", "check") })
				high := b.Probe(key, time.Duration(ms)*time.Millisecond, func() st.Reply { return b.Eval(s, key, "1", "1000", "5", "1", "check") })
				if low.Ints[0] == 1 && high.Ints[0] == 0 {
					seen = true
				}
			}
			if seen != c.forgiven {
				t.Errorf("%s: after force %s under burst 10: burst 2 admits where burst 5 denies: %t, want %t", b.Name, c.force, seen, c.forgiven)
			}
		}
	}
}

// Finding 6: sliding_window rounded its overlap to whole milliseconds: at
// 57.542 ms into a window of 1176 ms after a previous window of 327, 327
// per 1176 ms left 15 (floor(327 * 57 / 1176)) where exact arithmetic gives
// 16 (floor(327 * 57542 / 1176000)). v4 weighs the previous window by the
// microseconds of overlap, exactly.
func TestAuditSlidingWindowMicroseconds(t *testing.T) {
	s := spec("sliding_window")
	for _, b := range st.BothClocked(t) {
		start := int64(1795348800000) - int64(1795348800000)%1176 + 1176 // a window start, ms
		b.SetTime(time.UnixMicro(start*1000 + 57542))
		b.Client.Set(st.Ctx, "sw:us", fmt.Sprintf("sw:2 %d 327 0", start), 0)
		if r := b.Eval(s, "sw:us", "327", "1176", "", "0"); r.Err != "" || r.Ints[1] != 16 {
			t.Errorf("%s: 327 per 1176 ms, 57.542 ms into the window after 327: %v, want 16 remaining", b.Name, r)
		}
		// 17 units: admitted once 327 * (1176000 - d) <= (327 - 17) * 1176000,
		// at d = 1176000 - floor(310 * 1176000 / 327) = 61138 us
		if r := b.Eval(s, "sw:us", "327", "1176", "", "17", "check"); r.Err != "" || r.Ints[0] != 0 || r.Ints[2] != 4 {
			t.Errorf("%s: 17 units at 57.542 ms: %v, want denied for 4 ms (3,596 us, rounded up)", b.Name, r)
		}
	}
}

// Finding 7: several-keys refund under OOM: the first key emptied (DEL)
// made the script dirty, and a later key's PSETEX got through. v4 writes
// every PSETEX first, so the call fails whole with OOM.
func TestAuditOOMRefundSeveralKeys(t *testing.T) {
	onServers(t, func(t testing.TB) []*st.Backend { return st.RealServers(t, "--maxmemory-policy", "noeviction") }, func(t *testing.T, b *st.Backend) {
		s := spec("gcra")
		keys := []string{"{oomr}:1", "{oomr}:2"}
		lims := [][3]string{{"10", "60000", ""}, {"10", "60000", ""}}
		b.Eval(s, keys[0], "10", "60000", "", "1")
		b.Eval(s, keys[1], "10", "60000", "", "5")
		before := b.SnapAll(keys)
		used := usedMemory(t, b)
		if err := b.Client.ConfigSet(st.Ctx, "maxmemory", fmt.Sprint(used+256*1024)).Err(); err != nil {
			t.Fatal(err)
		}
		for i := 0; ; i++ {
			err := b.Client.Set(st.Ctx, fmt.Sprint("oomr:filler:", i), strings.Repeat("x", 16*1024), 0).Err()
			if err != nil && strings.HasPrefix(err.Error(), "OOM") {
				break
			}
			if err != nil || i > 1000 {
				t.Fatalf("filling to maxmemory: %v", err)
			}
		}
		if err := b.Client.ConfigSet(st.Ctx, "maxmemory", fmt.Sprint(used)).Err(); err != nil {
			t.Fatal(err)
		}
		defer b.Client.ConfigSet(st.Ctx, "maxmemory", "0")
		// refund 2: key 1 (1 unit) empties, key 2 (5 units) keeps 3
		if r := evalKeys(b, s, keys, keyArgs(lims, "2", "refund")...); !strings.HasPrefix(r.Err, "OOM") {
			t.Errorf("%s: a refund that empties key 1 and lowers key 2 under OOM: %v, want OOM", b.Name, r)
		}
		b.UnchangedAll("a refund refused under OOM", before)
	})
}

// Finding 7: the _ro functions refused a writing mode before an earlier
// fault (numkeys 0, a bad limit), against guarantee 8's order.
func TestAuditReadOnlyOrder(t *testing.T) {
	s := spec("gcra")
	for _, b := range st.RealServers(t) {
		b.LoadLibrary()
		for _, c := range []struct {
			keys []string
			argv []string
			want string
		}{
			{nil, a("10", "1000", "", "1", "upto"), "ERR invalid numkeys '0': must be 1 (every limit on one key) or 2 to 8 (limit i on KEYS[i])"},
			{[]string{"ro"}, a("abc", "1000", "", "1", "force"), "ERR invalid limit 'abc': must be a whole number from 1 to 10^12"},
			{[]string{"ro"}, a("10", "1000", "", "x", "refund"), "ERR invalid cost 'x': must be a whole number from 0 to 10^15"},
			{[]string{"ro"}, a("10", "1000", "", "1", "refund"), "ERR invalid mode 'refund': redisrate_gcra_ro only checks (empty or 'check'); call redisrate_gcra"},
		} {
			if r := b.FCallRO(s, c.keys, c.argv...); r.Err != c.want {
				t.Errorf("%s: FCALL_RO %v %q: %v, want %q", b.Name, c.keys, c.argv, r, c.want)
			}
		}
	}
}

// Finding 7: a several-keys refund or force rewrote keys whose limit it
// left as it was. v4 writes only the keys it changed: their TTL is kept.
func TestAuditSettleWritesOnlyChangedKeys(t *testing.T) {
	for _, b := range st.BothClocked(t) {
		b.SetTime(st.Epoch)
		s := spec("gcra")
		keys := []string{"{only}:1", "{only}:2"}
		lims := [][3]string{{"10", "60000", ""}, {"10", "60000", ""}}
		b.Eval(s, keys[1], "10", "60000", "", "4")
		before := b.SnapAll(keys[:1])
		// key 1 is empty: refund gives it nothing and must not write it
		if r := evalKeys(b, s, keys, keyArgs(lims, "2", "refund")...); r.Err != "" {
			t.Fatal(r)
		}
		b.UnchangedAll("a key a refund gave nothing", before)
		// key 2 at twice its capacity: a force records nothing there, and
		// 1 ms later must not rewrite it (drained, it would read 19.99 units)
		b.Eval(s, keys[1], "10", "60000", "", "20", "force")
		b.Advance(time.Millisecond)
		before = b.SnapAll(keys[1:])
		if r := evalKeys(b, s, keys, keyArgs(lims, "1", "force")...); r.Err != "" || r.Ints[6] != 0 || r.Ints[5] != 2 {
			t.Errorf("%s: a force of 1 on key 2 at twice its capacity: %v, want key 2 binding, 0 units", b.Name, r)
		}
		b.UnchangedAll("a key a force recorded nothing on", before)
	}
}
