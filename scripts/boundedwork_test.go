package scripts_test

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redisrate/redisrate/internal/manifest"
	st "github.com/redisrate/redisrate/scripts/internal/scripttest"
)

// busy is what one call cost Redis: wall time inside the scripts it ran
// (INFO commandstats' usec for EVAL and EVALSHA, the duration SLOWLOG also
// records, the commands the script made included) and the CPU time of
// Redis's main thread meanwhile (INFO cpu), which time the machine gave
// other processes does not inflate.
type busy struct{ wall, cpu time.Duration }

// busyFor measures call. Each test has a server of its own, so nothing
// else adds to the figures.
func busyFor(t *testing.T, b *st.Backend, call func()) busy {
	t.Helper()
	read := func() (usec int64, cpu float64) {
		info, err := b.Client.Info(st.Ctx, "commandstats", "cpu").Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(info, "\r\n") {
			name, value, _ := strings.Cut(line, ":")
			switch name {
			case "cmdstat_eval", "cmdstat_evalsha":
				for _, field := range strings.Split(value, ",") {
					if v, ok := strings.CutPrefix(field, "usec="); ok {
						n, err := strconv.ParseInt(v, 10, 64)
						if err != nil {
							t.Fatalf("%s: %v", line, err)
						}
						usec += n
					}
				}
			case "used_cpu_user_main_thread", "used_cpu_sys_main_thread":
				f, err := strconv.ParseFloat(value, 64)
				if err != nil {
					t.Fatalf("%s: %v", line, err)
				}
				cpu += f
			}
		}
		return usec, cpu
	}
	usec0, cpu0 := read()
	call()
	usec1, cpu1 := read()
	return busy{time.Duration(usec1-usec0) * time.Microsecond, time.Duration(math.Round((cpu1-cpu0)*1e6)) * time.Microsecond}
}

// bareLog is the sorted-set work of a sliding_log call and nothing else:
// ARGV[2] members from ARGV[3] on, at score ARGV[1], added in the
// script's batches, then the members scored up to ARGV[4] trimmed.
const bareLog = `local score, n, first = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local batch, j = {}, 0
for k = 1, n do
  batch[j + 1], batch[j + 2], j = score, first + k - 1, j + 2
  if j >= 4000 or k == n then redis.call('ZADD', KEYS[1], unpack(batch, 1, j)); j = 0 end
end
if ARGV[4] ~= '' then redis.call('ZREMRANGEBYSCORE', KEYS[1], '(0', ARGV[4]) end
return 1`

// TestBoundedWork (guarantee 11, issue 9 reproduction 9, where a sliding
// log of 10^6 entries kept Redis busy 353 ms in one call) on real Redis:
//
//   - the string scripts with 8 limits keep Redis busy less than 1 ms (the
//     median of 9 calls; they take 0.1–0.3 ms on the project's machines);
//   - sliding_log at its cap (10,000 entries trimmed and 10,000 added in
//     one call) adds little to the sorted-set work the cap allows. That
//     work is Redis's own, 12–20 ms on the project's machines against the
//     contract's 20 ms: its absolute time is the machine's speed, which a
//     test cannot assert without failing on a slower or busier machine
//     (BENCHMARKS.md records it). What the script controls is its own
//     share, so its fastest of 5 rounds must stay within 1.5× the fastest
//     of the same inserts and trims done bare, round by round on the same
//     server, in CPU time of Redis's main thread (wall time moves with
//     what else the machine runs). The absolute figures are logged.
//
// The refusal of a limit past the cap is in regression_test.go.
func TestBoundedWork(t *testing.T) {
	b := st.Real(t)
	eight := []string{"1000000", "3600000", "", "1", ""}
	for i := 2; i <= 8; i++ {
		eight = append(eight, fmt.Sprint(100000*i), fmt.Sprint(60000*i), "")
	}
	const calls = 9
	var medians []string
	for _, s := range manifest.Specs() {
		if s.Log {
			continue
		}
		argv := append([]string(nil), eight...) // bursts left out: windows take them too
		var took []time.Duration
		for i := range calls {
			argv[3] = "1"
			if i%3 == 2 {
				argv[3] = "1000000000" // past the capacity: a denial
			}
			took = append(took, busyFor(t, b, func() {
				if r := b.Eval(s, "work:"+s.Name, argv...); r.Err != "" {
					t.Fatal(r)
				}
			}).wall)
		}
		slices.Sort(took)
		if took[calls/2] >= time.Millisecond {
			t.Errorf("%s with 8 limits: median %v of %d calls, want under 1 ms: %v", s.Name, took[calls/2], calls, took)
		}
		medians = append(medians, fmt.Sprintf("%s %v", s.Name, took[calls/2]))
	}
	t.Logf("FIGURE bounded work: 8 limits, median of %d calls: %s", calls, strings.Join(medians, ", "))

	// sliding_log at its cap: 10000 per 200 ms. 9999 entries at t, 1 at
	// t+100ms; at t+205ms, a call trims the 9999 and adds 9999 (the key
	// lives until t+300ms); a denial in between looks up the 10000th entry
	// for its retry_after. The bare work runs the same adds and trim on a
	// key of its own. t is taken when the first call has returned, so that
	// it is no earlier than the TIME that call's entries carry, however
	// late the call reached Redis: the 9999 are surely out of the window
	// at t+205ms (a t taken before the call left only the 30 ms a busy
	// machine may take to deliver it).
	slog := spec("sliding_log")
	run := func(key string, want int64, argv ...string) {
		t.Helper()
		if r := b.Eval(slog, key, argv...); r.Err != "" || r.Ints[0] != want {
			t.Fatalf("sliding_log %v: %v, want allowed %d", argv, r, want)
		}
	}
	bare := func(key, score string, n, first int, trim string) {
		t.Helper()
		if err := b.Client.Eval(st.Ctx, bareLog, []string{key}, score, n, first, trim).Err(); err != nil {
			t.Fatal(err)
		}
	}
	const rounds = 5
	kinds := []string{"add 9999 to a new key", "trim 9999 and add 9999"}
	var script, work [2][]busy
	for i := range rounds {
		key := fmt.Sprint("work:log:", i)
		script[0] = append(script[0], busyFor(t, b, func() { run(key, 1, "10000", "200", "", "9999") }))
		added := time.Now() // no earlier than the 9999 entries' time (real Redis's TIME)
		time.Sleep(time.Until(added.Add(100 * time.Millisecond)))
		run(key, 1, "10000", "200", "", "1")
		run(key, 0, "10000", "200", "", "10000")
		time.Sleep(time.Until(added.Add(205 * time.Millisecond)))
		script[1] = append(script[1], busyFor(t, b, func() { run(key, 1, "10000", "200", "", "9999") }))
		// The entry added at added+100ms or later is still in the window
		// before added+300ms: 9999 + 1 entries and the marker.
		if c := b.Client.ZCard(st.Ctx, key).Val(); c != 10001 && time.Since(added) < 300*time.Millisecond {
			t.Errorf("the log holds %d members, want 10000 entries and the marker", c)
		}
		bkey := fmt.Sprint("work:bare:", i)
		work[0] = append(work[0], busyFor(t, b, func() { bare(bkey, "1000000000000000", 9999, 1, "") }))
		bare(bkey, "1000000000100000", 1, 10000, "")
		work[1] = append(work[1], busyFor(t, b, func() { bare(bkey, "1000000000230000", 9999, 10001, "1000000000030000") }))
	}
	fastest := func(of []busy) (wall, cpu time.Duration) {
		wall, cpu = of[0].wall, of[0].cpu
		for _, m := range of[1:] {
			wall, cpu = min(wall, m.wall), min(cpu, m.cpu)
		}
		return wall, cpu
	}
	var figures []string
	for k, kind := range kinds {
		sWall, sCPU := fastest(script[k])
		wWall, wCPU := fastest(work[k])
		if sCPU > wCPU*3/2+500*time.Microsecond {
			t.Errorf("sliding_log at its cap, %s: %v of Redis's CPU (fastest of %d rounds), over 1.5× the bare sorted-set work's %v: %v against %v", kind, sCPU, rounds, wCPU, script[k], work[k])
		}
		figures = append(figures, fmt.Sprintf("%s %v in the script, CPU %v (bare work %v, CPU %v)", kind, sWall, sCPU, wWall, wCPU))
	}
	t.Logf("FIGURE bounded work: sliding_log at its cap, fastest of %d rounds: %s; the contract's bound is 20 ms", rounds, strings.Join(figures, "; "))
}

// TestBoundedWorkRange (guarantee 11 over contract v4's range) on Redis 7
// and Valkey 8: the string scripts with 8 limits past 2^53 (deep.lua's
// exact arithmetic: 10^12 per 366 days down to 10^9 per 30 days), or 8
// keys, in every mode, keep Redis busy less than 1 ms (the median of 9
// calls, wall time as SLOWLOG and INFO commandstats record it); sliding_log
// with 8 keys, force at its most (1,250 a key) and the sequence's restart
// on every key, does no more than the sorted-set work it must (the fastest
// of 5 rounds within 1.5x the same adds done bare, in CPU time of Redis's
// main thread), and its figures are logged against the contract's 20 ms.
func TestBoundedWorkRange(t *testing.T) {
	for _, b := range st.RealServers(t) {
		t.Run(b.Name, func(t *testing.T) {
			b.Rebind(t)
			var lims [][3]string
			for i := range 8 {
				lims = append(lims, [3]string{fmt.Sprint(1000000000000 / (1 + i*130)), fmt.Sprint(31622400000 - int64(i)*3700000000), ""})
			}
			var medians []string
			for _, s := range manifest.Specs() {
				if s.Log {
					continue
				}
				for _, mode := range []string{"", "upto", "refund", "force"} {
					for _, k := range []int{1, 8} {
						var keys []string
						for i := range k {
							keys = append(keys, fmt.Sprintf("{wr:%s:%s}:%d", s.Name, mode, i))
						}
						argv := keyArgs(lims, "1", mode)
						if k == 1 {
							argv = append(a(lims[0][0], lims[0][1], lims[0][2], "1", mode), argv[5:]...)
						}
						var took []time.Duration
						for i := range 9 {
							argv[3] = fmt.Sprint(1 + i*123456789)
							took = append(took, busyFor(t, b, func() {
								if r := b.EvalKeys(s.Source, s.SHA1, keys, argv...); r.Err != "" {
									t.Fatal(r)
								}
							}).wall)
						}
						slices.Sort(took)
						if took[4] >= time.Millisecond {
							t.Errorf("%s, 8 limits of the range on %d key(s), mode %q: median %v of 9 calls, want under 1 ms: %v", s.Name, k, mode, took[4], took)
						}
						medians = append(medians, fmt.Sprintf("%s/%q/%dk %v", s.Name, mode, k, took[4]))
					}
				}
			}
			t.Logf("FIGURE bounded work, 8 limits of the range, median of 9: %s", strings.Join(medians, ", "))

			// sliding_log, 8 keys of 10,000 per minute, each holding 1,250
			// entries and a sequence 1 short of its restart: force 1,250 on
			// each restarts every key's sequence and adds 10,000 entries.
			slog := spec("sliding_log")
			var sCPU, wCPU, sWall []time.Duration
			for round := range 5 {
				var keys []string
				lims := make([][3]string, 8)
				for i := range 8 {
					key := fmt.Sprintf("{wrl:%d}:%d", round, i)
					keys = append(keys, key)
					lims[i] = [3]string{"10000", "60000", ""}
					if r := b.Eval(slog, key, "10000", "60000", "", "1250"); r.Err != "" {
						t.Fatal(r)
					}
					if err := b.Client.Do(st.Ctx, "ZADD", key, "XX", -2*(1<<52-2), slog.Tag).Err(); err != nil {
						t.Fatal(err)
					}
				}
				m := busyFor(t, b, func() {
					if r := evalKeys(b, slog, keys, keyArgs(lims, "1250", "force")...); r.Err != "" || r.Ints[6] != 1250 {
						t.Fatalf("force 1250 on 8 keys: %v", r)
					}
				})
				sCPU, sWall = append(sCPU, m.cpu), append(sWall, m.wall)
				for i, key := range keys {
					if n := b.Client.ZCard(st.Ctx, key).Val(); n != 2501 {
						t.Errorf("key %d holds %d members after the restart, want 2,500 entries and the marker", i+1, n)
					}
				}
				w := busyFor(t, b, func() {
					for i := range 8 {
						if err := b.Client.Eval(st.Ctx, bareLog, []string{fmt.Sprintf("{wrb:%d}:%d", round, i)}, "1000000000000000", 1250, 1, "").Err(); err != nil {
							t.Fatal(err)
						}
					}
				})
				wCPU = append(wCPU, w.cpu)
			}
			s, w, sw := slices.Min(sCPU), slices.Min(wCPU), slices.Min(sWall)
			if s > w*3/2+500*time.Microsecond {
				t.Errorf("sliding_log, force and restart on 8 keys: %v of Redis's CPU (fastest of 5), over 1.5x the bare adds' %v: %v against %v", s, w, sCPU, wCPU)
			}
			t.Logf("FIGURE bounded work: sliding_log, force 1,250 and the restart on 8 keys: %v (CPU %v; the bare adds in 8 calls %v); the contract's bound is 20 ms", sw, s, w)
		})
	}
}
