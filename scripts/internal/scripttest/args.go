package scripttest

import (
	"fmt"
	"math"
	"math/big"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/redisrate/redisrate/internal/manifest"
)

// Limit is one limit of a call, as the script reads it.
type Limit struct {
	Limit, PeriodMS, Burst int64 // Burst resolved: never 0
}

// Call is a call's arguments, as the script reads them.
type Call struct {
	Limits []Limit
	Cost   int64
	// Mode is ARGV[5]: "" (decide and record), "check", "upto", "refund"
	// or "force".
	Mode string
	// Keys is the call's number of keys: 1 (every limit on KEYS[1]) or,
	// from 2 to 8, one per limit (limit i on KEYS[i]).
	Keys int
}

var digits = regexp.MustCompile(`^[0-9]+$`)

// whole reads a contract number: digits only, at most max.
func whole(s string, max int64) (int64, bool) {
	if !digits.MatchString(s) {
		return 0, false
	}
	t := strings.TrimLeft(s, "0")
	if t == "" {
		return 0, true
	}
	if len(t) > 16 {
		return 0, false
	}
	var v int64
	for _, c := range t {
		v = v*10 + int64(c-'0')
	}
	if v > max {
		return 0, false
	}
	return v, true
}

func quote(s string) string {
	if len(s) > 40 {
		s = s[:40] + "..."
	}
	return "'" + s + "'"
}

func invalid(name string, i int, s, rule string) string {
	if i > 1 {
		name = fmt.Sprintf("%s #%d", name, i)
	}
	return "ERR invalid " + name + " " + quote(s) + ": " + rule
}

var two53 = new(big.Int).Lsh(big.NewInt(1), 53)

// MaxPeriodMS is 366 days in ms: the longest period_ms of the accepted range.
const MaxPeriodMS = 31_622_400_000

// RangeFault applies a Spec's range rule, exactly, with integers: "" when
// the script accepts the limit, else the argument its error names,
// "period_ms" or "burst". Every limit and burst up to 10^12 (MaxLimit) with
// a period_ms up to 366 days whose full drain burst * period_ms / limit is
// at most 10^12 ms is accepted; so is every call within the rule's exact
// case (cheap), whatever its period.
func RangeFault(rule string, limit, periodMS, burst int64) string {
	B := big.NewInt(burst)
	Pus := new(big.Int).Mul(big.NewInt(periodMS), big.NewInt(1000))
	cheap := true
	switch rule {
	case "continuous": // 2 * burst * period_us <= 2^53: twice the capacity, as a level times period_us
		cheap = new(big.Int).Mul(big.NewInt(2), new(big.Int).Mul(B, Pus)).Cmp(two53) <= 0
	case "refill": // ceil(2*burst/limit) * period_us <= 2^53: the refills from a debt of -burst back to burst
		q := (2*burst + limit - 1) / limit
		cheap = new(big.Int).Mul(big.NewInt(q), Pus).Cmp(two53) <= 0 || new(big.Int).Mul(big.NewInt(2), new(big.Int).Mul(B, Pus)).Cmp(two53) <= 0
	case "weighted": // 2 * limit * period_us <= 2^53: a count of up to twice the limit, weighted by microseconds
		cheap = new(big.Int).Mul(big.NewInt(2*limit), Pus).Cmp(two53) <= 0
	case "":
		return ""
	default:
		panic("unknown range rule " + rule)
	}
	if cheap {
		return ""
	}
	if periodMS > MaxPeriodMS {
		return "period_ms"
	}
	// burst * period_ms <= 10^12 * limit
	if new(big.Int).Mul(B, big.NewInt(periodMS)).Cmp(new(big.Int).Mul(big.NewInt(1e12), big.NewInt(limit))) > 0 {
		return "burst"
	}
	return ""
}

// InRange reports whether a Spec's range rule accepts the limit.
func InRange(rule string, limit, periodMS, burst int64) bool {
	return RangeFault(rule, limit, periodMS, burst) == ""
}

// RangeError is the script's error for a limit past its range (RangeFault).
func RangeError(s manifest.Spec, i int, limit, periodMS, burst int64, given bool, ps, bs string) string {
	switch RangeFault(s.Range, limit, periodMS, burst) {
	case "period_ms":
		with := fmt.Sprintf("with limit %d", limit)
		if given && !s.Window {
			with += fmt.Sprintf(" and burst %d", burst)
		}
		return invalid("period_ms", i, ps, "must be at most 31622400000 (366 days) "+with)
	case "burst":
		return invalid("burst", i, bs, fmt.Sprintf("must be at most 10^12 * limit / period_ms (a full drain within 10^12 ms) with limit %d and period_ms %d", limit, periodMS))
	}
	return ""
}

// ModeRule is what the mode error says a mode must be.
const ModeRule = "must be empty, 'check', 'upto', 'refund' or 'force'"

// Writes reports whether c may write: a mode other than check.
func (c Call) Writes() bool { return c.Mode != "check" }

// Parse is ParseKeys for numkeys keys that differ.
func Parse(s manifest.Spec, numkeys int, argv []string) (Call, string) {
	keys := make([]string, max(numkeys, 0))
	for i := range keys {
		keys[i] = fmt.Sprintf("{k}:%d", i+1)
	}
	return ParseKeys(s, keys, argv)
}

// ParseKeys is the contract's argument validation in Go: the call the
// script reads, or the exact error text it must reply. The order is the
// scripts': the key count (0 or more than 8), a key equal to an earlier one,
// then ARGV in its order (a 9th triple is "too many limits"), then the
// miscounts that follow the values: a last triple cut short, and a key
// count of 2 or more other than the number of limits.
func ParseKeys(s manifest.Spec, keys []string, argv []string) (Call, string) {
	numkeys := len(keys)
	if numkeys < 1 || numkeys > 8 {
		return Call{}, fmt.Sprintf("ERR invalid numkeys '%d': must be 1 (every limit on one key) or 2 to 8 (limit i on KEYS[i])", numkeys)
	}
	for i := 1; i < numkeys; i++ {
		for j := 0; j < i; j++ {
			if keys[i] == keys[j] {
				return Call{}, invalid("key", i+1, keys[i], fmt.Sprintf("must differ from key #%d", j+1))
			}
		}
	}
	n := 1 // the first limit, and one for each further triple begun
	if len(argv) > 5 {
		n = 1 + (len(argv)-5+2)/3
	}
	// Checked in ARGV order: a bad value is named before a miscount that
	// follows it (too many limits, a last triple cut short, the key count).
	incomplete := fmt.Sprintf("ERR incomplete limit #%d: each further limit is the triple limit period_ms burst", n)
	arg := func(i int) string {
		if i < len(argv) {
			return argv[i]
		}
		return ""
	}
	limitRule := "must be a whole number from 1 to " + power(s.MaxLimit)
	c := Call{Cost: 1}
	for i := 1; i <= n; i++ {
		if i > 8 {
			return Call{}, fmt.Sprintf("ERR too many limits (%d): must be at most 8", n)
		}
		at := 0
		if i > 1 {
			at = 3*i - 1
		}
		ls, ps, bs := arg(at), arg(at+1), arg(at+2)
		limit, ok := whole(ls, s.MaxLimit)
		if !ok || limit < 1 {
			return Call{}, invalid("limit", i, ls, limitRule)
		}
		if i > 1 && at+1 >= len(argv) {
			return Call{}, incomplete
		}
		period, ok := whole(ps, 1e12)
		if !ok || period < 1 {
			return Call{}, invalid("period_ms", i, ps, "must be a whole number from 1 to 10^12")
		}
		if i > 1 && at+2 >= len(argv) {
			return Call{}, incomplete
		}
		burst, given := limit, false
		if bs != "" {
			b, ok := whole(bs, s.MaxLimit)
			if s.Window {
				b, ok = whole(bs, 1e15)
				if !ok || (b != 0 && b != limit) {
					return Call{}, invalid("burst", i, bs, "must be empty, 0 or equal to limit for "+s.Name)
				}
			} else {
				if !ok {
					return Call{}, invalid("burst", i, bs, "must be a whole number up to "+power(s.MaxLimit)+", or 0 or empty for limit")
				}
				if b > 0 {
					burst, given = b, true
				}
			}
		}
		// In doubles, as the script: the product of two int64s up to 10^15
		// and 10^12 overflows one, and is exact wherever it is near 4e12.
		if float64(max(limit, burst))*float64(period) > 4e12 {
			if e := RangeError(s, i, limit, period, burst, given, ps, bs); e != "" {
				return Call{}, e
			}
		}
		if i == 1 {
			cs := arg(3)
			if cs != "" {
				v, ok := whole(cs, 1e15)
				if !ok {
					return Call{}, invalid("cost", 1, cs, "must be a whole number from 0 to 10^15")
				}
				c.Cost = v
			}
			if s.Log && c.Cost*int64(numkeys) > 10000 { // no call adds more than 10000 entries, in any mode
				if numkeys == 1 {
					return Call{}, invalid("cost", 1, cs, "must be at most 10000 for sliding_log")
				}
				return Call{}, invalid("cost", 1, cs, fmt.Sprintf("with %d keys must be at most %d", numkeys, 10000/numkeys))
			}
			switch m := arg(4); m {
			case "", "check", "upto", "refund", "force":
				c.Mode = m
			default:
				return Call{}, invalid("mode", 1, m, ModeRule)
			}
		}
		c.Limits = append(c.Limits, Limit{limit, period, burst})
	}
	if numkeys != 1 && numkeys != n {
		return Call{}, fmt.Sprintf("ERR invalid numkeys '%d': must be 1 or the number of limits (%d), one limit per key", numkeys, n)
	}
	c.Keys = numkeys
	return c, ""
}

// KeyAt is a state error (StateError, ExpectedStateError) as a call of
// several keys words it: naming the key's position i (from 1), "ERR key #2
// holds ...". "" stays "".
func KeyAt(i int, msg string) string {
	if msg == "" {
		return ""
	}
	return strings.Replace(msg, "ERR key holds ", fmt.Sprintf("ERR key #%d holds ", i), 1)
}

// StateError is the error a script replies for a key that holds something
// other than its state: other is "" for a value that is no script's state,
// "type" for another type, or another script's name.
func StateError(s manifest.Spec, other string) string {
	switch other {
	case "":
		return "ERR key holds a value that is not " + s.Name + " state: left untouched"
	case "type":
		return "ERR key holds a value of another type, not " + s.Name + " state: left untouched"
	}
	return "ERR key holds " + other + " state, not " + s.Name + " state: left untouched"
}

// contractErrors matches every error text the contract allows a script.
var contractErrors = regexp.MustCompile(`(?s)^ERR (` +
	`invalid numkeys '\d+': must be 1 \(the key to reset\)` +
	`|invalid numkeys '\d+': must be 1 \(every limit on one key\) or 2 to 8 \(limit i on KEYS\[i\]\)` +
	`|invalid numkeys '[2-8]': must be 1 or the number of limits \([1-8]\), one limit per key` +
	`|invalid key #[2-8] '.*': must differ from key #[1-7]` +
	`|too many limits \(\d+\): must be at most 8` +
	`|incomplete limit #\d: each further limit is the triple limit period_ms burst` +
	`|invalid (limit|period_ms|burst|cost|mode)( #[2-8])? '.*': (must be a whole number from 1 to 10\^15|must be a whole number from 1 to 10000|must be a whole number from 1 to 10\^12|must be a whole number up to 10\^1[25], or 0 or empty for limit|must be empty, 0 or equal to limit for [a-z_]+|must be a whole number from 0 to 10\^15|must be empty, 'check', 'upto', 'refund' or 'force'|redisrate_[a-z_]+_ro only checks \(empty or 'check'\); call redisrate_[a-z_]+|with [2-8] keys must be at most \d+|must be at most 10000 for sliding_log|must be at most 31622400000 \(366 days\) with limit \d+( and burst \d+)?|must be at most 10\^12 \* limit / period_ms \(a full drain within 10\^12 ms\) with limit \d+ and period_ms \d+)` +
	`|key( #[1-8])? holds (a value of another type, not|a value that is not|[a-z_]+ state, not) [a-z_]+ state: left untouched` +
	`)$`)

// ContractError reports whether msg is one of the contract's error texts.
func ContractError(msg string) bool { return contractErrors.MatchString(msg) }

var tagNames = map[string]string{}

func init() {
	for _, s := range manifest.Specs() {
		if !s.Log {
			for _, tag := range tags(s) {
				tagNames[tag] = s.Name
			}
		}
	}
}

// KeyState is what decides whether a key holds a script's state.
type KeyState struct {
	Type      string  // TYPE
	Value     string  // a string's value; a sorted set's marker score, as ZSCORE replies
	HasMarker bool    // a sorted set holds sliding_log's marker
	Newest    float64 // a sorted set's highest score above 0 (0 if none)
}

// ExpectedStateError is the error s must reply for a key in state k: ""
// when the key is empty or holds valid state of s, read strictly as
// guarantee 7 says. For sliding_log: a sorted set with the marker, whose
// score is a whole number <= 0, and whose newest entry is a whole number
// of microseconds no later than TimeMax (the year 2250, as a string state's
// time fields).
func ExpectedStateError(s manifest.Spec, k KeyState) string {
	if k.Type == "none" {
		return ""
	}
	if s.Log {
		if k.Type != "zset" {
			return StateError(s, "type")
		}
		if !k.HasMarker || !regexp.MustCompile(`^-[0-9]+$`).MatchString(k.Value) || len(k.Value) > 17 || !exactSequence(k.Value) || k.Newest > float64(s.TimeMax) || k.Newest != math.Trunc(k.Newest) {
			return StateError(s, "")
		}
		return ""
	}
	if k.Type != "string" {
		return StateError(s, "type")
	}
	value := k.Value
	if ValidState(s, value) {
		return ""
	}
	if i := strings.IndexByte(value, ' '); i > 0 {
		if other, ok := tagNames[value[:i]]; ok && other != s.Name && !strings.ContainsAny(value[:i], " \t\n\r\v\f") {
			return StateError(s, other)
		}
	}
	return StateError(s, "")
}

// exactSequence reports whether a sliding log's marker score, minus the
// last sequence number, is at most 2^53 - 1, so that every entry's number
// is exact.
func exactSequence(marker string) bool {
	v, err := strconv.ParseUint(strings.TrimPrefix(marker, "-"), 10, 64)
	return err == nil && v <= 1<<53-1
}

// tags is the tags of the string states s reads: the one it writes.
func tags(s manifest.Spec) []string { return []string{s.Tag} }

// ValidState reports whether value is a string state of s: its tag, then
// two or three whole numbers (no leading zeros) for each of 1 to 8 limits,
// separated by single spaces, each in its range: a time at most TimeMax
// (the year 2250); gcra's and leaky_bucket's level up to 26 digits; a
// token bucket's tokens may be negative ("-5"; not "-0"); other fields
// below 2^53.
func ValidState(s manifest.Spec, value string) bool {
	for _, tag := range tags(s) {
		rest, ok := strings.CutPrefix(value, tag)
		if !ok || rest == "" || rest[0] != ' ' {
			continue
		}
		f := strings.Split(rest[1:], " ")
		if len(f)%s.Fields != 0 || len(f) > 8*s.Fields {
			return false
		}
		for i, x := range f {
			if !validField(s, 1+i%s.Fields, x) {
				return false
			}
		}
		return true
	}
	return false
}

// validField reports whether x is field j (from 1) of a limit in a state of s.
func validField(s manifest.Spec, j int, x string) bool {
	max, width := int64(1<<53-1), 16
	switch {
	case s.Range == "continuous" && j == 1: // a level times period_us: up to 26 digits
		return digits.MatchString(x) && len(x) <= 26 && (len(x) == 1 || x[0] != '0')
	case s.TimeField == j:
		max = s.TimeMax
	case s.Name == "token_bucket" && j == 1 && strings.HasPrefix(x, "-"):
		x = x[1:] // a debt; "-0" is not state
		if x == "0" {
			return false
		}
	}
	if !digits.MatchString(x) || len(x) > width || (len(x) > 1 && x[0] == '0') {
		return false
	}
	v, err := strconv.ParseInt(x, 10, 64)
	return err == nil && v <= max
}

// SameError compares an error text as the script built it with the one a
// client read: servers turn CR and LF in an error into spaces, and some
// clients or servers turn bytes that are not UTF-8 into U+FFFD.
func SameError(want, got string) bool { return normError(want) == normError(got) }

func normError(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r < ' ' || r == 0x7f || unicode.IsSpace(r) {
			b.WriteByte(' ')
		} else if r == utf8.RuneError && n == 1 {
			b.WriteRune(utf8.RuneError)
		} else {
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// power writes 10^12 and 10^15 as the scripts' error texts do; other caps as digits.
func power(v int64) string {
	switch v {
	case 1e12:
		return "10^12"
	case 1e15:
		return "10^15"
	}
	return strconv.FormatInt(v, 10)
}
