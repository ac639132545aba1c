package redisrate_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDocMapListsEveryFile: doc.go's "Where things are" names every Go
// file of the package, so a reader can find each stage from it.
func TestDocMapListsEveryFile(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") || f == "doc.go" {
			continue
		}
		if !strings.Contains(string(doc), "//\t"+f+" ") {
			t.Errorf("doc.go's map of the package does not name %s: add a line saying what it holds", f)
		}
	}
}
