package scripts_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/redisrate/redisrate/internal/manifest"
	st "github.com/redisrate/redisrate/scripts/internal/scripttest"
)

// usedMemory reads INFO memory's used_memory.
func usedMemory(t *testing.T, b *st.Backend) int64 {
	t.Helper()
	info := b.Client.Info(st.Ctx, "memory").Val()
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no used_memory in INFO")
	return 0
}

// TestOOM (guarantee 10, issue 9 reproduction 5): under maxmemory with
// noeviction, every writing call of every script (new key and existing key,
// one limit and several, two keys each new or not, sliding_log with costs
// up to its cap) fails with Redis's OOM error and writes nothing on any
// key, by EVALSHA and by FCALL; calls that write nothing (a denial, a
// check, a cost of 0) still decide by EVALSHA, and FCALL_RO of the
// read-only functions still decides.
func TestOOM(t *testing.T) {
	onServers(t, func(t testing.TB) []*st.Backend { return st.RealServers(t, "--maxmemory-policy", "noeviction") }, oomOn)
}

func oomOn(t *testing.T, b *st.Backend) {
	b.LoadLibrary()
	type call struct {
		what string
		argv []string
	}
	writes := []call{
		{"one limit", a("100", "60000")},
		{"cost 3", a("100", "60000", "", "3")},
		{"three limits", a("100", "60000", "", "1", "", "1000", "3600000", "", "10", "1000", "")},
	}
	logWrites := []call{{"cost 1000", a("10000", "60000", "", "1000")}, {"cost 9000", a("10000", "60000", "", "9000")}, {"cost 10000", a("10000", "60000", "", "10000")}}
	// Existing keys, with room, made before the limit.
	for _, s := range manifest.Specs() {
		for i := range writes {
			prime(t, b, s, fmt.Sprintf("oom:old:%s:%d", s.Name, i))
			prime(t, b, s, fmt.Sprintf("oom:fold:%s:%d", s.Name, i))
		}
		// full, for denials
		b.Eval(s, "oom:full:"+s.Name, "5", "60000", "", "5")
	}
	// Calls of two keys: each key new or holding state ("{oom:2k:<kinds>:<script>}:<i>"), and
	// for denials a pair whose second key is full.
	pairKinds := []string{"new/new", "old/new", "new/old", "old/old"}
	pair := func(via, kinds string, s manifest.Spec) []string {
		tag := fmt.Sprintf("{oom:2k:%s:%s:%s}", via, kinds, s.Name)
		return []string{tag + ":1", tag + ":2"}
	}
	for _, s := range manifest.Specs() {
		for _, kinds := range pairKinds {
			for _, via := range []string{"EVALSHA", "FCALL"} {
				keys := pair(via, kinds, s)
				for i, kind := range strings.Split(kinds, "/") {
					if kind == "old" {
						prime(t, b, s, keys[i])
					}
				}
			}
		}
		full := pair("full", "new/full", s)
		b.Eval(s, full[1], "5", "60000", "", "5")
	}
	for i := range logWrites[:2] {
		for _, k := range []string{"oom:log:old:%d", "oom:flog:old:%d"} {
			if r := b.Eval(spec("sliding_log"), fmt.Sprintf(k, i), "10000", "60000", "", "1000"); r.Err != "" {
				t.Fatal(r)
			}
		}
	}
	// maxmemory just above used memory, then a filler past it: Redis is now
	// over maxmemory and refuses commands that may grow memory.
	used := usedMemory(t, b)
	if err := b.Client.ConfigSet(st.Ctx, "maxmemory", fmt.Sprint(used+256*1024)).Err(); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		err := b.Client.Set(st.Ctx, fmt.Sprint("oom:filler:", i), strings.Repeat("x", 16*1024), 0).Err()
		if err != nil && strings.HasPrefix(err.Error(), "OOM") {
			break
		}
		if err != nil || i > 1000 {
			t.Fatalf("filling to maxmemory: %d fillers, %v", i, err)
		}
	}
	// Redis judges OOM once, when a command starts, from used_memory, which
	// swings by kilobytes (client buffers shrink in the background): the last
	// filler's overshoot can fall back under the limit. Lowering it to the
	// memory used before the fillers keeps every later command 256 KiB over.
	if err := b.Client.ConfigSet(st.Ctx, "maxmemory", fmt.Sprint(used)).Err(); err != nil {
		t.Fatal(err)
	}
	n := 0
	expectOOM := func(what string, r st.Reply, key string, before st.Snapshot) {
		t.Helper()
		n++
		if !strings.HasPrefix(r.Err, "OOM") {
			t.Errorf("%s: %v, want an error starting OOM", what, r)
		}
		b.Unchanged(what, key, before)
	}
	for _, s := range manifest.Specs() {
		list := writes
		if s.Log {
			list = append(append([]call(nil), writes...), logWrites...)
		}
		for i, c := range list {
			for _, kind := range []string{"new", "old"} {
				if c.what == "cost 10000" && kind == "old" {
					continue // a denial on a log that holds entries
				}
				key, fkey := fmt.Sprintf("oom:%s:%s:%d", kind, s.Name, i), fmt.Sprintf("oom:f%s:%s:%d", kind, s.Name, i)
				if s.Log && i >= len(writes) {
					key, fkey = fmt.Sprintf("oom:log:%s:%d", kind, i-len(writes)), fmt.Sprintf("oom:flog:%s:%d", kind, i-len(writes))
				}
				before := b.Snap(key)
				expectOOM(fmt.Sprintf("EVALSHA %s %s key, %s", s.Name, kind, c.what), b.Eval(s, key, c.argv...), key, before)
				before = b.Snap(fkey)
				expectOOM(fmt.Sprintf("FCALL %s %s key, %s", s.Name, kind, c.what), b.FCall(s, []string{fkey}, c.argv...), fkey, before)
			}
		}
		// nothing to write: still decided by EVALSHA, and by FCALL_RO
		full := "oom:full:" + s.Name
		before := b.Snap(full)
		for _, argv := range [][]string{a("5", "60000", "", "1"), a("5", "60000", "", "1", "check"), a("5", "60000", "", "0"), a("100", "60000", "", "1", "check")} {
			if r := b.Eval(s, full, argv...); r.Err != "" {
				t.Errorf("EVALSHA %s %v under OOM: %v, want a decision (it writes nothing)", s.Name, argv, r)
			}
			if r := b.FCallRO(s, []string{full}, argv...); r.Err != "" {
				t.Errorf("FCALL_RO %s %v under OOM: %v, want a decision", s.Function+"_ro", argv, r)
			}
		}
		b.Unchanged("calls that write nothing under OOM", full, before)
		// Two keys: refused, nothing written on either (by EVALSHA Redis
		// refuses the script's first write, and so any later one).
		two := a("100", "60000", "", "1", "", "1000", "60000", "")
		for _, kinds := range pairKinds {
			for _, via := range []string{"EVALSHA", "FCALL"} {
				keys := pair(via, kinds, s)
				before := b.SnapAll(keys)
				var r st.Reply
				if via == "EVALSHA" {
					r = b.EvalKeys(s.Source, s.SHA1, keys, two...)
				} else {
					r = b.FCall(s, keys, two...)
				}
				n++
				if !strings.HasPrefix(r.Err, "OOM") {
					t.Errorf("%s %s, two keys %s: %v, want an error starting OOM", via, s.Name, kinds, r)
				}
				b.UnchangedAll(fmt.Sprintf("%s %s two keys %s under OOM", via, s.Name, kinds), before)
			}
		}
		fullPair := pair("full", "new/full", s)
		before = b.Snap(fullPair[1])
		for _, argv := range [][]string{a("5", "60000", "", "1", "", "5", "60000", ""), a("5", "60000", "", "1", "check", "5", "60000", "")} {
			if r := b.EvalKeys(s.Source, s.SHA1, fullPair, argv...); r.Err != "" || r.Ints[0] != 0 || r.Ints[5] != 2 {
				t.Errorf("EVALSHA %s two keys %v under OOM: %v, want denied by key 2 (it writes nothing)", s.Name, argv, r)
			}
			if r := b.FCallRO(s, fullPair, argv...); r.Err != "" || r.Ints[0] != 0 {
				t.Errorf("FCALL_RO %s two keys %v under OOM: %v, want denied", s.Function+"_ro", argv, r)
			}
		}
		b.Unchanged("a denial of two keys under OOM", fullPair[1], before)
		if b.PTTL(fullPair[0]) != -2 {
			t.Errorf("%s: a denial of two keys under OOM created key 1", s.Name)
		}
	}
	if used2 := usedMemory(t, b); used2 > used+1024*1024+512*1024 {
		t.Errorf("used_memory grew from %d to %d under OOM", used, used2)
	}
	t.Logf("%d writing calls refused with OOM, nothing written", n)
}
