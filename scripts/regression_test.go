package scripts_test

import (
	"strings"
	"testing"
	"time"

	"github.com/redisrate/redisrate/internal/manifest"
	"github.com/redisrate/redisrate/scripts"
	st "github.com/redisrate/redisrate/scripts/internal/scripttest"
)

// Inputs that once got wrong answers (exponents, long mantissas, values
// past a maximum, NaN, hand-typed state, a step back across a window, the
// range error's naming, the log's cap), each a regression test on both
// backends. OOM is TestOOM and the time bound is TestBoundedWork, on real
// Redis.

// onServers runs f on each real server that start starts (Redis, Valkey),
// each in a subtest named for it.
func onServers(t *testing.T, start func(testing.TB) []*st.Backend, f func(*testing.T, *st.Backend)) {
	for _, b := range start(t) {
		t.Run(b.Name, func(t *testing.T) {
			b.Rebind(t)
			f(t, b)
		})
	}
}

func spec(name string) manifest.Spec {
	s, ok := manifest.Lookup(name)
	if !ok {
		panic(name)
	}
	return s
}

// repro runs a reproduction's call several times on key: every time the
// error want, and the key never changed.
func repro(t *testing.T, b *st.Backend, s manifest.Spec, key, want string, argv ...string) {
	t.Helper()
	before := b.Snap(key)
	for range 3 {
		if r := b.Eval(s, key, argv...); r.Err != want {
			t.Errorf("%s: %s %q: %v, want %q", b.Name, s.Name, argv, r, want)
		}
	}
	b.Unchanged(s.Name+" reproduction", key, before)
}

// 1. An exponent of 7+ digits was misread: cost 1e-0000000 admitted every
// time without being recorded; 1e+0000001 as a limit refused as past 1e15.
func TestExponentRefused(t *testing.T) {
	for _, b := range st.Both(t) {
		repro(t, b, spec("token_bucket"), "a1", "ERR invalid cost '1e-0000000': must be a whole number from 0 to 10^15", "1", "60000", "", "1e-0000000")
		repro(t, b, spec("token_bucket"), "a1", "ERR invalid limit '1e+0000001': must be a whole number from 1 to 10^12", "1e+0000001", "60000")
		// the same limit as a whole number: one call admitted and recorded
		tb := spec("token_bucket")
		if r := b.Eval(tb, "a1w", "1", "60000", "", "1"); r.Err != "" || r.Ints[0] != 1 {
			t.Errorf("%s: the first unit of 1 per minute: %v, want admitted", b.Name, r)
		}
		if r := b.Eval(tb, "a1w", "1", "60000", "", "1"); r.Err != "" || r.Ints[0] != 0 {
			t.Errorf("%s: the second unit of 1 per minute: %v, want denied", b.Name, r)
		}
	}
}

// 2. A 17-digit mantissa rounded: cost 100.00000000000001 admitted against
// a capacity of 100.
func TestLongMantissaRefused(t *testing.T) {
	for _, b := range st.Both(t) {
		repro(t, b, spec("gcra"), "a3", "ERR invalid cost '100.00000000000001': must be a whole number from 0 to 10^15", "100", "1000", "", "100.00000000000001")
		if r := b.Eval(spec("gcra"), "a3w", "100", "1000", "", "101"); r.Err != "" || r.Ints[0] != 0 || r.Ints[2] != -1 {
			t.Errorf("%s: cost 101 of capacity 100: %v, want never", b.Name, r)
		}
	}
}

// A cost past 1e15 was accepted. (Under v4 a limit past 10^12 of the
// buckets is named first.)
func TestPastMaxRefused(t *testing.T) {
	for _, b := range st.Both(t) {
		repro(t, b, spec("token_bucket"), "a4", "ERR invalid cost '1000000000000000.1': must be a whole number from 0 to 10^15", "1000000000000", "1", "", "1000000000000000.1")
		repro(t, b, spec("fixed_window"), "a4", "ERR invalid cost '1000000000000000.1': must be a whole number from 0 to 10^15", "1000000000000000", "1", "", "1000000000000000.1")
		repro(t, b, spec("gcra"), "a4", "ERR invalid cost '1000000000000001': must be a whole number from 0 to 10^15", "1000", "1", "", "1000000000000001")
		repro(t, b, spec("gcra"), "a4", "ERR invalid limit '1000000000000000': must be a whole number from 1 to 10^12", "1000000000000000", "1", "", "1000000000000001")
	}
}

// 4. A 400-digit fraction became NaN: as a cost, admitted without being
// recorded; as a burst, silently the default.
func TestNaNRefused(t *testing.T) {
	frac := "0." + strings.Repeat("1", 400)
	cut := frac[:40] + "..."
	for _, b := range st.Both(t) {
		for _, name := range []string{"sliding_window", "token_bucket"} {
			repro(t, b, spec(name), "nan:"+name, "ERR invalid cost '"+cut+"': must be a whole number from 0 to 10^15", "10", "1000", "", frac)
		}
		repro(t, b, spec("token_bucket"), "nanb", "ERR invalid burst '"+cut+"': must be a whole number up to 10^12, or 0 or empty for limit", "10", "1000", frac)
		repro(t, b, spec("sliding_window"), "nanb", "ERR invalid burst '"+cut+"': must be empty, 0 or equal to limit for sliding_window", "10", "1000", frac)
	}
}

// 6. sliding_window discarded its state when TIME stepped back across a
// window boundary: 10 per 1000 ms, 20 calls at S+0.5 ms, 1 at S-0.5 ms, 20
// at S+0.6 ms admitted 19 in window S. (The waits after a step back, of
// every script, are TestClockStepBack.)
func TestStepBackAcrossWindow(t *testing.T) {
	for _, b := range st.BothClocked(t) {
		t.Run(b.Name, func(t *testing.T) {
			b.Rebind(t) // the backend's helpers report to this subtest
			sw := spec("sliding_window")
			S := time.Date(2026, 11, 22, 12, 0, 1, 0, time.UTC) // a window boundary
			admitted := 0
			call := func(at time.Duration, n int) {
				b.SetTime(S.Add(at))
				for range n {
					if r := b.Eval(sw, "repro6", "10", "1000"); r.Err != "" {
						t.Fatal(r)
					} else if r.Ints[0] == 1 {
						admitted++
					}
				}
			}
			call(500*time.Microsecond, 20)
			call(-500*time.Microsecond, 1)
			call(600*time.Microsecond, 20)
			if admitted != 10 {
				t.Errorf("window S admitted %d, want 10 (v1 admitted 19)", admitted)
			}
		})
	}
}

// 7. Hand-typed values that looked like state were taken as state.
func TestHandTypedStateRefused(t *testing.T) {
	for _, b := range st.Both(t) {
		for _, c := range []struct{ script, value string }{
			{"gcra", "gcra 1.0e999 0"}, {"fixed_window", "fw 10 20"}, {"leaky_bucket", "lb 1 2"},
			{"sliding_window", "sw 1 2 3"}, {"token_bucket", "tb 1.0e999 1.0e999"}, {"gcra", "gcra 1 2"},
		} {
			s := spec(c.script)
			b.Client.Set(st.Ctx, "c1", c.value, 0)
			repro(t, b, s, "c1", "ERR key holds a value that is not "+c.script+" state: left untouched", "10", "1000")
		}
	}
}

// 8. Errors named the wrong argument: burst was at fault, limit was named;
// burst was named though it was not passed. (Under v4 a period past the
// range is named, with the limit and the burst the caller gave.)
func TestRangeErrorNaming(t *testing.T) {
	for _, b := range st.Both(t) {
		repro(t, b, spec("gcra"), "e", "ERR invalid burst '1000000000000000.1': must be a whole number up to 10^12, or 0 or empty for limit", "10", "1000", "1000000000000000.1")
		repro(t, b, spec("gcra"), "e", "ERR invalid period_ms '1000000000000': must be at most 31622400000 (366 days) with limit 3003", "3003", "1000000000000")
		repro(t, b, spec("gcra"), "e", "ERR invalid period_ms '1000000000000': must be at most 31622400000 (366 days) with limit 3003 and burst 7", "3003", "1000000000000", "7")
		repro(t, b, spec("gcra"), "e", "ERR invalid burst '200000': must be at most 10^12 * limit / period_ms (a full drain within 10^12 ms) with limit 1 and period_ms 86400000", "1", "86400000", "200000")
	}
}

// 9. A sliding_log of 1e6 entries blocked Redis 353 ms: limit is capped at
// 10000 (the time bound at the cap is TestBoundedWork).
func TestSlidingLogCap(t *testing.T) {
	for _, b := range st.Both(t) {
		repro(t, b, spec("sliding_log"), "log", "ERR invalid limit '1000000': must be a whole number from 1 to 10000", "1000000", "60000")
		repro(t, b, spec("sliding_log"), "log", "ERR invalid limit '10001': must be a whole number from 1 to 10000", "10001", "60000")
		if r := b.Eval(spec("sliding_log"), "log", "10000", "60000", "", "10000"); r.Err != "" || r.Ints[0] != 1 {
			t.Errorf("%s: 10000 entries at the cap: %v", b.Name, r)
		}
		if n := b.Client.ZCard(st.Ctx, "log").Val(); n != 10001 {
			t.Errorf("%s: the log holds %d members, want 10000 entries and the marker", b.Name, n)
		}
	}
}

// TestResetNumkeys: reset.lua called without its key (numkeys 0) answers
// the contract's error, not a raw Lua error, by EVAL and EVALSHA.
func TestResetNumkeys(t *testing.T) {
	for _, b := range st.Both(t) {
		want := "ERR invalid numkeys '0': must be 1 (the key to reset)"
		if err := b.Client.Eval(st.Ctx, scripts.ResetSource, nil).Err(); err == nil || err.Error() != want {
			t.Errorf("%s: reset.lua by EVAL with numkeys 0: %v, want %q", b.Name, err, want)
		}
		if err := b.Client.EvalSha(st.Ctx, scripts.ResetSHA1, nil).Err(); err == nil || err.Error() != want {
			t.Errorf("%s: reset.lua by EVALSHA with numkeys 0: %v, want %q", b.Name, err, want)
		}
		if !st.ContractError(want) {
			t.Errorf("%q is not among the contract's errors", want)
		}
	}
}
