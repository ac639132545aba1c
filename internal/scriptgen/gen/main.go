// Command gen writes scripts/*.lua from scripts/src/. Run it with go generate
// from the module root.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/redisrate/redisrate/internal/scriptgen"
)

func main() {
	src := os.DirFS(filepath.Join("scripts", "src"))
	for _, name := range scriptgen.Names {
		out, err := scriptgen.Assemble(src, name)
		if err != nil {
			fmt.Fprintln(os.Stderr, "gen:", err)
			os.Exit(1)
		}
		if err := os.WriteFile(filepath.Join("scripts", name+".lua"), out, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "gen:", err)
			os.Exit(1)
		}
	}
}
