package scriptgen

import (
	"os"
	"path/filepath"
	"testing"
)

// TestGeneratedScriptsAreFresh fails when scripts/*.lua no longer match their
// sources: run go generate ./... at the module root.
func TestGeneratedScriptsAreFresh(t *testing.T) {
	root := filepath.Join("..", "..", "scripts")
	src := os.DirFS(filepath.Join(root, "src"))
	for _, name := range Names {
		want, err := Assemble(src, name)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(root, name+".lua"))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("scripts/%s.lua is stale: run `go generate ./...` at the module root", name)
		}
	}
}
