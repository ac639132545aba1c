// Package readmetest keeps the README's code blocks the same code as the
// Examples that the test suite compiles and runs.
package readmetest

import (
	"os"
	"strings"
	"testing"
)

// Check fails t unless readme holds, as a Go code block, the lines of file
// between the comments "// NAME:start" and "// NAME:end", unindented by one
// tab.
func Check(t testing.TB, file, readme, name string) {
	t.Helper()
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(src), "// "+name+":start\n")
	body, _, ok2 := strings.Cut(after, "\t// "+name+":end")
	if !ok || !ok2 {
		t.Fatalf("%s lost its %s:start and %s:end markers", file, name, name)
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimRight(body, "\n"), "\n") {
		lines = append(lines, strings.TrimPrefix(l, "\t"))
	}
	want := "```go\n" + strings.Join(lines, "\n") + "\n```"
	text, err := os.ReadFile(readme)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(text), want) {
		t.Errorf("%s differs from %s; it should contain:\n%s", readme, file, want)
	}
}
