package redisrate_test

import (
	"os"
	"path/filepath"
	"testing"
)

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
