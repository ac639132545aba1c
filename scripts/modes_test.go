package scripts_test

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/redisrate/redisrate/internal/manifest"
	st "github.com/redisrate/redisrate/scripts/internal/scripttest"
)

// The modes of contract v3 (upto, refund, force) as properties, on random
// states of every script, by EVALSHA on miniredis and the real servers
// (whose clocks the test sets) and by FCALL on these: each property is
// checked on a key and on its copy, at one moment, so that it needs no
// model. (TestDifferential holds every reply and TTL of the modes to the
// reference model, call for call.)

// modeCall is a call of one limit (limit, period_ms, burst) with cost and
// mode, by EVALSHA or, with fcall, by FCALL.
func modeCall(b *st.Backend, s manifest.Spec, fcall bool, key string, lim [3]string, cost int64, mode string) st.Reply {
	argv := []string{lim[0], lim[1], lim[2], strconv.FormatInt(cost, 10), mode}
	if fcall {
		return b.FCall(s, []string{key}, argv...)
	}
	return b.Eval(s, key, argv...)
}

// modeKinds is the call kinds of b: EVALSHA, and FCALL on a real server
// (with the library loaded).
func modeKinds(b *st.Backend) []bool {
	if !b.Real {
		return []bool{false}
	}
	b.LoadLibrary()
	return []bool{false, true}
}

// randState gives key a random state of s under lim: a few calls of every
// mode, the clock moving, and ends with the clock moved on a little.
func randState(t *testing.T, b *st.Backend, s manifest.Spec, fcall bool, rng *rand.Rand, key string, lim [3]string, capacity int64) {
	t.Helper()
	period, _ := strconv.ParseInt(lim[1], 10, 64)
	for range 1 + rng.IntN(5) {
		mode := []string{"", "", "upto", "refund", "force"}[rng.IntN(5)]
		cost := rng.Int64N(capacity + 1)
		if mode == "force" {
			cost = rng.Int64N(3*capacity + 1)
		}
		if r := modeCall(b, s, fcall, key, lim, cost, mode); r.Err != "" {
			t.Fatalf("%s: %s %v %d %q: %v", b.Name, s.Name, lim, cost, mode, r)
		}
		b.Advance(time.Duration(rng.Int64N(period*1000/2+1)) * time.Microsecond)
	}
}

// modeLimit draws one limit of s and its capacity.
func modeLimit(rng *rand.Rand, s manifest.Spec) ([3]string, int64) {
	l := []int64{1, 2, 3, 5, 7, 10, 40}[rng.IntN(7)]
	p := []int64{1, 10, 999, 1000, 60000}[rng.IntN(5)]
	burst := l
	lim := [3]string{strconv.FormatInt(l, 10), strconv.FormatInt(p, 10), ""}
	if !s.Window && rng.IntN(2) == 0 {
		burst = 1 + rng.Int64N(3*l)
		lim[2] = strconv.FormatInt(burst, 10)
	}
	return lim, burst
}

// modeRounds is how many random states each property runs per script and
// call kind.
func modeRounds(b *st.Backend) int {
	switch {
	case testing.Short():
		return 15
	case b.Real && !raceEnabled:
		return 150
	}
	return 60
}

// TestUptoGrantsWhatEmptyWouldAdmit: upto of cost grants g units, and an
// empty-mode call of g is admitted at the same moment from the same state
// while one of g + 1 (when g < cost) is denied; the key is then left as
// that empty-mode call leaves its copy, and the reply is that call's, with
// units g. A grant of 0 writes nothing and waits for one unit.
func TestUptoGrantsWhatEmptyWouldAdmit(t *testing.T) {
	for _, b := range st.BothClocked(t) {
		t.Run(b.Name, func(t *testing.T) {
			b.Rebind(t)
			rng := rand.New(rand.NewPCG(31, 1))
			n := 0
			for _, s := range manifest.Specs() {
				for _, fcall := range modeKinds(b) {
					for q := range modeRounds(b) {
						key, cp := fmt.Sprintf("upto:%s:%t:%d", s.Name, fcall, q), fmt.Sprintf("upto:%s:%t:%d:copy", s.Name, fcall, q)
						lim, capacity := modeLimit(rng, s)
						randState(t, b, s, fcall, rng, key, lim, capacity)
						copyKey(t, b, key, cp)
						cost := 1 + rng.Int64N(2*capacity)
						before := b.Snap(key)
						r := modeCall(b, s, fcall, key, lim, cost, "upto")
						if r.Err != "" {
							t.Fatalf("%s: upto %d on %v: %v", s.Name, cost, before, r)
						}
						g := r.Ints[6]
						n++
						if g == 0 {
							if r.Ints[0] != 0 || r.Ints[2] < 1 {
								t.Errorf("%s %v: upto %d granted nothing: %v, want a denial with a wait for one unit", s.Name, lim, cost, r)
							}
							b.Unchanged("upto of nothing", key, before)
							if c := modeCall(b, s, fcall, cp, lim, 1, "check"); c.Ints[0] != 0 {
								t.Errorf("%s %v: upto %d granted nothing, a check of 1 from the same state: %v", s.Name, lim, cost, c)
							}
							continue
						}
						if g > cost || r.Ints[0] != 1 {
							t.Fatalf("%s %v: upto %d: %v", s.Name, lim, cost, r)
						}
						if g < cost {
							if c := modeCall(b, s, fcall, cp, lim, g+1, "check"); c.Err != "" || c.Ints[0] != 0 {
								t.Errorf("%s %v on %v: upto %d granted %d, but %d more fit: %v", s.Name, lim, before, cost, g, g+1, c)
							}
						}
						e := modeCall(b, s, fcall, cp, lim, g, "")
						want := append(append([]int64(nil), e.Ints[:6]...), g)
						if e.Err != "" || e.Ints[0] != 1 || fmt.Sprint(r.Ints) != fmt.Sprint(want) {
							t.Errorf("%s %v on %v: upto %d: %v, an empty-mode call of %d: %v", s.Name, lim, before, cost, r, g, e)
						}
						if got, alone := b.Snap(key), b.Snap(cp); got.Value != alone.Value || got.PTTL != alone.PTTL {
							t.Errorf("%s %v: upto %d left %v, the empty-mode call of %d %v", s.Name, lim, cost, got, g, alone)
						}
					}
				}
			}
			t.Logf("%d upto calls", n)
		})
	}
}

// TestRefundLetsThroughAtMostItsUnits: a refund of u units lets at most u
// more through at that moment (an upto of everything after it grants at
// most u more than on the copy that had no refund), never past full (the
// capacity), and says in field 7 how many it gave back (at most u, and
// those it gave back let as many through, the binding limit being the
// only one); a refund on an empty key writes nothing.
func TestRefundLetsThroughAtMostItsUnits(t *testing.T) {
	for _, b := range st.BothClocked(t) {
		t.Run(b.Name, func(t *testing.T) {
			b.Rebind(t)
			rng := rand.New(rand.NewPCG(31, 2))
			n := 0
			for _, s := range manifest.Specs() {
				for _, fcall := range modeKinds(b) {
					for q := range modeRounds(b) {
						key, cp := fmt.Sprintf("refund:%s:%t:%d", s.Name, fcall, q), fmt.Sprintf("refund:%s:%t:%d:copy", s.Name, fcall, q)
						lim, capacity := modeLimit(rng, s)
						randState(t, b, s, fcall, rng, key, lim, capacity)
						copyKey(t, b, key, cp)
						u := rng.Int64N(capacity + 2)
						before := b.Snap(key)
						r := modeCall(b, s, fcall, key, lim, u, "refund")
						if r.Err != "" || r.Ints[0] != 1 || r.Ints[6] < 0 || r.Ints[6] > u {
							t.Fatalf("%s %v on %v: refund %d: %v", s.Name, lim, before, u, r)
						}
						if r.Ints[6] == 0 && u > 0 && before.Type == "none" {
							b.Unchanged("a refund on no key", key, before)
						}
						n++
						all := 2 * capacity // more than can ever be granted
						with := modeCall(b, s, fcall, key, lim, all, "upto")
						without := modeCall(b, s, fcall, cp, lim, all, "upto")
						if with.Err != "" || without.Err != "" {
							t.Fatalf("%s: %v %v", s.Name, with, without)
						}
						gw, go0 := with.Ints[6], without.Ints[6]
						switch {
						case gw > go0+u:
							t.Errorf("%s %v on %v: a refund of %d (%v) let %d through, %d without it", s.Name, lim, before, u, r, gw, go0)
						case gw > capacity:
							t.Errorf("%s %v: after a refund of %d, %d through at once, past the capacity %d", s.Name, lim, u, gw, capacity)
						case r.Ints[1] > capacity:
							t.Errorf("%s %v: refund %d: remaining %d past the capacity", s.Name, lim, u, r.Ints[1])
						case r.Ints[1] != gw:
							t.Errorf("%s %v: refund %d replied %d remaining, and then %d went through", s.Name, lim, u, r.Ints[1], gw)
						}
					}
				}
			}
			t.Logf("%d refunds", n)
		})
	}
}

// debtBound is the most a limit of s may record (contract, force): a level
// of twice the capacity, read back as the wait to drain it; it returns the
// longest reset_after_ms a state within the bound may answer.
func debtBound(s manifest.Spec, lim [3]string) int64 {
	l, _ := strconv.ParseInt(lim[0], 10, 64)
	p, _ := strconv.ParseInt(lim[1], 10, 64)
	burst := l
	if lim[2] != "" {
		burst, _ = strconv.ParseInt(lim[2], 10, 64)
	}
	switch s.Name {
	case "gcra", "leaky_bucket": // 2 * burst drained at limit per period
		return st.CeilDiv(2*burst*p, l)
	case "token_bucket": // -burst back to burst, in whole refills
		return st.CeilDiv(2*burst, l) * p
	}
	return 2 * p // the windows and the log: their periods
}

// TestForceKeepsItsDebtBound: force records what the limits admit or not,
// as far as a debt of one capacity: no call after it waits longer than the
// limit needs to drain twice its capacity (its period for the windows),
// and a second force on top records nothing past the bound (field 7 0 once
// the bound is reached); its allowed field is what an empty-mode call of
// the same cost answers from the same state.
func TestForceKeepsItsDebtBound(t *testing.T) {
	for _, b := range st.BothClocked(t) {
		t.Run(b.Name, func(t *testing.T) {
			b.Rebind(t)
			rng := rand.New(rand.NewPCG(31, 3))
			n := 0
			for _, s := range manifest.Specs() {
				for _, fcall := range modeKinds(b) {
					for q := range modeRounds(b) {
						key, cp := fmt.Sprintf("force:%s:%t:%d", s.Name, fcall, q), fmt.Sprintf("force:%s:%t:%d:copy", s.Name, fcall, q)
						lim, capacity := modeLimit(rng, s)
						randState(t, b, s, fcall, rng, key, lim, capacity)
						copyKey(t, b, key, cp)
						cost := rng.Int64N(3*capacity + 1)
						before := b.Snap(key)
						r := modeCall(b, s, fcall, key, lim, cost, "force")
						e := modeCall(b, s, fcall, cp, lim, cost, "check")
						if r.Err != "" || e.Err != "" || r.Ints[6] < 0 || r.Ints[6] > cost {
							t.Fatalf("%s %v on %v: force %d: %v (check %v)", s.Name, lim, before, cost, r, e)
						}
						n++
						if r.Ints[0] != e.Ints[0] {
							t.Errorf("%s %v on %v: force %d allowed %d, an empty-mode call would answer %v", s.Name, lim, before, cost, r.Ints[0], e)
						}
						bound := debtBound(s, lim)
						if r.Ints[3] > bound || r.Ints[2] > bound {
							t.Errorf("%s %v on %v: force %d: %v, waits past %d ms (twice the capacity)", s.Name, lim, before, cost, r, bound)
						}
						again := modeCall(b, s, fcall, key, lim, 3*capacity, "force")
						if again.Err != "" || again.Ints[3] > bound {
							t.Errorf("%s %v: a force of %d on top: %v, waits past %d ms", s.Name, lim, 3*capacity, again, bound)
						}
						if full := modeCall(b, s, fcall, key, lim, 1, "force"); full.Err != "" || full.Ints[6] != 0 {
							t.Errorf("%s %v: at the debt bound a force of 1 still records: %v", s.Name, lim, full)
						}
					}
				}
			}
			t.Logf("%d forces", n)
		})
	}
}

// g4Bound is guarantee 4's bound for one limit of s over a span of t µs,
// in units (a float is enough: the counts are small and the test compares
// whole units against it with no rounding at stake).
func g4Bound(s manifest.Spec, l, p, burst, t int64) float64 {
	P := p * 1000
	switch s.Name {
	case "gcra", "leaky_bucket":
		return float64(burst) + float64(l)*float64(t)/float64(P)
	case "token_bucket":
		return float64(burst + l*(1+t/P))
	case "sliding_log":
		if t < P {
			return float64(l)
		}
	}
	return float64(l * (1 + st.CeilDiv(t, P)))
}

// TestGuarantee4WithModes: random histories of every mode on one key, the
// clock moving forward; in any span of them, the units admitted (the
// empty mode's and upto's) are at most guarantee 4's bound plus the units
// refunds gave back in the span; force only lowers what others take.
func TestGuarantee4WithModes(t *testing.T) {
	for _, b := range st.BothClocked(t) {
		t.Run(b.Name, func(t *testing.T) {
			b.Rebind(t)
			rng := rand.New(rand.NewPCG(31, 4))
			spans := 0
			for _, s := range manifest.Specs() {
				for _, fcall := range modeKinds(b) {
					for q := range modeRounds(b) / 5 {
						key := fmt.Sprintf("g4m:%s:%t:%d", s.Name, fcall, q)
						lim, capacity := modeLimit(rng, s)
						l, _ := strconv.ParseInt(lim[0], 10, 64)
						p, _ := strconv.ParseInt(lim[1], 10, 64)
						type event struct{ at, took, gave int64 }
						var hist []event
						for range 60 {
							mode := []string{"", "", "", "upto", "upto", "refund", "force", "check"}[rng.IntN(8)]
							cost := 1 + rng.Int64N(capacity)
							r := modeCall(b, s, fcall, key, lim, cost, mode)
							if r.Err != "" {
								t.Fatalf("%s: %v", s.Name, r)
							}
							e := event{at: micros(b.Now())}
							switch {
							case (mode == "" || mode == "upto") && r.Ints[0] == 1:
								e.took = r.Ints[6]
							case mode == "refund":
								e.gave = r.Ints[6]
							}
							hist = append(hist, e)
							b.Advance(time.Duration(rng.Int64N(p*1000/max(1, l)+1)) * time.Microsecond)
						}
						for i := range hist {
							var took, gave int64
							for j := i; j < len(hist); j++ {
								took, gave = took+hist[j].took, gave+hist[j].gave
								spans++
								if bound := g4Bound(s, l, p, capacity, hist[j].at-hist[i].at) + float64(gave); float64(took) > bound {
									t.Fatalf("%s %v: calls %d to %d over %d us took %d units, past %.3f (with %d given back)", s.Name, lim, i, j, hist[j].at-hist[i].at, took, bound, gave)
								}
							}
						}
					}
				}
			}
			t.Logf("%d spans within guarantee 4", spans)
		})
	}
}

// TestROFunctionsRefuseWritingModes: the library's _ro functions answer a
// check and refuse upto, refund and force (which write), naming the
// function to call instead, and leave the key as it was.
func TestROFunctionsRefuseWritingModes(t *testing.T) {
	onServers(t, func(t testing.TB) []*st.Backend { return st.RealServers(t) }, func(t *testing.T, b *st.Backend) {
		b.LoadLibrary()
		for _, s := range manifest.Specs() {
			key := "ro:" + s.Name
			prime(t, b, s, key)
			before := b.Snap(key)
			for _, mode := range []string{"upto", "refund", "force"} {
				want := fmt.Sprintf("ERR invalid mode '%s': %s_ro only checks (empty or 'check'); call %s", mode, s.Function, s.Function)
				if r := b.FCallRO(s, []string{key}, "5", "60000", "", "1", mode); r.Err != want {
					t.Errorf("FCALL_RO %s_ro with %s: %v, want %q", s.Function, mode, r, want)
				}
				if !st.ContractError(want) {
					t.Errorf("%q is not among the contract's errors (scripttest.ContractError)", want)
				}
			}
			if r := b.FCallRO(s, []string{key}, "5", "60000", "", "1", "check"); r.Err != "" || r.Ints[0] != 1 {
				t.Errorf("FCALL_RO %s_ro with check: %v", s.Function, r)
			}
			b.Unchanged("_ro with writing modes", key, before)
		}
	})
}

// TestModesWriteNothingWhenNothingChanges (guarantee 2): an upto that
// grants nothing, a refund that gives nothing back, and any mode with cost
// 0 leave the key exactly as it was; a refund that empties a key deletes
// it.
func TestModesWriteNothingWhenNothingChanges(t *testing.T) {
	for _, b := range st.BothClocked(t) {
		t.Run(b.Name, func(t *testing.T) {
			b.Rebind(t)
			for _, s := range manifest.Specs() {
				for _, fcall := range modeKinds(b) {
					key := fmt.Sprintf("nothing:%s:%t", s.Name, fcall)
					lim := [3]string{"3", "60000", ""}
					if r := modeCall(b, s, fcall, key, lim, 3, ""); r.Err != "" || r.Ints[0] != 1 {
						t.Fatalf("%s: %v", s.Name, r)
					}
					before := b.Snap(key)
					for _, c := range []struct {
						mode string
						cost int64
					}{{"upto", 2}, {"upto", 0}, {"refund", 0}, {"force", 0}, {"", 0}, {"check", 1}} {
						if r := modeCall(b, s, fcall, key, lim, c.cost, c.mode); r.Err != "" || r.Ints[6] != 0 {
							t.Errorf("%s: %q of %d on a full key: %v, want nothing taken or given", s.Name, c.mode, c.cost, r)
						}
						b.Unchanged(fmt.Sprintf("%q of %d", c.mode, c.cost), key, before)
					}
					if r := modeCall(b, s, fcall, key, lim, 10, "refund"); r.Err != "" || r.Ints[6] != 3 || r.Ints[1] != 3 || r.Ints[3] != 0 {
						t.Errorf("%s: a refund of 10 after 3 of 3: %v, want 3 given back, 3 remaining, no reset", s.Name, r)
					}
					if typ := b.Client.Type(st.Ctx, key).Val(); typ != "none" {
						t.Errorf("%s: a refund that emptied the key left %s %v", s.Name, typ, b.Snap(key))
					}
					if r := modeCall(b, s, fcall, key, lim, 1, "refund"); r.Err != "" || r.Ints[6] != 0 {
						t.Errorf("%s: a refund on no key: %v", s.Name, r)
					}
					if typ := b.Client.Type(st.Ctx, key).Val(); typ != "none" {
						t.Errorf("%s: a refund on no key wrote %s", s.Name, typ)
					}
				}
			}
		})
	}
}

// randModeCall is randCall with every mode: check, upto, refund and force
// (whose costs run past the capacity, to reach the debt bound).
func randModeCall(rng *rand.Rand, lims [][3]string, capacity int64) []string {
	argv := randCall(rng, lims, capacity)
	if r := rng.IntN(10); r < 4 {
		for len(argv) < 5 {
			argv = append(argv, "")
		}
		argv[4] = []string{"upto", "refund", "force", "check"}[r]
		if argv[4] == "force" && rng.IntN(2) == 0 {
			argv[3] = strconv.FormatInt(1+rng.Int64N(2*capacity), 10)
		}
	}
	return argv
}
