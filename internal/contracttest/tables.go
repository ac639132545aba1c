package contracttest

import (
	"fmt"
	"strings"
)

// badArg is a call the contract refuses, and the start of its error reply.
type badArg struct {
	args []string
	want string
}

// notNumbers are strings that are not the contract's numbers
// (^[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$), or numbers past 1e15.
var notNumbers = []string{
	"-1", "+1", "-0", ".5", "5.", "0x10", "0X1A", " 5", "5 ", "5\t", "1 0", "nan", "NaN", "inf", "-inf", "Infinity",
	"1e16", "1000000000000001", "1.5e15", "abc", "five", "1e", "1e+", "e5", "1.5.2", "1,5", "1_000", "²",
}

// badArgs lists, for the script under test, every bad input the contract
// names, each with the error reply it must get.
func (h *H) badArgs() []badArg {
	var out []badArg
	add := func(want string, args ...string) { out = append(out, badArg{args: args, want: want}) }
	inv := func(name, v string) string {
		if strings.ContainsAny(v, "\t\r\n") {
			// servers may rewrite control characters in error replies
			return "ERR invalid " + name + " '"
		}
		return "ERR invalid " + name + " '" + v + "': must be "
	}

	limits := append([]string{"", "0", "0.0", "0e5"}, notNumbers...)
	if h.a.whole {
		limits = append(limits, "2.5", "1e-1", "10.5")
	}
	for _, v := range limits {
		add(inv("limit", v), v, hour)
	}
	for _, v := range []string{"", "0", "-1", "+1000", "1.5", "1e13", "1000000000001", ".5", "5.", "0x3e8", " 1000", "1000 ", "nan", "inf", "1e-3", "3600000.5", "abc", "1e1000"} {
		add(inv("period_ms", v), "10", v)
	}
	bursts := []string{"-1", "+10", ".5", "5.", "0x10", "nan", "inf", "abc", " 10", "1e16"}
	if h.a.window {
		bursts = append(bursts, "5", "11", "9.99", "1e1.5")
	}
	for _, v := range bursts {
		add(inv("burst", v), "10", hour, v)
	}
	costs := []string{}
	for _, v := range notNumbers {
		if v != "" {
			costs = append(costs, v)
		}
	}
	if h.a.whole {
		costs = append(costs, "0.5", "1.5", "1e-1", "2.5e0")
	}
	for _, v := range costs {
		add(inv("cost", v), "10", hour, "", v)
	}
	for _, v := range []string{"foo", "checks", "check ", " check", "1", "record"} {
		add(inv("mode", v), "10", hour, "", "1", v)
	}

	// further triples name their position
	base := []string{"10", hour, "", "1", ""}
	triple := func(extra ...string) []string { return append(append([]string{}, base...), extra...) }
	for _, v := range []string{"", "0", "-1", "nan", ".5"} {
		out = append(out, badArg{triple(v, hour, ""), inv("limit #2", v)})
	}
	for _, v := range []string{"", "0", "1.5", "1e13"} {
		out = append(out, badArg{triple("5", v, ""), inv("period_ms #2", v)})
	}
	b2 := []string{"-1", "nan", "5."}
	if h.a.window {
		b2 = append(b2, "4")
	}
	for _, v := range b2 {
		out = append(out, badArg{triple("5", hour, v), inv("burst #2", v)})
	}
	out = append(out,
		badArg{triple("5", hour, "", "0", hour, ""), inv("limit #3", "0")},
		badArg{triple("5", hour, "", "5", "x", ""), inv("period_ms #3", "x")},
		badArg{triple("5"), "ERR incomplete limit #2"},
		badArg{triple("5", hour), "ERR incomplete limit #2"},
		badArg{triple("5", hour, "", "1"), "ERR incomplete limit #3"},
	)
	nine := append([]string{}, base...)
	for i := 2; i <= 9; i++ {
		nine = append(nine, fmt.Sprint(10+i), hour, "")
	}
	out = append(out, badArg{nine, "ERR too many limits (9)"})
	out = append(out, badArg{append(nine, "30", hour, ""), "ERR too many limits (10)"})

	// combinations past the exact range of a double
	switch h.a.name {
	case "gcra", "leaky_bucket":
		add("ERR invalid burst '10': must be ", "7", "1000000000000", "10")
		// burst 5 at 7 per 1e12 ms needs 5e15 > 2^52 µs-units: the capacity itself is refused
		add("ERR invalid burst '5': must be ", "7", "1000000000000", "5", "5")
	case "token_bucket":
		add("ERR invalid burst '1000000000000000': must be ", "1", "1000000000000", "1000000000000000")
	case "sliding_window":
		add("ERR invalid limit '1000000000000000': must be ", "1000000000000000", "1000000000000")
	}
	return out
}

func runBadArgs(h *H) {
	used := h.key("used")
	h.must(used, "10", hour)
	before := h.snap(used)
	fresh := h.key("fresh")
	for _, b := range h.badArgs() {
		what := fmt.Sprintf("args %q", b.args)
		msg := h.expectErr(what, used, b.args, b.want)
		h.expectErr(what, fresh, b.args, b.want)
		// the argument is named, and what it must be is said
		if strings.HasPrefix(b.want, "ERR invalid ") && msg != "" && !strings.Contains(msg, ": must be ") {
			h.t.Errorf("%s: error %q does not say what the argument must be", what, msg)
		}
	}
	h.unchanged("bad arguments", used, before)
	h.absent("bad arguments", fresh)

	// a key count other than 1
	for _, keys := range [][]string{{}, {used, fresh}} {
		cmd := []any{"EVAL", h.s.Source, len(keys)}
		for _, k := range keys {
			cmd = append(cmd, k)
		}
		cmd = append(cmd, "10", hour)
		err := h.e.Client.Do(h.ctx, cmd...).Err()
		want := fmt.Sprintf("ERR invalid numkeys '%d'", len(keys))
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			h.t.Errorf("numkeys %d: error %v, want %q...", len(keys), err, want)
		}
	}
	h.unchanged("bad numkeys", used, before)
	h.absent("bad numkeys", fresh)
}

// foreign is a value a user (or someone else) keeps under a key.
type foreign struct {
	name  string
	setup []any // the command that stores it
}

func (h *H) foreigners(k string) []foreign {
	out := []foreign{
		{"list", []any{"RPUSH", k, "a", "b"}},
		{"hash", []any{"HSET", k, "f", "v"}},
		{"set", []any{"SADD", k, "a", "b"}},
		{"zset", []any{"ZADD", k, "1", "a", "2", "b"}},
		{"zset scored 0", []any{"ZADD", k, "0", "a"}},
		{"string order 42", []any{"SET", k, "order 42"}},
		{"string order 42 with a TTL", []any{"SET", k, "order 42", "PX", "5000000"}},
		{"empty string", []any{"SET", k, ""}},
		{"number string", []any{"SET", k, "42"}},
		{"string 1 2", []any{"SET", k, "1 2"}},
	}
	if !h.a.zset {
		// this script's own tag around a value that is not its state
		tag := map[string]string{"gcra": "gcra", "token_bucket": "tb", "leaky_bucket": "lb", "sliding_window": "sw", "fixed_window": "fw"}[h.a.name]
		out = append(out,
			foreign{"tag alone", []any{"SET", k, tag}},
			foreign{"tag and a space", []any{"SET", k, tag + " "}},
			foreign{"tag and words", []any{"SET", k, tag + " order 42"}},
			foreign{"tag and an odd field", []any{"SET", k, tag + " 1 2 3 4 5 6 7"}},
			foreign{"tag without a space", []any{"SET", k, tag + "1 2 3 4 5 6"}},
			foreign{"capital tag", []any{"SET", k, strings.ToUpper(tag) + " 1 2 3 4 5 6"}},
		)
	}
	return out
}

func runForeign(h *H) {
	for i, f := range h.foreigners("") {
		k := h.key(fmt.Sprintf("foreign-%d", i))
		f.setup[1] = k
		if err := h.e.Client.Do(h.ctx, f.setup...).Err(); err != nil {
			h.t.Fatalf("%s: %v", f.name, err)
		}
		h.refused(f.name, k)
	}
}

// refused wants every kind of call on key to get an error reply and leave
// the key exactly as it was.
func (h *H) refused(what, key string) {
	h.t.Helper()
	before := h.snap(key)
	for _, a := range [][]string{
		args("10", hour),
		args("10", hour, "", "0"),
		args("10", hour, "", "1", "check"),
		args("10", hour, "", "11"),
		args("10", hour, "", "1", "", "5", hour, ""),
	} {
		h.expectErr(what, key, a, "ERR key holds ")
	}
	h.unchanged(what, key, before)
}
