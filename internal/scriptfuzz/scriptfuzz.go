// Package scriptfuzz drives the raw scripts with hostile input and checks
// every reply against the contract. The root package's fuzz test runs it on
// miniredis; the integration tests replay the fuzz corpus with it against a
// real Redis, so both Lua runtimes see the same inputs.
package scriptfuzz

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/redisrate/redisrate"
)

// Input is one hostile call. Its fields are the fuzz test's arguments, in
// order.
type Input struct {
	Algo    uint8  // the script: index into redisrate.Scripts(), modulo their number
	Kind    uint8  // what the key holds before the call: see Kinds, modulo their number
	Data    string // the content of the key for Kind
	NumKeys uint8  // keys passed, modulo 3: the contract wants 1
	Key     string // the key's name
	Argv    string // ARGV, separated by NUL bytes; "" is no ARGV at all
}

// Kinds names what Setup puts under the key, by Input.Kind.
var Kinds = []string{
	"none", "string", "list", "set", "hash", "zset", "stream",
	"state",  // genuine state of the script Data[0] names, made by a call
	"tagged", // a string that starts like a script's state: "<tag> " + Data
	"zlog",   // a sorted set shaped like sliding_log's, from Data
}

// stateTags are the prefixes of the string states.
var stateTags = []string{"gcra", "tb", "lb", "sw", "fw"}

// Args splits Argv.
func (in Input) Args() []string {
	if in.Argv == "" {
		return nil
	}
	return strings.Split(in.Argv, "\x00")
}

func (in Input) String() string {
	s := redisrate.Scripts()
	return fmt.Sprintf("%s, key %.40q holding %s %.60q, %d keys, ARGV %q",
		s[int(in.Algo)%len(s)].Name, in.Key, Kinds[int(in.Kind)%len(Kinds)], in.Data, int(in.NumKeys)%3, in.Args())
}

// Setup deletes the key and fills it as in.Kind says. It needs a
// standalone server or a key's own node (it may touch a second key for
// NumKeys 2, on the same slot).
func Setup(ctx context.Context, rdb redis.Cmdable, in Input) error {
	if err := rdb.Del(ctx, in.Key, otherKey(in.Key)).Err(); err != nil {
		return err
	}
	data := in.Data
	switch Kinds[int(in.Kind)%len(Kinds)] {
	case "none":
		return nil
	case "string":
		return rdb.Set(ctx, in.Key, data, 0).Err()
	case "list":
		return rdb.RPush(ctx, in.Key, data).Err()
	case "set":
		return rdb.SAdd(ctx, in.Key, data).Err()
	case "hash":
		return rdb.HSet(ctx, in.Key, "f", data).Err()
	case "zset":
		return rdb.ZAdd(ctx, in.Key, redis.Z{Score: 1, Member: data}).Err()
	case "stream":
		return rdb.XAdd(ctx, &redis.XAddArgs{Stream: in.Key, Values: []string{"f", data}}).Err()
	case "state":
		s := redisrate.Scripts()
		a := 0
		if data != "" {
			a = int(data[0]) % len(s)
		}
		// Two units of five, so the state is neither empty nor full.
		_, err := eval(ctx, rdb, s[a], []string{in.Key}, []any{"5", "60000", "", "2"})
		return err
	case "tagged":
		tag := stateTags[0]
		if data != "" {
			tag = stateTags[int(data[0])%len(stateTags)]
			data = data[1:]
		}
		return rdb.Set(ctx, in.Key, tag+" "+data, 0).Err()
	case "zlog":
		// Data is member NUL score NUL member NUL score ...; a score that is
		// not a number becomes 0. "redisrate:sliding_log" is the marker.
		f := strings.Split(data, "\x00")
		var zs []redis.Z
		for i := 0; i+1 < len(f) && len(zs) < 64; i += 2 {
			sc, err := strconv.ParseFloat(f[i+1], 64)
			if err != nil || sc != sc || sc > 1e300 || sc < -1e300 {
				sc = 0
			}
			zs = append(zs, redis.Z{Score: sc, Member: f[i]})
		}
		if len(zs) == 0 {
			zs = []redis.Z{{Score: -1, Member: "redisrate:sliding_log"}, {Score: 1, Member: data}}
		}
		return rdb.ZAdd(ctx, in.Key, zs...).Err()
	}
	return nil
}

// otherKey is the second key of a NumKeys 2 call: on the same slot.
func otherKey(key string) string { return "{" + key + "}:other" }

func eval(ctx context.Context, rdb redis.Scripter, s redisrate.Script, keys []string, args []any) (any, error) {
	v, err := rdb.EvalSha(ctx, s.SHA1, keys, args...).Result()
	if err != nil && strings.Contains(err.Error(), "NOSCRIPT") {
		v, err = rdb.Eval(ctx, s.Source, keys, args...).Result()
	}
	return v, err
}

// Snapshot describes a key's content, to prove that a call wrote nothing.
type Snapshot struct {
	Type  string
	Value string
	PTTL  int64 // milliseconds; -1 no TTL, -2 no key
}

// Snap reads the key's type, content and TTL.
func Snap(ctx context.Context, rdb redis.Cmdable, key string) (Snapshot, error) {
	typ, err := rdb.Type(ctx, key).Result()
	if err != nil {
		return Snapshot{}, err
	}
	var val any
	switch typ {
	case "string":
		val, err = rdb.Get(ctx, key).Result()
	case "list":
		val, err = rdb.LRange(ctx, key, 0, -1).Result()
	case "set":
		var m []string
		m, err = rdb.SMembers(ctx, key).Result()
		sort.Strings(m)
		val = m
	case "hash":
		val, err = rdb.HGetAll(ctx, key).Result()
	case "zset":
		val, err = rdb.ZRangeWithScores(ctx, key, 0, -1).Result()
	case "stream":
		val, err = rdb.XRange(ctx, key, "-", "+").Result()
	}
	if err != nil {
		return Snapshot{}, err
	}
	d, err := rdb.PTTL(ctx, key).Result()
	if err != nil {
		return Snapshot{}, err
	}
	ms := d.Milliseconds()
	if d < 0 {
		ms = int64(d) // go-redis keeps -1 and -2 as they are
	}
	return Snapshot{Type: typ, Value: fmt.Sprint(val), PTTL: ms}, nil
}

// same reports whether after shows no write since before: the same
// content, and a TTL that only ran down.
func same(before, after Snapshot) bool {
	if before.Type != after.Type || before.Value != after.Value {
		return false
	}
	if before.PTTL < 0 || after.PTTL < 0 {
		return before.PTTL == after.PTTL
	}
	return after.PTTL <= before.PTTL
}

// errPrefixes are the contract's error replies: each names what was wrong.
var errPrefixes = []string{
	"ERR invalid ", "ERR incomplete limit #", "ERR too many limits (", "ERR key holds ",
}

// numberRE is the contract's number syntax.
var numberRE = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$`)

// Outcome is what a call did, for statistics.
type Outcome int

const (
	Admitted Outcome = iota
	Denied
	Refused // a contract error reply
)

// Check sets the key up, runs the call and checks the contract: never a Lua
// runtime error, either a reply of six sane integers or an ERR that names
// what was wrong, and no write on an error, a denial, a check or a cost of
// 0. It returns a violation, or an error of the server itself (wrapped in
// ErrServer).
func Check(ctx context.Context, rdb redis.UniversalClient, in Input) (Outcome, error) {
	if costly(in) {
		return 0, ErrCostly
	}
	if err := Setup(ctx, rdb, in); err != nil {
		return 0, fmt.Errorf("%w: setup: %v", ErrServer, err)
	}
	before, err := Snap(ctx, rdb, in.Key)
	if err != nil {
		return 0, fmt.Errorf("%w: %v", ErrServer, err)
	}
	s := redisrate.Scripts()
	sc := s[int(in.Algo)%len(s)]
	var keys []string
	switch in.NumKeys % 3 {
	case 1:
		keys = []string{in.Key}
	case 2:
		keys = []string{in.Key, otherKey(in.Key)}
	}
	argv := in.Args()
	args := make([]any, len(argv))
	for i, a := range argv {
		args[i] = a
	}
	v, callErr := eval(ctx, rdb, sc, keys, args)
	after, err := Snap(ctx, rdb, in.Key)
	if err != nil {
		return 0, fmt.Errorf("%w: %v", ErrServer, err)
	}
	if callErr != nil {
		var rerr redis.Error
		if !errors.As(callErr, &rerr) {
			return 0, fmt.Errorf("%w: %v", ErrServer, callErr) // the network, not the script
		}
		msg := callErr.Error()
		named := false
		for _, p := range errPrefixes {
			named = named || strings.HasPrefix(msg, p)
		}
		if !named || strings.Contains(msg, "user_script") || strings.Contains(msg, "attempt to") {
			return 0, fmt.Errorf("not a contract error: %q", msg)
		}
		if !same(before, after) {
			return 0, fmt.Errorf("error %q but the key changed: %+v -> %+v", msg, before, after)
		}
		return Refused, nil
	}
	arr, ok := v.([]any)
	if !ok || len(arr) < 6 {
		return 0, fmt.Errorf("reply %#v: want 6 integers", v)
	}
	var n [6]int64
	for i := range n {
		if n[i], ok = arr[i].(int64); !ok {
			return 0, fmt.Errorf("reply %#v: field %d is not an integer", v, i+1)
		}
	}
	allowed, remaining, retry, reset, capacity, binding := n[0], n[1], n[2], n[3], n[4], n[5]
	limits := 1
	if len(argv) > 5 {
		limits += (len(argv) - 5) / 3
	}
	switch {
	case allowed != 0 && allowed != 1:
		return 0, fmt.Errorf("reply %v: allowed must be 0 or 1", n)
	case remaining < 0 || reset < 0 || capacity < 0:
		return 0, fmt.Errorf("reply %v: negative remaining, reset or limit", n)
	case allowed == 1 && retry != 0:
		return 0, fmt.Errorf("reply %v: admitted with a retry_after_ms", n)
	case allowed == 0 && retry != -1 && retry <= 0:
		return 0, fmt.Errorf("reply %v: denied with retry_after_ms %d", n, retry)
	case binding < 1 || binding > int64(limits):
		return 0, fmt.Errorf("reply %v: binding %d outside 1..%d", n, binding, limits)
	case remaining > capacity:
		return 0, fmt.Errorf("reply %v: remaining above the limit", n)
	}
	readOnly := allowed == 0 || (len(argv) > 4 && argv[4] == "check")
	if len(argv) > 3 && numberRE.MatchString(argv[3]) {
		if c, err := strconv.ParseFloat(argv[3], 64); err == nil && c == 0 {
			readOnly = true
		}
	}
	if readOnly && !same(before, after) {
		return 0, fmt.Errorf("reply %v wrote nothing by contract, but the key changed: %+v -> %+v", n, before, after)
	}
	// -1 is a key without a TTL; 0 is one with less than a millisecond
	// left (a state that is empty again that soon).
	if !readOnly && after.PTTL == -1 && after.Type != "none" {
		return 0, fmt.Errorf("reply %v: admitted, but the key %+v has no TTL", n, after)
	}
	if allowed == 1 {
		return Admitted, nil
	}
	return Denied, nil
}

// ErrCostly is returned, without a call, for an input that would make
// sliding_log write more than MaxLogEntries entries: the contract lets it
// (one entry per unit, up to a limit of 1e15), and such a call keeps Redis
// busy for as long as it takes (a cost of 10^6 takes 6 s and 96 MB on Redis
// 7), so the fuzzer would only measure that.
var ErrCostly = errors.New("input would write too many sliding_log entries")

// MaxLogEntries is the most sliding_log entries one fuzz input may add.
const MaxLogEntries = 10000

func costly(in Input) bool {
	s := redisrate.Scripts()
	if s[int(in.Algo)%len(s)].Algorithm != redisrate.SlidingLog {
		return false
	}
	argv := in.Args()
	cost := 1.0
	if len(argv) > 3 && argv[3] != "" {
		if !numberRE.MatchString(argv[3]) {
			return false // refused anyway
		}
		cost, _ = strconv.ParseFloat(argv[3], 64)
	}
	return cost > MaxLogEntries
}

// ErrServer marks a failure of the server or the connection, not of the
// script.
var ErrServer = errors.New("server error")

// ReadCorpus reads the inputs of a Go fuzz corpus directory
// (testdata/fuzz/FuzzScripts): files of "go test fuzz v1" and one
// argument per line.
func ReadCorpus(dir string) (map[string]Input, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*"))
	if err != nil {
		return nil, err
	}
	out := make(map[string]Input, len(files))
	for _, f := range files {
		in, err := readEntry(f)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		out[filepath.Base(f)] = in
	}
	return out, nil
}

func readEntry(path string) (Input, error) {
	fh, err := os.Open(path)
	if err != nil {
		return Input{}, err
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	var vals []string
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line == "go test fuzz v1" {
			continue
		}
		open := strings.IndexByte(line, '(')
		if open < 0 || !strings.HasSuffix(line, ")") {
			return Input{}, fmt.Errorf("cannot read line %q", line)
		}
		typ, lit := line[:open], line[open+1:len(line)-1]
		switch typ {
		case "string", "[]byte":
			s, err := strconv.Unquote(lit)
			if err != nil {
				return Input{}, fmt.Errorf("line %q: %v", line, err)
			}
			vals = append(vals, s)
		case "byte", "uint8":
			if strings.HasPrefix(lit, "'") {
				r, _, _, err := strconv.UnquoteChar(lit[1:len(lit)-1], '\'')
				if err != nil {
					return Input{}, fmt.Errorf("line %q: %v", line, err)
				}
				vals = append(vals, string([]byte{byte(r)}))
			} else {
				u, err := strconv.ParseUint(lit, 0, 8)
				if err != nil {
					return Input{}, fmt.Errorf("line %q: %v", line, err)
				}
				vals = append(vals, string([]byte{byte(u)}))
			}
		default:
			return Input{}, fmt.Errorf("unexpected type in line %q", line)
		}
	}
	if err := sc.Err(); err != nil {
		return Input{}, err
	}
	if len(vals) != 6 {
		return Input{}, fmt.Errorf("%d values, want 6", len(vals))
	}
	return Input{Algo: vals[0][0], Kind: vals[1][0], Data: vals[2], NumKeys: vals[3][0], Key: vals[4], Argv: vals[5]}, nil
}

// Seeds are the starting points: valid calls of every shape, the
// contract's own refusals, and states of every kind for every script. The
// corpus under testdata/fuzz/FuzzScripts grows from them, and the
// integration tests replay it on a real Redis.
func Seeds() []Input {
	argvs := []string{
		"10\x001000",
		"10\x001000\x0020\x003",
		"10\x001000\x00\x001\x00check",
		"10\x001000\x00\x000",
		"3\x001000\x00\x001\x00\x00100\x0060000\x00",
		"2.5\x00250\x005\x002.5",
		"1e+06\x001000\x00\x001e3",
		"7\x0060000\x00\x0010",
		"",
		"10",
		"-1\x001000",
		"10\x000",
		"10\x001000\x00\x001\x00bogus",
		"10\x001000\x00\x001\x00\x005",
		"nan\x00inf\x00.5\x005.\x00 1",
		"1e15\x001e12\x001e15\x001e15",
		"0.000001\x001e12",
		strings.Repeat("1\x001000\x00\x00", 9),
	}
	var out []Input
	for algo := range 6 {
		for kind := range len(Kinds) {
			out = append(out, Input{Algo: uint8(algo), Kind: uint8(kind), Data: "\x01 1 2 3", NumKeys: 1, Key: "k", Argv: argvs[(algo+kind)%len(argvs)]})
		}
		for i, a := range argvs {
			out = append(out, Input{Algo: uint8(algo), Kind: uint8(i % 2 * 7), Data: string(rune('0' + algo)), NumKeys: 1, Key: "{user:42}:rate", Argv: a})
		}
		out = append(out,
			Input{Algo: uint8(algo), NumKeys: 0, Key: "k", Argv: argvs[0]},
			Input{Algo: uint8(algo), NumKeys: 2, Key: "k", Argv: argvs[0]},
			Input{Algo: uint8(algo), NumKeys: 1, Key: "", Argv: argvs[1]},
			Input{Algo: uint8(algo), NumKeys: 1, Key: "\x00\xff\r\n binary", Argv: argvs[1]},
			Input{Algo: uint8(algo), Kind: 9, Data: "1\x00100\x00redisrate:sliding_log\x00-1", NumKeys: 1, Key: "k", Argv: argvs[1]},
			Input{Algo: uint8(algo), Kind: 8, Data: "\x00nan inf", NumKeys: 1, Key: "k", Argv: argvs[1]},
		)
	}
	return out
}
