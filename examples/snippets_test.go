// Package examples holds the snippets that call redisrate's scripts from
// other languages, and the test that runs them against a real Redis so that
// the copies of them in docs/other-languages.md cannot rot.
package examples

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/redisrate/redisrate"
	"github.com/redisrate/redisrate/httplimit"
	"github.com/redisrate/redisrate/internal/manifest"
	"github.com/redisrate/redisrate/internal/redisserver"
)

// snippet is one runnable example: the command that runs it, and how to
// tell whether its interpreter and Redis library are installed.
type snippet struct {
	name    string
	file    string   // relative to examples/
	twoKeys string   // the two-key snippet, relative to examples/
	lang    string   // the code fence language in docs/other-languages.md
	run     []string // the command, the file last
	probe   func() error
	setup   string // how CI installs what it needs
}

// need skips t, or fails it in CI, when the snippet's interpreter or
// Redis library is not installed.
func (s snippet) need(t *testing.T) {
	t.Helper()
	if err := s.probe(); err != nil {
		missing(t, "%s is not installed (%v); install it with: %s", s.name, err, s.setup)
	}
}

// runTwoKeys is the command that runs the snippet's two-key call: its
// interpreter (s.run's first words) on the two-key file.
func (s snippet) runTwoKeys() []string {
	return append(append([]string(nil), s.run[:len(s.run)-1]...), s.twoKeys)
}

func snippets(t *testing.T) []snippet {
	python := findPython()
	return []snippet{
		{
			name: "redis-cli", file: "redis-cli/ratelimit.sh", twoKeys: "redis-cli/twokeys.sh", lang: "sh",
			run:   []string{"sh", "redis-cli/ratelimit.sh"},
			probe: func() error { _, err := exec.LookPath("redis-cli"); return err },
			setup: "apt-get install redis-tools",
		},
		{
			name: "python", file: "python/ratelimit.py", twoKeys: "python/twokeys.py", lang: "python",
			run:   []string{python, "python/ratelimit.py"},
			probe: func() error { return quiet(exec.Command(python, "-c", "import redis")) },
			setup: "apt-get install python3-redis",
		},
		{
			name: "node", file: "node/ratelimit.js", twoKeys: "node/twokeys.js", lang: "js",
			run: []string{"node", "node/ratelimit.js"},
			probe: func() error {
				cmd := exec.Command("node", "-e", `require.resolve("ioredis")`)
				cmd.Dir = "node"
				return quiet(cmd)
			},
			setup: "apt-get install nodejs npm && npm ci --prefix examples/node",
		},
		{
			name: "ruby", file: "ruby/ratelimit.rb", twoKeys: "ruby/twokeys.rb", lang: "ruby",
			run:   []string{"ruby", "ruby/ratelimit.rb"},
			probe: func() error { return quiet(exec.Command("ruby", "-e", `require "redis"`)) },
			setup: "apt-get install ruby-redis",
		},
	}
}

// findPython returns the first python3 that can import redis: $PYTHON, the
// one on PATH (perhaps a pyenv shim), then Debian's, where python3-redis
// installs.
func findPython() string {
	candidates := []string{os.Getenv("PYTHON"), "python3", "/usr/bin/python3"}
	for _, c := range candidates {
		if c != "" && quiet(exec.Command(c, "-c", "import redis")) == nil {
			return c
		}
	}
	return "python3"
}

func quiet(cmd *exec.Cmd) error {
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%v: %s", err, bytes.TrimSpace(out))
	}
	return nil
}

// missing skips a test whose tools are not installed, except in CI, which
// installs them: there it fails, so that the snippets are always run.
func missing(t *testing.T, format string, args ...any) {
	t.Helper()
	redisserver.Missing(t, format, args...)
}

// startRedis runs redis-server from PATH on a free port of 127.0.0.1 until
// the test ends, and returns its address.
func startRedis(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("-short (make unit): no real server; make test runs it")
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		missing(t, "redis-server is not on PATH")
	}
	dir := t.TempDir()
	srv, err := redisserver.Start(redisserver.Options{Args: func(port int) []string {
		return append(redisserver.Port(port), redisserver.NoPersistence(dir)...)
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	return srv.Addr
}

// redisCommand sends one command in RESP and returns the first reply line.
func redisCommand(t *testing.T, addr string, args ...string) string {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := c.Write([]byte(b.String())); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(c)
	line, err := r.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	if strings.HasPrefix(line, "$") && line != "$-1\r\n" {
		line, err = r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
	}
	return strings.TrimRight(line, "\r\n")
}

// gcraTag starts the state of gcra.lua, the script every snippet calls.
var gcraTag = func() string {
	s, _ := manifest.Lookup("gcra")
	return s.Tag
}()

// docPath is the page that shows every snippet and what it prints.
const docPath = "../docs/other-languages.md"

var lineRE = regexp.MustCompile(`^allowed=(\d+) remaining=(\d+) retry_after_ms=(-?\d+) reset_after_ms=(\d+) capacity=(\d+) binding=(\d+)$`)

// sixFields reads the reply's six integers from the first six of
// submatches, which the line's regexp has checked are whole numbers.
func sixFields(submatches []string) [6]int64 {
	var n [6]int64
	for j := range n {
		n[j], _ = strconv.ParseInt(submatches[j], 10, 64)
	}
	return n
}

// shownDrift is how far the times on a page of output may have counted down
// between its calls: the run that printed it is not timed.
const shownDrift = 5 * time.Second

// elapsedSince is how long ago start was, as the most the times of calls
// made since then may have counted down: in whole milliseconds, rounded up,
// with a millisecond for the scripts' own rounding up.
func elapsedSince(start time.Time) time.Duration {
	return time.Since(start).Truncate(time.Millisecond) + 2*time.Millisecond
}

// checkTwoPerMinute returns why the lines are not what three calls of 2 per
// minute on a fresh key print (contract v2): allowed, allowed, denied, with
// honest times and reply field 5, capacity, = 2. The calls are apart by the
// snippet's own speed: the times count down from 30s and 60s by at most
// drift, the time the calls took.
func checkTwoPerMinute(out string, drift time.Duration) error {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 {
		return fmt.Errorf("%d lines of output; want 3", len(lines))
	}
	type reply struct{ allowed, remaining, retry, reset, capacity, binding int64 }
	var got [3]reply
	for i, l := range lines {
		m := lineRE.FindStringSubmatch(l)
		if m == nil {
			return fmt.Errorf("line %d %q does not name the six fields of contract v2", i+1, l)
		}
		n := sixFields(m[1:])
		got[i] = reply{n[0], n[1], n[2], n[3], n[4], n[5]}
	}
	// down is whether x is want, counted down by at most drift.
	down := func(x, want int64) bool { return x >= want-drift.Milliseconds() && x <= want }
	ok := got[0].allowed == 1 && got[0].remaining == 1 && got[0].retry == 0 && got[0].reset == 30000 &&
		got[1].allowed == 1 && got[1].remaining == 0 && got[1].retry == 0 && down(got[1].reset, 60000) &&
		got[2].allowed == 0 && got[2].remaining == 0 && down(got[2].retry, 30000) &&
		down(got[2].reset, 60000) && got[2].reset == got[2].retry+30000
	for _, r := range got {
		ok = ok && r.capacity == 2 && r.binding == 1
	}
	if !ok {
		return fmt.Errorf("replies do not match 2 per minute")
	}
	return nil
}

// runSnippet runs command against the Redis at addr, with env added to the
// environment, and returns what it printed; the error shows its stderr.
func runSnippet(addr string, command []string, env ...string) (string, error) {
	return runSnippetIn("", addr, command, env...)
}

// runSnippetIn is runSnippet in the directory dir ("": this one).
func runSnippetIn(dir, addr string, command []string, env ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, command[0], command[1:]...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "REDIS_ADDR="+addr), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		err = fmt.Errorf("%v; stderr: %s", err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), err
}

// TestSnippets runs each snippet against a real Redis: three calls of 2 per
// minute on a fresh key are allowed, allowed, denied, with honest times.
// Then, on a key that holds a user's value, each must fail (exit non-zero)
// and leave the value alone.
func TestSnippets(t *testing.T) {
	addr := startRedis(t)
	for _, s := range snippets(t) {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel() // distinct keys; the interpreters start slowly
			s.need(t)
			run := func(key string) (string, error) {
				return runSnippet(addr, s.run, "RATE_KEY="+key)
			}

			key := "snippet:" + s.name
			start := time.Now()
			out, err := run(key)
			if err != nil {
				t.Fatalf("%s: %v\nstdout:\n%s", strings.Join(s.run, " "), err, out)
			}
			if err := checkTwoPerMinute(out, elapsedSince(start)); err != nil {
				t.Errorf("%v:\n%s", err, out)
			}
			// The state left is the v2 script's, which the Go client shares.
			if v := redisCommand(t, addr, "GET", key); !strings.HasPrefix(v, gcraTag+" ") {
				t.Errorf("the key holds %q, not %s state", v, gcraTag)
			}

			// A wrong reply (an error: the key holds a user's value) fails.
			foreign := "snippet:foreign:" + s.name
			if r := redisCommand(t, addr, "SET", foreign, "order 42"); r != "+OK" {
				t.Fatalf("SET: %s", r)
			}
			if out, err := run(foreign); err == nil {
				t.Errorf("exit status 0 on an error reply; output:\n%s", out)
			} else if !strings.Contains(err.Error(), "key holds") {
				t.Errorf("the failure does not show Redis's error: %v", err)
			}
			if r := redisCommand(t, addr, "GET", foreign); r != "order 42" {
				t.Errorf("the user's value is now %q", r)
			}
		})
	}
}

// TestDocSnippets keeps docs/other-languages.md showing each snippet
// verbatim, the same code as the file the test above runs, and the output
// it shows what the snippets print.
func TestDocSnippets(t *testing.T) {
	doc, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range snippets(t) {
		src, err := os.ReadFile(s.file)
		if err != nil {
			t.Fatal(err)
		}
		block := "```" + s.lang + "\n" + string(src) + "```\n"
		if !bytes.Contains(doc, []byte(block)) {
			t.Errorf("%s lacks examples/%s verbatim; it should contain:\n%s", docPath, s.file, block)
		}
		src, err = os.ReadFile(s.twoKeys)
		if err != nil {
			t.Fatal(err)
		}
		block = "```" + s.lang + "\n" + string(src) + "```\n"
		if !bytes.Contains(doc, []byte(block)) {
			t.Errorf("%s lacks examples/%s verbatim; it should contain:\n%s", docPath, s.twoKeys, block)
		}
	}
	twoKeysIntro := "Each prints, run as `twokeys " + strings.Join(twoKeysUsers, " ") + "` on fresh keys:\n\n```text\n"
	if out := outputBlock(t, doc, twoKeysIntro); out != "" {
		if err := checkTwoKeys(out, "7", shownDrift); err != nil {
			t.Errorf("%s shows output no two-key snippet prints: %v:\n%s", docPath, err, out)
		}
	}
	if out := outputBlock(t, doc, "Each prints, on a fresh key:\n\n```text\n"); out != "" {
		if err := checkTwoPerMinute(out, shownDrift); err != nil {
			t.Errorf("%s shows output no snippet prints: %v:\n%s", docPath, err, out)
		}
	}
}

// outputBlock returns the text block of doc that starts right after intro,
// or reports that there is none and returns "".
func outputBlock(t *testing.T, doc []byte, intro string) string {
	t.Helper()
	_, after, ok := strings.Cut(string(doc), intro)
	out, _, ok2 := strings.Cut(after, "```")
	if !ok || !ok2 {
		t.Errorf("%s lacks the block of output after %q", docPath, intro)
		return ""
	}
	return out
}

var twoKeysLineRE = regexp.MustCompile(`^user=(\S+) allowed=(\d+) remaining=(\d+) retry_after_ms=(-?\d+) reset_after_ms=(\d+) capacity=(\d+) binding=(\d+) key=(\S+)$`)

// twoKeysUsers are the requests, one user each, whose replies checkTwoKeys
// knows: users 42, 42, 42, 43, 43 of one organisation.
var twoKeysUsers = []string{"42", "42", "42", "43", "43"}

// checkTwoKeys returns why the lines are not what the two-key snippets print
// for twoKeysUsers of organisation org on fresh keys, each user at 2 per
// minute and the organisation at 3: user 42's limit admits twice then binds
// (its key named, the organisation's 3rd unit untaken); user 43 takes the
// organisation's last unit, which binds the admission (fewest remaining) and
// then denies. The times count down by the snippets' own speed: by at most
// drift, the time from the first call to the last.
func checkTwoKeys(out, org string, drift time.Duration) error {
	orgKey := "{org:" + org + "}"
	userKey := func(u string) string { return orgKey + ":user:" + u }
	type reply struct {
		user                                                string
		allowed, remaining, retry, reset, capacity, binding int64
		key                                                 string
	}
	want := []reply{
		{"42", 1, 1, 0, 30000, 2, 1, userKey("42")},
		{"42", 1, 0, 0, 60000, 2, 1, userKey("42")},
		{"42", 0, 0, 30000, 60000, 2, 1, userKey("42")},
		{"43", 1, 0, 0, 60000, 3, 2, orgKey},
		{"43", 0, 0, 20000, 60000, 3, 2, orgKey},
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != len(want) {
		return fmt.Errorf("%d lines of output; want %d", len(lines), len(want))
	}
	// A time is the one on a fresh key, or less by at most drift; only
	// the first call's is exact.
	near := func(got, want int64, exact bool) bool {
		if exact || want == 0 {
			return got == want
		}
		return got >= want-drift.Milliseconds() && got <= want
	}
	for i, l := range lines {
		m := twoKeysLineRE.FindStringSubmatch(l)
		if m == nil {
			return fmt.Errorf("line %d %q does not name the user, the six fields of contract v2 and the binding key", i+1, l)
		}
		n := sixFields(m[2:])
		got := reply{m[1], n[0], n[1], n[2], n[3], n[4], n[5], m[8]}
		w := want[i]
		if got.user != w.user || got.allowed != w.allowed || got.remaining != w.remaining ||
			got.capacity != w.capacity || got.binding != w.binding || got.key != w.key ||
			!near(got.retry, w.retry, false) || !near(got.reset, w.reset, i == 0) {
			return fmt.Errorf("line %d %q; want about %+v", i+1, l, w)
		}
		// A denial is answered from the binding key's empty state: the
		// retry frees one unit, the reset all the others after it.
		if got.allowed == 0 && got.reset-got.retry != (got.capacity-1)*60000/got.capacity {
			return fmt.Errorf("line %d %q: reset_after_ms is not retry_after_ms plus the time of capacity-1 units of the binding limit", i+1, l)
		}
	}
	return nil
}

// TestTwoKeySnippets runs each two-key snippet against a real Redis, one
// request at a time, and reads both keys between requests: a denial by the
// user's limit (binding 1) leaves the organisation's key as it was, and a
// denial by the organisation's (binding 2) leaves the user's. A foreign
// value on the organisation's key fails the call with Redis's error naming
// key #2, and nothing is written on the user's key.
func TestTwoKeySnippets(t *testing.T) {
	addr := startRedis(t)
	for _, s := range snippets(t) {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			s.need(t)
			org := "snippet-" + s.name
			orgKey := "{org:" + org + "}"
			userKey := func(u string) string { return orgKey + ":user:" + u }
			get := func(key string) string { return redisCommand(t, addr, "GET", key) }
			var out strings.Builder
			request := func(users ...string) {
				t.Helper()
				o, err := runSnippet(addr, append(s.runTwoKeys(), users...), "ORG_ID="+org)
				out.WriteString(o)
				if err != nil {
					t.Fatalf("%s: %v\nstdout so far:\n%s", s.twoKeys, err, out.String())
				}
			}
			unchanged := func(what, key, before string) {
				t.Helper()
				if now := get(key); now != before {
					t.Errorf("%s: %s went from %q to %q", what, key, before, now)
				}
			}

			// The times count down from here, as fast as the interpreters start.
			start := time.Now()
			request(twoKeysUsers[:2]...) // user 42's 2 per minute used up; the organisation's 3 down to 1
			org1, user42 := get(orgKey), get(userKey("42"))
			request(twoKeysUsers[2]) // denied by user 42's limit
			unchanged("a denial by the user's limit", orgKey, org1)
			unchanged("a denial by the user's limit", userKey("42"), user42)
			request(twoKeysUsers[3]) // user 43 takes the organisation's last unit
			org2, user43 := get(orgKey), get(userKey("43"))
			if org2 == org1 {
				t.Errorf("user 43's admission did not record on %s", orgKey)
			}
			request(twoKeysUsers[4]) // denied by the organisation's limit
			unchanged("a denial by the organisation's limit", orgKey, org2)
			unchanged("a denial by the organisation's limit", userKey("43"), user43)
			if err := checkTwoKeys(out.String(), org, elapsedSince(start)); err != nil {
				t.Errorf("%v:\n%s", err, out.String())
			}
			for _, key := range []string{orgKey, userKey("42"), userKey("43")} {
				if v := get(key); !strings.HasPrefix(v, gcraTag+" ") {
					t.Errorf("%s holds %q, not %s state", key, v, gcraTag)
				}
			}

			foreignOrg := "snippet-foreign-" + s.name
			foreignKey := "{org:" + foreignOrg + "}"
			if r := redisCommand(t, addr, "SET", foreignKey, "order 42"); r != "+OK" {
				t.Fatalf("SET: %s", r)
			}
			if o, err := runSnippet(addr, append(s.runTwoKeys(), "42"), "ORG_ID="+foreignOrg); err == nil {
				t.Errorf("exit status 0 on an error reply; output:\n%s", o)
			} else if !strings.Contains(err.Error(), "key #2 holds") {
				t.Errorf("the failure does not show Redis's error naming key #2: %v", err)
			}
			unchanged("a foreign value on key #2", foreignKey, "order 42")
			unchanged("a foreign value on key #2", foreignKey+":user:42", "$-1")
		})
	}
}

// A slow interpreter (Ruby on a busy machine: 6s for four runs) counts the
// times down further than a fixed slack allowed: the checks take the time
// the calls took, and still refuse a countdown longer than it.
func TestTwoKeysCountdownBoundedByRunTime(t *testing.T) {
	const out = `user=42 allowed=1 remaining=1 retry_after_ms=0 reset_after_ms=30000 capacity=2 binding=1 key={org:7}:user:42
user=42 allowed=1 remaining=0 retry_after_ms=0 reset_after_ms=59954 capacity=2 binding=1 key={org:7}:user:42
user=42 allowed=0 remaining=0 retry_after_ms=28818 reset_after_ms=58818 capacity=2 binding=1 key={org:7}:user:42
user=43 allowed=1 remaining=0 retry_after_ms=0 reset_after_ms=57020 capacity=3 binding=2 key={org:7}
user=43 allowed=0 remaining=0 retry_after_ms=13840 reset_after_ms=53840 capacity=3 binding=2 key={org:7}
`
	if err := checkTwoKeys(out, "7", 6200*time.Millisecond); err != nil {
		t.Errorf("a run of 6.2s that counted down 6.16s: %v", err)
	}
	if err := checkTwoKeys(out, "7", 6*time.Second); err == nil {
		t.Error("a run of 6s accepted a countdown of 6.16s")
	}
}

// appendedFieldTree is a copy of the snippets beside a scripts/gcra.lua that
// replies as a later contract version may: the six fields, then one more
// (a string). It returns the copy's examples directory.
func appendedFieldTree(t *testing.T) string {
	t.Helper()
	tree := t.TempDir()
	gcra, err := os.ReadFile("../scripts/gcra.lua")
	if err != nil {
		t.Fatal(err)
	}
	wrapped := "local function decide()\n" + string(gcra) + "\nend\n" +
		"local reply = decide()\n" +
		"if type(reply) == 'table' and not reply.err then reply[#reply + 1] = 'a later field' end\n" +
		"return reply\n"
	files := map[string]string{filepath.Join("scripts", "gcra.lua"): wrapped}
	for _, s := range snippets(t) {
		for _, f := range []string{s.file, s.twoKeys} {
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			files[filepath.Join("examples", f)] = string(src)
		}
	}
	for name, src := range files {
		path := filepath.Join(tree, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The Node snippets find ioredis where npm ci put it.
	if modules, err := filepath.Abs("node/node_modules"); err == nil {
		if err := os.Symlink(modules, filepath.Join(tree, "examples", "node", "node_modules")); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(tree, "examples")
}

// A later contract version may append fields to the reply, and clients
// must ignore those they do not know (CONTRACT.md, Reply): every snippet,
// of one key and of two, prints the same on a reply with one more field.
func TestSnippetsIgnoreAppendedFields(t *testing.T) {
	addr := startRedis(t)
	dir := appendedFieldTree(t)
	for _, s := range snippets(t) {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			s.need(t)
			start := time.Now()
			out, err := runSnippetIn(dir, addr, s.run, "RATE_KEY=appended:"+s.name)
			if err != nil {
				t.Errorf("%s, on a reply of seven fields: %v\nstdout:\n%s", s.file, err, out)
			} else if err := checkTwoPerMinute(out, elapsedSince(start)); err != nil {
				t.Errorf("%s, on a reply of seven fields: %v:\n%s", s.file, err, out)
			}
			org := "appended-" + s.name
			start = time.Now()
			out, err = runSnippetIn(dir, addr, append(s.runTwoKeys(), twoKeysUsers...), "ORG_ID="+org)
			if err != nil {
				t.Errorf("%s, on a reply of seven fields: %v\nstdout:\n%s", s.twoKeys, err, out)
			} else if err := checkTwoKeys(out, org, elapsedSince(start)); err != nil {
				t.Errorf("%s, on a reply of seven fields: %v:\n%s", s.twoKeys, err, out)
			}
		})
	}
}

// keySnippets run the snippets that compute the Go middleware's Redis keys
// (no Redis needed), as run words with the file last.
func keySnippets() []snippet {
	return []snippet{
		{name: "python", file: "python/keys.py", lang: "python", run: []string{findPython(), "python/keys.py"},
			probe: func() error { _, err := exec.LookPath(findPython()); return err }, setup: "apt-get install python3"},
		{name: "node", file: "node/keys.js", lang: "js", run: []string{"node", "node/keys.js"},
			probe: func() error { _, err := exec.LookPath("node"); return err }, setup: "apt-get install nodejs"},
		{name: "ruby", file: "ruby/keys.rb", lang: "ruby", run: []string{"ruby", "ruby/keys.rb"},
			probe: func() error { _, err := exec.LookPath("ruby"); return err }, setup: "apt-get install ruby"},
	}
}

// keyVectorSecret is the APIKey.Secret of the key snippets' test vector.
const keyVectorSecret = "an example secret, 16+ bytes"

// middlewareKeys returns the Redis keys httplimit writes, Name "api" on a
// Limiter WithKeyPrefix("rate:"), for the key snippets' test vector, one
// line per request as the snippets print them: the request of 203.0.113.7
// keyed by ClientIP, of 2001:db8:1:2:3:4:5:6 by ClientIP, of API key k-123
// by APIKey, and of k-123 with the scope account 42.
func middlewareKeys(t *testing.T) string {
	t.Helper()
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	limiter := redisrate.NewLimiter(rdb, redisrate.WithKeyPrefix("rate:"), redisrate.WithDecisionTimeout(time.Minute))
	apiKey := httplimit.APIKey{Header: "X-API-Key", Secret: []byte(keyVectorSecret), Authenticated: true}
	account := []httplimit.Scope{{Name: "account", Limit: redisrate.PerMinute(100),
		Key: httplimit.KeyFunc(func(r *http.Request) (string, error) { return r.Header.Get("X-Account"), nil })}}
	var lines []string
	for _, c := range []struct {
		key    httplimit.Keyer
		scopes []httplimit.Scope
		remote string
	}{
		{httplimit.ClientIP{}, nil, "203.0.113.7:4711"},
		{httplimit.ClientIP{}, nil, "[2001:db8:1:2:3:4:5:6]:4711"},
		{apiKey, nil, "192.0.2.1:4711"},
		{apiKey, account, "192.0.2.1:4711"},
	} {
		mr.FlushAll()
		m, err := httplimit.New(httplimit.Config{Limiter: limiter, Name: "api", Limits: []redisrate.Limit{redisrate.PerMinute(10)}, Key: c.key, Scopes: c.scopes})
		if err != nil {
			t.Fatal(err)
		}
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = c.remote
		r.Header.Set("X-API-Key", "k-123")
		r.Header.Set("X-Account", "42")
		w := httptest.NewRecorder()
		m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})).ServeHTTP(w, r)
		if w.Code != http.StatusOK {
			t.Fatalf("the middleware answered %d", w.Code)
		}
		keys := mr.Keys() // sorted: the scope's tag alone sorts after the request's key
		slices.Reverse(keys)
		lines = append(lines, strings.Join(keys, " "))
	}
	return strings.Join(lines, "\n") + "\n"
}

// TestKeySnippetsAgreeWithGo: each other-language snippet of
// docs/other-languages.md computes, for the test vector, the very keys
// the Go middleware writes, and the page shows the snippets verbatim and
// what they print.
func TestKeySnippetsAgreeWithGo(t *testing.T) {
	want := middlewareKeys(t)
	doc, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	if got := outputBlock(t, doc, "Each prints the keys of the test vector:\n\n```text\n"); got != want {
		t.Errorf("%s shows the keys\n%s; the middleware writes\n%s", docPath, got, want)
	}
	for _, s := range keySnippets() {
		t.Run(s.name, func(t *testing.T) {
			src, err := os.ReadFile(s.file)
			if err != nil {
				t.Fatal(err)
			}
			if block := "```" + s.lang + "\n" + string(src) + "```\n"; !bytes.Contains(doc, []byte(block)) {
				t.Errorf("%s lacks examples/%s verbatim", docPath, s.file)
			}
			s.need(t)
			out, err := exec.Command(s.run[0], s.run[1:]...).CombinedOutput()
			if err != nil {
				t.Fatalf("%s: %v\n%s", strings.Join(s.run, " "), err, out)
			}
			if string(out) != want {
				t.Errorf("%s prints\n%s; the Go middleware writes\n%s", s.file, out, want)
			}
		})
	}
}
