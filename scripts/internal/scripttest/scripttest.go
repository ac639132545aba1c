// Package scripttest runs the redisrate scripts on a backend for the
// scripts package's tests: miniredis (gopher-lua, with a clock the test
// sets) or a real redis-server started by the test on a free 127.0.0.1
// port, with the machine's clock (Real) or one the test sets (RealClock).
// The same tables run on both: Both, or BothClocked for the tables that
// move the clock.
package scripttest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/redisrate/redisrate/internal/manifest"
	"github.com/redisrate/redisrate/internal/redisserver"
	"github.com/redisrate/redisrate/scripts"
)

// Epoch is the miniredis clock's start: a fixed time with a fraction of a
// millisecond, so that rounding is exercised.
var Epoch = time.Date(2026, 11, 22, 12, 0, 0, 123456000, time.UTC)

// Backend is a Redis that runs the scripts.
type Backend struct {
	Name string
	// Client talks RESP2 to the backend.
	Client *redis.Client
	// Real reports a redis-server (Functions, DUMP, OOM, SLOWLOG).
	Real bool
	// Addr is host:port.
	Addr string

	t      testing.TB
	mr     *miniredis.Miniredis
	now    time.Time
	frozen bool
	clock  string // RealClock: the file that holds its wall clock
}

// Ctx is the tests' context.
var Ctx = context.Background()

// Miniredis starts a miniredis whose clock only moves when the test moves it
// (SetTime, Advance) and whose TTLs follow that clock.
func Miniredis(t testing.TB) *Backend {
	t.Helper()
	mr := miniredis.RunT(t)
	b := &Backend{Name: "miniredis", t: t, mr: mr, Addr: mr.Addr()}
	// miniredis runs in this process and compiles the script on every
	// call: on a starved machine (load 20 on 2 cores) a reply took over
	// go-redis's default 3 s read timeout. A minute still ends a hang.
	b.Client = redis.NewClient(&redis.Options{Addr: mr.Addr(), Protocol: 2, MaxRetries: -1, ReadTimeout: time.Minute, WriteTimeout: time.Minute})
	t.Cleanup(func() { _ = b.Client.Close() })
	mr.SetTime(Epoch)
	mr.ClockTTL(true)
	b.now = Epoch
	mr.DB(0)
	return b
}

// Servers are the real servers the scripts are tested on, by binary: the
// contract holds alike on Redis 7 and on Valkey 8 (managed services run
// both).
var Servers = []string{"redis-server", "valkey-server"}

// Real starts a redis-server on a free 127.0.0.1 port, stopped when the test
// ends. Without redis-server the test is skipped, unless CI=true, where
// that is a failure. extra are more config directives, e.g. "maxmemory", "10mb".
func Real(t testing.TB, extra ...string) *Backend {
	t.Helper()
	return startServer(t, "redis-server", nil, extra...)
}

// RealServers starts each of Servers that can be started (under CI=true,
// every one must), with the config directives extra: the tests that need
// a real server (Functions, OOM) run on each.
func RealServers(t testing.TB, extra ...string) []*Backend {
	t.Helper()
	var out []*Backend
	for _, bin := range Servers {
		if available(bin) {
			out = append(out, startServer(t, bin, nil, extra...))
		}
	}
	if len(out) == 0 {
		t.Skip("neither redis-server nor valkey-server is installed")
	}
	return out
}

// available reports whether bin can be started here; under CI=true every
// server must be, so a missing one fails the test when it is started.
func available(bin string) bool {
	if testing.Short() {
		return false // go test -short (make unit): miniredis only
	}
	_, err := exec.LookPath(bin)
	return err == nil || redisserver.Required()
}

// startServer starts bin (redis-server or valkey-server) with env added to
// its environment (redisserver.Start: ready, and surely on its own port).
func startServer(t testing.TB, bin string, env []string, extra ...string) *Backend {
	t.Helper()
	if testing.Short() {
		t.Skip("-short (make unit): miniredis only; make test runs it on " + bin)
	}
	if _, err := exec.LookPath(bin); err != nil {
		redisserver.Missing(t, "%s is not installed: %v", bin, err)
	}
	dir := t.TempDir()
	srv, err := redisserver.Start(redisserver.Options{Bin: bin, Env: env, Args: func(port int) []string {
		args := append(redisserver.Port(port), redisserver.NoPersistence(dir)...)
		return append(append(args, "--enable-debug-command", "local"), extra...)
	}})
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, Protocol: 2, MaxRetries: -1})
	t.Cleanup(func() {
		_ = c.Close()
		srv.Stop()
	})
	name := strings.TrimSuffix(bin, "-server") // "redis", "valkey"
	return &Backend{Name: name, Client: c, Real: true, Addr: srv.Addr, t: t}
}

// Both returns a miniredis and every real server that can be started
// (RealServers, without skipping when there is none).
func Both(t testing.TB) []*Backend {
	t.Helper()
	out := []*Backend{Miniredis(t)}
	for _, bin := range Servers {
		if available(bin) {
			out = append(out, startServer(t, bin, nil))
		}
	}
	return out
}

// Now is the backend's clock: the one the test set on miniredis and on a
// RealClock server, the machine's on other real Redis servers.
func (b *Backend) Now() time.Time {
	if b.mr == nil && b.clock == "" {
		return time.Now()
	}
	return b.now
}

// SetTime sets the clock (TIME) of miniredis or of a RealClock server;
// TTLs follow it as Redis's absolute expiry times do: a clock that steps
// back lengthens them by the step. On other real Redis servers it fails
// the test.
func (b *Backend) SetTime(t time.Time) {
	b.t.Helper()
	if b.clock != "" {
		b.setRealTime(t)
		return
	}
	if b.mr == nil {
		b.t.Fatal("SetTime on real Redis")
	}
	back := b.now.Sub(t)
	b.now = t
	b.mr.SetTime(t)
	if back > 0 && !b.frozen {
		b.mr.FastForward(-back)
	}
	b.mr.DB(0) // runs the TTLs down to t now, so that a step back starts from t
}

// Clocked reports whether the test sets b's clock (miniredis, RealClock).
func (b *Backend) Clocked() bool { return b.mr != nil || b.clock != "" }

// Advance moves the clock by d (negative: the clock steps back).
func (b *Backend) Advance(d time.Duration) { b.t.Helper(); b.SetTime(b.now.Add(d)) }

// Reply is a script's reply: six integers, or an error.
type Reply struct {
	Ints []int64
	Err  string
}

func (r Reply) String() string {
	if r.Err != "" || r.Ints == nil {
		return "error " + strconv.Quote(r.Err)
	}
	return fmt.Sprint(r.Ints)
}

// Equal compares two replies.
func (r Reply) Equal(o Reply) bool { return r.String() == o.String() }

// decode turns a go-redis result into a Reply; a reply that is neither an
// error nor a list of integers is reported as an error starting "BAD".
func decode(v any, err error) Reply {
	if err != nil {
		var re redis.Error
		if errors.As(err, &re) {
			return Reply{Err: err.Error()}
		}
		return Reply{Err: "TRANSPORT " + err.Error()}
	}
	arr, ok := v.([]any)
	if !ok {
		return Reply{Err: fmt.Sprintf("BAD reply %T %v", v, v)}
	}
	out := make([]int64, len(arr))
	for i, x := range arr {
		n, ok := x.(int64)
		if !ok {
			return Reply{Err: fmt.Sprintf("BAD reply element %d: %T %v", i, x, x)}
		}
		out[i] = n
	}
	return Reply{Ints: out}
}

func anys(args []string) []any {
	out := make([]any, len(args))
	for i, a := range args {
		out[i] = a
	}
	return out
}

// EvalKeys runs the script with EVALSHA (EVAL on NOSCRIPT), as any client would.
func (b *Backend) EvalKeys(src, sha string, keys []string, args ...string) Reply {
	v, err := b.Client.EvalSha(Ctx, sha, keys, anys(args)...).Result()
	if err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
		v, err = b.Client.Eval(Ctx, src, keys, anys(args)...).Result()
	}
	return decode(v, err)
}

// Eval runs s on key.
func (b *Backend) Eval(s manifest.Spec, key string, args ...string) Reply {
	return b.EvalKeys(s.Source, s.SHA1, []string{key}, args...)
}

// EvalRO runs s on key with EVALSHA_RO (real Redis only).
func (b *Backend) EvalRO(s manifest.Spec, key string, args ...string) Reply {
	if err := b.Client.ScriptLoad(Ctx, s.Source).Err(); err != nil {
		return Reply{Err: err.Error()}
	}
	return decode(b.Client.EvalShaRO(Ctx, s.SHA1, []string{key}, anys(args)...).Result())
}

// Reset runs reset.lua on key.
func (b *Backend) Reset(key string) (int64, error) {
	v, err := b.Client.EvalSha(Ctx, scripts.ResetSHA1, []string{key}).Result()
	if err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
		v, err = b.Client.Eval(Ctx, scripts.ResetSource, []string{key}).Result()
	}
	if err != nil {
		return 0, err
	}
	return v.(int64), nil
}

// LoadLibrary loads scripts.Library with FUNCTION LOAD REPLACE (real Redis).
func (b *Backend) LoadLibrary() {
	b.t.Helper()
	if err := b.Client.FunctionLoadReplace(Ctx, scripts.Library).Err(); err != nil {
		b.t.Fatal("FUNCTION LOAD: ", err)
	}
}

// FCall runs s's function of the library (LoadLibrary first).
func (b *Backend) FCall(s manifest.Spec, keys []string, args ...string) Reply {
	return decode(b.Client.FCall(Ctx, s.Function, keys, anys(args)...).Result())
}

// EvalAndFCall runs s on ke by EVALSHA and its function on kf by FCALL, in
// one MULTI, so that both read TIME within microseconds of each other
// (real Redis only, with the library loaded).
func (b *Backend) EvalAndFCall(s manifest.Spec, ke, kf string, args ...string) (Reply, Reply) {
	return b.EvalAndFCallKeys(s, []string{ke}, []string{kf}, args...)
}

// EvalAndFCallKeys is EvalAndFCall for calls of several keys: EVALSHA on
// ke, FCALL on kf.
func (b *Backend) EvalAndFCallKeys(s manifest.Spec, ke, kf []string, args ...string) (Reply, Reply) {
	if err := b.Client.ScriptLoad(Ctx, s.Source).Err(); err != nil {
		return Reply{Err: err.Error()}, Reply{Err: err.Error()}
	}
	var e, f *redis.Cmd
	_, _ = b.Client.TxPipelined(Ctx, func(p redis.Pipeliner) error {
		e = p.EvalSha(Ctx, s.SHA1, ke, anys(args)...)
		f = p.FCall(Ctx, s.Function, kf, anys(args)...)
		return nil
	})
	return decode(e.Result()), decode(f.Result())
}

// FCallRO runs s's read-only function with FCALL_RO.
func (b *Backend) FCallRO(s manifest.Spec, keys []string, args ...string) Reply {
	return decode(b.Client.FCallRO(Ctx, s.Function+"_ro", keys, anys(args)...).Result())
}

// Snapshot is a key's whole content and TTL, to prove a call wrote nothing.
type Snapshot struct {
	Type  string
	Value string
	Dump  string // DUMP, on real Redis
	PTTL  int64  // ms; -1 none, -2 no key
}

func (s Snapshot) String() string {
	return fmt.Sprintf("%s %.200q pttl %d", s.Type, s.Value, s.PTTL)
}

// Snap reads key's type, content, DUMP (real Redis) and PTTL.
func (b *Backend) Snap(key string) Snapshot {
	b.t.Helper()
	c := b.Client
	typ, err := c.Type(Ctx, key).Result()
	if err != nil {
		b.t.Fatal(err)
	}
	s := Snapshot{Type: typ}
	var v any
	switch typ {
	case "string":
		v, err = c.Get(Ctx, key).Result()
	case "zset":
		v, err = c.ZRangeWithScores(Ctx, key, 0, -1).Result()
	case "list":
		v, err = c.LRange(Ctx, key, 0, -1).Result()
	case "set":
		var m []string
		m, err = c.SMembers(Ctx, key).Result()
		sort.Strings(m)
		v = m
	case "hash":
		var m map[string]string
		m, err = c.HGetAll(Ctx, key).Result()
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k+"="+m[k])
		}
		sort.Strings(keys)
		v = keys
	case "stream":
		v, err = c.XRange(Ctx, key, "-", "+").Result()
	}
	if err == redis.Nil {
		return Snapshot{Type: "none", Value: "<nil>", PTTL: -2} // expired meanwhile (real Redis)
	}
	if err != nil {
		b.t.Fatal(err)
	}
	s.Value = fmt.Sprintf("%#v", v)
	if b.Real && typ != "none" {
		d, err := c.Dump(Ctx, key).Result()
		if err == redis.Nil {
			return Snapshot{Type: "none", Value: "<nil>", PTTL: -2}
		}
		if err != nil {
			b.t.Fatal(err)
		}
		s.Dump = d
	}
	ttl, err := c.Do(Ctx, "PTTL", key).Int64()
	if err != nil {
		b.t.Fatal(err)
	}
	if ttl == -2 {
		return Snapshot{Type: "none", Value: "<nil>", PTTL: -2} // expired meanwhile (real Redis)
	}
	s.PTTL = ttl
	return s
}

// Same reports whether after shows the key unchanged since before; on real
// Redis the TTL may have run down by up to slack (and so out, when it was
// that short).
func Same(before, after Snapshot, slack int64) bool {
	if slack > 0 && before.PTTL >= 0 && before.PTTL <= slack && after.PTTL == -2 {
		return true // its TTL ran out meanwhile
	}
	if before.Type != after.Type || before.Value != after.Value || before.Dump != after.Dump {
		return false
	}
	if before.PTTL < 0 || after.PTTL < 0 {
		return before.PTTL == after.PTTL
	}
	return after.PTTL <= before.PTTL && after.PTTL >= before.PTTL-slack
}

// Unchanged fails the test if key changed since before.
func (b *Backend) Unchanged(what, key string, before Snapshot) {
	b.t.Helper()
	after := b.Snap(key)
	slack := int64(0)
	if b.Real && !b.Clocked() { // the machine's clock runs on between the two reads
		slack = 1000
	}
	if !Same(before, after, slack) {
		b.t.Errorf("%s: %s: key %q changed:\n before %v\n after  %v", b.Name, what, key, before, after)
	}
}

// Snaps is the snapshots of several keys, by key: a call of several keys
// must change none of them when it changes nothing.
type Snaps map[string]Snapshot

// SnapAll snaps each of keys.
func (b *Backend) SnapAll(keys []string) Snaps {
	b.t.Helper()
	out := Snaps{}
	for _, k := range keys {
		out[k] = b.Snap(k)
	}
	return out
}

// UnchangedAll fails the test for each key of before that changed since.
func (b *Backend) UnchangedAll(what string, before Snaps) {
	b.t.Helper()
	for k, s := range before {
		b.Unchanged(what, k, s)
	}
}

// PTTL is the key's PTTL (-2 no key, -1 no TTL).
func (b *Backend) PTTL(key string) int64 {
	b.t.Helper()
	v, err := b.Client.Do(Ctx, "PTTL", key).Int64()
	if err != nil {
		b.t.Fatal(err)
	}
	return v
}

// Get is the key's string value ("" when absent).
func (b *Backend) Get(key string) string {
	v, _ := b.Client.Get(Ctx, key).Result()
	return v
}

// Rebind makes b report to t: for a backend that outlives one test, as the
// fuzz target's does.
func (b *Backend) Rebind(t testing.TB) { b.t = t }

// Save records key's value and expiry (a string or a sorted set) and
// returns a function that puts them back: for probes that move the clock
// forward and back, which may expire the key. A key found as it was is left
// alone. One that must be made again gets its expiry back as the absolute
// millisecond (PEXPIREAT), except that Redis cannot set an expiry that is
// not in the future: a key that was at its last millisecond (PTTL 0) and
// expired in between comes back with one more millisecond.
func (b *Backend) Save(key string) (restore func()) {
	b.t.Helper()
	saved := b.keyNow(key)
	return func() {
		b.t.Helper()
		if b.keyNow(key) == saved {
			return
		}
		c := b.Client
		c.Del(Ctx, key)
		switch saved.typ {
		case "string":
			c.Set(Ctx, key, saved.val, 0)
		case "zset":
			var zs []redis.Z
			if err := json.Unmarshal([]byte(saved.val), &zs); err != nil {
				b.t.Fatal(err)
			}
			c.ZAdd(Ctx, key, zs...)
		}
		if saved.at > 0 && saved.typ != "none" {
			now, err := c.Time(Ctx).Result()
			if err != nil {
				b.t.Fatal(err)
			}
			if err := c.Do(Ctx, "PEXPIREAT", key, max(saved.at, now.UnixMilli()+1)).Err(); err != nil {
				b.t.Fatal(err)
			}
		}
	}
}

// keyState is what Save records of a key: its type, value (a sorted set's
// members and scores as JSON) and absolute expiry in ms (PEXPIRETIME).
type keyState struct {
	typ, val string
	at       int64
}

func (b *Backend) keyNow(key string) keyState {
	b.t.Helper()
	c := b.Client
	k := keyState{typ: c.Type(Ctx, key).Val()}
	var err error
	if k.at, err = c.Do(Ctx, "PEXPIRETIME", key).Int64(); err != nil {
		b.t.Fatal(err)
	}
	switch k.typ {
	case "string":
		k.val = c.Get(Ctx, key).Val()
	case "zset":
		zs, err := json.Marshal(c.ZRangeWithScores(Ctx, key, 0, -1).Val())
		if err != nil {
			b.t.Fatal(err)
		}
		k.val = string(zs)
	case "none":
	default:
		b.t.Fatalf("Save of a %s", k.typ)
	}
	return k
}

// Probe runs call with the clock moved on by after, then puts the clock and
// key (value and TTL) back as they were: to ask what a key would answer
// later without changing what it answers now. On miniredis the TTLs stop
// instead while the clock is ahead: it expires a key at its expiry
// millisecond, which Redis still keeps (it expires only past it).
func (b *Backend) Probe(key string, after time.Duration, call func() Reply) Reply {
	b.t.Helper()
	start := b.Now()
	restore := func() {}
	if b.mr != nil {
		b.frozen = true
		b.mr.ClockTTL(false)
	} else {
		restore = b.Save(key)
	}
	b.Advance(after)
	r := call()
	b.SetTime(start)
	if b.mr != nil {
		b.frozen = false
		b.mr.ClockTTL(true)
	}
	restore()
	return r
}

// KeyState reads what ExpectedStateError needs of key.
func (b *Backend) KeyState(key string) KeyState {
	b.t.Helper()
	k := KeyState{Type: b.Client.Type(Ctx, key).Val()}
	switch k.Type {
	case "string":
		k.Value = b.Get(key)
	case "zset":
		if v, err := b.Client.Do(Ctx, "ZSCORE", key, manifest.Specs()[5].Tag).Text(); err == nil {
			k.Value, k.HasMarker = v, true
		}
		top := b.Client.ZRevRangeByScoreWithScores(Ctx, key, &redis.ZRangeBy{Max: "+inf", Min: "(0", Count: 1}).Val()
		if len(top) > 0 {
			k.Newest = top[0].Score
		}
	}
	return k
}

// Decode is a script's reply as Eval returns it, from a command's value
// and error (a pipelined call's, say).
func Decode(v any, err error) Reply { return decode(v, err) }
