package scripts_test

import (
	"fmt"
	"math/big"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/redisrate/redisrate/internal/manifest"
	st "github.com/redisrate/redisrate/scripts/internal/scripttest"
)

// TestNoWriteOnDenialCheckCostZero (guarantee 2): a denial, a check and a
// cost of 0 leave the key as it was (content, DUMP, TTL), on both backends;
// on real Redis they also run as read-only scripts (EVALSHA_RO), where a
// write would be refused.
func TestNoWriteOnDenialCheckCostZero(t *testing.T) {
	for _, b := range st.Both(t) {
		for _, s := range manifest.Specs() {
			key := "nowrite:" + s.Name
			for g, argv := range [][]string{a("5", "60000", "", "5"), a("5", "60000", "", "5", "", "5", "60000", "")} {
				b.Eval(s, key, argv...) // full use
				before := b.Snap(key)
				for _, c := range []struct {
					what string
					argv []string
				}{
					{"denial", a("5", "60000", "", "1")},
					{"denial, cost past capacity", a("5", "60000", "", "6")},
					{"check", a("5", "60000", "", "1", "check")},
					{"cost 0", a("5", "60000", "", "0")},
					{"denial by the second of two limits", a("100", "60000", "", "1", "", "5", "60000", "")},
					{"check of two limits", a("5", "60000", "", "1", "check", "5", "60000", "")},
					{"cost 0 of two limits", a("5", "60000", "", "0", "", "5", "60000", "")},
				} {
					if g == 0 && len(c.argv) > 5 {
						continue // the state holds one limit
					}
					r := b.Eval(s, key, c.argv...)
					if r.Err != "" || (strings.HasPrefix(c.what, "denial") && r.Ints[0] != 0) {
						t.Errorf("%s: %s %s: %v", b.Name, s.Name, c.what, r)
					}
					b.Unchanged(s.Name+" "+c.what, key, before)
					if b.Real {
						ro := b.EvalRO(s, key, c.argv...)
						if ro.Err != "" {
							t.Errorf("%s: %s %s by EVALSHA_RO: %v", b.Name, s.Name, c.what, ro)
						}
						b.Unchanged(s.Name+" "+c.what+" (EVALSHA_RO)", key, before)
					}
				}
				// a check on an empty key creates nothing
				if r := b.Eval(s, key+":empty", "5", "60000", "", "1", "check"); r.Err != "" || r.Ints[0] != 1 || b.PTTL(key+":empty") != -2 {
					t.Errorf("%s: %s check on no key: %v, pttl %d", b.Name, s.Name, r, b.PTTL(key+":empty"))
				}
				if b.Real {
					if ro := b.EvalRO(s, key+":ro", "5", "60000"); !strings.Contains(ro.Err, "Write commands are not allowed from read-only scripts") {
						t.Errorf("%s: an admitted call by EVALSHA_RO: %v, want refused as a write", s.Name, ro)
					}
				}
				b.Client.Del(st.Ctx, key)
			}
		}
	}
}

// TestTTLEndsWhenWorthless (guarantee 3): after an admission the key's TTL
// is exactly the time until every limit is back to empty: 1 ms before it
// expires the state still counts (not full, or a reset still pending), at
// expiry the key is gone and a call finds full capacity.
func TestTTLEndsWhenWorthless(t *testing.T) {
	for _, b := range st.BothClocked(t) {
		t.Run(b.Name, func(t *testing.T) {
			b.Rebind(t) // the backend's helpers report to this subtest
			rng := rand.New(rand.NewPCG(5, 6))
			n := 0
			for _, s := range manifest.Specs() {
				for q := range 40 {
					key := fmt.Sprintf("ttl:%s:%d", s.Name, q)
					lims := randLimits(rng, s)[:1]
					first, _ := st.Parse(s, 1, lims[0][:])
					capacity := first.Limits[0].Burst
					for range 1 + rng.IntN(4) {
						argv := randCall(rng, lims, capacity)
						call, _ := st.Parse(s, 1, argv)
						b.Advance(time.Duration(randStep(rng, call, false)) * time.Microsecond)
						b.Eval(s, key, argv...)
					}
					// end on an admission, so that the TTL was just set (PTTL is in
					// whole ms, rounded down, once time passes)
					b.Advance(time.Duration(rng.Int64N(5000)) * time.Microsecond)
					one := append(lims[0][:3:3], "1")
					r := b.Eval(s, key, one...)
					if r.Ints[0] == 0 {
						b.Advance(time.Duration(r.Ints[2]) * time.Millisecond)
						r = b.Eval(s, key, one...)
					}
					if r.Err != "" || r.Ints[0] != 1 {
						t.Fatalf("%s %v: retried after retry_after: %v", s.Name, one, r)
					}
					ttl := b.PTTL(key)
					n++
					if ttl <= 0 {
						t.Fatalf("%s: key without a positive TTL: %d", s.Name, ttl)
					}
					peek := append(lims[0][:3:3], "0")
					b.Advance(time.Duration(ttl-1) * time.Millisecond)
					r = b.Eval(s, key, peek...)
					if r.Err != "" || (r.Ints[1] == capacity && r.Ints[3] == 0) {
						t.Errorf("%s %v: 1 ms before the TTL ends the state is already worthless: %v", s.Name, lims[0], r)
					}
					if r.Ints[3] != 1 {
						t.Errorf("%s %v: 1 ms before the TTL ends, reset_after_ms %d, want 1", s.Name, lims[0], r.Ints[3])
					}
					b.Advance(time.Millisecond)
					// Redis keeps a key through the millisecond its TTL ends
					// in (PTTL 0), miniredis not; both expire it after.
					if p := b.PTTL(key); p != -2 && !(b.Real && p == 0) {
						t.Errorf("%s: key still there when its TTL ended: PTTL %d", s.Name, p)
					}
					if r := b.Eval(s, key, peek...); r.Err != "" || r.Ints[1] != capacity || r.Ints[3] != 0 {
						t.Errorf("%s: after expiry: %v, want full", s.Name, r)
					}
				}
			}
			t.Logf("%d keys expired exactly when worthless", n)
		})
	}
}

// admission is an admitted call: its time (µs: the latest clock any
// admission read so far, the time its state can know of; a denial records
// nothing, so a clock it read is not known), its cost and, for
// fixed_window, the start of the window its state records.
type admission struct{ at, cost, window int64 }

// TestAdmittedBounds (guarantees 4 and 9): on random traffic, with and
// without clock steps back, the units admitted never exceed the
// algorithm's bound, over every span, measured on the time that only goes
// forward (the latest clock an admission read).
func TestAdmittedBounds(t *testing.T) {
	for _, b := range st.BothClocked(t) {
		t.Run(b.Name, func(t *testing.T) {
			b.Rebind(t) // the backend's helpers report to this subtest
			rng := rand.New(rand.NewPCG(7, 8))
			total := 0
			for _, s := range manifest.Specs() {
				for q := range 8 {
					back := q%2 == 1
					key := fmt.Sprintf("bounds:%s:%d", s.Name, q)
					lims := randLimits(rng, s)[:1]
					first, _ := st.Parse(s, 1, lims[0][:])
					l := first.Limits[0]
					var adm []admission
					var env int64
					for i := range 100 {
						// heavy traffic: mostly costs that fit, small steps
						cost := 1 + rng.Int64N(max(1, l.Burst/2))
						argv := []string{lims[0][0], lims[0][1], lims[0][2], fmt.Sprint(cost)}
						if i > 0 {
							step := randStep(rng, st.Call{Limits: []st.Limit{l}}, back) / 4
							b.Advance(time.Duration(step) * time.Microsecond)
						}
						now := micros(b.Now())
						r := b.Eval(s, key, argv...)
						if r.Err != "" {
							t.Fatal(r)
						}
						if r.Ints[0] == 1 {
							env = max(env, now)
							var window int64 // fixed_window: the window the state records
							if s.Name == "fixed_window" {
								fmt.Sscanf(b.Get(key), "fw:2 %d", &window)
							}
							adm = append(adm, admission{env, cost, window})
							total++
						}
					}
					if msg := checkBound(s, l, adm); msg != "" {
						t.Errorf("%s %v (steps back: %v): %s", s.Name, lims[0], back, msg)
					}
				}
			}
			t.Logf("%d admissions within the bounds", total)
		})
	}
}

// checkBound holds admissions to guarantee 4 for limit l.
func checkBound(s manifest.Spec, l st.Limit, adm []admission) string {
	P := l.PeriodMS * 1000
	switch s.Name {
	case "gcra", "leaky_bucket", "token_bucket":
		for i := range adm {
			var sum int64
			for j := i; j < len(adm); j++ {
				sum += adm[j].cost
				span := adm[j].at - adm[i].at // µs
				var ok bool
				if s.Name == "token_bucket" { // burst + limit * (1 + floor(t / period))
					ok = sum <= l.Burst+l.Limit*(1+span/P)
				} else { // sum <= burst + limit * span / P, exactly
					lhs := new(big.Int).Mul(big.NewInt(sum-l.Burst), big.NewInt(P))
					rhs := new(big.Int).Mul(big.NewInt(l.Limit), big.NewInt(span))
					ok = lhs.Cmp(rhs) <= 0
				}
				if !ok {
					return fmt.Sprintf("%d units admitted in %d us, from admission %d to %d", sum, span, i, j)
				}
			}
		}
	case "sliding_log": // at most limit in any period_ms span
		for j := range adm {
			var sum int64
			for i := j; i >= 0 && adm[i].at > adm[j].at-P; i-- {
				sum += adm[i].cost
			}
			if sum > l.Limit {
				return fmt.Sprintf("%d units admitted in the period up to admission %d", sum, j)
			}
		}
	case "sliding_window": // at most limit per aligned window
		per := map[int64]int64{}
		for _, x := range adm {
			w := (x.at / 1000) / l.PeriodMS
			per[w] += x.cost
			if per[w] > l.Limit {
				return fmt.Sprintf("%d units admitted in aligned window %d", per[w], w)
			}
		}
	case "fixed_window": // at most limit per window (as the state records its start)
		per := map[int64]int64{}
		for _, x := range adm {
			per[x.window] += x.cost
			if per[x.window] > l.Limit {
				return fmt.Sprintf("%d units admitted in the window from %d", per[x.window], x.window)
			}
		}
	}
	return ""
}

// TestRetryAndResetHonest (guarantees 5 and 9): for every denial on random
// traffic (clock steps back included), a check exactly retry_after_ms
// later is admitted, and 1 ms earlier it is denied where the model says
// so; exactly reset_after_ms later the key is at full capacity. The
// probes are checks, and the clock and the key (value and TTL) are put back
// after them. On miniredis and on a real Redis whose clock the test sets.
func TestRetryAndResetHonest(t *testing.T) {
	for _, b := range st.BothClocked(t) {
		t.Run(b.Name, func(t *testing.T) { b.Rebind(t); retryAndResetHonest(t, b) })
	}
}

func retryAndResetHonest(t *testing.T, b *st.Backend) {
	rng := rand.New(rand.NewPCG(9, 10))
	retries, early := 0, 0
	for _, s := range manifest.Specs() {
		for q := range 8 {
			key := fmt.Sprintf("honest:%s:%d", s.Name, q)
			lims := randLimits(rng, s)
			first, _ := st.Parse(s, 1, lims[0][:])
			m := st.NewModel(s, micros(b.Now()))
			m.MsClock = b.Real
			for i := range 40 {
				argv := randCall(rng, lims, first.Limits[0].Burst)
				argv = append(argv, make([]string, max(0, 5-len(argv)))...)
				argv[4] = "" // real calls, so that state builds up
				call, _ := st.Parse(s, 1, argv)
				if i > 0 {
					b.Advance(time.Duration(randStep(rng, call, true)) * time.Microsecond)
				}
				r := b.Eval(s, key, argv...)
				m.Call(micros(b.Now()), call)
				if r.Err != "" {
					t.Fatal(r)
				}
				check := append([]string(nil), argv...)
				check[4] = "check"
				probe := func(after int64) st.Reply {
					return b.Probe(key, time.Duration(after)*time.Millisecond, func() st.Reply { return b.Eval(s, key, check...) })
				}
				if r.Ints[0] == 0 && r.Ints[2] > 0 {
					retries++
					if p := probe(r.Ints[2]); p.Err != "" || p.Ints[0] != 1 {
						t.Errorf("%s %v: denied with retry_after %d ms, and a check that much later: %v", s.Name, argv, r.Ints[2], p)
					}
					// 1 ms earlier: denied whenever the model says so
					mc := *m
					c2 := call
					c2.Mode = "check"
					want := mc.Call(micros(b.Now())+(r.Ints[2]-1)*1000, c2)
					if p := probe(r.Ints[2] - 1); p.Err != "" || fmt.Sprint(p.Ints) != fmt.Sprint(want) {
						t.Errorf("%s %v: a check 1 ms before retry_after: %v, model %v (reply %v, pttl %d, model %v)", s.Name, argv, p, want, r, b.PTTL(key), m)
					} else if want[0] == 0 {
						early++
					}
				}
				if r.Ints[3] > 0 && len(lims) == 1 {
					full := append([]string(nil), check...)
					full[3] = "0"
					check = full
					if p := probe(r.Ints[3]); p.Err != "" || p.Ints[1] != p.Ints[4] {
						t.Errorf("%s %v: reset_after %d ms, and then: %v, want full", s.Name, argv, r.Ints[3], p)
					}
				}
			}
		}
	}
	t.Logf("%d retries admitted exactly then, %d of them denied 1 ms before", retries, early)
}

// TestClockStepBack (guarantee 9): a clock that steps back decides as of
// the time the state records, and its waits are longer by the step (issue
// 9 reproduction 6 is TestStepBackAcrossWindow).
func TestClockStepBack(t *testing.T) {
	for _, b := range st.BothClocked(t) {
		t.Run(b.Name, func(t *testing.T) {
			b.Rebind(t) // the backend's helpers report to this subtest
			S := time.Date(2026, 11, 22, 12, 0, 1, 0, time.UTC)
			// Every script: state at T, the clock 5 s behind. The decision is the
			// one at T (or, for gcra, which keeps no update time, stricter); the
			// waits are longer by 5 s; the TTL reaches as far as reset_after.
			for _, s := range manifest.Specs() {
				b.SetTime(S.Add(time.Hour))
				key := "back:" + s.Name
				at := b.Eval(s, key, "4", "10000", "", "4") // full use at T
				b.Eval(s, key+":twin", "4", "10000", "", "4")
				ahead := b.Eval(s, key+":twin", "4", "10000", "", "1") // the same call at T
				b.Advance(-5 * time.Second)
				r := b.Eval(s, key, "4", "10000", "", "1")
				if r.Err != "" || r.Ints[0] != 0 {
					t.Errorf("%s: 5 s behind a full use: %v, want denied", s.Name, r)
					continue
				}
				if d := r.Ints[2] - ahead.Ints[2]; d != 5000 && !(s.Name == "sliding_window" && d >= 5000) {
					t.Errorf("%s: retry_after %d behind vs %d at T (first reply %v): want longer by 5000", s.Name, r.Ints[2], ahead.Ints[2], at)
				}
				if d := r.Ints[3] - ahead.Ints[3]; d != 5000 {
					t.Errorf("%s: reset_after %d behind vs %d at T: want longer by 5000", s.Name, r.Ints[3], ahead.Ints[3])
				}
				// retried retry_after_ms after the call behind the clock: admitted,
				// and its TTL covers reset_after
				b.Advance(time.Duration(r.Ints[2]) * time.Millisecond)
				w := b.Eval(s, key, "4", "10000", "", "1")
				if w.Err != "" || w.Ints[0] != 1 {
					t.Errorf("%s: retried after retry_after behind the clock: %v", s.Name, w)
				}
				if ttl := b.PTTL(key); ttl < w.Ints[3] {
					t.Errorf("%s: TTL %d ms shorter than reset_after %d", s.Name, ttl, w.Ints[3])
				}
			}
		})
	}
}
