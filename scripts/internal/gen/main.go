// Command gen writes the generated scripts (scripts/*.lua), the Functions
// library, the reset script and the Go manifests from scripts/src. Run it
// with `go generate ./scripts` (or `make generate`) from the module root.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/redisrate/redisrate/scripts/internal/assemble"
)

func main() {
	files, err := assemble.Generate(os.DirFS("src"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
	for path, b := range files {
		if err := os.WriteFile(filepath.FromSlash(path), b, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "gen:", err)
			os.Exit(1)
		}
	}
}
