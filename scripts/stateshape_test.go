package scripts_test

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redisrate/redisrate/internal/manifest"
	st "github.com/redisrate/redisrate/scripts/internal/scripttest"
)

// The general code reads a state of n limits in three ways: a call of n
// limits on one key matches it whole (a pattern per number of limits, whose
// recorded time takes no leading zero and no 0), another number of limits'
// state is read field by field (a leading zero refused by one find over
// the value), one limit's into locals; with several keys, each key is read
// as one limit's or, holding several, field by field. TestStateShapes holds
// the three to one another and to guarantee 7's strict parse (the model,
// scripttest.ValidState), on states of 1, 2, 3 and 8 limits as the scripts
// write them and on variants of them: a recorded time of 0, a leading zero
// in each field of the first and the last limit, a time past its range,
// gcra's 17-digit TATs, a field at and past 2^53 - 1, a trailing space, a
// double space, a field too many, a ninth limit.

// shapeLimits are the limits of positions 1 to 8 in TestStateShapes.
var shapeLimits = [8][3]string{{"5", "1000", "8"}, {"20", "60000", ""}, {"3", "7", ""}, {"100", "3600000", "150"},
	{"7", "1000", ""}, {"2", "500", ""}, {"50", "86400000", ""}, {"9", "999", "12"}}

func shapeLims(s manifest.Spec, n int) [][3]string {
	out := make([][3]string, n)
	copy(out, shapeLimits[:n])
	for i := range out {
		if s.Window {
			out[i][2] = ""
		}
	}
	return out
}

// stateShape is a value a key holds before a call.
type stateShape struct{ name, value string }

// stateShapes is the states of 1, 2, 3 and 8 limits that calls of s wrote
// on b, and variants of each, valid and not.
func stateShapes(t *testing.T, b *st.Backend, s manifest.Spec) []stateShape {
	t.Helper()
	timeAt := s.TimeField // the field a state's pattern of n limits takes without a leading zero or 0
	timeMax := strconv.FormatInt(s.TimeMax+1, 10)
	var out []stateShape
	for _, m := range []int{1, 2, 3, 8} {
		key := fmt.Sprintf("shape:make:%s:%d", s.Name, m)
		for c := range 3 {
			if r := b.Eval(s, key, keyArgs(shapeLims(s, m), strconv.Itoa(1+c), "")...); r.Err != "" {
				t.Fatalf("%s: %s: %v", b.Name, s.Name, r)
			}
			b.Advance(137 * time.Millisecond)
		}
		v := b.Get(key)
		fields := strings.Split(strings.TrimPrefix(v, s.Tag+" "), " ")
		if len(fields) != m*s.Fields {
			t.Fatalf("%s: %s wrote %q for %d limits", b.Name, s.Name, v, m)
		}
		with := func(j, f int, val string) string { // v with limit j's field f set to val
			c := slices.Clone(fields)
			c[(j-1)*s.Fields+f-1] = val
			return s.Tag + " " + strings.Join(c, " ")
		}
		name := func(format string, args ...any) string {
			return fmt.Sprintf("%d limits, ", m) + fmt.Sprintf(format, args...)
		}
		out = append(out, stateShape{name("as written"), v},
			stateShape{name("a trailing space"), v + " "},
			stateShape{name("a field too many"), v + " 1"},
			stateShape{name("a double space after the tag"), strings.Replace(v, " ", "  ", 1)})
		if m > 1 {
			c := slices.Clone(fields)
			c[s.Fields] = " " + c[s.Fields]
			out = append(out, stateShape{name("a double space before limit 2"), s.Tag + " " + strings.Join(c, " ")})
		}
		if m == 8 {
			out = append(out, stateShape{name("a ninth limit"), v + " " + strings.Join(fields[:s.Fields], " ")})
		}
		for _, j := range slices.Compact([]int{1, m}) { // the first limit and the last
			out = append(out, stateShape{name("limit %d's time 0", j), with(j, timeAt, "0")},
				stateShape{name("limit %d's time past its range", j), with(j, timeAt, timeMax)})
			for f := 1; f <= s.Fields; f++ {
				out = append(out, stateShape{name("limit %d's field %d with a leading zero", j, f), with(j, f, "0"+fields[(j-1)*s.Fields+f-1])},
					stateShape{name("limit %d's field %d 00", j, f), with(j, f, "00")})
			}
			other := timeAt%s.Fields + 1 // a field that is not a time
			out = append(out, stateShape{name("limit %d's field %d 2^53 - 1", j, other), with(j, other, "9007199254740991")},
				stateShape{name("limit %d's field %d 2^53", j, other), with(j, other, "9007199254740992")})
		}
	}
	return out
}

// TestStateShapes: for every shape of stateShapes, a call of 1, 2 and 8
// limits on one key refuses it exactly when the model does, with its error,
// and changes nothing then; one that reads it decides and writes as the
// same call with one key per limit, where the first key holds the whole
// value (several limits' state, read as its first limit's) and key i
// limit i's part of it: the same reply, the one key's value the keys'
// records joined, its TTL the longest of theirs. A value the model refuses
// on key 1 or on the last key of several is refused naming that key, and
// no key changes. A call of one limit decides as the general code alone
// (the specialized copy's fallback), and reset.lua deletes the value
// exactly when the model reads it as state. By EVALSHA on miniredis and the
// real servers, by FCALL too on these.
func TestStateShapes(t *testing.T) {
	if testing.Short() {
		t.Skip("a long table: make test runs it")
	}
	generals, lib := generalOnly(t)
	calls := 0
	for _, b := range st.BothClocked(t) {
		t.Run(b.Name, func(t *testing.T) {
			b.Rebind(t)
			kinds := loadBoth(t, b, lib)
			// run sets keys[i] to values[i] ("": none) and calls s on them:
			// by EVALSHA, and on a real server by FCALL on a copy of them,
			// which must answer and write the same (sameByFCallKeys).
			run := func(s manifest.Spec, keys, values []string, argv []string) (st.Reply, st.Snaps) {
				t.Helper()
				var all, fk []string
				for i, k := range keys {
					all = append(all, k, k+":f")
					fk = append(fk, k+":f")
					for _, key := range []string{k, k + ":f"} {
						b.Client.Del(st.Ctx, key)
						if values[i] != "" {
							b.Client.Set(st.Ctx, key, values[i], 0)
						}
					}
				}
				before := b.SnapAll(all)
				calls++
				if b.Real {
					return sameByFCallKeys(t, b, s, keys, fk, argv...), before
				}
				return evalKeys(b, s, keys, argv...), before
			}
			for _, s := range manifest.Specs() {
				if s.Log {
					continue
				}
				g := generals[s.Name]
				if err := b.Client.ScriptLoad(st.Ctx, g.src).Err(); err != nil {
					t.Fatal(err)
				}
				b.SetTime(st.Epoch)
				shapes := stateShapes(t, b, s)
				read, compared, admitted := 0, 0, 0
				for _, sh := range shapes {
					want := st.ExpectedStateError(s, st.KeyState{Type: "string", Value: sh.value})
					if want == "" {
						read++
					}
					// reset.lua deletes what the scripts read as state, and only that
					b.Client.Set(st.Ctx, "shape:reset", sh.value, 0)
					before := b.Snap("shape:reset")
					if n, err := b.Reset("shape:reset"); want == "" && (n != 1 || err != nil) {
						t.Errorf("%s: reset of %s state %q (%s): %d %v, want deleted", b.Name, s.Name, sh.value, sh.name, n, err)
					} else if want != "" {
						if err == nil || err.Error() != "ERR key holds a value that is not redisrate state: left untouched" {
							t.Errorf("%s: reset of %q (%s): %d %v, want refused", b.Name, sh.value, sh.name, n, err)
						}
						b.Unchanged("reset of "+sh.name, "shape:reset", before)
					}
					for _, n := range []int{1, 2, 8} {
						argv := keyArgs(shapeLims(s, n), "1", "")
						one, oneBefore := run(s, []string{"shape:one"}, []string{sh.value}, argv)
						if !st.SameError(want, one.Err) {
							t.Errorf("%s: %s of %d limits on %q (%s): %v, want %q", b.Name, s.Name, n, sh.value, sh.name, one, want)
							continue
						}
						if n == 1 { // the specialized copy against the general code
							for _, fcall := range kinds {
								for _, k := range []string{"f:0", "g:0"} {
									b.Client.Set(st.Ctx, k, sh.value, 0)
								}
								lockstep(t, b, s, g, fcall, [][]string{argv})
							}
						}
						if want != "" {
							b.UnchangedAll(fmt.Sprintf("%s of %d limits on %s", s.Name, n, sh.name), oneBefore)
							if n == 1 {
								continue
							}
							// on key 1, then on the last key, the others empty
							for _, at := range []int{1, n} {
								keys := make([]string, n)
								values := make([]string, n)
								for i := range keys {
									keys[i] = fmt.Sprintf("{shape}:%d", i+1)
								}
								values[at-1] = sh.value
								r, before := run(s, keys, values, argv)
								if w := st.KeyAt(at, want); !st.SameError(w, r.Err) {
									t.Errorf("%s: %s of %d keys, %q (%s) on key %d: %v, want %q", b.Name, s.Name, n, sh.value, sh.name, at, r, w)
								}
								b.UnchangedAll(fmt.Sprintf("%s of %d keys, %s on key %d", s.Name, n, sh.name, at), before)
							}
							continue
						}
						if n == 1 {
							continue
						}
						// read: as n keys, key 1 holding the whole value, key i
						// limit i's part of it
						fields := strings.Split(strings.TrimPrefix(sh.value, s.Tag+" "), " ")
						keys := make([]string, n)
						values := make([]string, n)
						for i := range keys {
							keys[i] = fmt.Sprintf("{shape}:%d", i+1)
							if (i+1)*s.Fields <= len(fields) {
								values[i] = s.Tag + " " + strings.Join(fields[i*s.Fields:(i+1)*s.Fields], " ")
							}
						}
						values[0] = sh.value
						r, before := run(s, keys, values, argv)
						compared++
						if !r.Equal(one) {
							t.Errorf("%s: %s of %d limits on %q (%s): one key %v, %d keys %v", b.Name, s.Name, n, sh.value, sh.name, one, n, r)
							continue
						}
						if r.Ints[0] == 0 {
							b.UnchangedAll(fmt.Sprintf("%s of %d limits on %s, denied", s.Name, n, sh.name), oneBefore)
							b.UnchangedAll(fmt.Sprintf("%s of %d keys on %s, denied", s.Name, n, sh.name), before)
							continue
						}
						admitted++
						var records []string
						var longest int64
						for _, k := range keys {
							v, ttl := b.Get(k), b.PTTL(k)
							rec, ok := strings.CutPrefix(v, s.Tag+" ")
							if !ok || ttl <= 0 || strings.Count(rec, " ") != s.Fields-1 {
								t.Fatalf("%s: %s of %d keys on %s: key %s holds %q, PTTL %d, want one limit's state and a TTL", b.Name, s.Name, n, sh.name, k, v, ttl)
							}
							records = append(records, rec)
							longest = max(longest, ttl)
						}
						got, ttl := b.Get("shape:one"), b.PTTL("shape:one")
						if wantValue := s.Tag + " " + strings.Join(records, " "); got != wantValue || ttl != longest {
							t.Errorf("%s: %s of %d limits on %q (%s): one key holds %q, PTTL %d, want %q, PTTL %d (the keys' records)", b.Name, s.Name, n, sh.value, sh.name, got, ttl, wantValue, longest)
						}
					}
				}
				t.Logf("%s: %s: %d state shapes, %d read as state; %d calls of several limits on one key compared with several keys, %d admitted", b.Name, s.Name, len(shapes), read, compared, admitted)
			}
		})
	}
	t.Logf("%d calls on state shapes", calls)
}
