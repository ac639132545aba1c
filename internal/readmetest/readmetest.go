// Package readmetest keeps the documentation's code the same code as the
// Examples and files that the test suite compiles and runs.
//
// A Go block of README.md or docs/*.md is the body of a marked region of a
// test file: the lines between "// NAME:start" and "// NAME:end" (both
// indented by one tab, inside an Example), unindented by one tab. The tests
// of this package check the README and the pages of docs/ as a whole (size,
// links, every Go block, the algorithm table, the annotated script call);
// Check lets a package's own test pin one region to one document.
package readmetest

import (
	"os"
	"strings"
	"testing"
)

// Regions returns the marked regions of a Go source file, by name: the
// lines between "\t// NAME:start" and "\t// NAME:end", unindented by one
// tab.
func Regions(src string) map[string]string {
	out := map[string]string{}
	lines := strings.Split(src, "\n")
	for i := 0; i < len(lines); i++ {
		name, ok := strings.CutPrefix(strings.TrimSpace(lines[i]), "// ")
		if !ok {
			continue
		}
		name, ok = strings.CutSuffix(name, ":start")
		if !ok || name == "" || strings.ContainsAny(name, " \t") {
			continue
		}
		var body []string
		for j := i + 1; j < len(lines); j++ {
			if strings.TrimSpace(lines[j]) == "// "+name+":end" {
				out[name] = strings.Join(body, "\n")
				i = j
				break
			}
			body = append(body, strings.TrimPrefix(lines[j], "\t"))
		}
	}
	return out
}

// Check fails t unless doc holds, as a Go code block, the region name of
// file (see Regions).
func Check(t testing.TB, file, doc, name string) {
	t.Helper()
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	body, ok := Regions(string(src))[name]
	if !ok {
		t.Fatalf("%s lost its %s:start and %s:end markers", file, name, name)
	}
	want := "```go\n" + strings.TrimRight(body, "\n") + "\n```"
	text, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(text), want) {
		t.Errorf("%s differs from %s; it should contain:\n%s", doc, file, want)
	}
}
