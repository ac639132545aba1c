package main

import (
	"bytes"
	"context"
	"flag"
	"os"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the demo output in README.md and cmd/redisrate/demo.svg")

const (
	readmePath    = "../../README.md"
	svgPath       = "demo.svg"
	outputStart   = "<!-- demo output: go test ./cmd/redisrate -run TestDocs -update rewrites it -->\n"
	outputEnd     = "<!-- end of demo output -->\n"
	sectionMarker = "<!-- section: demo (owner: cmd/redisrate) -->"
)

// The README shows the demo's actual output and chart: this fails when they
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
	block := outputStart + "```text\n$ go run ./cmd/redisrate demo\n" + out.String() + "```\n" + outputEnd
	svg := rep.svg()

	readme, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	s := string(readme)
	i, j := strings.Index(s, outputStart), strings.Index(s, outputEnd)
	sec := strings.Index(s, sectionMarker)
	if sec < 0 || i < sec || j < i {
		t.Fatalf("README.md has no demo output block below %q", sectionMarker)
	}
	if next := strings.Index(s[sec+len(sectionMarker):], "<!-- section: "); next >= 0 && j > sec+len(sectionMarker)+next {
		t.Fatal("the demo output block is outside the demo section")
	}
	current := s[i : j+len(outputEnd)]
	oldSVG, _ := os.ReadFile(svgPath)
	if *update {
		if current != block {
			if err := os.WriteFile(readmePath, []byte(s[:i]+block+s[j+len(outputEnd):]), 0o644); err != nil {
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
	if current != block {
		t.Errorf("the demo output in README.md is stale: run go test ./cmd/redisrate -run TestDocs -update\nwant:\n%s", block)
	}
	if string(oldSVG) != svg {
		t.Errorf("cmd/redisrate/demo.svg is stale: run go test ./cmd/redisrate -run TestDocs -update")
	}
}
