package scripts_test

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redisrate/redisrate/internal/manifest"
	st "github.com/redisrate/redisrate/scripts/internal/scripttest"
)

// Several keys in one call (contract v2.1, "Several keys"; issue 21): limit
// i guards KEYS[i], the call is all or nothing across its keys, and each key
// keeps exactly the state that a one-key call with its limit keeps.

// keyArgs is the ARGV of a call whose limit i is lims[i] (limit, period_ms,
// burst), with cost and mode.
func keyArgs(lims [][3]string, cost, mode string) []string {
	argv := []string{lims[0][0], lims[0][1], lims[0][2], cost, mode}
	for _, l := range lims[1:] {
		argv = append(argv, l[0], l[1], l[2])
	}
	return argv
}

// evalKeys runs s on keys by EVALSHA.
func evalKeys(b *st.Backend, s manifest.Spec, keys []string, argv ...string) st.Reply {
	return b.EvalKeys(s.Source, s.SHA1, keys, argv...)
}

// TestSeveralKeysDenialWritesNothing: a call denied by any of its keys'
// limits writes nothing on any key, new or holding state; nor does a check
// or a cost of 0. The reply's binding names the denying key.
func TestSeveralKeysDenialWritesNothing(t *testing.T) {
	for _, b := range st.BothClocked(t) {
		t.Run(b.Name, func(t *testing.T) {
			b.Rebind(t)
			for _, s := range manifest.Specs() {
				user, team, org := [3]string{"2", "60000", ""}, [3]string{"5", "60000", ""}, [3]string{"3", "60000", ""}
				u := func(i int) string { return fmt.Sprintf("{deny:%s}:u%d", s.Name, i) }
				tm, o := fmt.Sprintf("{deny:%s}:team", s.Name), fmt.Sprintf("{deny:%s}", s.Name)
				call := func(keys []string, lims [][3]string, cost, mode string) st.Reply {
					t.Helper()
					r := evalKeys(b, s, keys, keyArgs(lims, cost, mode)...)
					if r.Err != "" {
						t.Fatalf("%s %v: %v", s.Name, keys, r)
					}
					return r
				}
				denied := func(what string, keys []string, lims [][3]string, cost string, binding int64) {
					t.Helper()
					before := b.SnapAll(keys)
					r := call(keys, lims, cost, "")
					if r.Ints[0] != 0 || r.Ints[5] != binding {
						t.Errorf("%s: %s: %s %v: %v, want denied, binding %d", b.Name, s.Name, what, keys, r, binding)
					}
					b.UnchangedAll(s.Name+" "+what, before)
					for _, mode := range []string{"check", ""} { // a check, and a cost of 0
						c := cost
						if mode == "" {
							c = "0"
						}
						call(keys, lims, c, mode)
						b.UnchangedAll(fmt.Sprintf("%s %s (cost %s, mode %q)", s.Name, what, c, mode), before)
					}
				}
				// u1 takes its 2 and 2 of the organisation's 3
				for range 2 {
					if r := call([]string{u(1), o}, [][3]string{user, org}, "1", ""); r.Ints[0] != 1 {
						t.Fatalf("%s: u1: %v, want admitted", s.Name, r)
					}
				}
				denied("denied by the user's limit", []string{u(1), o}, [][3]string{user, org}, "1", 1)
				denied("denied by the user's limit, the organisation first", []string{o, u(1)}, [][3]string{org, user}, "1", 2)
				denied("a cost past the user's capacity", []string{u(2), o}, [][3]string{user, org}, "3", 1)
				if r := call([]string{u(2), tm, o}, [][3]string{user, team, org}, "1", ""); r.Ints[0] != 1 || r.Ints[5] != 3 || r.Ints[1] != 0 {
					t.Fatalf("%s: u2: %v, want admitted, binding 3 (the organisation's, none left)", s.Name, r)
				}
				// the organisation is full: it denies a new user's key and one that holds state
				if r := b.Eval(s, u(4), user[:]...); r.Err != "" || r.Ints[0] != 1 {
					t.Fatalf("%s: u4 alone: %v", s.Name, r)
				}
				for _, ku := range []string{u(3), u(4)} {
					denied("denied by the organisation's limit", []string{ku, o}, [][3]string{user, org}, "1", 2)
					denied("denied by the last of three keys", []string{ku, tm, o}, [][3]string{user, team, org}, "1", 3)
				}
				b.Advance(time.Hour)
			}
		})
	}
}

// sharedKeys is the keys of TestSeveralKeysShareOrg: users, a team and the
// organisation, under a hash tag; the shadow keys hold the same history as
// one-key calls.
type sharedKeys struct{ tag string }

func (k sharedKeys) user(i int) string { return fmt.Sprintf("{%s}:user:%d", k.tag, i) }
func (k sharedKeys) team() string      { return "{" + k.tag + "}:team" }
func (k sharedKeys) org() string       { return "{" + k.tag + "}" }

// TestSeveralKeysShareOrg: an organisation's key shared by many users'
// calls of two and three keys, and also called alone, reads the state those
// calls wrote exactly as a history of one-key calls would give: after every
// call each key holds, byte for byte and to the millisecond of its TTL, what
// its shadow holds, on which the same history ran as one-key calls (each
// key checked with its limit; if every one admits, each recorded). Replies
// and TTLs are the reference model's (scripttest.CallKeys), and miniredis,
// Redis and Valkey give the same replies and states, call for call.
func TestSeveralKeysShareOrg(t *testing.T) {
	if testing.Short() {
		t.Skip("a long table: make test runs it")
	}
	traces := map[string][]string{}
	var first string
	for _, b := range st.BothClocked(t) {
		t.Run(b.Name, func(t *testing.T) {
			b.Rebind(t)
			rng := rand.New(rand.NewPCG(21, 7))
			var trace []string
			calls := 0
			for _, s := range manifest.Specs() {
				b.SetTime(st.Epoch)
				trace = append(trace, sharedHistory(t, b, s, rng, 300, &calls)...)
			}
			traces[b.Name] = trace
			if first == "" {
				first = b.Name
			}
			for i := range min(len(trace), len(traces[first])) {
				if trace[i] != traces[first][i] {
					t.Fatalf("%s differs from %s at call %d:\n %s\n %s", b.Name, first, i, trace[i], traces[first][i])
				}
			}
			t.Logf("%d calls, each key as its one-key shadow and the model", calls)
		})
	}
}

// sharedHistory runs steps random calls of s: two keys (a user and the
// organisation, in either order), three (with the team), the organisation
// alone, a user alone; random costs, checks and clock moves (some back). It returns the
// trace of replies and values.
func sharedHistory(t *testing.T, b *st.Backend, s manifest.Spec, rng *rand.Rand, steps int, calls *int) []string {
	t.Helper()
	real, shadow := sharedKeys{"org:" + s.Name}, sharedKeys{"shadow:" + s.Name}
	const users = 4
	// the limits: a user's, the team's, the organisation's
	user, team, org := [3]string{"3", "1000", ""}, [3]string{"5", "7000", ""}, [3]string{"8", "60000", ""}
	if !s.Window {
		user[2], org[2] = "5", "12"
	}
	var all []string
	models := map[string]*st.Model{}
	for _, k := range []sharedKeys{real, shadow} {
		all = append(all, k.team(), k.org())
		for i := range users {
			all = append(all, k.user(i))
		}
	}
	for _, k := range all {
		models[k] = st.NewModel(s, micros(b.Now()))
		models[k].MsClock = b.Real
	}
	shadowOf := func(k string) string { return strings.Replace(k, real.tag, shadow.tag, 1) }
	var trace []string
	for step := range steps {
		j := rng.IntN(users)
		var keys []string
		var lims [][3]string
		switch op := rng.IntN(10); {
		case op < 5:
			keys, lims = []string{real.user(j), real.org()}, [][3]string{user, org}
		case op < 6: // the organisation first: a longer period before a shorter
			keys, lims = []string{real.org(), real.user(j)}, [][3]string{org, user}
		case op < 8:
			keys, lims = []string{real.user(j), real.team(), real.org()}, [][3]string{user, team, org}
		case op < 9:
			keys, lims = []string{real.org()}, [][3]string{org}
		default:
			keys, lims = []string{real.user(j)}, [][3]string{user}
		}
		cost, mode := "1", ""
		switch r := rng.IntN(20); {
		case r < 2:
			cost = "0"
		case r < 7:
			cost = strconv.Itoa(2 + rng.IntN(2))
		case r < 8:
			cost = "13" // past every capacity
		}
		if rng.IntN(10) == 0 {
			mode = "check"
		}
		argv := keyArgs(lims, cost, mode)
		call, perr := st.ParseKeys(s, keys, argv)
		if perr != "" {
			t.Fatalf("%s %v %q: %s", s.Name, keys, argv, perr)
		}
		now := micros(b.Now())
		got := evalKeys(b, s, keys, argv...)
		*calls++
		var want []int64
		if len(keys) == 1 {
			want = models[keys[0]].Call(now, call)
		} else {
			var ms []*st.Model
			for _, k := range keys {
				ms = append(ms, models[k])
			}
			want = st.CallKeys(ms, now, call)
		}
		if got.Err != "" || fmt.Sprint(got.Ints) != fmt.Sprint(want) {
			t.Fatalf("%s step %d: %v %q: %v, model %v", s.Name, step, keys, argv, got, want)
		}
		// The shadow history: each key checked alone with its limit; if
		// every one admits, each recorded by a one-key call.
		admitted := true
		for i, k := range keys {
			one := keyArgs(lims[i:i+1], cost, "check")
			r := b.Eval(s, shadowOf(k), one...)
			models[shadowOf(k)].Call(now, mustParse(t, s, one))
			if r.Err != "" {
				t.Fatalf("%s: shadow check %v: %v", s.Name, one, r)
			}
			admitted = admitted && r.Ints[0] == 1
			if len(keys) == 1 && !r.Equal(got) {
				t.Fatalf("%s step %d: %s alone: %v, its shadow %v", s.Name, step, k, got, r)
			}
		}
		if admitted != (got.Ints[0] == 1) {
			t.Fatalf("%s step %d: %v %q: %v, but the keys alone admit: %t", s.Name, step, keys, argv, got, admitted)
		}
		if admitted && cost != "0" && mode == "" {
			for i, k := range keys {
				one := keyArgs(lims[i:i+1], cost, "")
				r := b.Eval(s, shadowOf(k), one...)
				models[shadowOf(k)].Call(now, mustParse(t, s, one))
				if r.Err != "" || r.Ints[0] != 1 {
					t.Fatalf("%s step %d: shadow %s %v: %v, want admitted", s.Name, step, shadowOf(k), one, r)
				}
			}
		}
		// The trace: the reply and the keys it wrote (a key left alone may
		// have expired on Redis's millisecond clock and not on miniredis's).
		line := fmt.Sprint(keys, argv, got)
		if admitted && cost != "0" && mode == "" {
			for _, k := range keys {
				line += " " + b.Snap(k).Value
			}
		}
		for _, k := range all[:len(all)/2] {
			rs, ss := b.Snap(k), b.Snap(shadowOf(k))
			if rs.Type != ss.Type || rs.Value != ss.Value || rs.PTTL != ss.PTTL {
				t.Fatalf("%s step %d, after %v %q (%v): %s holds %v, its one-key shadow %v", s.Name, step, keys, argv, got, k, rs, ss)
			}
			if m := models[k]; rs.PTTL != m.TTL() {
				t.Fatalf("%s step %d: %s: PTTL %d, model %d (%v)", s.Name, step, k, rs.PTTL, m.TTL(), m)
			}
		}
		trace = append(trace, line)
		step := time.Duration(rng.Int64N(int64(400 * time.Millisecond)))
		switch rng.IntN(20) {
		case 0:
			step = time.Duration(1+rng.IntN(70)) * time.Second
		case 1:
			step = -time.Duration(rng.Int64N(int64(300 * time.Millisecond))) // a clock that steps back
		}
		b.Advance(step.Truncate(time.Microsecond)) // the scripts' clock, and the model's
		for _, m := range models {
			m.Clock(micros(b.Now()))
		}
	}
	return trace
}

func mustParse(t *testing.T, s manifest.Spec, argv []string) st.Call {
	t.Helper()
	c, err := st.Parse(s, 1, argv)
	if err != "" {
		t.Fatalf("%s %q: %s", s.Name, argv, err)
	}
	return c
}

// TestSeveralKeysForeignKey: a key that holds anything but the script's
// state gets the state error naming its position (the first key at fault),
// and no key is written, whatever the others hold; a valid state on a
// further key, one limit's or several's, is read as a one-key call with its
// limit reads it, and written so. By EVALSHA, and on the real servers by FCALL.
func TestSeveralKeysForeignKey(t *testing.T) {
	n := 0
	for _, b := range st.BothClocked(t) {
		t.Run(b.Name, func(t *testing.T) {
			b.Rebind(t)
			if b.Real {
				b.LoadLibrary()
			}
			for _, s := range manifest.Specs() {
				var all []foreign
				all = append(all, foreigners...)
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
				lims := [][3]string{{"5", "60000", ""}, {"10", "60000", ""}}
				for i, f := range all {
					for _, first := range []string{"empty", "state", "foreign"} {
						k1, k2 := fmt.Sprintf("{fk:%s:%d:%s}:1", s.Name, i, first), fmt.Sprintf("{fk:%s:%d:%s}:2", s.Name, i, first)
						switch first {
						case "state":
							prime(t, b, s, k1)
						case "foreign":
							if err := f.set(b.Client, k1); err != nil {
								t.Fatal(err)
							}
						}
						if err := f.set(b.Client, k2); err != nil {
							t.Fatal(f.name, err)
						}
						want := st.KeyAt(2, st.ExpectedStateError(s, b.KeyState(k2)))
						if first == "foreign" {
							want = st.KeyAt(1, st.ExpectedStateError(s, b.KeyState(k1)))
						}
						if want == "" {
							t.Fatalf("%s: %s reads %s as its state", b.Name, s.Name, f.name)
						}
						before := b.SnapAll([]string{k1, k2})
						for _, argv := range [][]string{keyArgs(lims, "1", ""), keyArgs(lims, "1", "check"), keyArgs(lims, "0", "")} {
							n++
							if r := evalKeys(b, s, []string{k1, k2}, argv...); !st.SameError(want, r.Err) {
								t.Errorf("%s: %s %q, key 1 %s, key 2 %s: %v, want %q", b.Name, s.Name, argv, first, f.name, r, want)
							}
							b.UnchangedAll(fmt.Sprintf("%s on key 1 %s, key 2 %s", s.Name, first, f.name), before)
							if b.Real {
								if r := b.FCall(s, []string{k1, k2}, argv...); !st.SameError(want, r.Err) {
									t.Errorf("FCALL %s %q, key 1 %s, key 2 %s: %v, want %q", s.Name, argv, first, f.name, r, want)
								}
								b.UnchangedAll(fmt.Sprintf("FCALL %s on key 1 %s, key 2 %s", s.Name, first, f.name), before)
							}
						}
					}
				}
				// Valid states on key 2, by hand: read and written as a
				// one-key call with limit 2 reads and writes them.
				for i, v := range states[s.Name] {
					k1, k2, shadow := fmt.Sprintf("{fv:%s:%d}:1", s.Name, i), fmt.Sprintf("{fv:%s:%d}:2", s.Name, i), fmt.Sprintf("{fv:%s:%d}:shadow", s.Name, i)
					b.Client.Set(st.Ctx, k2, v, 0)
					b.Client.Set(st.Ctx, shadow, v, 0)
					r := evalKeys(b, s, []string{k1, k2}, keyArgs(lims, "1", "")...)
					one := b.Eval(s, shadow, keyArgs(lims[1:], "1", "")...)
					if r.Err != "" || one.Err != "" || r.Ints[0] != one.Ints[0] {
						t.Errorf("%s: %s on %q as key 2: %v; alone with its limit: %v", b.Name, s.Name, v, r, one)
					}
					if got, alone := b.Snap(k2), b.Snap(shadow); got.Value != alone.Value || got.PTTL != alone.PTTL {
						t.Errorf("%s: %s on %q as key 2: it holds %v, alone %v", b.Name, s.Name, v, got, alone)
					}
				}
			}
		})
	}
	t.Logf("%d calls of two keys on foreign values", n)
}

// TestSeveralKeysGCRANear2200: a level of 10^12 units of 366 days on a
// further key, late this century, is read from that key's text, exactly,
// as a one-key call reads it.
func TestSeveralKeysGCRANear2200(t *testing.T) {
	s := spec("gcra")
	for _, b := range st.BothClocked(t) {
		b.SetTime(dec2199)
		state := fmt.Sprintf("gcra:4 31622400000000000000000000 %d", dec2199.UnixMicro())
		lim := [3]string{"1000000000000", "31622400000", ""}
		keys := []string{"{rv53}:a", "{rv53}:b"}
		if r := evalKeys(b, s, keys, keyArgs([][3]string{lim, lim}, "1000000000000", "")...); !r.Equal(st.Reply{Ints: []int64{1, 0, 0, 31622400000, 1e12, 1, 1e12}}) {
			t.Errorf("%s: two keys at 2199-12-01: %v", b.Name, r)
		}
		for _, k := range keys {
			if v := b.Get(k); v != state {
				t.Errorf("%s: %s holds %q, want %q", b.Name, k, v, state)
			}
		}
		// key 2 alone holds the level: the next unit is 31.6224 us away
		b.Client.Del(st.Ctx, keys[0])
		want := st.Reply{Ints: []int64{0, 0, 1, 31622400000, 1e12, 2, 0}}
		if r := evalKeys(b, s, keys, keyArgs([][3]string{lim, lim}, "1", "check")...); !r.Equal(want) {
			t.Errorf("%s: key 2 full: %v, want %v", b.Name, r, want)
		}
		if b.Real {
			b.LoadLibrary()
			if r := b.FCall(s, keys, keyArgs([][3]string{lim, lim}, "1", "check")...); !r.Equal(want) {
				t.Errorf("%s: FCALL, key 2 full: %v, want %v", b.Name, r, want)
			}
		}
	}
}
