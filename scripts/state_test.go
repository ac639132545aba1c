package scripts_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redisrate/redisrate/internal/manifest"
	st "github.com/redisrate/redisrate/scripts/internal/scripttest"
)

// foreign is something a key can hold before a script's call.
type foreign struct {
	name string
	set  func(c *redis.Client, key string) error
}

func str(v string) func(*redis.Client, string) error {
	return func(c *redis.Client, key string) error { return c.Set(st.Ctx, key, v, 0).Err() }
}

func zset(zs ...redis.Z) func(*redis.Client, string) error {
	return func(c *redis.Client, key string) error { return c.ZAdd(st.Ctx, key, zs...).Err() }
}

const marker = "sliding_log:3"

// foreigners: users' values, hand-typed and v1 states, v2 look-alikes that
// fail the strict parse, other types, sorted sets without a valid marker.
var foreigners = []foreign{
	{"user value", str("order 42")},
	{"empty string", str("")},
	{"number", str("42")},
	{"hand-typed gcra (repro 7)", str("gcra 1 2")},
	{"v1 gcra with 1.0e999 (repro 7)", str("gcra 1.0e999 0")},
	{"v1 fw (repro 7)", str("fw 10 20")},
	{"v1 lb (repro 7)", str("lb 1 2")},
	{"v1 sw (repro 7)", str("sw 1 2 3")},
	{"v1 tb 1.0e999 (repro 7)", str("tb 1.0e999 1.0e999")},
	{"other version", str("gcra:5 1 2")},
	{"a token debt of -0", str("tb:2 -0 1795348800123456")},
	{"a token debt with a leading zero", str("tb:2 -05 1795348800123456")},
	{"a minus sign in a level", str("lb:3 -5 1795348800123456")},
	{"a :4 level of 27 digits", str("gcra:4 100000000000000000000000000 1795348800123456")},
	{"a :4 level of 26 digits, a leading zero", str("gcra:4 01000000000000000000000000 1795348800123456")},
	{"a v3 state (:3), not read by v4", str("gcra:3 5000000 1795348800123456")},
	{"a v2.1 state (:2), not read by v4", str("lb:2 1000000 1795348800123456")},
	{"a :4 state of three fields", str("gcra:4 5 0 1795348800123456")},
	{"tag in capitals", str("GCRA:2 1 2")},
	{"tag alone", str("gcra:2")},
	{"tag and space", str("gcra:2 ")},
	{"one field short", str("gcra:2 1")},
	{"one field over", str("gcra:2 1 2 3")},
	{"double space", str("gcra:2  1 2")},
	{"trailing space", str("gcra:2 1 2 ")},
	{"tab", str("gcra:2\t1 2")},
	{"newline", str("gcra:2 1 2\n")},
	{"negative field", str("gcra:2 -1 2")},
	{"fraction field", str("gcra:2 1.5 2")},
	{"exponent field", str("gcra:2 1e5 2")},
	{"field 2^53", str("gcra:2 1 9007199254740992")},
	{"a TAT past its range", str("gcra:2 13339554827370499 0")}, // AheadMax + 1: reads as AheadMax + 2
	{"a TAT of 18 digits", str("gcra:2 100000000000000000 0")},
	{"a TAT of 17 digits, leading zero", str("gcra:2 01000000000000000 0")},
	{"a second limit's TAT past its range", str("gcra:2 1 0 13339554827370500 0")},
	{"a time past 2250", str("lb:2 0 8835955200000001")},
	{"a window start past 2250", str("sw:2 8835955200001 0 0")}, // ms: 1 ms past 2250
	{"a refill past 2250", str("tb:2 1 8835955200000001")},
	{"a second limit's time past 2250", str("fw:2 1 1 8835955200000001 1")},
	{"field of 17 digits", str("gcra:2 00000000000000001 0")},
	{"field with a leading zero", str("gcra:2 01 0")},
	{"nine limits", str("gcra:2" + strings.Repeat(" 1 2", 9))},
	{"tb field over", str("tb:2 1 2 3")},
	{"tb oversize", str("tb:2 99999999999999999999 1")},
	{"lb fraction", str("lb:2 1.0 2")},
	{"sw two fields", str("sw:2 1 2")},
	{"sw oversize", str("sw:2 1 2 1.0e999")},
	{"fw nine limits", str("fw:2" + strings.Repeat(" 1 2", 9))},
	{"sliding_log tag as a string", str("sliding_log:3 1 2")},
	{"v3's sliding_log marker as a string", str("sliding_log:2 1 2")},
	{"list", func(c *redis.Client, k string) error { return c.RPush(st.Ctx, k, "gcra:2 1 2").Err() }},
	{"set", func(c *redis.Client, k string) error { return c.SAdd(st.Ctx, k, "a").Err() }},
	{"hash", func(c *redis.Client, k string) error { return c.HSet(st.Ctx, k, "gcra:2", "1 2").Err() }},
	{"stream", func(c *redis.Client, k string) error {
		return c.XAdd(st.Ctx, &redis.XAddArgs{Stream: k, Values: []string{"f", "v"}}).Err()
	}},
	{"zset without marker", zset(redis.Z{Score: 1795348800123456, Member: "1"})},
	{"zset, v1 marker", zset(redis.Z{Score: -1, Member: "redisrate:sliding_log"}, redis.Z{Score: 1, Member: "1"})},
	{"zset, marker not an integer", zset(redis.Z{Score: -1.5, Member: marker})},
	{"zset, marker positive", zset(redis.Z{Score: 5, Member: marker})},
	{"zset, marker -2^53 (review 1)", zset(redis.Z{Score: -9007199254740992, Member: marker})},
	{"zset, marker 1e300", zset(redis.Z{Score: -1e300, Member: marker})},
	{"zset, marker and an entry past 2^53 us", zset(redis.Z{Score: -1, Member: marker}, redis.Z{Score: 1.102e16, Member: "1"})},
	{"zset, marker and an entry past 2250", zset(redis.Z{Score: -1, Member: marker}, redis.Z{Score: 8835955200000001, Member: "1"})},
	{"zset, marker and an entry at a fraction of a us", zset(redis.Z{Score: -1, Member: marker}, redis.Z{Score: 1795348800123456.5, Member: "1"})},
}

// states are valid states of each script, written by hand.
var states = map[string][]string{
	"gcra":           {"gcra:4 0 0", "gcra:4 5000000 1795348800123456", "gcra:4" + strings.Repeat(" 1 0", 8), "gcra:4 9007199254740991 8835955200000000", "gcra:4 9007199254740992 1795348800123456", "gcra:4 63244800000000000000000000 1795348800123456", "gcra:4 99999999999999999999999999 1"},
	"token_bucket":   {"tb:2 0 0", "tb:2 3 1795348800123456", "tb:2" + strings.Repeat(" 5 1795348800123456", 3), "tb:2 1 8835955200000000", "tb:2 -5 1795348800123456", "tb:2 -1 0 3 1795348800123456"},
	"leaky_bucket":   {"lb:4 0 0", "lb:4 1000000 1795348800123456", "lb:4 0 8835955200000000", "lb:4 9007199254740991 1795348800123456", "lb:4" + strings.Repeat(" 7 1795348800123456", 3), "lb:4 1000000000000000000000 1795348800123456"},
	"sliding_window": {"sw:2 0 0 0", "sw:2 1795348800000 5 5", "sw:2 1795348800000 5 5 1795348800000 5 5", "sw:2 8835955200000 5 5"},
	"fixed_window":   {"fw:2 0 0", "fw:2 1795348800123456 3", "fw:2 8835955200000000 3"},
}

// TestStateStrict (guarantee 7): a key that holds anything but the
// script's own state gets the exact state error and is left byte for byte
// as it was (GET or content, DUMP on real Redis, TTL), whatever the call
// (a check, a cost of 0 or a real one; on real Redis also by FCALL); valid
// state is read, and argument errors come before the key is read.
func TestStateStrict(t *testing.T) {
	n := 0
	for _, b := range st.Both(t) {
		if b.Real {
			b.LoadLibrary()
		}
		for _, s := range manifest.Specs() {
			var all []foreign
			all = append(all, foreigners...)
			for name, vs := range states { // other scripts' states
				for i, v := range vs {
					all = append(all, foreign{fmt.Sprintf("%s state %d", name, i), str(v)})
				}
			}
			// a real state of each other script, made by a call
			for _, o := range manifest.Specs() {
				if o.Name != s.Name {
					all = append(all, foreign{o.Name + " state by a call", func(c *redis.Client, k string) error {
						if r := b.Eval(o, k, "5", "60000", "", "2"); r.Err != "" {
							return fmt.Errorf("%v", r)
						}
						return nil
					}})
				}
			}
			for i, f := range all {
				for j, argv := range [][]string{a("10", "1000"), a("10", "1000", "", "", "", "20", "60000", ""), a("10", "1000", "", "0"), a("10", "1000", "", "1", "check")} {
					if b.Real && j > 1 {
						break // the same reads; miniredis runs them all
					}
					key := fmt.Sprintf("strict:%s:%d:%d", s.Name, i, j)
					if err := f.set(b.Client, key); err != nil {
						t.Fatal(f.name, err)
					}
					if i%2 == 0 { // half the keys carry a TTL of their own
						if err := b.Client.PExpire(st.Ctx, key, time.Hour).Err(); err != nil {
							t.Fatal(err)
						}
					}
					before := b.Snap(key)
					want := st.ExpectedStateError(s, b.KeyState(key))
					r := b.Eval(s, key, argv...)
					n++
					if want == "" {
						if r.Err != "" {
							t.Errorf("%s: %s on %s: %v, want it read as state", b.Name, s.Name, f.name, r)
						}
						continue
					}
					if !st.SameError(want, r.Err) {
						t.Errorf("%s: %s %v on %s (%v): %v, want %q", b.Name, s.Name, argv, f.name, before, r, want)
					}
					b.Unchanged(s.Name+" on "+f.name, key, before)
					if b.Real && j == 0 { // FCALL of the library: the same error, nothing written
						if r := b.FCall(s, []string{key}, argv...); !st.SameError(want, r.Err) {
							t.Errorf("FCALL %s %v on %s: %v, want %q", s.Function, argv, f.name, r, want)
						}
						b.Unchanged("FCALL "+s.Name+" on "+f.name, key, before)
					}
					if j == 0 { // an argument error comes first
						r := b.Eval(s, key, "10", "0")
						if !strings.HasPrefix(r.Err, "ERR invalid period_ms") {
							t.Errorf("%s: %s bad period on %s: %v, want the argument error", b.Name, s.Name, f.name, r)
						}
					}
				}
			}
			// valid states by hand are read, as this script's state
			for i, v := range states[s.Name] {
				key := fmt.Sprintf("valid:%s:%d", s.Name, i)
				b.Client.Set(st.Ctx, key, v, 0)
				if r := b.Eval(s, key, "10", "1000", "", "1", "check"); r.Err != "" {
					t.Errorf("%s: %s on its own state %q: %v", b.Name, s.Name, v, r)
				}
			}
		}
	}
	t.Logf("%d calls on foreign keys", n)
}

// TestStateErrorTexts pins a few state errors word for word.
func TestStateErrorTexts(t *testing.T) {
	for _, b := range st.BothClocked(t) {
		t.Run(b.Name, func(t *testing.T) {
			b.Rebind(t) // the backend's helpers report to this subtest
			gcra, _ := manifest.Lookup("gcra")
			slog, _ := manifest.Lookup("sliding_log")
			b.Client.Set(st.Ctx, "c1", "gcra 1.0e999 0", 0)
			b.Client.Set(st.Ctx, "tb", "tb:2 3 1795348800123456", 0)
			b.Client.RPush(st.Ctx, "l", "x")
			b.Client.ZAdd(st.Ctx, "z", redis.Z{Score: 1, Member: "1"})
			for _, c := range []struct {
				s        manifest.Spec
				key, err string
			}{
				{gcra, "c1", "ERR key holds a value that is not gcra state: left untouched"},
				{gcra, "tb", "ERR key holds token_bucket state, not gcra state: left untouched"},
				{gcra, "l", "ERR key holds a value of another type, not gcra state: left untouched"},
				{slog, "z", "ERR key holds a value that is not sliding_log state: left untouched"},
				{slog, "c1", "ERR key holds a value of another type, not sliding_log state: left untouched"},
			} {
				if r := b.Eval(c.s, c.key, "10", "1000"); r.Err != c.err {
					t.Errorf("%s on %s: %v, want %q", c.s.Name, c.key, r, c.err)
				}
			}
		})
	}
}

// TestReset: reset.lua deletes a key that holds the state of any script
// (1), replies 0 for no key, and refuses every other key, left untouched:
// whatever every script refuses as "not state" is not deleted either.
func TestReset(t *testing.T) {
	for _, b := range st.Both(t) {
		for _, s := range manifest.Specs() {
			key := "reset:" + s.Name
			for _, argv := range [][]string{a("5", "60000", "", "2"), a("5", "60000", "", "2", "", "10", "3600000", "")} {
				prime(t, b, s, key)
				b.Eval(s, key, argv...)
				if n, err := b.Reset(key); n != 1 || err != nil {
					t.Errorf("%s: reset of %s state: %d %v, want 1", b.Name, s.Name, n, err)
				}
				if b.PTTL(key) != -2 {
					t.Errorf("%s: %s state still there after reset", b.Name, s.Name)
				}
				if r := b.Eval(s, key, "5", "60000", "", "0"); r.Err != "" || r.Ints[1] != 5 {
					t.Errorf("%s: %s after reset: %v, want full", b.Name, s.Name, r)
				}
			}
		}
		if n, err := b.Reset("reset:none"); n != 0 || err != nil {
			t.Errorf("%s: reset of no key: %d %v, want 0", b.Name, n, err)
		}
		for i, f := range foreigners {
			key := fmt.Sprintf("reset:foreign:%d", i)
			if err := f.set(b.Client, key); err != nil {
				t.Fatal(err)
			}
			before := b.Snap(key)
			refused := true // by every script, as not its state
			ks := b.KeyState(key)
			for _, s := range manifest.Specs() {
				if st.ExpectedStateError(s, ks) == "" {
					refused = false
				}
			}
			if !refused {
				t.Fatalf("foreigner %q is some script's state", f.name)
			}
			n, err := b.Reset(key)
			if err == nil || err.Error() != "ERR key holds a value that is not redisrate state: left untouched" {
				t.Errorf("%s: reset of %s: %d %v, want refused", b.Name, f.name, n, err)
			}
			b.Unchanged("reset of "+f.name, key, before)
		}
	}
}

// TestTimeMaxIs2250: every script holds a state's recorded times to the
// start of the year 2250, in the unit the script records them in (the
// manifest's time_unit), checked here against the calendar.
func TestTimeMaxIs2250(t *testing.T) {
	y2250 := time.Date(2250, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, s := range manifest.Specs() {
		want := y2250.UnixMicro()
		if s.Name == "sliding_window" { // its window starts are in ms
			want = y2250.UnixMilli()
		}
		if s.TimeMax != want {
			t.Errorf("%s: TimeMax %d, want %d (2250-01-01 in its unit)", s.Name, s.TimeMax, want)
		}
	}
}
