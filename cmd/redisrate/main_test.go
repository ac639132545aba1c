package main

import (
	"bytes"
	"context"
	"encoding/xml"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redisrate/redisrate"
	"github.com/redisrate/redisrate/scripts"
)

// runCmd runs the command in-process and returns its exit code and output.
func runCmd(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestDemoIsReproducible(t *testing.T) {
	dir := t.TempDir()
	svg1, svg2 := filepath.Join(dir, "1.svg"), filepath.Join(dir, "2.svg")
	code, out1, errOut := runCmd(t, "demo", "--svg", svg1)
	if code != 0 {
		t.Fatalf("demo: exit %d: %s", code, errOut)
	}
	code, out2, _ := runCmd(t, "demo", "--svg", svg2)
	if code != 0 {
		t.Fatalf("second demo: exit %d", code)
	}
	out1 = strings.ReplaceAll(out1, svg1, "FILE")
	out2 = strings.ReplaceAll(out2, svg2, "FILE")
	if out1 != out2 {
		t.Errorf("two runs differ:\n%s\n----\n%s", out1, out2)
	}
	b1, _ := os.ReadFile(svg1)
	b2, _ := os.ReadFile(svg2)
	if !bytes.Equal(b1, b2) {
		t.Error("the two SVG charts differ")
	}
	for _, s := range scripts.Specs() {
		if n := strings.Count(out1, "\n"+s.Name+" "); n != 2 { // its timeline and its table row
			t.Errorf("%s appears in %d lines starting with it, want 2:\n%s", s.Name, n, out1)
		}
	}
	for _, want := range []string{"embedded Redis (miniredis)", "identical output on every run", "most in 1s", "longest wait", "MEMORY USAGE"} {
		if !strings.Contains(out1, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	t.Logf("demo output:\n%s", out1)
}

// The summary must show what distinguishes the algorithms, on the numbers
// the contract guarantees: the sliding log never admits more than the limit
// in any period, GCRA at most burst + limit, the fixed window lets more than
// the limit through across a window edge.
func TestDemoShowsTheAlgorithmsDiffer(t *testing.T) {
	cfg, err := demoConfig(limitFlags{limit: "10/s"})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := runDemo(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	got := map[redisrate.Algorithm]stats{}
	for _, ln := range rep.lanes {
		if ln.skipped {
			t.Fatalf("%s skipped: %s", ln.algo, ln.note)
		}
		if len(ln.out) != len(rep.pat.reqs) {
			t.Fatalf("%s decided %d of %d requests", ln.algo, len(ln.out), len(rep.pat.reqs))
		}
		got[ln.algo] = ln.stats(cfg.limit.Period)
	}
	if s := got[redisrate.SlidingLog]; s.most1 != 10 {
		t.Errorf("sliding_log: most in 1s = %v, want exactly the limit 10", s.most1)
	}
	if s := got[redisrate.GCRA]; s.most1 > 20 || s.most1 <= 10 {
		t.Errorf("gcra: most in 1s = %v, want between the limit and burst+limit (10, 20]", s.most1)
	}
	if s := got[redisrate.FixedWindow]; s.most1 <= 10 {
		t.Errorf("fixed_window: most in 1s = %v, want more than the limit across the window edge", s.most1)
	}
	if g, l := got[redisrate.GCRA], got[redisrate.LeakyBucket]; g.admitted != l.admitted || g.most1 != l.most1 {
		t.Errorf("gcra %+v and leaky_bucket %+v should decide alike", g, l)
	}
	for a, s := range got {
		if s.denied == 0 || s.admitted == 0 || s.longestWait <= 0 {
			t.Errorf("%s: %+v: the pattern should both admit and deny", a, s)
		}
	}
}

func TestDemoSVGIsWellFormed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "chart.svg")
	if code, _, errOut := runCmd(t, "demo", "--limit", "30/minute", "--burst", "12", "--svg", path); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	d := xml.NewDecoder(bytes.NewReader(b))
	for {
		if _, err := d.Token(); err != nil {
			if err.Error() != "EOF" {
				t.Fatalf("not well-formed XML: %v", err)
			}
			break
		}
	}
	for _, s := range scripts.Specs() {
		if !bytes.Contains(b, []byte(">"+s.Name+"</text>")) {
			t.Errorf("chart has no lane for %s", s.Name)
		}
	}
	if !bytes.Contains(b, []byte("limit 30/m, burst 12")) {
		t.Errorf("chart title lacks the limit")
	}
}

func TestDemoUserNumbers(t *testing.T) {
	code, out, errOut := runCmd(t, "demo", "--algorithm", "gcra,token_bucket", "--limit", "5/s", "--burst", "2")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "limit 5/s, burst 2,") {
		t.Errorf("output does not name the limit:\n%s", out)
	}
	if strings.Contains(out, "fixed_window") || !strings.Contains(out, "token_bucket") {
		t.Errorf("--algorithm gcra,token_bucket ran other lanes:\n%s", out)
	}
	// A window algorithm keeps no separate burst: it runs with burst = limit, and says so.
	code, out, errOut = runCmd(t, "demo", "--limit", "4/s", "--burst", "8")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "note: fixed_window keeps no burst apart from its limit") {
		t.Errorf("no note on the window algorithms' burst:\n%s", out)
	}
	// A rate that is not whole per period runs, exactly, with a longer
	// period: 2.5/s is 5 per 2s, for every algorithm.
	code, out, errOut = runCmd(t, "demo", "--limit", "2.5/s")
	if code != 0 || !strings.Contains(out, "limit 5/2s, burst 5,") || strings.Contains(out, "skipped") {
		t.Errorf("exit %d, want all six at 5/2s:\n%s%s", code, out, errOut)
	}
}

func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"demo", "--limit", "10/fortnight"}, `period "fortnight" must be a unit`},
		{[]string{"demo", "--limit", "ten/s"}, `rate "ten" must be a number of plain decimal digits`},
		{[]string{"demo", "--limit", "NaN/s"}, `rate "NaN" must be a number`},
		{[]string{"demo", "--limit", "0/s"}, `the rate must be more than 0`},
		{[]string{"demo", "--limit", "10/1us"}, `whole number of milliseconds`},
		{[]string{"demo", "--algorithm", "leaky"}, `invalid algorithm "leaky": must be one of gcra, token_bucket`},
		{[]string{"demo", "--limit", "1000000/s"}, "more than the demo's 5000"},
		{[]string{"demo", "--limit", "10/minute", "--redis", "127.0.0.1:1"}, "runs in real time"},
		{[]string{"demo", "extra"}, `unexpected argument "extra"`},
		{[]string{"demo", "--burst", "-1"}, "invalid burst '-1': must be a whole number"},
		{[]string{"demo", "--burst", "2.5"}, "invalid burst '2.5': must be a whole number"},
		{[]string{"demo", "--limit", "10/0s"}, `period "0s" must be`},
		{[]string{"demo", "--nope"}, "flag provided but not defined: -nope"},
		{[]string{"try", "--redis", "127.0.0.1:1"}, "the KEY to decide for is missing"},
		{[]string{"try", "--redis", "127.0.0.1:1", "a", "b"}, "want one KEY, got 2 arguments"},
		{[]string{"try", "--redis", "127.0.0.1:1", "--limit", "10/fortnight", "k"}, `period "fortnight"`},
		{[]string{"try", "--redis", "127.0.0.1:1", "--algorithm", "bucket", "k"}, `invalid algorithm "bucket"`},
		{[]string{"try", "--redis", "127.0.0.1:1", "--cost", "1.5", "k"}, "invalid cost '1.5': must be a whole number"},
		{[]string{"try", "--redis", "127.0.0.1:1", "--cost", "1e3", "k"}, "invalid cost '1e3': must be a whole number"},
		{[]string{"try", "--redis", "127.0.0.1:1", "--cost", "1000000000000001", "k"}, "must be a whole number from 0 to 10^15"},
		{[]string{"try", "--redis", "127.0.0.1:1", "--algorithm", "sliding_log", "--limit", "10001/h", "k"}, "invalid limit '10001': must be a whole number from 1 to 10000"},
		{[]string{"try", "--redis", "127.0.0.1:1", "--algorithm", "sliding_window", "--burst", "20", "k"}, "invalid burst '20'"},
		{[]string{"try", "--limit", "10/s", "k"}, "--redis ADDR is required"},
		{[]string{"try", "--redis", "127.0.0.1:1", "--limit", "10/month", "k"}, `a month has no fixed length: write 30d for 30 days, or add "calendar ZONE"`},
		{[]string{"try", "--redis", "127.0.0.1:1", "--limit", "10/day calendar", "--algorithm", "gcra", "k"}, "decided by fixed_window, not gcra"},
		{[]string{"try", "--redis", "127.0.0.1:1", "--limit", "10/day calendar Nowhere/Else", "k"}, `unknown time zone "Nowhere/Else"`},
		{[]string{"demo", "--limit", "10/day calendar"}, "a calendar limit"},
		{[]string{"try", "--redis", "redis://[::1", "k"}, "--redis"},
		{[]string{"load"}, "--redis ADDR is required"},
		{[]string{"functions", "--load"}, "--load needs --redis ADDR"},
		{[]string{"functions", "--redis", "127.0.0.1:1"}, "--redis needs --load"},
		{[]string{"scripts", "--force"}, "--force needs --dir"},
		{[]string{"scripts", "x"}, `unexpected argument "x"`},
		{[]string{"fly"}, `unknown command "fly"`},
		{nil, "Usage:"},
	} {
		code, out, errOut := runCmd(t, tc.args...)
		if code != exitUsage || !strings.Contains(errOut, tc.want) || out != "" {
			t.Errorf("%q: exit %d, stderr %q, stdout %q; want exit %d and %q", tc.args, code, errOut, out, exitUsage, tc.want)
		}
	}
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"help"}, {"demo", "--help"}, {"scripts", "-h"}, {"load", "--help"},
		{"try", "--help"}, {"functions", "--help"}, {"help", "try"}} {
		code, out, errOut := runCmd(t, args...)
		if code != 0 || errOut != "" {
			t.Errorf("%q: exit %d, stderr %q", args, code, errOut)
		}
		for _, want := range []string{"Usage:", "Exit codes:", "3  Redis could not be reached"} {
			if !strings.Contains(out, want) {
				t.Errorf("%q: help lacks %q:\n%s", args, want, out)
			}
		}
	}
	// The main help lists every registered command, by its usage line and summary.
	_, out, _ := runCmd(t, "--help")
	for _, c := range commands {
		line, _, _ := strings.Cut(c.usage, "\n")
		if c.summaryLine() == "" || !strings.HasPrefix(line, "Usage: redisrate "+c.name) ||
			!strings.Contains(out, "  "+strings.TrimPrefix(line, "Usage: ")+"\n") || !strings.Contains(out, c.summaryLine()) {
			t.Errorf("--help does not list %s with its usage line and summary:\n%s", c.name, out)
		}
	}
	// scripts --help names the contract version the scripts' headers name,
	// and both forms of the call (it said v2 and one key after v2.1).
	gcra, _ := scripts.Lookup("gcra")
	version := regexp.MustCompile(`Script contract (v[0-9.]+) `).FindStringSubmatch(gcra.Source)
	_, out, _ = runCmd(t, "scripts", "--help")
	if version == nil || !strings.Contains(out, "(script contract "+version[1]+")") ||
		!strings.Contains(out, "EVALSHA SHA1 K KEY1 ... KEYK LIMIT PERIOD_MS") {
		t.Errorf("scripts --help does not name contract %v and its call of K keys:\n%s", version, out)
	}
	_, out, _ = runCmd(t, "try", "--help")
	for _, flag := range []string{"-redis", "-algorithm", "-limit", "-burst", "-cost", "-check", "-json"} {
		if !strings.Contains(out, flag) {
			t.Errorf("try --help lacks %s", flag)
		}
	}
}

func TestUnreachableRedis(t *testing.T) {
	addr := closedAddr(t)
	for _, args := range [][]string{
		{"try", "--redis", addr, "k"},
		{"load", "--redis", addr},
		{"functions", "--load", "--redis", addr},
		{"demo", "--redis", addr},
	} {
		code, _, errOut := runCmd(t, args...)
		if code != exitUnreachable || !strings.Contains(errOut, "cannot reach Redis at "+addr) {
			t.Errorf("%q: exit %d, stderr %q; want exit %d, cannot reach", args, code, errOut, exitUnreachable)
		}
	}
}

func TestScriptsList(t *testing.T) {
	code, out, _ := runCmd(t, "scripts")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if want := "redisrate (devel: built from a checkout, no release tag), script contract v" + scripts.ContractVersion; lines[0] != want {
		t.Errorf("first line %q, want %q", lines[0], want)
	}
	lines = lines[1:]
	specs := scripts.Specs()
	if len(lines) != len(specs)+1 {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(specs)+1, out)
	}
	for i, s := range specs {
		if f := strings.Fields(lines[i]); f[0] != s.Name || f[1] != s.SHA1 || !strings.HasSuffix(lines[i], s.Summary) {
			t.Errorf("line %q, want %s %s ... %s", lines[i], s.Name, s.SHA1, s.Summary)
		}
	}
	if f := strings.Fields(lines[len(specs)]); f[0] != "reset" || f[1] != scripts.ResetSHA1 {
		t.Errorf("last line %q, want reset %s", lines[len(specs)], scripts.ResetSHA1)
	}
}

// The exported files are byte for byte what the client runs, and what the
// repository's scripts/ directory holds.
func TestScriptsDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "lua")
	code, out, errOut := runCmd(t, "scripts", "--dir", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, s := range bundledScripts() {
		got, err := os.ReadFile(filepath.Join(dir, s.name+".lua"))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != s.source {
			t.Errorf("%s.lua differs from the embedded script", s.name)
		}
		repo, err := os.ReadFile(filepath.Join("..", "..", "scripts", s.name+".lua"))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, repo) {
			t.Errorf("%s.lua differs from scripts/%s.lua in the repository", s.name, s.name)
		}
		if !strings.Contains(out, s.sha1+"  "+filepath.Join(dir, s.name+".lua")) {
			t.Errorf("output lacks %s's SHA1 and path", s.name)
		}
	}
	if n := len(bundledScripts()); n != len(scripts.Specs())+1 {
		t.Errorf("%d files written, want the %d scripts and reset.lua", n, len(scripts.Specs()))
	}
	// Writing again is fine; a file with other contents is left alone.
	if code, _, _ := runCmd(t, "scripts", "--dir", dir); code != 0 {
		t.Errorf("rewriting identical files: exit %d", code)
	}
	mine := filepath.Join(dir, "gcra.lua")
	if err := os.WriteFile(mine, []byte("-- my own gcra\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = runCmd(t, "scripts", "--dir", dir)
	if got, _ := os.ReadFile(mine); code != exitLocal || string(got) != "-- my own gcra\n" || !strings.Contains(errOut, "left untouched") {
		t.Errorf("exit %d, stderr %q, file now %.20q: want exit %d and the file kept", code, errOut, got, exitLocal)
	}
	if code, _, _ := runCmd(t, "scripts", "--dir", dir, "--force"); code != 0 {
		t.Errorf("--force: exit %d", code)
	}
	if got, _ := os.ReadFile(mine); string(got) != scripts.Specs()[0].Source {
		t.Error("--force did not replace the file")
	}
	// A path that cannot be a directory is a local failure.
	code, _, _ = runCmd(t, "scripts", "--dir", filepath.Join(mine, "sub"))
	if code != exitLocal {
		t.Errorf("--dir under a file: exit %d, want %d", code, exitLocal)
	}
}

func TestFunctionsPrints(t *testing.T) {
	code, out, _ := runCmd(t, "functions")
	if code != 0 || out != scripts.Library {
		t.Fatalf("exit %d; output is not scripts.Library", code)
	}
	if !strings.HasPrefix(out, "#!lua name=redisrate\n") {
		t.Errorf("library starts %.40q", out)
	}
}

// try on the embedded Redis: it answers like any server without INFO cluster.
func TestTryOnMiniredis(t *testing.T) {
	mr := miniredis.RunT(t)
	args := []string{"try", "--redis", mr.Addr(), "--limit", "2/minute", "user:1"}
	code, out, errOut := runCmd(t, args...)
	if code != 0 || !strings.HasPrefix(out, `ALLOWED  key "user:1", cost 1, gcra 2/m (recorded)`) || !strings.Contains(out, "remaining    1 of 2") {
		t.Fatalf("exit %d, stdout:\n%s\nstderr %s", code, out, errOut)
	}
	runCmd(t, args...)
	code, out, _ = runCmd(t, args...)
	if code != exitDenied || !strings.HasPrefix(out, "DENIED") || !regexp.MustCompile(`retry after  [0-9.]+s`).MatchString(out) {
		t.Errorf("third call: exit %d, stdout:\n%s", code, out)
	}
	code, out, _ = runCmd(t, "try", "--redis", mr.Addr(), "--limit", "2/minute", "--cost", "3", "--json", "user:2")
	if code != exitDenied || out != `{"key":"user:2","algorithm":"gcra","limit":"2/m","cost":3,"check":false,"allowed":false,"remaining":2,"retry_after_ms":-1,"reset_after_ms":0,"capacity":2}`+"\n" {
		t.Errorf("never: exit %d, %s", code, out)
	}
	// A cost of 0 peeks: the state, nothing taken, admitted.
	code, out, _ = runCmd(t, "try", "--redis", mr.Addr(), "--limit", "2/minute", "--cost", "0", "user:1")
	if code != 0 || !strings.HasPrefix(out, `PEEK  key "user:1", cost 0, gcra 2/m (the state; nothing taken)`) || !strings.Contains(out, "remaining    0 of 2") {
		t.Errorf("peek: exit %d, stdout:\n%s", code, out)
	}
	// A key holding the user's data is refused, and left alone.
	mr.Set("order:42", "shipped")
	code, _, errOut = runCmd(t, "try", "--redis", mr.Addr(), "order:42")
	if v, _ := mr.Get("order:42"); code != exitRedis || !strings.Contains(errOut, "left untouched") || v != "shipped" {
		t.Errorf("foreign key: exit %d, stderr %q, value %q", code, errOut, v)
	}
}

// A server without Redis Functions (before 7.0, or miniredis) gets a clear
// error that points to the scripts.
func TestFunctionsLoadWithoutFunctions(t *testing.T) {
	mr := miniredis.RunT(t)
	code, _, errOut := runCmd(t, "functions", "--load", "--redis", mr.Addr())
	if code != exitRedis || !strings.Contains(errOut, "Redis Functions need Redis 7.0 or later") {
		t.Errorf("exit %d, stderr %q", code, errOut)
	}
}

func TestInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out, errOut bytes.Buffer
	if code := run(ctx, []string{"demo", "--redis", closedAddr(t)}, &out, &errOut); code != exitInterrupted {
		t.Errorf("exit %d, %s", code, errOut.String())
	}
	mr := miniredis.RunT(t)
	code := run(ctx, []string{"try", "--redis", mr.Addr(), "k"}, &out, &errOut)
	if code != exitInterrupted || !strings.Contains(errOut.String(), "interrupted") {
		t.Errorf("try with a cancelled context: exit %d, %s", code, errOut.String())
	}
}

func TestDemoSVGUnwritable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing", "chart.svg")
	code, out, errOut := runCmd(t, "demo", "--algorithm", "gcra", "--svg", path)
	if code != exitLocal || out != "" || !strings.Contains(errOut, "--svg: open "+path) {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}
