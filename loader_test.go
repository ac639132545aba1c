package redisrate

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2/server"

	"github.com/redisrate/redisrate/scripts"
)

// TestNoScriptHeals: after SCRIPT FLUSH the next call falls back to EVAL,
// which loads the script again, and the call after is an EVALSHA again.
func TestNoScriptHeals(t *testing.T) {
	ctx := context.Background()
	f := newFakeRedis(t)
	log := &cmdLog{}
	f.rdb.AddHook(log)
	for _, ro := range []bool{false, true} {
		opts := []Option{WithCircuitBreaker(0)} // miniredis refuses the scripts under EVAL_RO: not an outage to wait out
		if ro {
			opts = append(opts, WithReadOnlyCheck())
		}
		l := NewLimiter(f.rdb, opts...)
		call := func() (Result, error) {
			if ro {
				return l.Check(ctx, "k", PerSecond(5))
			}
			return l.Allow(ctx, "k", PerSecond(5))
		}
		_, _ = call() // asks for the library once (miniredis has no FCALL)
		if err := f.rdb.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		log.take()
		r, err := call()
		want := "[EVALSHA EVAL]"
		if ro {
			want = "[EVALSHA_RO EVAL_RO]"
		}
		if got := fmt.Sprint(log.take()); got != want {
			t.Errorf("read-only %v: sent %s, want %s", ro, got, want)
		}
		if ro {
			// miniredis counts TIME as a write command, so it refuses the
			// scripts under EVAL_RO; Redis does not (integration_test/ runs
			// them there). The fallback itself is what is shown here.
			if err == nil || !strings.Contains(err.Error(), "read-only scripts") {
				t.Errorf("read-only: %+v %v: want miniredis's read-only refusal of TIME", r, err)
			}
			continue
		}
		if err != nil || !r.Allowed {
			t.Fatalf("first call after SCRIPT FLUSH: %+v %v", r, err)
		}
		if _, err := call(); err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(log.take()); got != "[EVALSHA]" {
			t.Errorf("then sent %s, want EVALSHA alone: EVAL should have loaded the script", got)
		}
	}
	for _, msg := range []string{"NOSCRIPT No matching script", "proxy: upstream said NOSCRIPT No matching script. Use EVAL."} {
		if !isNoScript(errors.New(msg)) {
			t.Errorf("isNoScript(%q) = false", msg)
		}
	}
	if isNoScript(errors.New("ERR invalid limit")) {
		t.Errorf("isNoScript matched another error")
	}
}

// functionsServer teaches a miniredis FCALL and FCALL_RO of the library's
// functions, as Redis 7 answers them once FUNCTION LOAD has run: each
// function runs its script (by EVALSHA on a side connection), the _ro
// variants always as mode "check", and redisrate_version answers version.
// With loaded false, every FCALL gets "ERR Function not found".
type functionsServer struct {
	loaded  atomic.Bool
	version atomic.Value // string
	calls   atomic.Int64
	last    atomic.Value // string: the last command and function called
}

func addFunctions(t *testing.T, f *fakeRedis) *functionsServer {
	t.Helper()
	fs := &functionsServer{}
	fs.loaded.Store(true)
	fs.version.Store(scripts.LibraryVersion)
	side := fastClient(t, f.mr.Addr())
	handler := func(c *server.Peer, cmd string, args []string) {
		fs.calls.Add(1)
		if len(args) > 0 {
			fs.last.Store(cmd + " " + args[0])
		}
		if len(args) < 2 {
			c.WriteError("ERR wrong number of arguments for '" + strings.ToLower(cmd) + "' command")
			return
		}
		name := args[0]
		if !fs.loaded.Load() {
			c.WriteError("ERR Function not found")
			return
		}
		if name == versionFunction {
			c.WriteBulk(fs.version.Load().(string))
			return
		}
		base, ro := strings.CutSuffix(name, "_ro")
		var sp *scripts.Spec
		for i := range specs {
			if specs[i].Function == base {
				sp = &specs[i]
			}
		}
		if sp == nil || (cmd == "FCALL_RO" && !ro) {
			c.WriteError("ERR Function not found")
			return
		}
		nk, _ := strconv.Atoi(args[1])
		keys := args[2 : 2+nk]
		argv := make([]any, 0, 5)
		for _, a := range args[2+nk:] {
			argv = append(argv, a)
		}
		if ro {
			for len(argv) < 5 {
				argv = append(argv, "")
			}
			argv[4] = "check"
		}
		v, err := side.EvalSha(context.Background(), sp.SHA1, keys, argv...).Result()
		if err != nil && isNoScript(err) {
			v, err = side.Eval(context.Background(), sp.Source, keys, argv...).Result()
		}
		if err != nil {
			c.WriteError(err.Error())
			return
		}
		arr := v.([]any)
		c.WriteLen(len(arr))
		for _, x := range arr {
			c.WriteInt(int(x.(int64)))
		}
	}
	for _, cmd := range []string{"FCALL", "FCALL_RO"} {
		if err := f.mr.Server().Register(cmd, handler); err != nil {
			t.Fatal(err)
		}
	}
	return fs
}

// TestFunctionsPreferred: with this version of the library loaded, calls
// go by FCALL (checks by FCALL_RO of the _ro variant), after one
// FCALL_RO redisrate_version, and decide exactly as EVALSHA does.
func TestFunctionsPreferred(t *testing.T) {
	ctx := context.Background()
	f := newFakeRedis(t)
	addFunctions(t, f)
	log := &cmdLog{}
	f.rdb.AddHook(log)
	l := NewLimiter(f.rdb, WithReadOnlyCheck())
	plain := NewLimiter(fastClient(t, f.mr.Addr()))
	lim := PerMinute(3)
	for i := range 4 {
		got, err := l.Allow(ctx, "fn", lim)
		want, werr := plain.Allow(ctx, "sha", lim)
		if err != nil || werr != nil || got != want {
			t.Fatalf("call %d: FCALL %+v %v, EVALSHA %+v %v", i, got, err, want, werr)
		}
	}
	if r, err := l.Check(ctx, "fn", lim); err != nil || r.Allowed || r.RetryAfter <= 0 {
		t.Fatalf("Check by FCALL_RO: %+v %v, want a denial", r, err)
	}
	res, err := l.AllowBatch(ctx, []Request{{Key: "fn2", Limits: []Limit{lim}}, {Key: "fn3", Limits: []Limit{lim}, N: 3}})
	if err != nil || !res[0].Allowed || res[1].Remaining != 0 {
		t.Fatalf("batch by FCALL: %+v %v", res, err)
	}
	want := "[FCALL_RO FCALL FCALL FCALL FCALL FCALL_RO FCALL FCALL]"
	if got := fmt.Sprint(log.take()); got != want {
		t.Errorf("sent %s, want %s", got, want)
	}
}

// TestFunctionsChecksRunNoWrites: a call that writes nothing (Check, Peek)
// goes to the library's no-writes _ro function even on the primary, by
// FCALL, so that Redis runs it when it refuses writes (OOM under
// maxmemory); a real call runs the writing function.
func TestFunctionsChecksRunNoWrites(t *testing.T) {
	ctx := context.Background()
	f := newFakeRedis(t)
	fs := addFunctions(t, f)
	l := NewLimiter(f.rdb)
	lim := PerMinute(3)
	for _, c := range []struct {
		name string
		call func() (Result, error)
		want string
	}{
		{"Allow", func() (Result, error) { return l.Allow(ctx, "k", lim) }, "FCALL redisrate_gcra"},
		{"Check", func() (Result, error) { return l.Check(ctx, "k", lim) }, "FCALL redisrate_gcra_ro"},
		{"Peek", func() (Result, error) { return l.Peek(ctx, "k", lim) }, "FCALL redisrate_gcra_ro"},
		{"CheckMulti", func() (Result, error) { return l.CheckMulti(ctx, "k", 1, lim, PerHour(10)) }, "FCALL redisrate_gcra_ro"},
	} {
		if _, err := c.call(); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := fs.last.Load(); got != c.want {
			t.Errorf("%s sent %v, want %s", c.name, got, c.want)
		}
	}
	if r, err := l.Peek(ctx, "k", lim); err != nil || r.Remaining != 2 {
		t.Errorf("Peek after one Allow and the checks: %+v %v, want 2 left (checks take nothing)", r, err)
	}
}

// TestFunctionsFallBackToEvalSha: without the library, or with another
// version of it, calls go by EVALSHA; a library deleted under a running
// Limiter costs one "function not found", answered by EVALSHA in the same
// call, and is asked for again a minute later.
func TestFunctionsFallBackToEvalSha(t *testing.T) {
	ctx := context.Background()
	lim := PerMinute(3)
	t.Run("other version", func(t *testing.T) {
		f := newFakeRedis(t)
		fs := addFunctions(t, f)
		fs.version.Store("0000")
		log := &cmdLog{}
		f.rdb.AddHook(log)
		l := NewLimiter(f.rdb)
		for range 3 {
			if r, err := l.Allow(ctx, "k", lim); err != nil || !r.Allowed {
				t.Fatalf("%+v %v", r, err)
			}
		}
		if got := fmt.Sprint(log.take()); got != "[FCALL_RO EVALSHA EVAL EVALSHA EVALSHA]" {
			t.Errorf("sent %s, want the version asked once, then EVALSHA", got)
		}
	})
	t.Run("deleted", func(t *testing.T) {
		f := newFakeRedis(t)
		fs := addFunctions(t, f)
		log := &cmdLog{}
		f.rdb.AddHook(log)
		l := NewLimiter(f.rdb)
		clk := &fakeClock{t: epoch2026}
		l.loader.now = clk.Now
		if r, err := l.Allow(ctx, "k", lim); err != nil || !r.Allowed {
			t.Fatalf("%+v %v", r, err)
		}
		fs.loaded.Store(false)
		log.take()
		r, err := l.Allow(ctx, "k", lim)
		if err != nil || !r.Allowed || r.Remaining != 1 {
			t.Fatalf("the call that finds the library gone: %+v %v, want decided (1 left)", r, err)
		}
		res, err := l.AllowBatch(ctx, []Request{{Key: "k", Limits: []Limit{lim}}, {Key: "j", Limits: []Limit{lim}}})
		if err != nil || !res[0].Allowed || res[0].Remaining != 0 || !res[1].Allowed {
			t.Fatalf("batch: %+v %v", res, err)
		}
		if got := fmt.Sprint(log.take()); got != "[FCALL EVALSHA EVALSHA EVALSHA]" { // FCALL loaded the script
			t.Errorf("sent %s, want one FCALL, then EVALSHA", got)
		}
		fs.loaded.Store(true)
		clk.Advance(functionsRecheck)
		_, _ = l.Allow(ctx, "x", lim)
		if got := fmt.Sprint(log.take()); got != "[FCALL_RO FCALL]" {
			t.Errorf("a minute later sent %s, want the library asked for again, then FCALL", got)
		}
		// Deleted while a batch goes: its FCALLs come back "function not
		// found" and go again by EVALSHA, in the next pipeline.
		fs.loaded.Store(false)
		res, err = l.AllowBatch(ctx, []Request{{Key: "b1", Limits: []Limit{lim}}, {Key: "b2", Limits: []Limit{lim}}})
		if err != nil || !res[0].Allowed || !res[1].Allowed || res[1].Remaining != 2 {
			t.Fatalf("batch finding the library gone: %+v %v", res, err)
		}
		if got := fmt.Sprint(log.take()); got != "[FCALL FCALL EVALSHA EVALSHA]" {
			t.Errorf("sent %s, want the FCALLs again by EVALSHA", got)
		}
	})
	t.Run("no FCALL at all", func(t *testing.T) {
		f := newFakeRedis(t) // miniredis: "unknown command"
		log := &cmdLog{}
		f.rdb.AddHook(log)
		l := NewLimiter(f.rdb)
		for range 2 {
			if r, err := l.Allow(ctx, "k", lim); err != nil || !r.Allowed {
				t.Fatalf("%+v %v", r, err)
			}
		}
		if got := fmt.Sprint(log.take()); got != "[FCALL_RO EVALSHA EVAL EVALSHA]" {
			t.Errorf("sent %s", got)
		}
	})
	t.Run("client without FCALL", func(t *testing.T) {
		f := newFakeRedis(t)
		addFunctions(t, f)
		log := &cmdLog{}
		f.rdb.AddHook(log)
		l := NewLimiter(plainClient{f.rdb})
		if r, err := l.Allow(ctx, "k", lim); err != nil || !r.Allowed {
			t.Fatalf("%+v %v", r, err)
		}
		if got := fmt.Sprint(log.take()); got != "[EVALSHA EVAL]" {
			t.Errorf("sent %s", got)
		}
	})
}

func TestIsNoFunction(t *testing.T) {
	for msg, want := range map[string]bool{
		"ERR Function not found":                                              true,
		"ERR unknown command 'FCALL', with args beginning with: ":             true,
		"ERR unknown command `fcall`, with args beginning with: ":             true,
		"NOPERM User limiter has no permissions to run the 'fcall' command":   true,
		"NOPERM User limiter has no permissions to run the 'evalsha' command": false,
		"ERR invalid limit '0': must be a whole number from 1 to 10^15":       false,
		"LOADING Redis is loading the dataset in memory":                      false,
		"ERR key holds a value that is not gcra state: left untouched":        false,
	} {
		if got := isNoFunction(errors.New(msg)); got != want {
			t.Errorf("isNoFunction(%q) = %v, want %v", msg, got, want)
		}
	}
}

// TestFunctionsVersionCheckNetworkError: a network error while asking for
// the library says nothing of it: the loader asks again a second later.
func TestFunctionsVersionCheckNetworkError(t *testing.T) {
	ld := newLoader(downRedis(t))
	clk := &fakeClock{t: epoch2026}
	ld.now = clk.Now
	if ld.functions(context.Background()) {
		t.Fatal("a down Redis has the library")
	}
	if until := time.Unix(0, ld.fnUntil.Load()); until.Sub(clk.Now()) != time.Second {
		t.Errorf("asks again in %v, want 1s", until.Sub(clk.Now()))
	}
}
