package scripts_test

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redisrate/redisrate/internal/manifest"
	st "github.com/redisrate/redisrate/scripts/internal/scripttest"
)

// States at their edges: a sliding log's marker near 2^53, gcra's level
// near the year 2200, a clock that steps back behind a bucket's time; each
// on miniredis and every real server (Redis 7, Valkey 8), by EVALSHA and,
// on the real servers, by FCALL. (FCALL under OOM is TestOOM here and the
// Go client's OOM test; the order of argument errors is in argCases.)

// eachCallKind runs call on b by EVALSHA and, on a real server, by FCALL
// on a second key prepared the same way (prepare may be nil), and gives
// both replies to check.
func eachCallKind(t *testing.T, b *st.Backend, s manifest.Spec, key string, prepare func(key string), check func(kind, key string, r st.Reply), argv ...string) {
	t.Helper()
	kinds := []string{"EVALSHA"}
	if b.Real {
		b.LoadLibrary()
		kinds = append(kinds, "FCALL")
	}
	for _, kind := range kinds {
		k := key + ":" + kind
		if prepare != nil {
			prepare(k)
		}
		if kind == "EVALSHA" {
			check(kind, k, b.Eval(s, k, argv...))
		} else {
			check(kind, k, b.FCall(s, []string{k}, argv...))
		}
	}
}

// A marker near 2^53 was once accepted, and new entries, whose
// numbers were no longer exact, overwrote each other: 6 of 6 admitted
// against 4 per minute. A marker whose sequence is past 2^53 - 1 is not
// state (reset.lua refuses it too); one at 2^53 - 1 starts the sequence
// again, and the limit holds.
func TestSlidingLogMarkerPast2p53(t *testing.T) {
	s := spec("sliding_log")
	for _, b := range st.Both(t) {
		marker := func(score float64) func(string) {
			return func(k string) {
				if err := b.Client.ZAdd(st.Ctx, k, redis.Z{Score: score, Member: s.Tag}).Err(); err != nil {
					t.Fatal(err)
				}
			}
		}
		eachCallKind(t, b, s, "rv1:past", marker(-9007199254740992), func(kind, k string, r st.Reply) {
			before := b.Snap(k)
			for i := range 6 {
				if i > 0 {
					if kind == "EVALSHA" {
						r = b.Eval(s, k, "4", "60000")
					} else {
						r = b.FCall(s, []string{k}, "4", "60000")
					}
				}
				if r.Err != st.StateError(s, "") {
					t.Errorf("%s %s: call %d on a marker at -2^53: %v, want %q", b.Name, kind, i+1, r, st.StateError(s, ""))
				}
			}
			b.Unchanged(kind+" on a marker at -2^53", k, before)
			if n, err := b.Reset(k); err == nil || n != 0 {
				t.Errorf("%s: reset.lua of a marker at -2^53: %d %v, want refused", b.Name, n, err)
			}
			b.Unchanged("reset.lua on a marker at -2^53", k, before)
		}, "4", "60000")
		eachCallKind(t, b, s, "rv1:last", marker(-9007199254740991), func(kind, k string, r st.Reply) {
			admitted := 0
			for i := range 6 {
				if i > 0 {
					if kind == "EVALSHA" {
						r = b.Eval(s, k, "4", "60000")
					} else {
						r = b.FCall(s, []string{k}, "4", "60000")
					}
				}
				if r.Err != "" {
					t.Fatalf("%s %s: call %d on a marker at -(2^53 - 1): %v", b.Name, kind, i+1, r)
				}
				admitted += int(r.Ints[0])
			}
			if admitted != 4 {
				t.Errorf("%s %s: %d of 6 admitted against 4 per minute from the last sequence number", b.Name, kind, admitted)
			}
			if got := b.Client.ZScore(st.Ctx, k, s.Tag).Val(); got != -8 {
				t.Errorf("%s %s: the marker after 4 units from the last sequence number: %v, want -8 (started again with the other sign: 2 * 4 + 0)", b.Name, kind, got)
			}
		}, "4", "60000")
	}
}

// dec2199 is 2199-12-01, a month before the contract's horizon.
var dec2199 = time.Date(2199, 12, 1, 0, 0, 0, 0, time.UTC)

// gcra once wrote a TAT past 2^53 that it then refused ("not gcra state"
// for as long as the key lived). Under :4 it writes the level (10^12 units
// of 366 days: 3.16224 * 10^25 in units of 1/period_us, 26 digits) and its
// time, and reads them back, at 2199-12-01 too.
func TestGCRAStateNear2200(t *testing.T) {
	s := spec("gcra")
	for _, b := range st.BothClocked(t) {
		b.SetTime(dec2199)
		want := fmt.Sprintf("gcra:4 31622400000000000000000000 %d", dec2199.UnixMicro())
		eachCallKind(t, b, s, "rv3", nil, func(kind, k string, r st.Reply) {
			if !r.Equal(st.Reply{Ints: []int64{1, 0, 0, 31622400000, 1e12, 1, 1e12}}) {
				t.Errorf("%s %s at 2199-12-01: %v, want [1 0 0 31622400000 1000000000000 1 1000000000000]", b.Name, kind, r)
			}
			if v := b.Client.Get(st.Ctx, k).Val(); v != want || !st.ValidState(s, v) {
				t.Errorf("%s %s: state %q, want %q, valid state", b.Name, kind, v, want)
			}
			// read back: full, the next unit 31.6224 us away
			if r := b.Eval(s, k, "1000000000000", "31622400000", "", "1", "check"); !r.Equal(st.Reply{Ints: []int64{0, 0, 1, 31622400000, 1e12, 1, 0}}) {
				t.Errorf("%s %s: the next call: %v, want [0 0 1 31622400000 1000000000000 1 0]", b.Name, kind, r)
			}
		}, "1000000000000", "31622400000", "", "1000000000000")
	}
}

// The rule gcra once broke: no script writes what it would refuse,
// for any TIME before 2200 and any combination in the accepted range
// (limit and burst up to 10^12, period_ms up to 366 days, a full drain
// within 10^12 ms): random combinations, drawn log-uniformly, and costs in
// 2199, each written, then read by a check that must not fail.
func TestNoScriptWritesWhatItRefuses(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 3))
	logUniform := func(hi int64) int64 { return max(1, min(hi, int64(math.Exp(rng.Float64()*math.Log(float64(hi)+1))))) }
	for _, b := range st.BothClocked(t) {
		for _, s := range manifest.Specs() {
			for i := range 60 {
				at := dec2199.Add(-time.Duration(rng.Int64N(int64(330 * 24 * time.Hour))))
				b.SetTime(at)
				period := logUniform(st.MaxPeriodMS)
				if rng.IntN(2) == 0 {
					period = []int64{1, 1000, 60000, 86400000, 2592000000, st.MaxPeriodMS}[rng.IntN(6)]
				}
				limit := logUniform(min(s.MaxLimit, 1e12))
				burst := ""
				if !s.Window && rng.IntN(2) == 0 {
					most := new(big.Int).Quo(new(big.Int).Mul(big.NewInt(1e12), big.NewInt(limit)), big.NewInt(period))
					top := int64(1e12)
					if most.IsInt64() {
						top = min(top, most.Int64())
					}
					burst = strconv.FormatInt(logUniform(min(top, s.MaxLimit)), 10)
				}
				capacity := limit
				if burst != "" {
					capacity, _ = strconv.ParseInt(burst, 10, 64)
				}
				cost := strconv.FormatInt(1+rng.Int64N(min(capacity, 10000)), 10)
				key := fmt.Sprintf("nr:%s:%d", s.Name, i)
				argv := a(strconv.FormatInt(limit, 10), strconv.FormatInt(period, 10), burst, cost)
				if r := b.Eval(s, key, argv...); r.Err != "" {
					t.Errorf("%s: %s %v at %v: %v", b.Name, s.Name, argv, at, r)
					continue
				}
				if !s.Log {
					if v := b.Client.Get(st.Ctx, key).Val(); !st.ValidState(s, v) {
						t.Errorf("%s: %s %v at %v wrote %q, which is not its state", b.Name, s.Name, argv, at, v)
					}
				}
				b.Advance(time.Duration(rng.Int64N(int64(time.Second))))
				if r := b.Eval(s, key, append(argv[:3:3], "1", "check")...); r.Err != "" {
					t.Errorf("%s: %s %v at %v: the call after refused what it wrote: %v", b.Name, s.Name, argv, at, r)
				}
			}
		}
	}
}

// After a clock step back, gcra under :3 decides as leaky_bucket does, as
// of the time its state records (under :2 it was stricter, deciding on the
// clock it read); and each header says its modes and what its state means
// under other limits.
func TestContinuousClockStepBack(t *testing.T) {
	for _, b := range st.BothClocked(t) {
		want := map[string][]int64{"gcra": {1, 0, 0, 1001, 3, 1, 1}, "leaky_bucket": {1, 0, 0, 1001, 3, 1, 1}}
		for name, w := range want {
			s := spec(name)
			b.SetTime(st.Epoch)
			key := "rv4:" + name
			if r := b.Eval(s, key, "3", "1000", "", "2"); r.Err != "" || r.Ints[0] != 1 {
				t.Fatalf("%s: %s: 2 of 3: %v", b.Name, name, r)
			}
			b.SetTime(st.Epoch.Add(-time.Microsecond))
			if r := b.Eval(s, key, "3", "1000", "", "1", "check"); !r.Equal(st.Reply{Ints: w}) {
				t.Errorf("%s: %s stepped back 1 us after 2 of 3 units: %v, want %v", b.Name, name, r, w)
			}
		}
	}
	for _, s := range manifest.Specs() {
		head := s.Source[:strings.Index(s.Source, "\n-- ---- ")] // the header, up to the first section
		for _, word := range []string{"upto", "refund", "force", "other limits"} {
			if !strings.Contains(head, word) {
				t.Errorf("%s's header does not say %q", s.Name, word)
			}
		}
	}
}
