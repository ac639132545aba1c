// Package readmetest keeps the documentation's code the same code as the
// Examples and files that the test suite compiles and runs.
//
// A Go block of README.md or docs/*.md is lines of a tested Example,
// unindented by one tab: a run of consecutive lines of its body (see
// Examples), or a marked region of a test file, the lines between
// "// NAME:start" and "// NAME:end" (see Regions). The tests of this package
// check the README and the pages of docs/ as a whole (size, links, every Go
// block and the output shown after it, the algorithm table, the annotated
// script call); Check lets a package's own test pin one region to one
// document.
package readmetest

import (
	"os"
	"strings"
	"testing"
)

// Example is one Example function of a test file.
type Example struct {
	Name   string // e.g. "ExampleLimiter_Wait"
	Body   string // its body before "// Output:", unindented by one tab
	Output string // what "// Output:" says it prints; "" when it has none
}

// Examples returns the Example functions of a Go test file.
func Examples(src string) []Example {
	var out []Example
	lines := strings.Split(src, "\n")
	for i := 0; i < len(lines); i++ {
		name, ok := strings.CutPrefix(lines[i], "func Example")
		if !ok || !strings.HasSuffix(name, "() {") {
			continue
		}
		ex := Example{Name: "Example" + strings.TrimSuffix(name, "() {")}
		var body, output []string
		inOutput := false
		for i++; i < len(lines) && lines[i] != "}"; i++ {
			l := strings.TrimPrefix(lines[i], "\t")
			if rest, ok := strings.CutPrefix(l, "// Output:"); ok && !inOutput {
				inOutput = true
				if rest = strings.TrimSpace(rest); rest != "" {
					output = append(output, rest)
				}
				continue
			}
			if inOutput {
				l = strings.TrimPrefix(strings.TrimPrefix(l, "//"), " ")
				output = append(output, l)
				continue
			}
			body = append(body, l)
		}
		ex.Body = strings.Join(body, "\n")
		if len(output) > 0 {
			ex.Output = strings.Join(output, "\n") + "\n"
		}
		out = append(out, ex)
	}
	return out
}

// Regions returns the marked regions of a Go source file, by name: the
// lines between "// NAME:start" and "// NAME:end", unindented as the start
// marker is indented (by one tab inside a function, not at all at the top
// level).
func Regions(src string) map[string]string {
	out := map[string]string{}
	lines := strings.Split(src, "\n")
	for i := 0; i < len(lines); i++ {
		indent := lines[i][:len(lines[i])-len(strings.TrimLeft(lines[i], " \t"))]
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
			body = append(body, strings.TrimPrefix(lines[j], indent))
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

// Block returns the contents of the code block of the Markdown file at path
// whose text starts with start (the fence line and what follows it, e.g.
// "```console\n$ redisrate try "): the text after the fence line, up to the
// closing fence. It fails t when there is no such block.
func Block(t testing.TB, path, start string) string {
	t.Helper()
	text, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(text), start)
	_, fence, _ := strings.Cut(start, "\n")
	body, _, closed := strings.Cut(fence+after, "```\n")
	if !ok || !closed {
		t.Fatalf("%s has no code block starting %q", path, start)
	}
	return body
}

// Golden checks that the code block Block finds is want. With update, it
// rewrites the block to want instead; how names the command that does it.
func Golden(t testing.TB, path, start, want string, update bool, how string) {
	t.Helper()
	got := Block(t, path, start)
	if got == want {
		return
	}
	if !update {
		t.Errorf("a code block of %s is stale (%s rewrites it); it should read:\n%s", path, how, want)
		return
	}
	text, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, fence, _ := strings.Cut(start, "\n")
	old := start[:len(start)-len(fence)] + got + "```\n"
	if strings.Count(string(text), old) != 1 {
		t.Fatalf("%s: the block starting %q is not unique", path, start)
	}
	s := strings.Replace(string(text), old, start[:len(start)-len(fence)]+want+"```\n", 1)
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}
