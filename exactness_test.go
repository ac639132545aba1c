package redisrate

import (
	"fmt"
	"testing"
	"time"
)

// exactRates are rates whose emission interval is not a whole number of
// milliseconds (3/s, 7/min) or is one exactly (1000/s, 1/h): the classic
// off-by-one of float arithmetic.
var exactRates = []struct {
	limit  int64
	period int64 // ms
}{{3, 1000}, {7, 60000}, {1, 3600000}, {1000, 1000}, {13, 1000}}

// exactClocks are today and a clock in 2045, both a fraction of a ms in.
var exactClocks = map[string]time.Time{
	"2026": epoch2026,
	"2045": time.Date(2045, 3, 14, 15, 9, 26, 535897000, time.UTC),
}

// TestExactnessContinuous: for GCRA and the leaky bucket, emptying the
// bucket one unit at a time gives remaining burst-1, ..., 0, and k units
// come back exactly ceil(k * period / limit) ms later, not 1 ms sooner.
func TestExactnessContinuous(t *testing.T) {
	for _, a := range []Algorithm{GCRA, LeakyBucket} {
		for cname, clock := range exactClocks {
			for _, r := range exactRates {
				t.Run(fmt.Sprintf("%s/%s/%d per %dms", a, cname, r.limit, r.period), func(t *testing.T) {
					f := newFakeRedis(t)
					f.setClock(clock)
					lim, per := fmt.Sprint(r.limit), fmt.Sprint(r.period)
					for i := int64(1); i <= r.limit; i++ {
						cost := "1"
						if i == 1 && r.limit > oneByOne {
							// most of a large burst at once, the last units one by one
							i = r.limit - oneByOne
							cost = fmt.Sprint(i)
						}
						got := f.mustEval(a, "k", lim, per, "", cost)
						reset := ceilDivInt(i*r.period, r.limit)
						if want := []int64{1, r.limit - i, 0, reset, r.limit, 1}; !equalInts(got, want) {
							t.Fatalf("call %d: got %v, want %v", i, got, want)
						}
					}
					start := f.now
					interval := ceilDivInt(r.period, r.limit)
					if got, want := f.mustEval(a, "k", lim, per), []int64{0, 0, interval, r.period, r.limit, 1}; !equalInts(got, want) {
						t.Fatalf("empty: got %v, want %v", got, want)
					}
					ks := []int64{1, 2, r.limit - 1, r.limit}
					if r.limit > 20 {
						ks = append(ks, 7, 333, r.limit/2+1)
					}
					for _, k := range ks {
						if k < 1 || k > r.limit {
							continue
						}
						at := ceilDivInt(k*r.period, r.limit) // ms after the bucket was emptied
						f.setClock(start.Add(time.Duration(at-1) * time.Millisecond))
						if got := f.mustEval(a, "k", lim, per, "", "0"); got[1] != k-1 {
							t.Errorf("%d ms after empty: remaining %d, want %d", at-1, got[1], k-1)
						}
						f.setClock(start.Add(time.Duration(at) * time.Millisecond))
						got := f.mustEval(a, "k", lim, per, "", "0")
						if want := []int64{1, k, 0, r.period - at, r.limit, 1}; !equalInts(got, want) {
							t.Errorf("%d ms after empty (%d intervals): got %v, want %v", at, k, got, want)
						}
					}
					// exactly one interval after empty: one unit, and only one
					f.setClock(start.Add(time.Duration(interval) * time.Millisecond))
					if got := f.mustEval(a, "k", lim, per); got[0] != 1 || got[1] != 0 {
						t.Errorf("one interval after empty: got %v, want admitted with 0 left", got)
					}
					if got := f.mustEval(a, "k", lim, per); got[0] != 0 {
						t.Errorf("a second unit one interval after empty: got %v, want denied", got)
					}
				})
			}
		}
	}
}

// TestExactnessDiscrete: the token bucket and the windows give exact
// remaining sequences and an exact retry at the same rates and clocks.
func TestExactnessDiscrete(t *testing.T) {
	for _, a := range []Algorithm{TokenBucket, SlidingWindow, FixedWindow, SlidingLog} {
		for cname, clock := range exactClocks {
			for _, r := range exactRates {
				t.Run(fmt.Sprintf("%s/%s/%d per %dms", a, cname, r.limit, r.period), func(t *testing.T) {
					f := newFakeRedis(t)
					f.setClock(clock)
					lim, per := fmt.Sprint(r.limit), fmt.Sprint(r.period)
					var last []int64
					for i := int64(1); i <= r.limit; i++ {
						cost := "1"
						if i == 1 && r.limit > oneByOne {
							i = r.limit - oneByOne
							cost = fmt.Sprint(i)
						}
						last = f.mustEval(a, "k", lim, per, "", cost)
						if last[0] != 1 || last[1] != r.limit-i || last[4] != r.limit || last[3] <= 0 {
							t.Fatalf("call %d: got %v, want admitted with %d left", i, last, r.limit-i)
						}
					}
					deny := f.mustEval(a, "k", lim, per)
					if deny[0] != 0 || deny[1] != 0 || deny[2] <= 0 || deny[3] != last[3] {
						t.Fatalf("empty: got %v, want denied, 0 left, reset %d", deny, last[3])
					}
					if a != SlidingWindow && deny[2] != r.period {
						t.Errorf("empty: retry_after %d, want the period %d", deny[2], r.period)
					}
					start := f.now
					f.setClock(start.Add(time.Duration(deny[2]-1) * time.Millisecond))
					if got := f.mustEval(a, "k", lim, per); got[0] != 0 || got[2] != 1 {
						t.Errorf("1 ms before retry_after: got %v, want denied with retry_after 1", got)
					}
					f.setClock(start.Add(time.Duration(deny[2]) * time.Millisecond))
					got := f.mustEval(a, "k", lim, per)
					if got[0] != 1 {
						t.Fatalf("at retry_after: got %v, want admitted", got)
					}
					if a != SlidingWindow && got[1] != r.limit-1 {
						// a whole refill or a whole new window
						t.Errorf("at retry_after: remaining %d, want %d", got[1], r.limit-1)
					}
				})
			}
		}
	}
}

// oneByOne is how many units of a large burst are taken one at a time.
const oneByOne = 40

func ceilDivInt(n, d int64) int64 { return (n + d - 1) / d }
