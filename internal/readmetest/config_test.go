package readmetest_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadmeReplaceRecipe (issue 38, finding 6): until the first tag, the
// README's replace recipe is how a user builds against the modules; it
// covered grpclimit but not otelrate, and `go mod tidy` answered 403. It
// names every public nested module: each directory of go.work with a
// go.mod of its own but bench and integration_test.
func TestReadmeReplaceRecipe(t *testing.T) {
	readme := read(t, "README.md")
	start := strings.Index(readme, "Until the first tag")
	end := strings.Index(readme, "go mod edit -require")
	if start < 0 || end < start {
		t.Fatal("README.md has no replace recipe (\"Until the first tag\" ... \"go mod edit -require\")")
	}
	recipe := readme[start:end]
	work := read(t, "go.work")
	n := 0
	for _, line := range strings.Split(work, "\n") {
		dir := strings.TrimPrefix(strings.TrimSpace(line), "./")
		if dir == "" || strings.ContainsAny(dir, " ()/=") || dir == "." || dir == "bench" || dir == "integration_test" {
			continue
		}
		if _, err := os.Stat(filepath.Join(root, dir, "go.mod")); err != nil {
			continue
		}
		n++
		if !strings.Contains(recipe, dir) {
			t.Errorf("README.md's replace recipe does not name the nested module %s: a user's `go mod tidy` would fetch it, and get 403", dir)
		}
	}
	if n < 2 {
		t.Errorf("found %d nested modules in go.work; want grpclimit and otelrate at least", n)
	}
}

// TestNoSuggestedRatePrefix (issue 38, finding 6): "rate:" is
// go-redis/redis_rate's key prefix, and on a key both use, each fails on
// the other's state: the docs and their examples suggest another.
func TestNoSuggestedRatePrefix(t *testing.T) {
	pages := append([]string(nil), docs...)
	tests, _ := filepath.Glob(filepath.Join(root, "*example_test.go"))
	more, _ := filepath.Glob(filepath.Join(root, "*", "*example_test.go"))
	for _, p := range append(tests, more...) {
		rel, _ := filepath.Rel(root, p)
		pages = append(pages, rel)
	}
	for _, name := range pages {
		if strings.Contains(read(t, name), `WithKeyPrefix("rate:")`) {
			t.Errorf(`%s suggests WithKeyPrefix("rate:"), redis_rate's prefix: use another, such as "redisrate:"`, name)
		}
	}
}
