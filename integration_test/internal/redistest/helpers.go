package redistest

// What the module's test packages (integration, integration_test and
// hardening) share besides servers: the algorithms, the skip of a test
// that needs local servers, FIGURE lines, polling with a deadline, the
// servers' command statistics and the soak switch.

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redisrate/redisrate"
	"github.com/redisrate/redisrate/scripts"
)

// Algorithms are every algorithm the scripts implement, in the order of
// scripts.Specs: a script added there is tested here without an edit.
var Algorithms = algorithms()

func algorithms() []redisrate.Algorithm {
	var out []redisrate.Algorithm
	for _, s := range scripts.Specs() {
		a, err := redisrate.ParseAlgorithm(s.Name)
		if err != nil {
			panic(fmt.Sprintf("scripts.Specs has %q, which redisrate does not know: %v", s.Name, err))
		}
		out = append(out, a)
	}
	return out
}

// NeedLocal skips t unless fresh servers are local processes of ServerBin,
// as a test needs that kills, restarts, pauses, clusters or replicates
// them (a container announces addresses the host cannot reach, and cannot
// be killed from here); needs says what for. In CI (CI=true), which
// installs the servers, it fails t instead, so that these tests never
// quietly stop running.
func NeedLocal(t testing.TB, needs string) {
	t.Helper()
	if Local() {
		return
	}
	msg := fmt.Sprintf("needs %s on PATH (%s)", ServerBin(), needs)
	noRedis(t, msg+": "+HowTo)
}

// Report logs a figure for the docs in the one greppable format of these
// tests: "FIGURE name: value".
func Report(t testing.TB, name, format string, args ...any) {
	t.Helper()
	t.Logf("FIGURE %s: %s", name, fmt.Sprintf(format, args...))
}

// WaitFor polls cond every 10 ms until it holds, and fails t when it does
// not within the deadline: what names what was awaited.
func WaitFor(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s", within, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// CommandStats are a server's calls per command, from INFO commandstats:
// "evalsha_ro" for cmdstat_evalsha_ro. A command never called is absent
// (0). Calls a script makes count too.
type CommandStats map[string]int64

// ReadCommandStats reads c's INFO commandstats.
func ReadCommandStats(t testing.TB, c *redis.Client) CommandStats {
	t.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatalf("INFO commandstats: %v", err)
	}
	out := CommandStats{}
	for line := range strings.Lines(info) {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		name, ok2 := strings.CutPrefix(name, "cmdstat_")
		if !ok || !ok2 {
			continue
		}
		calls, _, _ := strings.Cut(strings.TrimPrefix(rest, "calls="), ",")
		out[name], _ = strconv.ParseInt(calls, 10, 64)
	}
	return out
}

// Sum is the calls of cmds.
func (s CommandStats) Sum(cmds ...string) int64 {
	var n int64
	for _, c := range cmds {
		n += s[c]
	}
	return n
}

// Since is the calls of cmds made between before and s.
func (s CommandStats) Since(before CommandStats, cmds ...string) int64 {
	return s.Sum(cmds...) - before.Sum(cmds...)
}

// Info is field of c's INFO section, e.g. Info(t, c, "server",
// "redis_version"); it fails t when the server does not give it.
func Info(t testing.TB, c *redis.Client, section, field string) string {
	t.Helper()
	info, err := c.Info(context.Background(), section).Result()
	if err != nil {
		t.Fatalf("INFO %s: %v", section, err)
	}
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v
		}
	}
	t.Fatalf("INFO %s gives no %s", section, field)
	return ""
}

// Writes is how many writes the server has made since it started (INFO
// persistence rdb_changes_since_last_save; the servers this package starts
// never save): unchanged across a call, the call wrote nothing, not even a
// TTL. Only a server of the test's own can tell, where nobody else writes.
func Writes(t testing.TB, c *redis.Client) int64 {
	t.Helper()
	v := Info(t, c, "persistence", "rdb_changes_since_last_save")
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		t.Fatalf("INFO persistence: rdb_changes_since_last_save:%s", v)
	}
	return n
}

// AbsDur is |d|.
func AbsDur(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}

// soak lengthens the load phases of the reliability and hardening tests.
// CI keeps them short; a soak run is e.g.
//
//	cd integration_test && go test -run Reliability -soak 10m -timeout 3h .
//
// or REDISRATE_SOAK=10m GOFLAGS=-timeout=3h make test (a phase of 10 minutes
// outlasts go test's default timeout).
var soak = flag.Duration("soak", 0, "how long each load phase of the reliability and hardening tests runs (default: short, for CI; or $REDISRATE_SOAK)")

// LoadFor is how long a load phase runs: short, unless -soak or
// REDISRATE_SOAK (e.g. 10m) asks for a soak.
func LoadFor(t testing.TB, short time.Duration) time.Duration {
	t.Helper()
	if *soak > 0 {
		return *soak
	}
	if env := os.Getenv("REDISRATE_SOAK"); env != "" {
		d, err := time.ParseDuration(env)
		if err != nil || d <= 0 {
			t.Fatalf("REDISRATE_SOAK=%q: want a positive duration such as 10m (%v)", env, err)
		}
		return d
	}
	return short
}
