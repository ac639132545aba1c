package redisrate_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadmeQuickstartIsExample keeps the README's Go quickstart identical
// to the code of Example, which the test suite compiles and runs.
func TestReadmeQuickstartIsExample(t *testing.T) {
	src, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(src), "// quickstart:start\n")
	body, _, ok2 := strings.Cut(after, "\t// quickstart:end")
	if !ok || !ok2 {
		t.Fatal("example_test.go lost its quickstart markers")
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimRight(body, "\n"), "\n") {
		lines = append(lines, strings.TrimPrefix(l, "\t"))
	}
	want := "```go\n" + strings.Join(lines, "\n") + "\n```"
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), want) {
		t.Errorf("README.md's Go quickstart differs from Example in example_test.go; it should read:\n%s", want)
	}
}

// TestContractCopyIsCurrent keeps CONTRACT.md, shipped with the scripts, equal
// to the project's binding contract where that is checked out beside the repo.
func TestContractCopyIsCurrent(t *testing.T) {
	shared, err := os.ReadFile(filepath.Join("..", "shared", "CONTRACT.md"))
	if err != nil {
		t.Skipf("../shared/CONTRACT.md is not beside this checkout (%v): nothing to compare CONTRACT.md with", err)
	}
	local, err := os.ReadFile("CONTRACT.md")
	if err != nil {
		t.Fatal(err)
	}
	if string(local) != string(shared) {
		t.Error("CONTRACT.md differs from ../shared/CONTRACT.md: copy the binding contract over")
	}
}
