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

	"github.com/redisrate/redisrate/internal/readmetest"
)

var update = flag.Bool("update", false, "rewrite the demo output in docs/cli.md and cmd/redisrate/demo.svg")

const (
	cliDocPath = "../../docs/cli.md"
	svgPath    = "demo.svg"
	demoLine   = "$ go run ./cmd/redisrate demo\n"
)

// how rewrites the blocks of docs/cli.md that the tests below check.
const how = "go test ./cmd/redisrate -run TestDocs -update"

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
	readmetest.Golden(t, cliDocPath, "```text\n"+demoLine, demoLine+out.String(), *update, how)

	svg := rep.svg()
	oldSVG, _ := os.ReadFile(svgPath)
	switch {
	case string(oldSVG) == svg:
	case *update:
		if err := os.WriteFile(svgPath, []byte(svg), 0o644); err != nil {
			t.Fatal(err)
		}
	default:
		t.Errorf("cmd/redisrate/demo.svg is stale: run %s", how)
	}
}

// The try session in docs/cli.md is what the command prints: each
// "$ redisrate try" line is run, in order, on an embedded Redis whose clock
// stands still, with -update filling in the output; `; echo "exit $?"`
// prints the exit code as a shell would.
func TestDocsTrySession(t *testing.T) {
	const start = "```console\n$ redisrate try "
	session := readmetest.Block(t, cliDocPath, start)

	mr := miniredis.RunT(t)
	mr.SetTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var want strings.Builder
	for _, line := range strings.SplitAfter(session, "\n") {
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
	readmetest.Golden(t, cliDocPath, start, want.String(), *update, how)
}
