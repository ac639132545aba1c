package examples

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// settleLines are what settle.sh prints, each with the units the call
// must report (reply field 7) and the least remaining it may show: the
// bucket drains between the calls, so remaining may grow, never shrink.
var settleLines = []struct {
	prefix         string
	units, minLeft int64
}{
	{"reserve 1000: ", 1000, 9000},
	{"settle, 700 back: ", 700, 9700},
	{"lease up to 50: ", 50, 9650},
	{"return 30: ", 30, 9680},
}

var settleRE = regexp.MustCompile(`^allowed=1 remaining=(\d+) units=(\d+)$`)

// checkSettle returns why out is not what settle.sh prints on a fresh key.
func checkSettle(out string) string {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != len(settleLines) {
		return "want " + strconv.Itoa(len(settleLines)) + " lines"
	}
	for i, want := range settleLines {
		rest, ok := strings.CutPrefix(lines[i], want.prefix)
		m := settleRE.FindStringSubmatch(rest)
		if !ok || m == nil {
			return "line " + strconv.Itoa(i+1) + " is not " + strconv.Quote(want.prefix+"allowed=1 remaining=N units=N")
		}
		left, _ := strconv.ParseInt(m[1], 10, 64)
		units, _ := strconv.ParseInt(m[2], 10, 64)
		if units != want.units || left < want.minLeft || left > 10000 {
			return lines[i] + ": want units=" + strconv.FormatInt(want.units, 10) + " and remaining from " + strconv.FormatInt(want.minLeft, 10)
		}
	}
	return ""
}

// TestSettleSnippet runs examples/redis-cli/settle.sh against a real Redis:
// a reservation settled by refund and a lease by upto, each one call, with
// the units each recorded; docs/other-languages.md shows it verbatim.
func TestSettleSnippet(t *testing.T) {
	s := snippets(t)[0] // redis-cli
	s.need(t)
	addr := startRedis(t)
	out, err := runSnippet(addr, []string{"sh", "redis-cli/settle.sh"}, "KEY=settle:test")
	if err != nil {
		t.Fatalf("settle.sh: %v\n%s", err, out)
	}
	if why := checkSettle(out); why != "" {
		t.Errorf("settle.sh printed:\n%s%s", out, why)
	}
	doc, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("redis-cli/settle.sh")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), "```sh\n"+string(src)+"```\n") {
		t.Errorf("%s lacks examples/redis-cli/settle.sh verbatim", docPath)
	}
	if shown := outputBlock(t, doc, "It prints, on a fresh key:\n\n```text\n"); shown != "" {
		if why := checkSettle(shown); why != "" {
			t.Errorf("%s shows output settle.sh does not print: %s", docPath, why)
		}
	}
}
