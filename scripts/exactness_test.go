package scripts_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/redisrate/redisrate/internal/manifest"
	st "github.com/redisrate/redisrate/scripts/internal/scripttest"
)

// TestExactness (guarantee 6): at 3/s, 7/min, 1/h, 1000/s and 13/s, now
// and just before the year 2200, every script's replies equal the exact
// model call for call while a drained key is used unit by unit at its
// retry_after; 1 ms earlier it is denied whenever the model says so; and
// the k-th unit after the drain is admitted exactly at the first whole
// millisecond at or after the exact time (T0 + k * period / limit for the
// continuous buckets, T0 + ceil(k / limit) * period for the discrete ones).
func TestExactness(t *testing.T) {
	for _, b := range st.BothClocked(t) {
		t.Run(b.Name, func(t *testing.T) {
			b.Rebind(t) // the backend's helpers report to this subtest
			rates := []struct{ limit, periodMS int64 }{{3, 1000}, {7, 60000}, {1, 3600000}, {1000, 1000}, {13, 1000}}
			epochs := []time.Time{st.Epoch, time.Date(2199, 12, 31, 23, 0, 0, 987654000, time.UTC)}
			calls := 0
			for _, s := range manifest.Specs() {
				for _, rate := range rates {
					for e, t0 := range epochs {
						b.SetTime(t0)
						key := fmt.Sprintf("exact:%s:%d:%d", s.Name, rate.limit, e)
						L, P := fmt.Sprint(rate.limit), fmt.Sprint(rate.periodMS)
						m := st.NewModel(s, micros(t0))
						m.MsClock = b.Real
						call := func(argv ...string) st.Reply {
							t.Helper()
							c, perr := st.Parse(s, 1, argv)
							if perr != "" {
								t.Fatal(perr)
							}
							got := b.Eval(s, key, argv...)
							want := m.Call(micros(b.Now()), c)
							calls++
							if fmt.Sprint(got.Ints) != fmt.Sprint(want) || got.Err != "" || b.PTTL(key) != m.TTL() {
								t.Fatalf("%s %d/%dms at %v + %v, %v: %v ttl %d, model %v ttl %d",
									s.Name, rate.limit, rate.periodMS, t0, b.Now().Sub(t0), argv, got, b.PTTL(key), want, m.TTL())
							}
							return got
						}
						if r := call(L, P, "", L); r.Ints[0] != 1 || r.Ints[1] != 0 {
							t.Fatalf("%s: the drain: %v", s.Name, r)
						}
						n := min(20, 2*rate.limit+2)
						for k := int64(1); k <= n; k++ {
							r := call(L, P, "", "1")
							if r.Ints[0] == 0 {
								back := b.Now()
								b.Advance(time.Duration(r.Ints[2]-1) * time.Millisecond)
								call(L, P, "", "1", "check")
								b.SetTime(back)
								b.Advance(time.Duration(r.Ints[2]) * time.Millisecond)
								r = call(L, P, "", "1")
							}
							if r.Ints[0] != 1 {
								t.Fatalf("%s: unit %d not admitted at its retry_after: %v", s.Name, k, r)
							}
							var want int64 // µs after T0 of the k-th admission
							P := rate.periodMS * 1000
							switch s.Name {
							case "gcra", "leaky_bucket":
								want = st.CeilDiv(k*P, rate.limit*1000) * 1000
							case "token_bucket", "fixed_window", "sliding_log":
								want = st.CeilDiv(k, rate.limit) * P
							default:
								continue // aligned windows: the model says
							}
							if got := b.Now().Sub(t0).Microseconds(); got != want {
								t.Errorf("%s %d per %d ms from %v: unit %d admitted %d us after the drain, want %d", s.Name, rate.limit, rate.periodMS, t0, k, got, want)
							}
						}
					}
				}
			}
			t.Logf("%d calls equal to the exact model", calls)
		})
	}
}
