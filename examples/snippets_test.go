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
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redisrate/redisrate/internal/manifest"
	"github.com/redisrate/redisrate/internal/redisserver"
)

// snippet is one runnable example: the command that runs it, and how to
// tell whether its interpreter and Redis library are installed.
type snippet struct {
	name  string
	file  string   // relative to examples/
	lang  string   // the code fence language in docs/other-languages.md
	run   []string // the command, the file last
	probe func() error
	setup string // how CI installs what it needs
}

func snippets(t *testing.T) []snippet {
	python := findPython()
	return []snippet{
		{
			name: "redis-cli", file: "redis-cli/ratelimit.sh", lang: "sh",
			run:   []string{"sh", "redis-cli/ratelimit.sh"},
			probe: func() error { _, err := exec.LookPath("redis-cli"); return err },
			setup: "apt-get install redis-tools",
		},
		{
			name: "python", file: "python/ratelimit.py", lang: "python",
			run:   []string{python, "python/ratelimit.py"},
			probe: func() error { return quiet(exec.Command(python, "-c", "import redis")) },
			setup: "apt-get install python3-redis",
		},
		{
			name: "node", file: "node/ratelimit.js", lang: "js",
			run: []string{"node", "node/ratelimit.js"},
			probe: func() error {
				cmd := exec.Command("node", "-e", `require.resolve("ioredis")`)
				cmd.Dir = "node"
				return quiet(cmd)
			},
			setup: "apt-get install nodejs npm && npm ci --prefix examples/node",
		},
		{
			name: "ruby", file: "ruby/ratelimit.rb", lang: "ruby",
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
	if os.Getenv("CI") == "true" {
		t.Fatalf(format+" (CI=true: CI must install it)", args...)
	}
	t.Skipf(format+" (skipped outside CI)", args...)
}

// startRedis runs redis-server from PATH on a free port of 127.0.0.1 until
// the test ends, and returns its address.
func startRedis(t *testing.T) string {
	t.Helper()
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

// checkTwoPerMinute returns why the lines are not what three calls of 2 per
// minute on a fresh key print (contract v2): allowed, allowed, denied, with
// honest times and reply field 5, capacity, = 2. The calls are apart by the
// snippet's own speed, at most a few seconds: the times count down from 30s
// and 60s by that much.
func checkTwoPerMinute(out string) error {
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
		var n [6]int64
		for j := range n {
			n[j], _ = strconv.ParseInt(m[j+1], 10, 64)
		}
		got[i] = reply{n[0], n[1], n[2], n[3], n[4], n[5]}
	}
	between := func(x, lo, hi int64) bool { return x > lo && x <= hi }
	ok := got[0].allowed == 1 && got[0].remaining == 1 && got[0].retry == 0 && got[0].reset == 30000 &&
		got[1].allowed == 1 && got[1].remaining == 0 && got[1].retry == 0 && between(got[1].reset, 55000, 60000) &&
		got[2].allowed == 0 && got[2].remaining == 0 && between(got[2].retry, 25000, 30000) &&
		between(got[2].reset, 55000, 60000) && got[2].reset == got[2].retry+30000
	for _, r := range got {
		ok = ok && r.capacity == 2 && r.binding == 1
	}
	if !ok {
		return fmt.Errorf("replies do not match 2 per minute")
	}
	return nil
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
			if err := s.probe(); err != nil {
				missing(t, "%s is not installed (%v); install it with: %s", s.name, err, s.setup)
			}
			run := func(key string) (string, error) {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				cmd := exec.CommandContext(ctx, s.run[0], s.run[1:]...)
				cmd.Env = append(os.Environ(), "REDIS_ADDR="+addr, "RATE_KEY="+key)
				var stdout, stderr bytes.Buffer
				cmd.Stdout, cmd.Stderr = &stdout, &stderr
				err := cmd.Run()
				if err != nil {
					err = fmt.Errorf("%v; stderr: %s", err, strings.TrimSpace(stderr.String()))
				}
				return stdout.String(), err
			}

			key := "snippet:" + s.name
			out, err := run(key)
			if err != nil {
				t.Fatalf("%s: %v\nstdout:\n%s", strings.Join(s.run, " "), err, out)
			}
			if err := checkTwoPerMinute(out); err != nil {
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
	}
	_, after, ok := strings.Cut(string(doc), "Each prints, on a fresh key:\n\n```text\n")
	out, _, ok2 := strings.Cut(after, "```")
	if !ok || !ok2 {
		t.Fatalf("%s lacks the block of output after \"Each prints, on a fresh key:\"", docPath)
	}
	if err := checkTwoPerMinute(out); err != nil {
		t.Errorf("%s shows output no snippet prints: %v:\n%s", docPath, err, out)
	}
}
