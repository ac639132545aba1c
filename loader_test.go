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

	"github.com/redis/go-redis/v9"

	"github.com/redisrate/redisrate/internal/manifest"
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
		l := testLimiter(f.rdb, opts...)
		call := func() (Result, error) {
			if ro {
				return l.Decide(ctx, Request{Kind: KindCheck, Key: "k", Limits: []Limit{PerSecond(5)}})
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

// functionsServer teaches a go-redis client of a miniredis the library's
// functions, as Redis 7 answers FCALL and FCALL_RO once FUNCTION LOAD has
// run, single or in a pipeline: each function runs its script (by EVALSHA
// on a side connection), the _ro variants always as mode "check", and
// redisrate_version answers version. The names bound to a version
// (scripts.VersionSuffix) exist only while version is this library's. With
// loaded false, every function is "ERR Function not found"; with bogus,
// the algorithms' functions admit everything without writing, as a library
// of another version might. The server is a hook, which must be the
// client's last (it answers FCALL itself).
type functionsServer struct {
	loaded  atomic.Bool
	bogus   atomic.Bool
	version atomic.Value // string
	calls   atomic.Int64
	last    atomic.Value // string: the last command and function called
	side    *redis.Client
}

func addFunctions(t *testing.T, f *fakeRedis) *functionsServer {
	t.Helper()
	fs := &functionsServer{side: fastClient(t, f.mr.Addr())}
	fs.loaded.Store(true)
	fs.version.Store(scripts.LibraryVersion)
	f.rdb.AddHook(fs)
	return fs
}

func (fs *functionsServer) DialHook(next redis.DialHook) redis.DialHook { return next }

func (fs *functionsServer) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "fcall" || cmd.Name() == "fcall_ro" {
			fs.fcall(ctx, cmd)
			return cmd.Err()
		}
		return next(ctx, cmd)
	}
}

func (fs *functionsServer) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		var rest []redis.Cmder
		for _, c := range cmds {
			if c.Name() == "fcall" || c.Name() == "fcall_ro" {
				fs.fcall(ctx, c)
			} else {
				rest = append(rest, c)
			}
		}
		if len(rest) == 0 {
			return nil
		}
		return next(ctx, rest)
	}
}

// functionsRedis is a fake Redis with the library (addFunctions) whose
// commands are logged as the Limiter sends them.
func functionsRedis(t *testing.T) (*fakeRedis, *cmdLog, *functionsServer) {
	t.Helper()
	f := newFakeRedis(t)
	log := &cmdLog{}
	f.rdb.AddHook(log) // before the library's hook, which answers FCALL itself
	return f, log, addFunctions(t, f)
}

// replyError is an error reply of the server, as go-redis makes them.
type replyError string

func (e replyError) Error() string { return string(e) }
func (replyError) RedisError()     {}

// fcall answers one FCALL or FCALL_RO, a Cmd or (an algorithm's, as the
// loader reads it) an IntSliceCmd.
func (fs *functionsServer) fcall(ctx context.Context, cmd redis.Cmder) {
	c := fakeReply{cmd}
	fs.calls.Add(1)
	args := make([]string, len(c.Args()))
	for i, a := range c.Args() {
		args[i] = fmt.Sprint(a)
	}
	name, versioned := strings.CutSuffix(args[1], scripts.VersionSuffix)
	fs.last.Store(strings.ToUpper(args[0]) + " " + args[1])
	if !fs.loaded.Load() || versioned && fs.version.Load() != scripts.LibraryVersion {
		c.SetErr(replyError("ERR Function not found"))
		return
	}
	if name == versionFunction {
		c.SetVal(fs.version.Load().(string))
		return
	}
	base, ro := strings.CutSuffix(name, "_ro")
	var sp *manifest.Spec
	for i := range specs {
		if specs[i].Function == base {
			sp = &specs[i]
		}
	}
	if sp == nil || (c.Name() == "fcall_ro" && !ro) {
		c.SetErr(replyError("ERR Function not found"))
		return
	}
	if fs.bogus.Load() {
		c.SetVal([]any{int64(1), int64(999), int64(0), int64(0), int64(1000), int64(1)})
		return
	}
	nk, _ := strconv.Atoi(args[2])
	keys := args[3 : 3+nk]
	argv := make([]any, 0, 5)
	for _, a := range args[3+nk:] {
		argv = append(argv, a)
	}
	if ro {
		for len(argv) < 5 {
			argv = append(argv, "")
		}
		argv[4] = "check"
	}
	v, err := fs.side.EvalSha(ctx, sp.SHA1, keys, argv...).Result()
	if err != nil && isNoScript(err) {
		v, err = fs.side.Eval(ctx, sp.Source, keys, argv...).Result()
	}
	if err != nil {
		c.SetErr(err)
		return
	}
	c.SetVal(v)
}

// fakeReply sets a command's reply, whatever its type.
type fakeReply struct{ cmd redis.Cmder }

func (a fakeReply) Args() []any      { return a.cmd.Args() }
func (a fakeReply) Name() string     { return a.cmd.Name() }
func (a fakeReply) SetErr(err error) { a.cmd.SetErr(err) }

func (a fakeReply) SetVal(v any) {
	cmd := a.cmd
	switch c := cmd.(type) { // a pipeline's commands (noRetry)
	case *noRetryInts:
		cmd = &c.IntSliceCmd
	case noRetryCmd:
		cmd = c.Cmd
	}
	switch c := cmd.(type) {
	case *redis.Cmd:
		c.SetVal(v)
	case *redis.IntSliceCmd:
		arr, _ := v.([]any)
		ints := make([]int64, len(arr))
		for i, x := range arr {
			ints[i], _ = x.(int64)
		}
		c.SetVal(ints)
	default:
		a.cmd.SetErr(fmt.Errorf("the fake library cannot answer a %T", a.cmd))
	}
}

// v is the suffix of the function names bound to this library version.
const v = scripts.VersionSuffix

// TestFunctionsPreferred: with this version of the library loaded, calls
// go by FCALL of the functions bound to it once FCALL_RO redisrate_version
// found it (checks by FCALL of the _ro variant), and decide exactly as
// EVALSHA does; with WithReadOnlyCheck,
// checks go by FCALL_RO, which may go to a replica.
func TestFunctionsPreferred(t *testing.T) {
	ctx := context.Background()
	f, log, fs := functionsRedis(t)
	l := testLimiter(f.rdb)
	plain := testLimiter(fastClient(t, f.mr.Addr()))
	lim := PerMinute(3)
	for i := range 4 {
		got, err := l.Allow(ctx, "fn", lim)
		want, werr := plain.Allow(ctx, "sha", lim)
		want.Key = "fn"
		if err != nil || werr != nil || got != want {
			t.Fatalf("call %d: FCALL %+v %v, EVALSHA %+v %v", i, got, err, want, werr)
		}
	}
	if r, err := l.Decide(ctx, Request{Kind: KindCheck, Key: "fn", Limits: []Limit{lim}}); err != nil || r.Allowed || r.RetryAfter <= 0 || fs.last.Load() != "FCALL redisrate_gcra_ro"+v {
		t.Fatalf("Check by FCALL of the _ro function: %+v %v (%v), want a denial", r, err, fs.last.Load())
	}
	res, err := l.DecideBatch(ctx, []Request{{Key: "fn2", Limits: []Limit{lim}}, {Key: "fn3", Limits: []Limit{lim}, N: 3}})
	if err != nil || !res[0].Allowed || res[1].Remaining != 0 {
		t.Fatalf("batch by FCALL: %+v %v", res, err)
	}
	want := "FCALL_RO " + strings.Repeat("FCALL ", 5) + "FCALL FCALL"
	if got := strings.Join(log.take(), " "); got != want {
		t.Errorf("sent %s, want %s", got, want)
	}
	ro := testLimiter(f.rdb, WithReadOnlyCheck())
	if r, err := ro.Decide(ctx, Request{Kind: KindCheck, Key: "fn", Limits: []Limit{lim}}); err != nil || r.Allowed || fs.last.Load() != "FCALL_RO redisrate_gcra_ro"+v {
		t.Fatalf("Check with WithReadOnlyCheck: %+v %v (%v), want a denial by FCALL_RO", r, err, fs.last.Load())
	}
	if got, want := strings.Join(log.take(), " "), "FCALL_RO FCALL_RO"; got != want {
		t.Errorf("Check with WithReadOnlyCheck sent %s, want %s, which a replica may serve", got, want)
	}
}

// Every call kind goes by FCALL when the library is there, on a
// ClusterClient too (reads that may go to a replica by FCALL_RO).
func TestFunctionsFirstStep(t *testing.T) {
	ctx := context.Background()
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}, ReadOnly: true})
	t.Cleanup(func() { _ = cc.Close() })
	for _, c := range []redis.Scripter{cc, newFakeRedis(t).rdb} {
		ld := newLoader(c, realClock{})
		ld.fnYes.Store(true)
		if got := ld.first(ctx, &algoScripts[GCRA]); got != stepFCall {
			t.Errorf("%T: first step %d, want FCALL", c, got)
		}
		if got := ld.first(ctx, &resetScript); got != stepEvalSha {
			t.Errorf("%T: reset's first step %d, want EVALSHA (it has no function)", c, got)
		}
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
	l := testLimiter(f.rdb)
	lim := PerMinute(3)
	for _, c := range []struct {
		name string
		call func() (Result, error)
		want string
	}{
		{"Allow", func() (Result, error) { return l.Allow(ctx, "k", lim) }, "FCALL redisrate_gcra" + v},
		{"Check", func() (Result, error) { return l.Decide(ctx, Request{Kind: KindCheck, Key: "k", Limits: []Limit{lim}}) }, "FCALL redisrate_gcra_ro" + v},
		{"Peek", func() (Result, error) { return l.Decide(ctx, Request{Kind: KindPeek, Key: "k", Limits: []Limit{lim}}) }, "FCALL redisrate_gcra_ro" + v},
		{"Decide/Check/Limits", func() (Result, error) {
			return l.Decide(ctx, Request{Kind: KindCheck, Key: "k", Limits: []Limit{lim, PerHour(10)}})
		}, "FCALL redisrate_gcra_ro" + v},
	} {
		if _, err := c.call(); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := fs.last.Load(); got != c.want {
			t.Errorf("%s sent %v, want %s", c.name, got, c.want)
		}
	}
	if r, err := l.Decide(ctx, Request{Kind: KindPeek, Key: "k", Limits: []Limit{lim}}); err != nil || r.Remaining != 2 {
		t.Errorf("Peek after one Allow and the checks: %+v %v, want 2 left (checks take nothing)", r, err)
	}
}

// TestFunctionsFallBackToEvalSha: without the library, or with another
// version of it, calls go by EVALSHA; a library deleted under a running
// Limiter costs one "function not found", answered by EVALSHA in the same
// call, and FCALL is tried again a minute later.
func TestFunctionsFallBackToEvalSha(t *testing.T) {
	ctx := context.Background()
	lim := PerMinute(3)
	t.Run("other version", func(t *testing.T) {
		f, log, fs := functionsRedis(t)
		fs.version.Store("0000")
		fs.bogus.Store(true)
		l := testLimiter(f.rdb)
		for i := range 4 {
			if r, err := l.Allow(ctx, "k", lim); err != nil || r.Allowed != (i < 3) || r.Source != SourceRedis {
				t.Fatalf("call %d: %+v %v: want the scripts' decision", i, r, err)
			}
		}
		if got, want := strings.Join(log.take(), " "), "FCALL_RO EVALSHA EVAL EVALSHA EVALSHA EVALSHA"; got != want {
			t.Errorf("sent %s, want %s: the version asked once, then EVALSHA", got, want)
		}
	})
	t.Run("deleted", func(t *testing.T) {
		f, log, fs := functionsRedis(t)
		clk := &fakeClock{t: epoch2026}
		l := testLimiterOn(clk, f.rdb)
		if r, err := l.Allow(ctx, "k", lim); err != nil || !r.Allowed {
			t.Fatalf("%+v %v", r, err)
		}
		fs.loaded.Store(false)
		log.take()
		r, err := l.Allow(ctx, "k", lim)
		if err != nil || !r.Allowed || r.Remaining != 1 {
			t.Fatalf("the call that finds the library gone: %+v %v, want decided (1 left)", r, err)
		}
		res, err := l.DecideBatch(ctx, []Request{{Key: "k", Limits: []Limit{lim}}, {Key: "j", Limits: []Limit{lim}}})
		if err != nil || !res[0].Allowed || res[0].Remaining != 0 || !res[1].Allowed {
			t.Fatalf("batch: %+v %v", res, err)
		}
		if got, want := strings.Join(log.take(), " "), "FCALL EVALSHA EVALSHA EVALSHA"; got != want { // FCALL loaded the script
			t.Errorf("sent %s, want %s: one FCALL, then EVALSHA", got, want)
		}
		fs.loaded.Store(true)
		clk.Advance(functionsRecheck - time.Millisecond)
		_, _ = l.Allow(ctx, "x", lim)
		clk.Advance(time.Millisecond)
		_, _ = l.Allow(ctx, "x", lim)
		_, _ = l.Allow(ctx, "x", lim)
		if got, want := strings.Join(log.take(), " "), "EVALSHA FCALL_RO FCALL FCALL"; got != want {
			t.Errorf("around a minute later sent %s, want %s", got, want)
		}
		// Deleted while a batch goes: its FCALLs come back "function not
		// found" and go again by EVALSHA, in the next pipeline.
		fs.loaded.Store(false)
		res, err = l.DecideBatch(ctx, []Request{{Key: "b1", Limits: []Limit{lim}}, {Key: "b2", Limits: []Limit{lim}}})
		if err != nil || !res[0].Allowed || !res[1].Allowed || res[1].Remaining != 2 {
			t.Fatalf("batch finding the library gone: %+v %v", res, err)
		}
		if got, want := strings.Join(log.take(), " "), "FCALL FCALL EVALSHA EVALSHA"; got != want {
			t.Errorf("sent %s, want %s: the FCALLs again by EVALSHA", got, want)
		}
	})
	t.Run("no FCALL at all", func(t *testing.T) {
		f := newFakeRedis(t) // miniredis: "unknown command"
		log := &cmdLog{}
		f.rdb.AddHook(log)
		l := testLimiter(f.rdb)
		for range 2 {
			if r, err := l.Allow(ctx, "k", lim); err != nil || !r.Allowed {
				t.Fatalf("%+v %v", r, err)
			}
		}
		if got, want := strings.Join(log.take(), " "), "FCALL_RO EVALSHA EVAL EVALSHA"; got != want {
			t.Errorf("sent %s, want %s: no FCALL for a server without it", got, want)
		}
	})
	t.Run("client without FCALL", func(t *testing.T) {
		f, log, _ := functionsRedis(t)
		l := testLimiter(plainClient{f.rdb})
		if r, err := l.Allow(ctx, "k", lim); err != nil || !r.Allowed {
			t.Fatalf("%+v %v", r, err)
		}
		if got := fmt.Sprint(log.take()); got != "[EVALSHA EVAL]" {
			t.Errorf("sent %s", got)
		}
	})
}

// FUNCTION LOAD REPLACE of another version under a running Limiter: the
// client went on calling it by FCALL until its check a minute later (595
// admissions of an exhausted key). Each FCALL now reads the version in its
// own transaction: the very call that meets the other library is decided
// by EVALSHA, single or in a batch, and FCALL waits until the library is
// this version again.
func TestFunctionsOtherVersionLoadedUnderway(t *testing.T) {
	ctx := context.Background()
	f, log, fs := functionsRedis(t)
	clk := &fakeClock{t: epoch2026}
	l := testLimiterOn(clk, f.rdb)
	lim := PerMinute(3)
	for i := range 3 {
		if r, err := l.Allow(ctx, "k", lim); err != nil || !r.Allowed {
			t.Fatalf("call %d by FCALL: %+v %v", i, r, err)
		}
	}
	log.take()
	fs.version.Store("another version")
	fs.bogus.Store(true) // it admits everything
	admitted := 0
	for range 100 {
		r, err := l.Allow(ctx, "k", lim)
		if err != nil {
			t.Fatal(err)
		}
		if r.Allowed {
			admitted++
		}
	}
	res, err := l.DecideBatch(ctx, []Request{{Key: "k", Limits: []Limit{lim}}, {Key: "k", Limits: []Limit{lim}, Kind: KindCheck}})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Allowed || res[1].Allowed {
		admitted++
	}
	if admitted != 0 {
		t.Fatalf("%d calls of an exhausted key admitted after another library was loaded; want 0", admitted)
	}
	if got, want := strings.Join(log.take(), " "), "FCALL EVALSHA"+strings.Repeat(" EVALSHA", 99+2); got != want {
		t.Errorf("sent %s,\nwant %s", got, want)
	}

	// A batch that meets it: its FCALLs go again by EVALSHA.
	fs.version.Store(scripts.LibraryVersion)
	fs.bogus.Store(false)
	clk.Advance(functionsRecheck)
	if r, err := l.Allow(ctx, "j", lim); err != nil || !r.Allowed {
		t.Fatalf("a minute later, with this version back: %+v %v", r, err)
	}
	fs.version.Store("another version")
	fs.bogus.Store(true)
	res, err = l.DecideBatch(ctx, []Request{{Key: "k", Limits: []Limit{lim}}, {Key: "j", Limits: []Limit{lim}, N: 3}})
	if err != nil || res[0].Allowed || res[1].Allowed || res[1].Remaining != 2 {
		t.Fatalf("batch meeting another library: %+v %v; want both denied as the scripts decide", res, err)
	}
	if got, want := strings.Join(log.take(), " "), "FCALL_RO FCALL FCALL FCALL EVALSHA EVALSHA"; got != want {
		t.Errorf("sent %s,\nwant %s", got, want)
	}
}

func TestIsNoFunction(t *testing.T) {
	for msg, want := range map[string]bool{
		"ERR Function not found":                                              true,
		"ERR unknown command 'FCALL', with args beginning with: ":             true,
		"ERR unknown command `fcall`, with args beginning with: ":             true,
		"NOPERM User limiter has no permissions to run the 'fcall' command":   true,
		"NOPERM User limiter has no permissions to run the 'multi' command":   true,
		"ERR invalid limit '0': must be a whole number from 1 to 10^15":       false,
		"LOADING Redis is loading the dataset in memory":                      false,
		"ERR key holds a value that is not gcra state: left untouched":        false,
		"READONLY You can't write against a read only replica.":               false,
		"OOM command not allowed when used memory > 'maxmemory'.":             false,
		"EXECABORT Transaction discarded because of previous errors.":         false,
		"CROSSSLOT Keys in request don't hash to the same slot":               false,
		"NOSCRIPT No matching script. Please use EVAL.":                       false,
		"MOVED 3999 127.0.0.1:6381":                                           false,
		"ERR Error running script (call to f_...): @user_script:1: Script...": false,
	} {
		if got := isNoFunction(errors.New(msg)); got != want {
			t.Errorf("isNoFunction(%q) = %v, want %v", msg, got, want)
		}
	}
}

// What follows an FCALL's error: EVALSHA, and no FCALL until the library
// is found again, when this version's function is not there (another
// version, none, no FCALL, no permission); EVALSHA for this call only when
// Redis refused to run it (OOM); nothing else otherwise.
func TestFunctionsNextStep(t *testing.T) {
	for _, c := range []struct {
		name       string
		err        error
		want       step
		stillFCall bool
	}{
		{"decided", nil, stepDone, true},
		{"the script refused the arguments", replyError("ERR invalid limit 'x'"), stepDone, true},
		{"another version, or none", replyError("ERR Function not found"), stepEvalSha, false},
		{"no FCALL (6.2)", replyError("ERR unknown command 'fcall'"), stepEvalSha, false},
		{"NOPERM for FCALL", replyError("NOPERM no permissions to run the 'fcall' command"), stepEvalSha, false},
		{"OOM", replyError("OOM command not allowed when used memory > 'maxmemory'."), stepEvalSha, true},
		{"READONLY", replyError("READONLY You can't write against a read only replica."), stepDone, true},
		{"network", context.DeadlineExceeded, stepDone, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			ld := newLoader(newFakeRedis(t).rdb, realClock{})
			ld.fnYes.Store(true)
			if got := ld.next(stepFCall, c.err); got != c.want {
				t.Errorf("next step %d, want %d", got, c.want)
			}
			if ld.fnYes.Load() != c.stillFCall {
				t.Errorf("after %v the loader goes by FCALL: %v, want %v", c.err, ld.fnYes.Load(), c.stillFCall)
			}
		})
	}
}

// TestFunctionsVersionCheckNetworkError: a network error while asking for
// the library says nothing of it: the loader asks again a second later.
func TestFunctionsVersionCheckNetworkError(t *testing.T) {
	clk := &fakeClock{t: epoch2026}
	ld := newLoader(downRedis(t), clk)
	if ld.functions(context.Background()) {
		t.Fatal("a down Redis has the library")
	}
	if until := time.Unix(0, ld.fnUntil.Load()); until.Sub(clk.Now()) != time.Second {
		t.Errorf("asks again in %v, want 1s", until.Sub(clk.Now()))
	}
}
