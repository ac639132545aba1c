package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// events is go test -json of a package with a passing, a failing and a
// skipped test, and of a package that did not build.
const events = `{"Action":"start","Package":"p"}
{"Action":"run","Package":"p","Test":"TestOK"}
{"Action":"output","Package":"p","Test":"TestOK","Output":"=== RUN   TestOK\n"}
{"Action":"output","Package":"p","Test":"TestOK","Output":"    a_test.go:1: chatter\n"}
{"Action":"pass","Package":"p","Test":"TestOK"}
{"Action":"run","Package":"p","Test":"TestBad"}
{"Action":"output","Package":"p","Test":"TestBad","Output":"=== RUN   TestBad\n"}
{"Action":"output","Package":"p","Test":"TestBad","Output":"    a_test.go:2: it broke\n"}
{"Action":"output","Package":"p","Test":"TestBad","Output":"--- FAIL: TestBad (0.00s)\n"}
{"Action":"fail","Package":"p","Test":"TestBad"}
{"Action":"run","Package":"p","Test":"TestNode"}
{"Action":"output","Package":"p","Test":"TestNode","Output":"=== RUN   TestNode\n"}
{"Action":"output","Package":"p","Test":"TestNode","Output":"    a_test.go:3: node is not installed (skipped outside CI)\n"}
{"Action":"output","Package":"p","Test":"TestNode","Output":"--- SKIP: TestNode (0.00s)\n"}
{"Action":"skip","Package":"p","Test":"TestNode"}
{"Action":"output","Package":"p","Output":"PASS\n"}
{"Action":"output","Package":"p","Output":"FAIL\tp\t0.01s\n"}
{"Action":"fail","Package":"p"}
`

func TestSummarize(t *testing.T) {
	var out bytes.Buffer
	ok, skipped := summarize(strings.NewReader(events), &out)
	if ok {
		t.Error("a failed test passed")
	}
	got := out.String()
	if !strings.Contains(got, "it broke") || !strings.Contains(got, "FAIL\tp") || strings.Contains(got, "chatter") || strings.Contains(got, "PASS\n") {
		t.Errorf("output:\n%s\nwant the failure and the package's result, not the passing test's log", got)
	}
	if len(skipped) != 1 || skipped[0] != "p TestNode: a_test.go:3: node is not installed (skipped outside CI)" {
		t.Errorf("skipped %q", skipped)
	}
	if ok, _ := summarize(strings.NewReader("go: no such flag\n"), &out); ok {
		t.Error("no result at all passed")
	}
	pass := `{"Action":"output","Package":"q","Output":"ok  \tq\t0.01s\n"}` + "\n" + `{"Action":"pass","Package":"q"}` + "\n"
	if ok, _ := summarize(strings.NewReader(pass), &out); !ok {
		t.Error("a passing package failed")
	}
}

func TestReport(t *testing.T) {
	file := filepath.Join(t.TempDir(), "skips")
	var out bytes.Buffer
	if printReport(&out, file) != 0 || out.Len() != 0 {
		t.Fatalf("no file: %q", out.String())
	}
	if err := os.WriteFile(file, []byte("p TestB: why b\np TestA: why a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if printReport(&out, file) != 0 {
		t.Fatal("report failed")
	}
	got := out.String()
	if !strings.Contains(got, "SKIPPED: 2 test(s)") || strings.Index(got, "TestA") > strings.Index(got, "TestB") {
		t.Errorf("report:\n%s", got)
	}
}
