package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
)

var update = flag.Bool("update", false, "rewrite the demo output in docs/cli.md and cmd/redisrate/demo.svg")

const (
	cliDocPath = "../../docs/cli.md"
	svgPath    = "demo.svg"
	demoLine   = "$ go run ./cmd/redisrate demo\n"
)

// demoBlock returns where docs/cli.md shows the demo's output: from just
// after the line of the command to the end of its code block.
func demoBlock(t *testing.T, doc string) (from, to int) {
	t.Helper()
	start := "```text\n" + demoLine
	i := strings.Index(doc, start)
	if i < 0 {
		t.Fatalf("%s has no block starting %q", cliDocPath, start)
	}
	from = i + len(start)
	j := strings.Index(doc[from:], "```\n")
	if j < 0 {
		t.Fatalf("%s: the demo's block does not end", cliDocPath)
	}
	return from, from + j
}

// docs/cli.md shows the demo's actual output and chart: this fails when they
// are stale (the scripts decide differently), and -update rewrites them.
func TestDocsAreCurrent(t *testing.T) {
	cfg, err := demoConfig(limitFlags{limit: "10/s"})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := runDemo(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	rep.writeText(&out)
	svg := rep.svg()

	b, err := os.ReadFile(cliDocPath)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	from, to := demoBlock(t, doc)
	oldSVG, _ := os.ReadFile(svgPath)
	if *update {
		if doc[from:to] != out.String() {
			if err := os.WriteFile(cliDocPath, []byte(doc[:from]+out.String()+doc[to:]), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if string(oldSVG) != svg {
			if err := os.WriteFile(svgPath, []byte(svg), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return
	}
	if doc[from:to] != out.String() {
		t.Errorf("the demo output in docs/cli.md is stale: run go test ./cmd/redisrate -run TestDocs -update\nwant:\n%s", out.String())
	}
	if string(oldSVG) != svg {
		t.Errorf("cmd/redisrate/demo.svg is stale: run go test ./cmd/redisrate -run TestDocs -update")
	}
}

// The try session in docs/cli.md is what the command prints: each
// "$ redisrate try" line is run, in order, on an embedded Redis whose clock
// stands still, with -update filling in the output; `; echo "exit $?"`
// prints the exit code as a shell would.
func TestDocsTrySession(t *testing.T) {
	b, err := os.ReadFile(cliDocPath)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	const start = "```console\n$ redisrate try "
	i := strings.Index(doc, start)
	if i < 0 {
		t.Fatalf("%s has no block starting %q", cliDocPath, start)
	}
	from := i + len("```console\n")
	j := strings.Index(doc[from:], "```\n")
	if j < 0 {
		t.Fatal("the try session's block does not end")
	}
	to := from + j

	mr := miniredis.RunT(t)
	mr.SetTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var want strings.Builder
	for _, line := range strings.SplitAfter(doc[from:to], "\n") {
		if !strings.HasPrefix(line, "$ ") {
			continue // output, made again below
		}
		want.WriteString(line)
		cmd, echo := strings.CutSuffix(strings.TrimSuffix(line[2:], "\n"), `; echo "exit $?"`)
		args := strings.Fields(cmd)
		if args[0] != "redisrate" {
			t.Fatalf("%q: only redisrate commands run here", line)
		}
		for k, a := range args {
			if a == "localhost:6379" {
				args[k] = mr.Addr()
			}
		}
		code, out, errOut := runCmd(t, args[1:]...)
		want.WriteString(out + errOut)
		if echo {
			fmt.Fprintf(&want, "exit %d\n", code)
		} else if code != 0 {
			t.Errorf("%q: exit %d without echo", line, code)
		}
	}
	if *update {
		if doc[from:to] != want.String() {
			if err := os.WriteFile(cliDocPath, []byte(doc[:from]+want.String()+doc[to:]), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return
	}
	if doc[from:to] != want.String() {
		t.Errorf("the try session in docs/cli.md is stale: run go test ./cmd/redisrate -run TestDocs -update\nwant:\n%s", want.String())
	}
}
