// Command testsummary reads `go test -json` on its standard input and
// prints what `go test` prints without -json: each package's result, and
// the output of the tests that failed. It keeps every skipped test with
// its reason, appending them to the file of -skips; with -report it prints
// that file as a loud summary instead, so that `make test` ends by saying
// what it did not run (an interpreter, a client library, a server that is
// not installed) rather than passing in silence. It exits 1 when a test or
// a build failed, or when it saw no package's result.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// maxReason cuts a skip's reason (a tool's whole error message) to a line.
const maxReason = 300

type event struct {
	Action  string
	Package string
	Test    string
	Output  string
}

func main() {
	skips := flag.String("skips", "", "append each skipped test, with its reason, to this file")
	report := flag.Bool("report", false, "print the skipped tests of the -skips file, loudly, and exit")
	flag.Parse()
	if *report {
		os.Exit(printReport(os.Stdout, *skips))
	}
	ok, skipped := summarize(os.Stdin, os.Stdout)
	if *skips != "" && len(skipped) > 0 {
		f, err := os.OpenFile(*skips, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			fmt.Fprintln(os.Stderr, "testsummary:", err)
			os.Exit(1)
		}
		for _, s := range skipped {
			fmt.Fprintln(f, s)
		}
		if err := f.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "testsummary:", err)
			os.Exit(1)
		}
	}
	if !ok {
		os.Exit(1)
	}
}

// summarize copies the results of the events of in to out, and returns
// whether everything passed and the skipped tests, one line each.
func summarize(in io.Reader, out io.Writer) (ok bool, skipped []string) {
	outputs := map[string][]string{} // by package and test
	results, failed := 0, false
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil {
			fmt.Fprintln(out, string(line)) // not an event: go test's own message
			continue
		}
		key := e.Package + "\x00" + e.Test
		switch {
		case e.Action == "build-output":
			fmt.Fprint(out, e.Output)
		case e.Action == "build-fail":
			failed = true
		case e.Test == "" && e.Action == "output":
			if e.Output != "PASS\n" {
				fmt.Fprint(out, e.Output)
			}
		case e.Test == "" && (e.Action == "pass" || e.Action == "fail" || e.Action == "skip"):
			results++
			failed = failed || e.Action == "fail"
		case e.Action == "output":
			outputs[key] = append(outputs[key], e.Output)
		case e.Action == "fail":
			failed = true
			fmt.Fprint(out, strings.Join(outputs[key], ""))
			delete(outputs, key)
		case e.Action == "skip":
			var why []string
			for _, o := range outputs[key] {
				o = strings.TrimSpace(o)
				if o == "" || strings.HasPrefix(o, "=== ") || strings.HasPrefix(o, "--- SKIP") {
					continue
				}
				why = append(why, o)
			}
			reason := strings.Join(why, " ")
			if len(reason) > maxReason {
				reason = reason[:maxReason] + " ..."
			}
			skipped = append(skipped, fmt.Sprintf("%s %s: %s", e.Package, e.Test, reason))
			delete(outputs, key)
		case e.Action == "pass":
			delete(outputs, key)
		}
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintln(out, "testsummary:", err)
		return false, skipped
	}
	if results == 0 {
		fmt.Fprintln(out, "testsummary: no package's result: go test did not run")
		return false, skipped
	}
	return !failed, skipped
}

// printReport prints the skipped tests of file, if any, between banners.
func printReport(out io.Writer, file string) int {
	b, err := os.ReadFile(file)
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		return 1
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) == 1 && lines[0] == "" {
		return 0
	}
	sort.Strings(lines)
	banner := strings.Repeat("!", 78)
	fmt.Fprintf(out, "%s\n!!! SKIPPED: %d test(s) did not run here. Each says why (and what to install).\n%s\n", banner, len(lines), banner)
	for _, l := range lines {
		fmt.Fprintln(out, "SKIPPED", l)
	}
	fmt.Fprintln(out, banner)
	return 0
}
