package scripts_test

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redisrate/redisrate/internal/manifest"
	st "github.com/redisrate/redisrate/scripts/internal/scripttest"
)

// A state written under another period_ms (guarantee 12's cap): whatever
// wrote it, a continuous bucket reads at most twice its own capacity, so
// no wait it answers is longer than 2 * burst * period_ms / limit of the
// limits it is called with. Under v2.1, gcra moved from 1 per day to 1000
// per second waited a day, and from 4 per 10^12 ms 31.7 years. (v4 reads
// no v2 state: its TAT could be read bounded or draining, not both.)
func TestChangedPeriodWaitsBounded(t *testing.T) {
	type change struct {
		from [3]string // the limit that wrote the state, its cost a full bucket
		to   [3]string
	}
	changes := []change{
		{[3]string{"1", "86400000", "1"}, [3]string{"1000", "1000", "1000"}},
		{[3]string{"4", "1000000000000", "4"}, [3]string{"1000", "1000", "1000"}},
		{[3]string{"4", "1000000000000", "4"}, [3]string{"1", "1", "1"}},
		{[3]string{"1", "86400000", "1"}, [3]string{"7", "60000", "3"}},
	}
	for _, b := range st.BothClocked(t) {
		for _, s := range []manifest.Spec{spec("gcra"), spec("leaky_bucket")} {
			for _, fcall := range modeKinds(b) {
				for i, c := range changes {
					b.SetTime(st.Epoch)
					// the state as v4 writes it
					states := map[string]func(key string){
						"v4": func(key string) {
							if r := modeCall(b, s, fcall, key, c.from, mustInt(c.from[2]), ""); r.Err != "" || r.Ints[0] != 1 {
								t.Fatalf("%s: %v", s.Name, r)
							}
						},
					}
					for version, write := range states {
						key := fmt.Sprintf("period:%s:%t:%d:%s", s.Name, fcall, i, version)
						write(key)
						l, p, burst := mustInt(c.to[0]), mustInt(c.to[1]), mustInt(c.to[2])
						bound := st.CeilDiv(2*burst*p, l)
						r := modeCall(b, s, fcall, key, c.to, 1, "")
						if r.Err != "" || r.Ints[2] > bound || r.Ints[3] > bound {
							t.Errorf("%s: %s: state of %v (%s, %q) under %v: %v, want waits of at most %d ms", b.Name, s.Name, c.from, version, b.Get(key), c.to, r, bound)
						}
						if r.Err == "" && r.Ints[0] == 0 {
							b.Advance(time.Duration(r.Ints[2]) * time.Millisecond)
							if r := modeCall(b, s, fcall, key, c.to, 1, ""); r.Err != "" || r.Ints[0] != 1 {
								t.Errorf("%s: %s: state of %v (%s) under %v, retried after its retry_after: %v", b.Name, s.Name, c.from, version, c.to, r)
							}
							b.SetTime(st.Epoch)
						}
					}
				}
			}
		}
	}
}

func mustInt(s string) int64 {
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		panic(err)
	}
	return v
}

// TestChangedPeriodAlternating: leaky_bucket (and gcra) called in turn with
// `2 1000000` (2 per 1000 s) and `1 1` (1 per ms) admitted 7 in 20 ms under
// v2.1, each limit reading the other's level in its own units. Under :3 the
// level is one amount for both, and each call reads it capped at twice its
// own capacity (guarantee 12: a debt past that is forgiven), so `1 1`
// forgives `2 1000000`'s level 2 ms after it and may write over it: the
// calls admit no more than guarantee 4 allows the more permissive limit
// (1 + 20 in 20 ms), and the model (which the other tables hold the
// scripts to call by call) says how many exactly.
func TestChangedPeriodAlternating(t *testing.T) {
	for _, b := range st.BothClocked(t) {
		for _, s := range []manifest.Spec{spec("leaky_bucket"), spec("gcra")} {
			for _, fcall := range modeKinds(b) {
				for _, first := range []int{0, 1} {
					key := fmt.Sprintf("alt:%s:%t:%d", s.Name, fcall, first)
					b.SetTime(st.Epoch)
					m := st.NewModel(s, micros(b.Now()))
					m.MsClock = b.Real
					lims := [2][3]string{{"2", "1000000", ""}, {"1", "1", ""}}
					var all int64
					for i := range 40 { // one call every 0.5 ms: 20 ms
						lim := lims[(i+first)%2]
						r := modeCall(b, s, fcall, key, lim, 1, "")
						want := m.Call(micros(b.Now()), mustParse(t, s, []string{lim[0], lim[1], lim[2], "1", ""}))
						if r.Err != "" || fmt.Sprint(r.Ints) != fmt.Sprint(want) {
							t.Fatalf("%s: %s: call %d %v: %v, model %v", b.Name, s.Name, i, lim, r, want)
						}
						all += r.Ints[0]
						b.Advance(500 * time.Microsecond)
					}
					if all > 21 {
						t.Errorf("%s: %s: alternating `2 1000000` and `1 1` for 20 ms: %d admitted, past 1 + 20", b.Name, s.Name, all)
					}
				}
			}
		}
	}
}

// TestSlidingLogRestartKeepsEntries: when the sequence reaches 2^52 - 1
// with entries held, it starts again from 1 with the other sign (v4: the
// marker holds 2 * seq + sign), so no new entry replaces an old one and no
// entry held is renamed. Under v2.1 it started at 1 while members 1, 2, 3
// existed, and 8 were admitted in 60 s against 5; v3 renumbered every
// entry held, one ZADD each.
func TestSlidingLogRestartKeepsEntries(t *testing.T) {
	s := spec("sliding_log")
	for _, b := range st.BothClocked(t) {
		for _, fcall := range modeKinds(b) {
			key := fmt.Sprintf("restart:%t", fcall)
			lim := [3]string{"5", "60000", ""}
			b.SetTime(st.Epoch)
			// a log whose sequence is 3 short of its end, sign 0: its
			// entries are numbered 2^52 - 2 and 2^52 - 1, then -1, -2, ...
			if err := b.Client.ZAdd(st.Ctx, key, redis.Z{Score: -2 * (1<<52 - 3), Member: s.Tag}).Err(); err != nil {
				t.Fatal(err)
			}
			for i := range 3 {
				if r := modeCall(b, s, fcall, key, lim, 1, ""); r.Err != "" || r.Ints[1] != int64(4-i) {
					t.Fatalf("%s: call %d: %v", b.Name, i+1, r)
				}
			}
			for _, m := range []string{"4503599627370494", "4503599627370495", "-1"} {
				if err := b.Client.ZScore(st.Ctx, key, m).Err(); err != nil {
					t.Errorf("%s (FCALL %t): no entry %s after the restart: %v", b.Name, fcall, m, b.Snap(key))
				}
			}
			admitted := int64(0)
			for range 5 {
				b.Advance(time.Millisecond)
				r := modeCall(b, s, fcall, key, lim, 1, "")
				if r.Err != "" {
					t.Fatalf("%s: %v", b.Name, r)
				}
				admitted += r.Ints[0]
			}
			if admitted != 2 {
				t.Errorf("%s (FCALL %t): after the restart at 2^52 - 1, %d of 5 admitted; 3 were held of 5 per minute, want 2", b.Name, fcall, admitted)
			}
			if n := b.Client.ZCard(st.Ctx, key).Val(); n != 6 {
				t.Errorf("%s (FCALL %t): the log holds %d members, want the marker and 5 entries: %v", b.Name, fcall, n, b.Snap(key))
			}
			// a refund takes the newest back, and the same again is admitted
			if r := modeCall(b, s, fcall, key, lim, 1, "refund"); r.Err != "" || r.Ints[6] != 1 {
				t.Errorf("%s: a refund of 1 after the restart: %v", b.Name, r)
			}
			if r := modeCall(b, s, fcall, key, lim, 2, "check"); r.Err != "" || r.Ints[0] != 0 {
				t.Errorf("%s: after a refund of 1, 2 more: %v, want denied", b.Name, r)
			}
		}
	}
}

// TestSlidingLogSeveralKeysBoundedWork (guarantee 11): with k keys a call's
// cost is at most 10000 / k (else an error naming cost), and a call trims
// at most 10000 / k expired entries a key, the rest later, while it decides
// exactly: 8 keys full of 10000 entries each, expired, then calls of 8
// keys of cost 1250, each adding at most 10000 entries and removing at
// most 10000 in all (under v2.1 one call trimmed 80,000 and added 80,000,
// 60 to 120 ms of Redis).
func TestSlidingLogSeveralKeysBoundedWork(t *testing.T) {
	s := spec("sliding_log")
	for _, b := range st.BothClocked(t) {
		for _, fcall := range modeKinds(b) {
			var keys []string
			var argv []string
			for i := 1; i <= 8; i++ {
				keys = append(keys, fmt.Sprintf("{o:%t}k%d", fcall, i))
				argv = append(argv, "10000", "2000", "")
				if i == 1 {
					argv = append(argv, "1250", "")
				}
			}
			call := func(argv []string) st.Reply {
				if fcall {
					return b.FCall(s, keys, argv...)
				}
				return b.EvalKeys(s.Source, s.SHA1, keys, argv...)
			}
			over := append([]string(nil), argv...)
			over[3] = "1251"
			if r := call(over); r.Err != "ERR invalid cost '1251': with 8 keys must be at most 1250" {
				t.Errorf("%s: 8 keys, cost 1251: %v", b.Name, r)
			}
			b.SetTime(st.Epoch)
			for _, k := range keys {
				if r := modeCall(b, s, fcall, k, [3]string{"10000", "2000", ""}, 10000, ""); r.Err != "" || r.Ints[0] != 1 {
					t.Fatalf("%s: filling %s: %v", b.Name, k, r)
				}
			}
			total := func() int64 {
				var n int64
				for _, k := range keys {
					n += b.Client.ZCard(st.Ctx, k).Val()
				}
				return n
			}
			b.Advance(2100 * time.Millisecond)
			for round := range 8 {
				before := total()
				r := call(argv)
				if r.Err != "" || r.Ints[0] != 1 || r.Ints[1] != 10000-1250*int64(round+1) {
					t.Fatalf("%s: round %d: 8 keys, cost 1250, after the 10000 expired: %v", b.Name, round, r)
				}
				after := total()
				if removed := before + 8*1250 - after; removed > 10000 {
					t.Errorf("%s: round %d: one call of 8 keys removed %d entries, want at most 10000 (added 10000)", b.Name, round, removed)
				}
			}
		}
	}
}
