package scripts_test

import (
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redisrate/redisrate/internal/manifest"
	"github.com/redisrate/redisrate/scripts"
	"github.com/redisrate/redisrate/scripts/internal/assemble"
	st "github.com/redisrate/redisrate/scripts/internal/scripttest"
)

// The generated copy of each algorithm specialized for one key and one
// limit (scripts/src/fast.lua) must decide exactly as the general code:
// the same reply, the same value written and the same TTL, for every call.
// The general code alone is what assemble.GeneralOnly writes: the same
// sources without the copies, and a library named redisrate_general that
// loads beside the real one. Both run on the same calls in lockstep, on two
// keys, on a clock the test holds.

// general is one algorithm's general-only script.
type general struct{ src, sha string }

func generalOnly(t testing.TB) (map[string]general, string) {
	t.Helper()
	files, err := assemble.GeneralOnly(os.DirFS("src"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]general{}
	for _, s := range manifest.Specs() {
		src := string(files[s.Name+".lua"])
		if strings.Contains(src, "GENERATED COPY") {
			t.Fatalf("%s: the general-only script has a specialized copy", s.Name)
		}
		sum := sha1.Sum([]byte(src))
		out[s.Name] = general{src, hex.EncodeToString(sum[:])}
	}
	return out, string(files["library.lua"])
}

// loadBoth loads, on a real server, the library and beside it the
// general-only library lib, and returns the call kinds both run by: FCALL
// (true) there, EVALSHA (false) everywhere.
func loadBoth(t *testing.T, b *st.Backend, lib string) []bool {
	t.Helper()
	if !b.Real {
		return []bool{false}
	}
	b.LoadLibrary()
	if err := b.Client.FunctionLoadReplace(st.Ctx, lib).Err(); err != nil {
		t.Fatal(err)
	}
	return []bool{false, true}
}

// fastSpecs are the scripts that carry a specialized copy.
func fastSpecs(t testing.TB) []manifest.Spec {
	var out []manifest.Spec
	for _, s := range manifest.Specs() {
		if strings.Contains(s.Source, "GENERATED COPY") {
			out = append(out, s)
		}
	}
	if len(out) != 5 {
		t.Fatalf("%d scripts carry a specialized copy, want the 5 but sliding_log", len(out))
	}
	return out
}

// outcomes counts the replies of calls that lockstep compared.
type outcomes struct{ admitted, denied, errors int }

// lockstep runs calls (one ARGV each) on b in one pipeline: each on key
// "f:<i>" with the real script and on "g:<i>" with the general code, by
// EVALSHA or (fcall) FCALL, and compares replies, values and TTLs. A reply
// that did not come from the server (a broken connection) fails the test,
// as two such would compare equal.
func lockstep(t *testing.T, b *st.Backend, s manifest.Spec, g general, fcall bool, calls [][]string) outcomes {
	t.Helper()
	type result struct{ f, g, ftype, gtype, fv, gv, ft, gt *redis.Cmd }
	res := make([]result, len(calls))
	_, _ = b.Client.Pipelined(st.Ctx, func(p redis.Pipeliner) error {
		for i, argv := range calls {
			kf, kg := fmt.Sprintf("f:%d", i), fmt.Sprintf("g:%d", i)
			args := anys(argv)
			if fcall {
				res[i].f = p.FCall(st.Ctx, s.Function, []string{kf}, args...)
				res[i].g = p.FCall(st.Ctx, assemble.GeneralLibrary+"_"+s.Name, []string{kg}, args...)
			} else {
				res[i].f = p.EvalSha(st.Ctx, s.SHA1, []string{kf}, args...)
				res[i].g = p.EvalSha(st.Ctx, g.sha, []string{kg}, args...)
			}
			// what each key holds after: type, value (a string's; a foreign
			// type's is left as it was, which other tests hold), TTL
			res[i].ftype, res[i].gtype = p.Do(st.Ctx, "TYPE", kf), p.Do(st.Ctx, "TYPE", kg)
			res[i].fv, res[i].gv = p.Do(st.Ctx, "GET", kf), p.Do(st.Ctx, "GET", kg)
			res[i].ft, res[i].gt = p.Do(st.Ctx, "PTTL", kf), p.Do(st.Ctx, "PTTL", kg)
		}
		return nil
	})
	show := func(c *redis.Cmd) string {
		v, err := c.Result()
		if err != nil {
			var re redis.Error
			if !errors.As(err, &re) {
				t.Fatalf("%s: %s: %v, not the server's reply", b.Name, s.Name, err)
			}
			return "error " + err.Error()
		}
		return fmt.Sprint(v)
	}
	var n outcomes
	for i, r := range res {
		f := show(r.f) + " | " + show(r.ftype) + " " + show(r.fv) + " | TTL " + show(r.ft)
		g := show(r.g) + " | " + show(r.gtype) + " " + show(r.gv) + " | TTL " + show(r.gt)
		if f != g {
			t.Fatalf("%s: %s %q (FCALL %t):\n specialized %s\n general     %s", b.Name, s.Name, calls[i], fcall, f, g)
		}
		switch reply, _ := r.f.Int64Slice(); {
		case len(reply) != 7:
			n.errors++
		case reply[0] == 1:
			n.admitted++
		default:
			n.denied++
		}
	}
	return n
}

func anys(args []string) []any {
	out := make([]any, len(args))
	for i, a := range args {
		out[i] = a
	}
	return out
}

// fastArg draws one argument: mostly the plain form the copy takes, often
// a form it leaves to the general code.
func fastArg(rng *rand.Rand, plain int64) string {
	switch rng.IntN(20) {
	case 0:
		return ""
	case 1:
		return "0"
	case 2:
		return "0" + strconv.FormatInt(plain, 10) // a leading zero
	case 3:
		return strconv.FormatInt(plain*1000000000000000, 10) // 16 digits and more
	case 4:
		return []string{"-1", "1.5", "1e3", " 1", "x", "1000000000000001"}[rng.IntN(6)]
	}
	return strconv.FormatInt(plain, 10)
}

// fastCall draws one call: one limit in 9 of 10, a cost and a mode at times.
func fastCall(rng *rand.Rand) []string {
	periods := []int64{1, 7, 1000, 60000, 3600000, 86400000, 1000000000000}
	limit := 1 + rng.Int64N(20)
	if rng.IntN(10) == 0 {
		limit = 1 + rng.Int64N(5000000)
	}
	period := periods[rng.IntN(len(periods))]
	argv := []string{fastArg(rng, limit), fastArg(rng, period)}
	if rng.IntN(3) > 0 {
		burst := limit
		if rng.IntN(2) == 0 {
			burst = 1 + rng.Int64N(3*limit)
		}
		argv = append(argv, fastArg(rng, burst))
	}
	if len(argv) == 3 && rng.IntN(2) == 0 {
		argv = append(argv, fastArg(rng, rng.Int64N(limit+2)))
		if rng.IntN(3) == 0 {
			argv = append(argv, []string{"", "check", "check", "peek", "upto", "upto", "refund", "force"}[rng.IntN(8)])
		}
	}
	if len(argv) == 5 && rng.IntN(4) == 0 { // a second limit: the general code's
		argv = append(argv, strconv.FormatInt(1+rng.Int64N(50), 10), strconv.FormatInt(periods[rng.IntN(len(periods))], 10), "")
	}
	return argv
}

// fastCalls is how many random calls per algorithm each backend runs; a soak
// sets REDISRATE_FAST_CALLS (e.g. 100000 on miniredis, some 20 times
// slower than Redis).
func fastCalls(b *st.Backend) (evalsha, fcall int) {
	if n, err := strconv.Atoi(os.Getenv("REDISRATE_FAST_CALLS")); err == nil && n > 0 {
		return n, n
	}
	defer func() { // under the race detector a tenth: make test runs them whole without it
		if raceEnabled {
			evalsha, fcall = evalsha/10, fcall/10
		}
	}()
	switch {
	case !b.Real:
		return 3000, 0
	case strings.HasPrefix(b.Name, "redis"):
		return 100000, 100000
	}
	return 10000, 10000 // Valkey: held to Redis call by call elsewhere
}

// TestFastCopyDecidesAsGeneral: every argument case of the tables, every
// foreign value and state of state_test.go, and random calls in lockstep
// (keys carrying state from call to call, the clock moving forward and
// back), by EVALSHA and FCALL, on miniredis, Redis and Valkey.
func TestFastCopyDecidesAsGeneral(t *testing.T) {
	if testing.Short() {
		t.Skip("a long table: make test runs it")
	}
	generals, lib := generalOnly(t)
	for _, b := range st.BothClocked(t) {
		t.Run(b.Name, func(t *testing.T) {
			b.Rebind(t)
			kinds := loadBoth(t, b, lib)
			for _, s := range fastSpecs(t) {
				g := generals[s.Name]
				if err := b.Client.ScriptLoad(st.Ctx, s.Source).Err(); err != nil {
					t.Fatal(err)
				}
				if err := b.Client.ScriptLoad(st.Ctx, g.src).Err(); err != nil {
					t.Fatal(err)
				}
				for _, fcall := range kinds {
					b.SetTime(st.Epoch)
					b.Client.FlushDB(st.Ctx)
					// The tables' rows: every argument case (one key), each on
					// an empty key, then on state, then on each foreign value.
					var rows, valid [][]string
					for _, c := range argCases {
						if c.numkeys == 0 {
							rows = append(rows, c.argv)
							if c.want == "" {
								valid = append(valid, c.argv)
							}
						}
					}
					lockstep(t, b, s, g, fcall, rows)
					lockstep(t, b, s, g, fcall, rows)
					for _, f := range foreigners { // the calls that read the key
						b.Client.FlushDB(st.Ctx)
						for i := range valid {
							_ = f.set(b.Client, fmt.Sprintf("f:%d", i))
							_ = f.set(b.Client, fmt.Sprintf("g:%d", i))
						}
						lockstep(t, b, s, g, fcall, valid)
					}
					// Random calls: 100 key pairs, a round of calls at a time,
					// the clock moved between rounds. A key is called again with
					// its last call's arguments half the time, as a key is meant
					// to be called, so that its state runs down to denials; the
					// keys start again empty every 30 rounds (a state read under
					// many others' limits ends far ahead, where all is denied).
					rng := rand.New(rand.NewPCG(20, uint64(len(s.Name))))
					evalsha, fc := fastCalls(b)
					n := evalsha
					if fcall {
						n = fc
					}
					at := st.Epoch
					var random outcomes
					last := make([][]string, 100)
					for done := 0; done < n; done += len(last) {
						if done%(30*len(last)) == 0 {
							b.Client.FlushDB(st.Ctx)
							clear(last)
						}
						calls := make([][]string, min(len(last), n-done))
						for i := range calls {
							if last[i] == nil || rng.IntN(2) == 0 {
								last[i] = fastCall(rng)
							}
							calls[i] = last[i]
						}
						o := lockstep(t, b, s, g, fcall, calls)
						random.admitted, random.denied, random.errors = random.admitted+o.admitted, random.denied+o.denied, random.errors+o.errors
						step := time.Duration(rng.Int64N(int64(400 * time.Millisecond)))
						if rng.IntN(10) == 0 {
							step = -time.Duration(rng.Int64N(int64(time.Second))) // a clock that steps back
						}
						at = at.Add(step)
						b.SetTime(at)
					}
					// The copy decides most random calls (the rest are forms it
					// leaves to the general code, and their errors), admissions
					// and denials alike: not only errors are compared.
					if random.admitted < n/10 || random.denied < n/100 {
						t.Errorf("%s: %s (FCALL %t): of %d random calls %d admitted, %d denied: too few decided to compare", b.Name, s.Name, fcall, n, random.admitted, random.denied)
					}
					t.Logf("%s: %s (FCALL %t): %d table rows, %d on foreign values, %d random calls (%d admitted, %d denied, %d errors)", b.Name, s.Name, fcall, 2*len(rows), len(foreigners)*len(valid), n, random.admitted, random.denied, random.errors)
				}
			}
		})
	}
}

// TestFastCopyTakesTheCommonCall: the specialized copy answers the calls a
// client makes most, rather than leaving them to the general code (which
// would decide alike, TestFastCopyDecidesAsGeneral, but cost a second TIME
// and GET and the speed issue's instructions). The scripts and the library
// are run with the general code cut off after the copy: a call the copy
// leaves answers "general code". Every common call, on a fresh key and on
// the state it left, must be answered by the copy, by EVALSHA and by FCALL;
// a call the copy must leave (a state of two limits) shows the cut works.
func TestFastCopyTakesTheCommonCall(t *testing.T) {
	common := [][]string{{"1000000", "3600000"}, {"10", "1000"}, {"100", "60000", "@burst"}, {"5", "1000", "", "3"},
		{"5", "1000", "", "", "check"}, {"7", "86400000", "", "0"}, {"1000000", "1800000"}, {"1", "3600000"}}
	const cut = "do return 'general code' end -- (TestFastCopyTakesTheCommonCall)\n"
	cutOff := func(src, until string) string {
		if strings.Count(src, until) < 1 {
			t.Fatalf("no %q in the generated code", until)
		}
		return strings.ReplaceAll(src, until, until+strings.Repeat(" ", strings.Index(until, "until")-1)+cut)
	}
	library := cutOff(scripts.Library, "\n  until true\n")
	for _, b := range st.Both(t) {
		if b.Real {
			if err := b.Client.FunctionLoadReplace(st.Ctx, library).Err(); err != nil {
				t.Fatal(err)
			}
		}
		for _, s := range fastSpecs(t) {
			src := cutOff(s.Source, "\nuntil true\n")
			sum := sha1.Sum([]byte(src))
			sha := hex.EncodeToString(sum[:])
			for _, fcall := range []bool{false, true} {
				if fcall && !b.Real {
					continue
				}
				call := func(key string, argv []string) st.Reply {
					if fcall {
						return b.FCall(s, []string{key}, argv...)
					}
					return b.EvalKeys(src, sha, []string{key}, argv...)
				}
				for i, argv := range common {
					argv = append([]string(nil), argv...)
					for j := range argv {
						if argv[j] == "@burst" {
							argv[j] = map[bool]string{true: "100", false: "200"}[s.Window]
						}
					}
					key := fmt.Sprintf("common:%s:%t:%d", s.Name, fcall, i)
					for n := range 4 { // on a fresh key, then on the state it left (but after a check)
						if r := call(key, argv); r.Err != "" || strings.Contains(r.String(), "general code") {
							t.Errorf("%s: %s %v (FCALL %t), call %d: %s: the specialized copy did not answer", b.Name, s.Name, argv, fcall, n+1, r)
						}
					}
				}
				key := fmt.Sprintf("common:%s:%t:two", s.Name, fcall)
				b.Client.Set(st.Ctx, key, s.Tag+strings.Repeat(" 1", 2*s.Fields), 0)
				if r := call(key, []string{"10", "1000"}); !strings.Contains(r.String(), "general code") {
					t.Errorf("%s: %s on two limits' state (FCALL %t): %s, want the general code's call", b.Name, s.Name, fcall, r)
				}
			}
		}
	}
}
