package scripts_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/redisrate/redisrate/internal/manifest"
	st "github.com/redisrate/redisrate/scripts/internal/scripttest"
)

// randLimits draws 1 to 3 limits for s (mostly 1), as ARGV triples.
func randLimits(rng *rand.Rand, s manifest.Spec) [][3]string {
	n := 1
	if rng.IntN(3) == 0 {
		n = 2 + rng.IntN(2)
	}
	limits := []int64{1, 2, 3, 5, 7, 10, 13, 100, 1000}
	periods := []int64{1, 10, 100, 999, 1000, 7000, 60000, 3600000}
	out := make([][3]string, n)
	for i := range out {
		l, p := limits[rng.IntN(len(limits))], periods[rng.IntN(len(periods))]
		if s.Log {
			l = min(l, 100)
		}
		burst := ""
		switch {
		case s.Window && rng.IntN(3) == 0:
			burst = fmt.Sprint(l)
		case s.Window:
		case rng.IntN(2) == 0:
			burst = fmt.Sprint(1 + rng.Int64N(3*l))
		case rng.IntN(2) == 0:
			burst = "0"
		}
		out[i] = [3]string{fmt.Sprint(l), fmt.Sprint(p), burst}
	}
	return out
}

// randCall builds the ARGV of a call with the given limits, a random cost
// (0, 1, up to past the capacity) and sometimes mode check.
func randCall(rng *rand.Rand, lims [][3]string, capacity int64) []string {
	cost := ""
	switch r := rng.IntN(10); {
	case r == 0:
		cost = "0"
	case r < 6:
	case r < 9:
		cost = fmt.Sprint(1 + rng.Int64N(capacity))
	default:
		cost = fmt.Sprint(capacity + 1 + rng.Int64N(3))
	}
	mode := ""
	if rng.IntN(10) == 0 {
		mode = "check"
	}
	argv := []string{lims[0][0], lims[0][1], lims[0][2], cost, mode}
	for _, l := range lims[1:] {
		argv = append(argv, l[0], l[1], l[2])
	}
	for len(argv) > 2 && argv[len(argv)-1] == "" && len(lims) == 1 {
		argv = argv[:len(argv)-1] // send only what the call needs
	}
	return argv
}

// randStep is how far the clock moves before a call, in µs: often within
// a unit's interval, sometimes past a period, rarely back (a clock step).
func randStep(rng *rand.Rand, call st.Call, back bool) int64 {
	l := call.Limits[rng.IntN(len(call.Limits))]
	P := l.PeriodMS * 1000
	T := max(1, P/l.Limit)
	switch r := rng.IntN(20); {
	case r < 3:
		return 0
	case r < 12:
		return rng.Int64N(2*T + 1)
	case r < 15:
		return rng.Int64N(P + 1)
	case r < 17:
		return P + rng.Int64N(2*P+1)
	case r < 18 && back:
		return -1 - rng.Int64N(min(P, 5_000_000))
	default:
		return rng.Int64N(1000) // within a millisecond
	}
}

func micros(t time.Time) int64 { return t.UnixMicro() }

// TestDifferential runs random call sequences (1 to 3 limits, random
// costs, every mode, clock moves, some steps back) through every script on
// miniredis and through the Go reference model, and compares every reply
// and, after each call, the key's existence and TTL.
func TestDifferential(t *testing.T) {
	for _, b := range st.BothClocked(t) {
		t.Run(b.Name, func(t *testing.T) {
			b.Rebind(t) // the backend's helpers report to this subtest
			seqs, steps := 12, 50
			if testing.Short() {
				seqs = 10
			}
			rng := rand.New(rand.NewPCG(1, 2))
			calls := 0
			for _, s := range manifest.Specs() {
				for q := range seqs {
					lims := randLimits(rng, s)
					key := fmt.Sprintf("diff:%s:%d", s.Name, q)
					m := st.NewModel(s, micros(b.Now()))
					m.MsClock = b.Real
					first, _ := st.Parse(s, 1, []string{lims[0][0], lims[0][1], lims[0][2]})
					capacity := first.Limits[0].Burst
					var trail []string
					for i := range steps {
						argv := randModeCall(rng, lims, capacity)
						call, perr := st.Parse(s, 1, argv)
						if perr != "" {
							t.Fatalf("%s %v: %s", s.Name, argv, perr)
						}
						if i > 0 {
							b.Advance(time.Duration(randStep(rng, call, true)) * time.Microsecond)
						}
						now := micros(b.Now())
						got := b.Eval(s, key, argv...)
						want := m.Call(now, call)
						ttl := b.PTTL(key)
						calls++
						trail = append(trail, fmt.Sprintf("  t=%d %v -> %v (model %v) ttl %d", now, argv, got, want, ttl))
						if got.Err != "" || fmt.Sprint(got.Ints) != fmt.Sprint(want) || ttl != m.TTL() {
							t.Errorf("%s sequence %d, call %d: got %v ttl %d, model %v ttl %d\nmodel state: %v\nsequence:\n%s",
								s.Name, q, i, got, ttl, want, m.TTL(), m, joinLast(trail, 12))
							break // the next sequence, on a key of its own
						}
					}
				}
			}
			t.Logf("%d calls, replies and TTLs equal to the models", calls)
		})
	}
}

func joinLast(lines []string, n int) string {
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	out := ""
	for _, l := range lines {
		out += l + "\n"
	}
	return out
}

// TestGCRAEqualsLeakyBucket: under their :3 state gcra and leaky_bucket
// give the same replies and TTLs, call for call, also when the clock steps
// back (both decide as of the time the state records).
func TestGCRAEqualsLeakyBucket(t *testing.T) {
	for _, b := range st.BothClocked(t) {
		t.Run(b.Name, func(t *testing.T) {
			b.Rebind(t) // the backend's helpers report to this subtest
			gcra, _ := manifest.Lookup("gcra")
			lb, _ := manifest.Lookup("leaky_bucket")
			rng := rand.New(rand.NewPCG(3, 4))
			calls := 0
			for q := range 20 {
				lims := randLimits(rng, gcra)
				first, _ := st.Parse(gcra, 1, []string{lims[0][0], lims[0][1], lims[0][2]})
				for i := range 50 {
					argv := randCall(rng, lims, first.Limits[0].Burst)
					call, _ := st.Parse(gcra, 1, argv)
					if i > 0 {
						b.Advance(time.Duration(randStep(rng, call, true)) * time.Microsecond)
					}
					kg, kl := fmt.Sprintf("eq:g:%d", q), fmt.Sprintf("eq:l:%d", q)
					g, l := b.Eval(gcra, kg, argv...), b.Eval(lb, kl, argv...)
					calls++
					if !g.Equal(l) || b.PTTL(kg) != b.PTTL(kl) {
						t.Fatalf("sequence %d call %d %v: gcra %v ttl %d, leaky_bucket %v ttl %d", q, i, argv, g, b.PTTL(kg), l, b.PTTL(kl))
					}
				}
			}
			t.Logf("%d call pairs equal", calls)
		})
	}
}

// TestMultiLimit: with several limits a call is all or nothing, and the
// reply describes the binding limit (denial: the longest retry, -1
// longest; admission: the fewest units left; ties to the earlier).
func TestMultiLimit(t *testing.T) {
	for _, b := range st.BothClocked(t) {
		t.Run(b.Name, func(t *testing.T) {
			b.Rebind(t) // the backend's helpers report to this subtest
			for _, s := range manifest.Specs() {
				key := "multi:" + s.Name
				// 2 per second and 3 per minute: the third call in a second is
				// denied by the first limit only, and records nothing against the second.
				r1 := b.Eval(s, key, "2", "1000", "", "1", "", "3", "60000", "")
				if r1.Err != "" || r1.Ints[0] != 1 || r1.Ints[5] != 1 || r1.Ints[1] != 1 {
					t.Errorf("%s call 1: %v, want admitted, binding 1 with 1 left (tie on 1 vs 2 left: the fewest)", s.Name, r1)
				}
				b.Eval(s, key, "2", "1000", "", "1", "", "3", "60000", "")
				before := b.Snap(key)
				r3 := b.Eval(s, key, "2", "1000", "", "1", "", "3", "60000", "")
				if r3.Err != "" || r3.Ints[0] != 0 || r3.Ints[5] != 1 {
					t.Errorf("%s call 3: %v, want denied by limit 1", s.Name, r3)
				}
				b.Unchanged(s.Name+" denied multi-limit call", key, before)
				// two seconds later the first admits again (past sliding_window's
				// weighted previous window too); the minute has 1 left
				b.Advance(2 * time.Second)
				r4 := b.Eval(s, key, "2", "1000", "", "1", "", "3", "60000", "")
				if r4.Err != "" || r4.Ints[0] != 1 || r4.Ints[5] != 2 || r4.Ints[1] != 0 || r4.Ints[4] != 3 {
					t.Errorf("%s call 4: %v, want admitted, binding 2 (the minute, 0 left, capacity 3)", s.Name, r4)
				}
				// now both deny: the minute's retry is the longer
				r5 := b.Eval(s, key, "2", "1000", "", "2", "", "3", "60000", "")
				if r5.Err != "" || r5.Ints[0] != 0 || r5.Ints[5] != 2 {
					t.Errorf("%s call 5: %v, want denied, binding 2 (the longer retry)", s.Name, r5)
				}
				// a cost past the second limit's capacity: -1 wins over any retry
				r6 := b.Eval(s, key, "10", "1000", "", "4", "", "3", "60000", "")
				if r6.Err != "" || r6.Ints[0] != 0 || r6.Ints[2] != -1 || r6.Ints[5] != 2 {
					t.Errorf("%s call 6: %v, want never (-1), binding 2", s.Name, r6)
				}
				// equal limits tie to the earlier
				r7 := b.Eval(s, "tie:"+s.Name, "5", "1000", "", "1", "", "5", "1000", "", "5", "1000", "")
				if r7.Err != "" || r7.Ints[5] != 1 {
					t.Errorf("%s tie: %v, want binding 1", s.Name, r7)
				}
				r8 := b.Eval(s, "tie:"+s.Name, "5", "1000", "", "5", "", "5", "1000", "", "5", "1000", "")
				if r8.Err != "" || r8.Ints[0] != 0 || r8.Ints[5] != 1 {
					t.Errorf("%s tie on a denial: %v, want denied, binding 1", s.Name, r8)
				}
				b.Advance(time.Hour)
			}
		})
	}
}

// TestBindingExact: the binding limit of an admission is the one with the
// fewest units left, in exact amounts: here sliding_window's two limits
// (1048576 per 100000 ms and per 100003 ms, one unit in each previous
// window) leave 1048575 + 66667/100000 and 1048575 + 66669/100003 units,
// which differ by 1/(100000 * 100003), less than a double can tell apart
// at 2^20: the second has fewer left.
func TestBindingExact(t *testing.T) {
	for _, b := range st.BothClocked(t) {
		t.Run(b.Name, func(t *testing.T) {
			b.Rebind(t) // the backend's helpers report to this subtest
			sw := spec("sliding_window")
			const N = 1806720866667 // ms: 66667 into a window of 100000, 66669 into one of 100003
			b.SetTime(time.UnixMicro(N*1000 + 500))
			b.Client.Set(st.Ctx, "bind", fmt.Sprintf("sw:2 %d 1 0 %d 1 0", N-66667, N-66669), 0)
			argv := a("1048576", "100000", "", "0", "", "1048576", "100003", "")
			// limit 2: 1048575 units left (rounded down), its previous window
			// weighs until its end, 100003 - 66669 = 33334 ms away
			want := []int64{1, 1048575, 0, 33334, 1048576, 2, 0}
			if r := b.Eval(sw, "bind", argv...); r.Err != "" || fmt.Sprint(r.Ints) != fmt.Sprint(want) {
				t.Errorf("%v on %q: %v, want %v (limit 2 has fewer units left, exactly)", argv, b.Get("bind"), r, want)
			}
		})
	}
}

// TestBindingExactBuckets: the same for gcra and leaky_bucket: 2^30 per
// 3001 ms and per 3002 ms, used 3000 us and 3001 us ahead, leave
// 2^30 - 3000/3001000 and 2^30 - 3001/3002000 units, 1.1e-10 apart, which
// round to one double: the second has fewer left.
func TestBindingExactBuckets(t *testing.T) {
	for _, b := range st.BothClocked(t) {
		t.Run(b.Name, func(t *testing.T) {
			b.Rebind(t) // the backend's helpers report to this subtest
			now := micros(b.Now())
			// the states (a level times period_us: 3000 us at 1 per 3001 ms is 3000)
			states := [][2]string{
				{"gcra", fmt.Sprintf("gcra:4 3000 %d 3001 %d", now, now)},
				{"leaky_bucket", fmt.Sprintf("lb:4 3000 %d 3001 %d", now, now)},
			}
			argv := a("1", "3001", "1073741824", "0", "", "1", "3002", "1073741824")
			want := []int64{1, 1073741823, 0, 4, 1073741824, 2, 0}
			for _, c := range states {
				name, state := c[0], c[1]
				b.Client.Set(st.Ctx, "bind:"+name, state, 0)
				if r := b.Eval(spec(name), "bind:"+name, argv...); r.Err != "" || fmt.Sprint(r.Ints) != fmt.Sprint(want) {
					t.Errorf("%s %v on %q: %v, want %v (limit 2 has fewer units left, exactly)", name, argv, state, r, want)
				}
			}
		})
	}
}
