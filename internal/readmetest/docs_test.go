package readmetest_test

import (
	"context"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/redisrate/redisrate/internal/manifest"
	"github.com/redisrate/redisrate/internal/readmetest"
	"github.com/redisrate/redisrate/scripts"
)

var update = flag.Bool("update", false, "rewrite the annotated script call in README.md from what the script replies")

// root is the repository, from this package's directory.
const root = "../.."

// docs are the pages these tests hold to their rules. docs/reliability.md
// and docs/observability.md have tests of their own modules behind them.
var docs = []string{"README.md", "docs/go.md", "docs/cli.md", "docs/testing.md", "docs/other-languages.md", "docs/releasing.md"}

// maxReadme is what a newcomer reads in five minutes.
const maxReadme = 12 * 1024

func read(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestReadmeFits(t *testing.T) {
	if n := len(read(t, "README.md")); n > maxReadme {
		t.Errorf("README.md is %d bytes, more than %d: move detail to docs/", n, maxReadme)
	}
}

// The README opens with the two commands: the demo and the whole test
// suite, and both exist.
func TestReadmeOpensWithTheTwoCommands(t *testing.T) {
	readme := read(t, "README.md")
	_, after, _ := strings.Cut(readme, "\n```sh\n")
	first, _, _ := strings.Cut(after, "```")
	lines := strings.Split(strings.TrimSpace(first), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "go run ./cmd/redisrate demo ") || !strings.HasPrefix(lines[1], "make test ") {
		t.Fatalf("README.md's first block is not the demo and make test:\n%s", first)
	}
	if strings.Index(readme, "\n## ") < strings.Index(readme, first) {
		t.Error("the two commands come after a section heading; they must come first")
	}
	if _, err := os.Stat(filepath.Join(root, "cmd/redisrate/demo.go")); err != nil {
		t.Error(err)
	}
	if !regexp.MustCompile(`(?m)^test:`).MatchString(read(t, "Makefile")) {
		t.Error("the Makefile has no test target")
	}
}

// No internal markers (section owners, HTML comments, notes to ourselves)
// and nothing outside the repository: users have only the repository.
func TestDocsHaveNoInternalMarkers(t *testing.T) {
	for _, name := range docs {
		text := read(t, name)
		for _, bad := range []string{"<!--", "owner:", "TODO", "FIXME", "XXX", "../shared", "/work/"} {
			if strings.Contains(text, bad) {
				t.Errorf("%s contains %q", name, bad)
			}
		}
	}
}

// No comment or text in the command, the examples or these tests points to
// the project's shared contract outside the repository: CONTRACT.md in the
// repository is the reference.
func TestNoPointerOutsideTheRepository(t *testing.T) {
	for _, dir := range []string{"cmd/redisrate", "examples", "internal/readmetest", "docs"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && d.Name() == "node_modules" {
				return filepath.SkipDir
			}
			if d.IsDir() || !strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, ".md") && !strings.HasSuffix(path, ".py") &&
				!strings.HasSuffix(path, ".js") && !strings.HasSuffix(path, ".rb") && !strings.HasSuffix(path, ".sh") {
				return nil
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			if strings.Contains(string(b), "shared/"+"CONTRACT.md") {
				t.Errorf("%s points to the shared contract outside the repository; point to CONTRACT.md", path)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

var linkRE = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// Every relative link of the README and of every page of docs/ reaches a
// file or directory of the repository.
func TestDocLinks(t *testing.T) {
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	all := []string{"README.md"}
	for _, p := range pages {
		all = append(all, filepath.Join("docs", filepath.Base(p)))
	}
	for _, name := range all {
		for _, m := range linkRE.FindAllStringSubmatch(read(t, name), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "#") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			target, _, _ = strings.Cut(target, "#")
			path := filepath.Join(root, filepath.Dir(name), target)
			if _, err := os.Stat(path); err != nil {
				t.Errorf("%s links to %s, which does not exist", name, m[1])
			}
		}
	}
}

// goBlock is a Go code block of a Markdown text and, when a text block
// follows it at once (after one blank line), what that block shows.
type goBlock struct {
	code   string
	output string
	shown  bool // output holds a text block
}

func goBlocks(text string) []goBlock {
	var out []goBlock
	for {
		_, after, ok := strings.Cut(text, "```go\n")
		if !ok {
			return out
		}
		code, rest, _ := strings.Cut(after, "```\n")
		b := goBlock{code: strings.TrimRight(code, "\n")}
		if shown, ok := strings.CutPrefix(rest, "\n```text\n"); ok {
			b.output, _, _ = strings.Cut(shown, "```\n")
			b.shown = true
		}
		out = append(out, b)
		text = rest
	}
}

// Every Go block of the docs is lines of a tested Example (consecutive
// lines of its body, or a marked region of a test file), so no Go code in
// the docs can stop compiling unnoticed; and a text block right after it
// shows what that Example's "// Output:" says it prints.
func TestDocsGoBlocks(t *testing.T) {
	regions := map[string]bool{}
	var examples []readmetest.Example
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".") && path != root) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, body := range readmetest.Regions(string(b)) {
			regions[strings.TrimRight(body, "\n")] = true
		}
		examples = append(examples, readmetest.Examples(string(b))...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, name := range docs {
		for _, block := range goBlocks(read(t, name)) {
			n++
			var from []readmetest.Example
			for _, ex := range examples {
				if strings.Contains("\n"+ex.Body+"\n", "\n"+block.code+"\n") {
					from = append(from, ex)
				}
			}
			if len(from) == 0 && !regions[block.code] {
				t.Errorf("%s: this Go block is no tested Example's lines (consecutive lines of an Example's body, or a marked region // NAME:start ... // NAME:end):\n%s", name, block.code)
				continue
			}
			if !block.shown {
				continue
			}
			ok := false
			var outputs []string
			for _, ex := range from {
				ok = ok || ex.Output != "" && ex.Output == block.output
				outputs = append(outputs, ex.Name+":\n"+ex.Output)
			}
			if !ok {
				t.Errorf("%s: the output shown after this Go block is not what its Example prints:\n%s\nshown:\n%s\nprinted:\n%s", name, block.code, block.output, strings.Join(outputs, "\n"))
			}
		}
	}
	if n < 6 {
		t.Errorf("only %d Go blocks found in the docs: the quickstart, the middleware and docs/go.md's are expected", n)
	}
}

// The algorithm table's first columns are the scripts' manifest: name,
// summary, burst rule, state, cap on limit.
func TestReadmeAlgorithmTable(t *testing.T) {
	readme := read(t, "README.md")
	for i, s := range manifest.Specs() {
		name := "`" + s.Name + "`"
		if i == 0 {
			name += " (default)"
		}
		burst, state := "any", "a string"
		if s.Window {
			burst = "= limit"
		}
		if s.Log {
			state = "a sorted set, one entry per unit"
		}
		max := "10^15"
		if s.MaxLimit != 1_000_000_000_000_000 {
			max = fmt.Sprintf("%d,%03d", s.MaxLimit/1000, s.MaxLimit%1000)
		}
		row := fmt.Sprintf("\n| %s | %s | %s | %s | %s | ", name, s.Summary, burst, state, max)
		if !strings.Contains(readme, row) {
			t.Errorf("README.md's algorithm table lacks the row the manifest gives for %s; it should start:\n%s", s.Name, row[1:])
		}
	}
}

// The annotated call in the README is what the script replies: the block
// loads a script into $SHA, and each "$ redis-cli EVALSHA" line is run on an
// embedded Redis with a stopped clock; the lines after it are redis-cli's
// rendering of the reply. -update rewrites the block.
func TestReadmeScriptCall(t *testing.T) {
	const start = "```console\n$ SHA=$(redis-cli -x SCRIPT LOAD < "
	readme := filepath.Join(root, "README.md")
	session := readmetest.Block(t, readme, start)

	mr := miniredis.RunT(t)
	mr.SetTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	ctx := context.Background()
	var want strings.Builder
	calls := 0
	loaded := "" // $SHA: the SHA1 of the script the block loaded
	for _, line := range strings.SplitAfter(session, "\n") {
		if !strings.HasPrefix(line, "$ ") {
			continue
		}
		want.WriteString(line)
		args := strings.Fields(line[2:])
		// redis-cli -x sends the file's bytes as they are, so the SHA1 is the
		// one `redisrate scripts` lists (spec.SHA1); "$(cat FILE)" would drop
		// the final newline and give another.
		file, isLoad := strings.CutPrefix(strings.TrimSpace(line), `$ SHA=$(redis-cli -x SCRIPT LOAD < scripts/`)
		switch {
		case isLoad:
			spec, ok := scripts.Lookup(strings.TrimSuffix(file, `.lua)`))
			if !ok {
				t.Fatalf("%q: no such script", line)
			}
			onDisk, err := os.ReadFile(filepath.Join(root, "scripts", spec.Name+".lua"))
			if err != nil {
				t.Fatal(err)
			}
			sha, err := rdb.ScriptLoad(ctx, string(onDisk)).Result()
			if err != nil {
				t.Fatal(err)
			}
			if sha != spec.SHA1 {
				t.Errorf("%q loads SHA1 %s; redisrate scripts lists %s", line, sha, spec.SHA1)
			}
			loaded = sha
		case len(args) > 4 && args[1] == "EVALSHA" && args[3] == "1":
			calls++
			argv := make([]any, len(args)-5)
			for k, a := range args[5:] {
				argv[k] = a
			}
			sha := args[2]
			if sha == "$SHA" {
				sha = loaded
			}
			reply, err := rdb.EvalSha(ctx, sha, []string{args[4]}, argv...).Int64Slice()
			if err != nil {
				fmt.Fprintf(&want, "(error) %v\n", err)
				continue
			}
			for k, v := range reply {
				fmt.Fprintf(&want, "%d) (integer) %d\n", k+1, v)
			}
		default:
			t.Fatalf("%q: only SCRIPT LOAD and EVALSHA with one key run here", line)
		}
	}
	if calls == 0 {
		t.Fatal("the block makes no EVALSHA call")
	}
	readmetest.Golden(t, readme, start, want.String(), *update, "go test ./internal/readmetest -run ScriptCall -update")
}

// The README's line on CONTRACT.md names its version and counts its
// guarantees as CONTRACT.md has them (it said v2 and eleven after v2.1 added
// guarantee 12).
func TestReadmeNamesTheContract(t *testing.T) {
	contract := read(t, "CONTRACT.md")
	version := regexp.MustCompile(`^# The script contract \((v[0-9.]+)\)\n`).FindStringSubmatch(contract)
	if version == nil {
		t.Fatal("CONTRACT.md does not open with \"# The script contract (vN)\"")
	}
	_, guarantees, _ := strings.Cut(contract, "\n## Guarantees\n")
	guarantees, _, _ = strings.Cut(guarantees, "\n## ")
	n := len(regexp.MustCompile(`(?m)^[0-9]+\. `).FindAllString(guarantees, -1))
	words := []string{"", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen"}
	if n == 0 || n >= len(words) {
		t.Fatalf("CONTRACT.md's Guarantees: %d numbered items", n)
	}
	want := "[CONTRACT.md](CONTRACT.md): the scripts' contract (" + version[1] + "), binding on every script: arguments, reply, errors and " + words[n] + " guarantees"
	if readme := strings.Join(strings.Fields(read(t, "README.md")), " "); !strings.Contains(readme, want) {
		t.Errorf("README.md does not describe CONTRACT.md as %q", want)
	}
}
