package scripts_test

import (
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redisrate/redisrate/internal/manifest"
	"github.com/redisrate/redisrate/scripts"
	st "github.com/redisrate/redisrate/scripts/internal/scripttest"
)

// argCase is a call and the error it must get ("" for none). In want, NAME
// stands for the script's name and LIMITRULE for its limit's rule.
type argCase struct {
	name    string
	numkeys int // keys passed, each its own; 0 means 1, -1 none
	dup     int // with numkeys keys: this key (from 2) is the same as the first
	argv    []string
	want    string
	only    string // "bucket" or "window": the case applies to those scripts only
}

func a(s ...string) []string { return s }

const (
	periodRule = "must be a whole number from 1 to 10^12"
	costRule   = "must be a whole number from 0 to 10^15"
	burstRule  = "must be a whole number up to MAXPOW, or 0 or empty for limit"
	windowRule = "must be empty, 0 or equal to limit for NAME"
	modeRule   = st.ModeRule
)

// argCases are the card's error list, each error at least once, with the
// exact text; the first argument at fault in ARGV order; and calls that
// must be accepted.
var argCases = []argCase{
	// key count, and the keys (issue 21): checked before ARGV, but a
	// count other than the limits' after them, as the other miscounts
	{name: "no key", numkeys: -1, argv: a("10", "1000"), want: numkeysRange(0)},
	{name: "no key, bad limit", numkeys: -1, argv: a("x", "1000"), want: numkeysRange(0)},
	{name: "9 keys", numkeys: 9, argv: append(a("1", "1000", "", "", ""), strings.Split(strings.Repeat("1 1000 0 ", 8), " ")[:24]...), want: numkeysRange(9)},
	{name: "9 keys, bad limit", numkeys: 9, argv: a("x", "1000"), want: numkeysRange(9)},
	{name: "two keys, one limit", numkeys: 2, argv: a("10", "1000"), want: numkeysLimits(2, 1)},
	{name: "two keys, bad limit", numkeys: 2, argv: a("x", "1000"), want: "ERR invalid limit 'x': LIMITRULE"},
	{name: "two keys, bad cost", numkeys: 2, argv: a("10", "1000", "", "x"), want: "ERR invalid cost 'x': " + costRule},
	{name: "two keys, three limits", numkeys: 2, argv: a("10", "1000", "", "", "", "5", "1000", "", "7", "1000", ""), want: numkeysLimits(2, 3)},
	{name: "two keys, three limits, bad limit #3", numkeys: 2, argv: a("10", "1000", "", "", "", "5", "1000", "", "x", "1000", ""), want: "ERR invalid limit #3 'x': LIMITRULE"},
	{name: "three keys, two limits", numkeys: 3, argv: a("10", "1000", "", "", "", "5", "1000", ""), want: numkeysLimits(3, 2)},
	{name: "three keys, incomplete #2", numkeys: 3, argv: a("10", "1000", "", "", "", "5", "1000"), want: "ERR incomplete limit #2: each further limit is the triple limit period_ms burst"},
	{name: "two keys, 9 limits", numkeys: 2, argv: append(a("1", "1000", "", "", ""), strings.Split(strings.Repeat("1 1000 0 ", 8), " ")[:24]...), want: "ERR too many limits (9): must be at most 8"},
	{name: "two keys, two limits", numkeys: 2, argv: a("10", "1000", "", "", "", "5", "1000", "")},
	{name: "two keys, two limits, cost 0", numkeys: 2, argv: a("10", "1000", "", "0", "", "5", "1000", "")},
	{name: "8 keys, 8 limits", numkeys: 8, argv: append(a("1", "1000", "", "", ""), strings.Split(strings.Repeat("1 1000 0 ", 7), " ")[:21]...)},
	{name: "the same key twice", numkeys: 2, dup: 2, argv: a("10", "1000", "", "", "", "5", "1000", ""), want: "ERR invalid key #2 '@KEY@': must differ from key #1"},
	{name: "the same key twice, bad limit", numkeys: 2, dup: 2, argv: a("x", "1000", "", "", "", "5", "1000", ""), want: "ERR invalid key #2 '@KEY@': must differ from key #1"},
	{name: "the same key twice, one limit", numkeys: 2, dup: 2, argv: a("10", "1000"), want: "ERR invalid key #2 '@KEY@': must differ from key #1"},
	{name: "key #3 the same as key #1", numkeys: 3, dup: 3, argv: a("10", "1000", "", "", "", "5", "1000", "", "5", "1000", ""), want: "ERR invalid key #3 '@KEY@': must differ from key #1"},
	// limits: too many, incomplete
	{name: "9 limits", argv: append(a("1", "1000", "", "", ""), strings.Split(strings.Repeat("1 1000 0 ", 8), " ")[:24]...), want: "ERR too many limits (9): must be at most 8"},
	{name: "9 limits, incomplete", argv: append(a("1", "1000", "", "", ""), strings.Split(strings.Repeat("1 1000 0 ", 8), " ")[:23]...), want: "ERR too many limits (9): must be at most 8"},
	{name: "10 limits, bad limit", argv: append(a("x", "1000", "", "", ""), strings.Split(strings.Repeat("1 1000 0 ", 9), " ")[:25]...), want: "ERR invalid limit 'x': LIMITRULE"},
	{name: "10 limits, bad limit #8", argv: append(append(a("1", "1000", "", "", ""), strings.Split(strings.Repeat("1 1000 0 ", 6), " ")[:18]...), strings.Split("x 1000 0 1 1000 0 1 1000", " ")...), want: "ERR invalid limit #8 'x': LIMITRULE"},
	{name: "8 limits", argv: append(a("1", "1000", "", "", ""), strings.Split(strings.Repeat("1 1000 0 ", 7), " ")[:21]...)},
	{name: "incomplete #2, one", argv: a("10", "1000", "", "", "", "5"), want: "ERR incomplete limit #2: each further limit is the triple limit period_ms burst"},
	{name: "incomplete #2, two", argv: a("10", "1000", "", "", "", "5", "60000"), want: "ERR incomplete limit #2: each further limit is the triple limit period_ms burst"},
	{name: "incomplete #3", argv: a("10", "1000", "", "", "", "5", "60000", "", "7"), want: "ERR incomplete limit #3: each further limit is the triple limit period_ms burst"},
	// v2.1: a bad value is named before a miscount that follows it
	{name: "bad limit before incomplete", argv: a("x", "1000", "", "", "", "5"), want: "ERR invalid limit 'x': LIMITRULE"},
	{name: "bad limit before incomplete (review)", argv: a("abc", "1000", "", "1", "", "1", "1000"), want: "ERR invalid limit 'abc': LIMITRULE"},
	{name: "bad cost before incomplete", argv: a("1", "1000", "", "x", "", "1", "1000"), want: "ERR invalid cost 'x': " + costRule},
	{name: "bad mode before incomplete", argv: a("1", "1000", "", "1", "bogus", "1"), want: "ERR invalid mode 'bogus': " + modeRule},
	{name: "bad limit #2 before incomplete", argv: a("10", "1000", "", "", "", "x"), want: "ERR invalid limit #2 'x': LIMITRULE"},
	{name: "bad period_ms #2 before incomplete", argv: a("10", "1000", "", "", "", "5", "0"), want: "ERR invalid period_ms #2 '0': " + periodRule},
	{name: "bad period_ms before too many", argv: append(a("1", "0", "", "", ""), strings.Split(strings.Repeat("1 1000 0 ", 8), " ")[:24]...), want: "ERR invalid period_ms '0': " + periodRule},
	// limit
	{name: "no limit", argv: nil, want: "ERR invalid limit '': LIMITRULE"},
	{name: "empty limit", argv: a("", "1000"), want: "ERR invalid limit '': LIMITRULE"},
	{name: "limit 0", argv: a("0", "1000"), want: "ERR invalid limit '0': LIMITRULE"},
	{name: "limit 000", argv: a("000", "1000"), want: "ERR invalid limit '000': LIMITRULE"},
	{name: "limit sign", argv: a("+5", "1000"), want: "ERR invalid limit '+5': LIMITRULE"},
	{name: "limit negative", argv: a("-5", "1000"), want: "ERR invalid limit '-5': LIMITRULE"},
	{name: "limit fraction", argv: a("2.5", "1000"), want: "ERR invalid limit '2.5': LIMITRULE"},
	{name: "limit exponent", argv: a("1e3", "1000"), want: "ERR invalid limit '1e3': LIMITRULE"},
	{name: "limit exponent (repro 1)", argv: a("1e+0000001", "1000"), want: "ERR invalid limit '1e+0000001': LIMITRULE"},
	{name: "limit hex", argv: a("0x10", "1000"), want: "ERR invalid limit '0x10': LIMITRULE"},
	{name: "limit space", argv: a(" 5", "1000"), want: "ERR invalid limit ' 5': LIMITRULE"},
	{name: "limit trailing space", argv: a("5 ", "1000"), want: "ERR invalid limit '5 ': LIMITRULE"},
	{name: "limit nan", argv: a("nan", "1000"), want: "ERR invalid limit 'nan': LIMITRULE"},
	{name: "limit inf", argv: a("inf", "1000"), want: "ERR invalid limit 'inf': LIMITRULE"},
	{name: "limit 10^15+1", argv: a("1000000000000001", "1"), want: "ERR invalid limit '1000000000000001': LIMITRULE"},
	{name: "limit 2^53+1", argv: a("9007199254740993", "1"), want: "ERR invalid limit '9007199254740993': LIMITRULE"},
	{name: "limit 17 digits", argv: a("10000000000000000", "1"), want: "ERR invalid limit '10000000000000000': LIMITRULE"},
	{name: "limit 41 chars, cut", argv: a(strings.Repeat("9", 41), "1"), want: "ERR invalid limit '" + strings.Repeat("9", 40) + "...': LIMITRULE"},
	{name: "limit 40 chars, whole", argv: a(strings.Repeat("x", 40), "1"), want: "ERR invalid limit '" + strings.Repeat("x", 40) + "': LIMITRULE"},
	{name: "limit 10001 (window cap)", argv: a("10001", "1000"), want: "", only: "notlog"},
	// period_ms
	{name: "no period", argv: a("10"), want: "ERR invalid period_ms '': " + periodRule},
	{name: "period 0", argv: a("10", "0"), want: "ERR invalid period_ms '0': " + periodRule},
	{name: "period fraction", argv: a("10", "1000.5"), want: "ERR invalid period_ms '1000.5': " + periodRule},
	{name: "period 10^12+1", argv: a("1", "1000000000001"), want: "ERR invalid period_ms '1000000000001': " + periodRule},
	{name: "period 10^12", argv: a("1", "1000000000000")},
	{name: "bad limit before bad period", argv: a("0", "0"), want: "ERR invalid limit '0': LIMITRULE"},
	// burst
	{name: "burst fraction (repro 8)", argv: a("10", "1000", "1000000000000000.1"), want: "ERR invalid burst '1000000000000000.1': " + burstRule, only: "bucket"},
	{name: "burst 10^15+1", argv: a("10", "1000", "1000000000000001"), want: "ERR invalid burst '1000000000000001': " + burstRule, only: "bucket"},
	{name: "burst negative", argv: a("10", "1000", "-1"), want: "ERR invalid burst '-1': " + burstRule, only: "bucket"},
	{name: "burst 400-digit fraction (repro 4)", argv: a("10", "1000", "0."+strings.Repeat("1", 400)), want: "ERR invalid burst '0." + strings.Repeat("1", 38) + "...': " + burstRule, only: "bucket"},
	{name: "burst 0", argv: a("10", "1000", "0")},
	{name: "burst 00", argv: a("10", "1000", "00")},
	{name: "burst 20", argv: a("10", "1000", "20"), only: "bucket"},
	{name: "burst 1 (below limit)", argv: a("10", "1000", "1"), only: "bucket"},
	{name: "window burst other", argv: a("10", "1000", "20"), want: "ERR invalid burst '20': " + windowRule, only: "window"},
	{name: "window burst fraction", argv: a("10", "1000", "10.0"), want: "ERR invalid burst '10.0': " + windowRule, only: "window"},
	{name: "window burst equal", argv: a("10", "1000", "10"), only: "window"},
	{name: "window burst equal, zeros", argv: a("10", "1000", "0010"), only: "window"},
	{name: "bad period before bad burst", argv: a("10", "0", "x"), want: "ERR invalid period_ms '0': " + periodRule},
	// cost
	{name: "cost fraction (repro 2)", argv: a("100", "1000", "", "100.00000000000001"), want: "ERR invalid cost '100.00000000000001': " + costRule},
	{name: "cost exponent (repro 1)", argv: a("1", "60000", "", "1e-0000000"), want: "ERR invalid cost '1e-0000000': " + costRule},
	{name: "cost past 10^15 (repro 3)", argv: a("1000", "1000", "", "1000000000000000.1"), want: "ERR invalid cost '1000000000000000.1': " + costRule},
	{name: "cost 10^15+1", argv: a("10", "1000", "", "1000000000000001"), want: "ERR invalid cost '1000000000000001': " + costRule},
	{name: "cost 400-digit fraction (repro 4)", argv: a("10", "1000", "", "0."+strings.Repeat("1", 400)), want: "ERR invalid cost '0." + strings.Repeat("1", 38) + "...': " + costRule},
	{name: "cost 10^15 (never)", argv: a("10", "1000", "", "1000000000000000"), only: "notlog"},
	{name: "log, cost 10^15", argv: a("10", "1000", "", "1000000000000000"), want: "ERR invalid cost '1000000000000000': must be at most 10000 for sliding_log", only: "log"},
	{name: "cost 0", argv: a("10", "1000", "", "0")},
	{name: "cost 0000", argv: a("10", "1000", "", "0000")},
	{name: "bad burst before bad cost", argv: a("10", "1000", "x", "y"), want: "ERR invalid burst 'x': " + burstRule, only: "bucket"},
	{name: "bad window burst before bad cost", argv: a("10", "1000", "x", "y"), want: "ERR invalid burst 'x': " + windowRule, only: "window"},
	// mode
	{name: "mode CHECK", argv: a("10", "1000", "", "", "CHECK"), want: "ERR invalid mode 'CHECK': " + modeRule},
	{name: "mode peek", argv: a("10", "1000", "", "", "peek"), want: "ERR invalid mode 'peek': " + modeRule},
	{name: "mode check", argv: a("10", "1000", "", "", "check")},
	{name: "mode UPTO", argv: a("10", "1000", "", "", "UPTO"), want: "ERR invalid mode 'UPTO': " + modeRule},
	{name: "mode refund with a space", argv: a("10", "1000", "", "", "refund "), want: "ERR invalid mode 'refund ': " + modeRule},
	{name: "bad mode before incomplete limit #2", argv: a("10", "1000", "", "", "forced", "5"), want: "ERR invalid mode 'forced': " + modeRule},
	{name: "bad cost before bad mode", argv: a("10", "1000", "", "x", "y"), want: "ERR invalid cost 'x': " + costRule},
	{name: "bad mode before bad limit #2", argv: a("10", "1000", "", "", "y", "0", "1000", ""), want: "ERR invalid mode 'y': " + modeRule},
	// further limits
	{name: "limit #2 0", argv: a("10", "1000", "", "", "", "0", "1000", ""), want: "ERR invalid limit #2 '0': LIMITRULE"},
	{name: "period_ms #3", argv: a("10", "1000", "", "", "", "5", "60000", "", "5", "0", ""), want: "ERR invalid period_ms #3 '0': " + periodRule},
	{name: "burst #2", argv: a("10", "1000", "", "", "", "5", "60000", "x"), want: "ERR invalid burst #2 'x': " + burstRule, only: "bucket"},
	{name: "window burst #2", argv: a("10", "1000", "", "", "", "5", "60000", "6"), want: "ERR invalid burst #2 '6': " + windowRule, only: "window"},
	{name: "empty limit #2", argv: a("10", "1000", "", "", "", "", "60000", ""), want: "ERR invalid limit #2 '': LIMITRULE"},
	{name: "bad limit #2 before bad cost? no: cost first", argv: a("10", "1000", "", "x", "", "0", "60000", ""), want: "ERR invalid cost 'x': " + costRule},
	{name: "two limits, skipped positions", argv: a("10", "1000", "", "", "", "100", "60000", "")},
	// sliding_log with several keys: cost times the keys at most 10,000
	// (guarantee 11), named at the cost, before what follows it
	{name: "log, 2 keys, cost 5001", numkeys: 2, argv: a("10", "1000", "", "5001", "", "5", "1000", ""), want: "ERR invalid cost '5001': with 2 keys must be at most 5000", only: "log"},
	{name: "log, 3 keys, cost 3334", numkeys: 3, argv: a("10", "1000", "", "3334", "", "5", "1000", "", "7", "1000", ""), want: "ERR invalid cost '3334': with 3 keys must be at most 3333", only: "log"},
	{name: "log, 8 keys, cost 1251, bad mode", numkeys: 8, argv: append(a("1", "1000", "", "1251", "x"), strings.Split(strings.Repeat("1 1000 0 ", 7), " ")[:21]...), want: "ERR invalid cost '1251': with 8 keys must be at most 1250", only: "log"},
	{name: "log, 8 keys, cost 1250", numkeys: 8, argv: append(a("1", "1000", "", "1250", ""), strings.Split(strings.Repeat("1 1000 0 ", 7), " ")[:21]...), only: "log"},
	{name: "log, 1 key, cost 10001, 2 limits", argv: a("10", "1000", "", "10001", "", "5", "1000", ""), want: "ERR invalid cost '10001': must be at most 10000 for sliding_log", only: "log"},
	{name: "log, 1 key, cost 10001, force", argv: a("10", "1000", "", "10001", "force"), want: "ERR invalid cost '10001': must be at most 10000 for sliding_log", only: "log"},
	{name: "2 keys, cost 5001", numkeys: 2, argv: a("10", "1000", "", "5001", "", "5", "1000", ""), only: "notlog"},
}

func applies(c argCase, s manifest.Spec) bool {
	switch c.only {
	case "bucket":
		return !s.Window
	case "window":
		return s.Window
	case "notlog":
		return !s.Log
	case "log":
		return s.Log
	}
	return true
}

func numkeysRange(k int) string {
	return fmt.Sprintf("ERR invalid numkeys '%d': must be 1 (every limit on one key) or 2 to 8 (limit i on KEYS[i])", k)
}

func numkeysLimits(k, n int) string {
	return fmt.Sprintf("ERR invalid numkeys '%d': must be 1 or the number of limits (%d), one limit per key", k, n)
}

// wantText is c's error for s on key (@KEY@ in want).
func wantText(c argCase, s manifest.Spec, key string) string {
	pow := map[int64]string{1e12: "10^12", 1e15: "10^15", 10000: "10000"}[s.MaxLimit]
	return strings.NewReplacer("NAME", s.Name, "LIMITRULE", "must be a whole number from 1 to "+pow, "MAXPOW", pow, "@KEY@", key).Replace(c.want)
}

// keysFor is c's keys: key, then keys of the same hash tag.
func keysFor(c argCase, key string) []string {
	switch c.numkeys {
	case -1:
		return nil
	case 0:
		return []string{key}
	}
	keys := []string{key}
	for i := 2; i <= c.numkeys; i++ {
		keys = append(keys, fmt.Sprintf("{%s}:%d", key, i))
	}
	if c.dup > 0 {
		keys[c.dup-1] = key
	}
	return keys
}

// prime gives key some state of s, so that a call that must change nothing
// has something to change.
func prime(t *testing.T, b *st.Backend, s manifest.Spec, key string) {
	t.Helper()
	if r := b.Eval(s, key, "5", "60000", "", "2"); r.Err != "" {
		t.Fatalf("%s: %s: priming: %v", b.Name, s.Name, r)
	}
}

// TestArgumentErrors runs the table on every script, on miniredis and real
// Redis (by EVALSHA and by FCALL of the library): each error's exact text,
// the Go model of the validation (Parse) agreeing, and an error changing
// nothing.
func TestArgumentErrors(t *testing.T) {
	cases := 0
	for _, b := range st.Both(t) {
		if b.Real {
			b.LoadLibrary()
		}
		for _, s := range manifest.Specs() {
			for i, c := range argCases {
				if !applies(c, s) {
					continue
				}
				cases++
				key := fmt.Sprintf("args:%s:%d", s.Name, i)
				keys := keysFor(c, key)
				for _, k := range keys {
					prime(t, b, s, k)
				}
				snaps := b.SnapAll(append(keys, key)) // key: also when no key is passed
				want := wantText(c, s, key)
				argv := c.argv
				if want == "" {
					argv = append(append([]string(nil), argv...), make([]string, max(0, 5-len(argv)))...)
					argv[4] = "check" // accepted calls: checked, so the key stays as it was
					if len(c.argv) > 4 && c.argv[4] != "" && c.argv[4] != "check" {
						t.Fatalf("case %q: mode in an accepted case", c.name)
					}
				}
				r := b.EvalKeys(s.Source, s.SHA1, keys, argv...)
				if _, parsed := st.ParseKeys(s, keys, argv); parsed != want {
					t.Errorf("%s %q: Parse says %q, want %q", s.Name, c.name, parsed, want)
				}
				if want != "" && r.Err != want {
					t.Errorf("%s: %s %q: %v, want error %q", b.Name, s.Name, c.name, r, want)
				}
				if want == "" && r.Err != "" {
					t.Errorf("%s: %s %q: %v, want a reply", b.Name, s.Name, c.name, r)
				}
				b.UnchangedAll(s.Name+" "+c.name, snaps)
				if b.Real {
					f := b.FCall(s, keys, argv...)
					if want != "" && f.Err != want {
						t.Errorf("FCALL %s %q: %v, want error %q", s.Name, c.name, f, want)
					}
					if want == "" && f.Err != "" {
						t.Errorf("FCALL %s %q: %v, want a reply", s.Name, c.name, f)
					}
					b.UnchangedAll("FCALL "+s.Name+" "+c.name, snaps)
				}
			}
		}
	}
	t.Logf("%d argument cases", cases)
}

// TestArgumentsLeadingZeros: leading zeros are allowed (^[0-9]+$) and read
// as decimal, on both Lua runtimes (gopher-lua reads "010" as octal 8).
func TestArgumentsLeadingZeros(t *testing.T) {
	for _, b := range st.Both(t) {
		for _, s := range manifest.Specs() {
			burst := "0020"
			if s.Window {
				burst = "010"
			}
			r := b.Eval(s, "zeros:"+s.Name, "010", "01000", burst, "03", "")
			capacity := int64(20)
			if s.Window {
				capacity = 10
			}
			if r.Err != "" || r.Ints[4] != capacity || r.Ints[1] != capacity-3 {
				t.Errorf("%s: %s 010 01000 %s 03: %v, want capacity %d and %d remaining", b.Name, s.Name, burst, r, capacity, capacity-3)
			}
			r = b.Eval(s, "zeros17:"+s.Name, "0000000000000000010", "0000000000000001000")
			if r.Err != "" || r.Ints[4] != 10 {
				t.Errorf("%s: %s with 19-digit limit 10: %v, want capacity 10", b.Name, s.Name, r)
			}
		}
	}
}

// TestArgumentsSkippedPositions: "" means the default at every optional
// position, in further triples too.
func TestArgumentsSkippedPositions(t *testing.T) {
	for _, b := range st.BothClocked(t) {
		t.Run(b.Name, func(t *testing.T) {
			b.Rebind(t) // the backend's helpers report to this subtest
			for _, s := range manifest.Specs() {
				groups := [][][]string{
					{a("10", "1000"), a("10", "1000", ""), a("10", "1000", "", ""), a("10", "1000", "", "", ""), a("10", "1000", "0", "1", "")},
					{a("10", "1000", "", "", "", "100", "60000", ""), a("10", "1000", "0", "1", "", "100", "60000", "0"), a("10", "1000", "10", "", "", "100", "60000", "100")},
				}
				for _, g := range groups {
					var first st.Reply
					for i, argv := range g {
						key := fmt.Sprintf("skip:%s:%d", s.Name, i)
						r := b.Eval(s, key, argv...)
						r2 := b.Eval(s, key, argv...)
						got := r.String() + r2.String() + b.Get(key)
						if s.Log {
							got = r.String() + r2.String()
						}
						if i == 0 {
							first = st.Reply{Err: got}
							continue
						}
						if got != first.Err {
							t.Errorf("%s %q: %s, want as %q: %s", s.Name, argv, got, g[0], first.Err)
						}
					}
				}
			}
		})
	}
}

// TestArgumentsAlwaysAccepted: every combination of the accepted range
// (limit and burst up to 10^12, period_ms up to 366 days, a full drain
// burst * period_ms / limit of at most 10^12 ms) is accepted by every
// script (sliding_log within its cap of 10000), and decides: an admitted
// call, then a denied or admitted one, no error; alone and as the second
// of two limits.
func TestArgumentsAlwaysAccepted(t *testing.T) {
	periods := []int64{1, 3, 7, 1000, 1001, 60000, 3600000, 86400000, 999999999, 2592000000, 4000000000, st.MaxPeriodMS}
	limits := []int64{1, 3, 7, 1000, 100000, 2000000, 150000000, 1000000000, 999999999989, 1000000000000}
	n := 0
	for _, b := range st.Both(t) {
		for _, s := range manifest.Specs() {
			for _, p := range periods {
				for i, l := range limits {
					if s.Log {
						l = min(l, 10000)
					}
					drain := new(big.Int).Quo(new(big.Int).Mul(big.NewInt(1e12), big.NewInt(l)), big.NewInt(p)) // the largest burst whose drain is within 10^12 ms
					most := min(s.MaxLimit, drain.Int64())
					if !drain.IsInt64() {
						most = s.MaxLimit
					}
					for j, burst := range []int64{0, l, most, most - 1, 1, (l + most) / 2} {
						if burst < 0 || burst > most || (s.Window && burst != 0 && burst != l) {
							continue
						}
						args := a(fmt.Sprint(l), fmt.Sprint(p), fmt.Sprint(burst), "1")
						if _, e := st.Parse(s, 1, args); e != "" {
							t.Errorf("Parse %s %v: %s", s.Name, args, e)
						}
						key := fmt.Sprintf("range:%s:%d:%d:%d", s.Name, p, i, j)
						n++
						for call := range 2 {
							if r := b.Eval(s, key, args...); r.Err != "" || (call == 0 && r.Ints[0] != 1) {
								t.Errorf("%s: %s %v, call %d: %v, want accepted (the first admitted)", b.Name, s.Name, args, call, r)
							}
						}
						// the same as the second of two limits
						args2 := append(a("4", "1000", "", "1", ""), args[:3]...)
						if r := b.Eval(s, key+":2", args2...); r.Err != "" {
							t.Errorf("%s: %s %v: %v", b.Name, s.Name, args2, r)
						}
					}
				}
			}
		}
	}
	t.Logf("%d combinations in the always-accepted range", n)
}

// TestArgumentsPastRange: past a script's range rule, the error names
// period_ms past 366 days, else burst (which then the caller gave: with
// the default burst a drain is its period), never an argument left out;
// Parse (the exact integer rule) agrees with the script at the boundary.
func TestArgumentsPastRange(t *testing.T) {
	for _, b := range st.BothClocked(t) {
		t.Run(b.Name, func(t *testing.T) {
			b.Rebind(t) // the backend's helpers report to this subtest
			cases := []struct {
				algo string
				argv []string
				want string
			}{
				{"gcra", a("3003", "1000000000000"), "ERR invalid period_ms '1000000000000': must be at most 31622400000 (366 days) with limit 3003"},
				{"gcra", a("10", "1000", "1000000000000000"), "ERR invalid burst '1000000000000000': must be a whole number up to 10^12, or 0 or empty for limit"},
				{"gcra", a("1", "86400000", "200000"), "ERR invalid burst '200000': must be at most 10^12 * limit / period_ms (a full drain within 10^12 ms) with limit 1 and period_ms 86400000"},
				{"gcra", a("1", "86400000", "52125"), "ERR invalid burst '52125': must be at most 10^12 * limit / period_ms (a full drain within 10^12 ms) with limit 1 and period_ms 86400000"}, // 2 * burst * period_us past 2^53 first here
				{"gcra", a("1", "86400000", "52124"), ""}, // within 2^53: exact, accepted
				{"gcra", a("1", "86400000", "11574"), ""}, // a drain within 10^12 ms
				{"leaky_bucket", a("1", "1000000000000", "5"), "ERR invalid period_ms '1000000000000': must be at most 31622400000 (366 days) with limit 1 and burst 5"},
				{"token_bucket", a("1", "1000000000000", "10"), "ERR invalid period_ms '1000000000000': must be at most 31622400000 (366 days) with limit 1 and burst 10"},
				{"token_bucket", a("3", "31622400000", "100000"), "ERR invalid burst '100000': must be at most 10^12 * limit / period_ms (a full drain within 10^12 ms) with limit 3 and period_ms 31622400000"},
				{"sliding_window", a("28059810762433", "107"), "ERR invalid limit '28059810762433': must be a whole number from 1 to 10^12"},
				{"sliding_window", a("10000", "1000000000000"), "ERR invalid period_ms '1000000000000': must be at most 31622400000 (366 days) with limit 10000"},
				{"sliding_window", a("1000000000000", "31622400000"), ""},
				{"gcra", a("1", "1000", "", "", "", "3003", "1000000000000", "0"), "ERR invalid period_ms #2 '1000000000000': must be at most 31622400000 (366 days) with limit 3003"},
				{"gcra", a("3003", "1000000000000", "", "x"), "ERR invalid period_ms '1000000000000': must be at most 31622400000 (366 days) with limit 3003"}, // range before cost
				{"fixed_window", a("1000000000000000", "1000000000000"), ""}, //
				{"sliding_log", a("10000", "1000000000000"), ""},             //
			}
			for _, c := range cases {
				s, _ := manifest.Lookup(c.algo)
				r := b.Eval(s, "past:"+c.algo, c.argv...)
				if _, e := st.Parse(s, 1, c.argv); e != c.want {
					t.Errorf("Parse %s %q: %q, want %q", c.algo, c.argv, e, c.want)
				}
				if c.want == "" && r.Err != "" || c.want != "" && r.Err != c.want {
					t.Errorf("%s %q: %v, want %q", c.algo, c.argv, r, c.want)
				}
			}
			// Both sides of each rule's boundary, for many limits and periods.
			n := 0
			for _, s := range manifest.Specs() {
				if s.Range == "" {
					continue
				}
				for _, p := range []int64{1, 2, 3, 7, 1000, 1024, 86400000, 999999999989, 1000000000000} {
					for _, l := range []int64{1, 2, 3, 7, 13, 1000, 1 << 20, 999999999989} {
						// the largest burst in range, by bisection on the exact rule
						lo, hi := int64(0), int64(1e15)
						for lo < hi {
							mid := lo + (hi-lo+1)/2
							bst := mid
							if s.Window {
								bst = l
							}
							if st.InRange(s.Range, l, p, bst) {
								lo = mid
							} else {
								hi = mid - 1
							}
						}
						for _, burst := range []int64{lo, lo + 1} {
							if burst < 1 || burst > 1e15 {
								continue
							}
							argv := a(fmt.Sprint(l), fmt.Sprint(p), fmt.Sprint(burst), "", "check")
							if s.Window {
								argv[2] = ""
							}
							_, want := st.Parse(s, 1, argv)
							r := b.Eval(s, "edge", argv...)
							n++
							if r.Err != want {
								t.Errorf("%s %v: %v, want %q", s.Name, argv, r, want)
							}
						}
					}
				}
			}
			t.Logf("%d boundary combinations", n)
		})
	}
}

// sameByFCall runs argv by EVALSHA on ke and by FCALL on kf (in one MULTI,
// on a server whose clock the test holds still) and fails t unless the
// replies, the keys written and their TTLs are the same. It returns the
// EVALSHA reply.
func sameByFCall(t *testing.T, b *st.Backend, s manifest.Spec, ke, kf string, argv ...string) st.Reply {
	t.Helper()
	return sameByFCallKeys(t, b, s, []string{ke}, []string{kf}, argv...)
}

// sameByFCallKeys is sameByFCall for a call of several keys: EVALSHA on
// ke, FCALL on kf, key by key the same.
func sameByFCallKeys(t *testing.T, b *st.Backend, s manifest.Spec, ke, kf []string, argv ...string) st.Reply {
	t.Helper()
	e, f := b.EvalAndFCallKeys(s, ke, kf, argv...)
	if !e.Equal(f) {
		t.Errorf("%s %v %v: EVALSHA %v, FCALL %v", s.Name, ke, argv, e, f)
	}
	for i := range ke {
		se, sf := b.Snap(ke[i]), b.Snap(kf[i])
		if se.Type != sf.Type || se.Value != sf.Value || se.PTTL != sf.PTTL {
			t.Errorf("%s %v: key %d by EVALSHA %v, by FCALL %v", s.Name, argv, i+1, se, sf)
		}
	}
	return e
}

// TestFunctionsMatchScripts: on real Redis, FCALL of the library gives the
// reply EVALSHA gives, and writes the same, for the same call on the same
// state (of one key or several), and the read-only functions decide as
// "check" on FCALL_RO.
func TestFunctionsMatchScripts(t *testing.T) {
	onServers(t, st.RealClockServers, functionsMatchScripts)
}

func functionsMatchScripts(t *testing.T, b *st.Backend) {
	b.LoadLibrary()
	if v, err := b.Client.FCallRO(st.Ctx, "redisrate_version", nil).Text(); err != nil || v != scripts.LibraryVersion {
		t.Errorf("redisrate_version: %q %v, want %q", v, err, scripts.LibraryVersion)
	}
	calls := [][]string{
		a("10", "1000"), a("3", "1000", "5", "2"), a("10", "1000", "", "0"), a("10", "1000", "", "11"),
		a("10", "1000", "", "", "check"), a("10", "1000", "", "4", "", "20", "60000", ""),
		a("2", "1000", "", "2", "", "100", "60000", "100"),
	}
	n := 0
	for _, s := range manifest.Specs() {
		for i, argv := range calls {
			for range 3 { // the same call three times: fresh, then with state
				sameByFCall(t, b, s, fmt.Sprintf("fe:%s:%d", s.Name, i), fmt.Sprintf("ff:%s:%d", s.Name, i), argv...)
				b.Advance(time.Millisecond)
				n++
			}
		}
		// FCALL_RO of the _ro function decides as check: no write.
		key := "fro:" + s.Name
		prime(t, b, s, key)
		before := b.Snap(key)
		r := b.FCallRO(s, []string{key}, "5", "60000")
		if r.Err != "" || r.Ints[0] != 1 || r.Ints[1] != 2 {
			t.Errorf("FCALL_RO %s: %v, want admitted as a check, 2 remaining", s.Function+"_ro", r)
		}
		b.Unchanged("FCALL_RO", key, before)
		if r := b.FCallRO(s, []string{key}, "5", "60000", "", "1", "peek"); r.Err != "ERR invalid mode 'peek': "+modeRule {
			t.Errorf("FCALL_RO with mode peek: %v", r)
		}
		// Several keys: a user's, a team's and the organisation's, some
		// calls on keys that other calls share, denials by each key.
		keyed := []struct {
			keys []int // of the keys below
			argv []string
		}{
			{[]int{0, 2}, a("3", "1000", "", "1", "", "5", "1000", "")},
			{[]int{1, 2}, a("3", "1000", "", "2", "", "5", "1000", "")},
			{[]int{0, 1, 2}, a("3", "1000", "", "1", "", "4", "1000", "", "5", "1000", "")},
			{[]int{2, 0}, a("5", "1000", "", "1", "", "3", "1000", "")},
			{[]int{0, 2}, a("3", "1000", "", "1", "check", "5", "1000", "")},
			{[]int{0, 2}, a("3", "1000", "", "0", "", "5", "1000", "")},
			{[]int{0, 2}, a("3", "1000", "", "4", "", "5", "1000", "")},
		}
		names := []string{"user:1", "user:2", "org"}
		for round := range 4 {
			for i, c := range keyed {
				var ke, kf []string
				for _, k := range c.keys {
					ke, kf = append(ke, fmt.Sprintf("{fe2:%s}:%s", s.Name, names[k])), append(kf, fmt.Sprintf("{ff2:%s}:%s", s.Name, names[k]))
				}
				if r := sameByFCallKeys(t, b, s, ke, kf, c.argv...); r.Err != "" {
					t.Errorf("%s round %d call %d %v: %v", s.Name, round, i, ke, r)
				}
				if r := b.FCallRO(s, kf, c.argv...); r.Err != "" {
					t.Errorf("FCALL_RO %s %v: %v", s.Function+"_ro", kf, r)
				}
				n++
			}
			b.Advance(300 * time.Millisecond)
		}
	}
	t.Logf("%d EVALSHA/FCALL pairs", n)
}

// TestFunctionsNumberMemo: the library remembers what argument strings read
// as (NUM in helpers.lua), and that never changes a reply: strings valid and
// not, with leading zeros, past 16 characters, in further limits, give
// EVALSHA's reply when new, when remembered, and after NUM has filled and
// started again many times, in the middle of a call too. And it stays
// small: 100,000 distinct strings leave the library's Lua memory less than
// 2 MB larger (kept, they took 9.5–9.8 MB).
func TestFunctionsNumberMemo(t *testing.T) { onServers(t, st.RealClockServers, functionsNumberMemo) }

func functionsNumberMemo(t *testing.T, b *st.Backend) {
	b.LoadLibrary()
	calls := [][]string{
		a("10", "1000"), a("0010", "1000"), a("00000000000000000010", "01000"), a("1x", "1000"),
		a("10", "1000", "0005", "002"), a("10", "1000", "", "0000000000000000001"),
		a("10", "1000", "", "", "", "0020", "60000", "1x"), a("10", "1000", "", "", "", "20", "60000", "25"),
		a("1000000000000000", "1"), a("10000000000000000", "1"), a("4", "1000000000000"),
	}
	compare := func(when string) {
		for _, s := range manifest.Specs() {
			for i, argv := range calls {
				sameByFCall(t, b, s, fmt.Sprintf("me:%s:%s:%d", s.Name, when, i), fmt.Sprintf("mf:%s:%s:%d", s.Name, when, i), argv...)
			}
		}
	}
	functionsMemory := func() int64 {
		info, err := b.Client.InfoMap(st.Ctx, "memory").Result()
		if err != nil {
			t.Fatal(err)
		}
		v, err := strconv.ParseInt(info["Memory"]["used_memory_vm_functions"], 10, 64)
		if err != nil {
			t.Fatalf("used_memory_vm_functions: %v", err)
		}
		return v
	}
	compare("new")
	compare("remembered")
	before := functionsMemory()
	gcra := manifest.Specs()[0]
	for start := 0; start < 100000; start += 5000 {
		p := b.Client.Pipeline()
		for i := start; i < start+5000; i++ {
			p.FCall(st.Ctx, gcra.Function, []string{"memo:fill"}, strconv.Itoa(1000000+i), "60000", "", "0")
		}
		cmds, err := p.Exec(st.Ctx)
		if err != nil {
			t.Fatalf("fill: %v", err)
		}
		if got, err := cmds[len(cmds)-1].(*redis.Cmd).Int64Slice(); err != nil || got[0] != 1 {
			t.Fatalf("fill: %v %v, want an admitted check", got, err)
		}
	}
	if grown := functionsMemory() - before; grown > 2<<20 {
		t.Errorf("100,000 distinct arguments grew the library's Lua memory by %d bytes, want < 2 MB", grown)
	}
	compare("after")

	// Calls of 8 limits, each with 24 strings never seen: NUM fills and
	// starts again while a call reads its arguments.
	fresh := 0
	for round := range 50 {
		argv := a("", "", "", "", "")
		for l := range 8 {
			for f := range 3 {
				fresh++
				v := fmt.Sprint(5000000 + fresh)
				if l == 0 && f < 2 {
					argv[f] = v
				} else if l > 0 {
					argv = append(argv, v)
				}
			}
		}
		for _, s := range manifest.Specs() {
			sameByFCall(t, b, s, fmt.Sprintf("me8:%s:%d", s.Name, round), fmt.Sprintf("mf8:%s:%d", s.Name, round), argv...)
		}
	}
	// And the library does read its arguments through NUM.
	if !strings.Contains(scripts.Library, "local limit = NUM[ls] or read(ls)") {
		t.Error("the library reads limit without NUM")
	}
}
