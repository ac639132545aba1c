// Package integration runs the Go client and the scripts it sends against a
// real Redis: the one at REDIS_ADDR, else redis-server from PATH started on
// a free 127.0.0.1 port, else a redis:7 container where a Docker engine
// answers; otherwise every test skips and says how to run it.
//
// What only a real server shows is here: its real clock, 64 goroutines on
// one key, EVALSHA_RO and FCALL_RO (on replicas too), the Functions
// library, SCRIPT FLUSH and FUNCTION DELETE, ACL users, and the
// reliability tests (Cluster, Sentinel, AOF, faults). The scripts' own
// contract tables and fuzz corpus run on real Redis in package scripts;
// the hardening tests (TLS, ACL, clocks, eviction, resharding, breaker)
// are in ./hardening.
package integration

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redisrate/redisrate"
	"github.com/redisrate/redisrate/integration_test/internal/redistest"
	"github.com/redisrate/redisrate/scripts"
)

func TestMain(m *testing.M) {
	if os.Getenv(redistest.EnvAddr) != "" {
		fmt.Fprintf(os.Stderr, "integration: testing against %s=%s (keys under redisrate-it:*, deleted afterwards)\n", redistest.EnvAddr, os.Getenv(redistest.EnvAddr))
	} else if src := redistest.Source(); src != "none" {
		fmt.Fprintf(os.Stderr, "integration: fresh servers from %s\n", src)
	} else {
		fmt.Fprintf(os.Stderr, "integration: %s\n", redistest.HowTo)
	}
	os.Exit(m.Run())
}

// openRedis returns the Redis for a test (see redistest.Open).
func openRedis(t *testing.T) *redistest.Redis {
	t.Helper()
	return redistest.Open(t)
}

// startRedis starts a server of the test's own with extra config args; it is
// stopped when the test ends, or earlier by stop.
func startRedis(t *testing.T, extraArgs ...string) (addr string, stop func()) {
	t.Helper()
	return redistest.Start(t, extraArgs...)
}

func newClient(t *testing.T, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// needRedis7 skips t on a server older than 7 (EVALSHA_RO, EVAL_RO).
func needRedis7(t *testing.T, c *redis.Client) {
	t.Helper()
	if major := serverMajor(t, c); major < 7 {
		t.Skipf("needs Redis 7 or later for EVALSHA_RO; this server is %d.x", major)
	}
}

// serverMajor is the major version of the server's redis_version (Valkey 8
// reports 7.2.4, the Redis it is compatible with).
func serverMajor(t *testing.T, c *redis.Client) int {
	t.Helper()
	v := redistest.Info(t, c, "server", "redis_version")
	major, err := strconv.Atoi(strings.SplitN(v, ".", 2)[0])
	if err != nil {
		t.Fatalf("INFO server: redis_version:%s", v)
	}
	return major
}

// algoCase is one algorithm with a short limit for real-time tests: tens
// of milliseconds, so that waiting for a refill costs little.
type algoCase struct {
	algo  redisrate.Algorithm
	limit redisrate.Limit
}

// shortLimits are rate units per period with a larger burst for the buckets.
func shortLimits(rate int64, period time.Duration, burst int64) []algoCase {
	var out []algoCase
	for _, a := range redistest.Algorithms {
		l := redisrate.Per(rate, period).WithAlgorithm(a)
		if !isWindow(a) {
			l = l.WithBurst(burst)
		}
		out = append(out, algoCase{algo: a, limit: l})
	}
	return out
}

// isWindow reports a window algorithm (its capacity is its rate): the
// scripts refuse it a burst apart from its limit, and so does Validate,
// which reads the scripts' manifest.
func isWindow(a redisrate.Algorithm) bool {
	return redisrate.Per(1, time.Second).WithAlgorithm(a).WithBurst(2).Validate() != nil
}

// serverTime is the server's clock in µs.
func serverTime(t testing.TB, c *redis.Client) int64 {
	t.Helper()
	tm, err := c.Time(context.Background()).Result()
	if err != nil {
		t.Fatalf("TIME: %v", err)
	}
	return tm.UnixMicro()
}

// bracketed is a raw script reply with the server's clock read right before
// and right after it, in the same MULTI: the script read its TIME between
// before and after, within microseconds.
type bracketed struct {
	reply         []int64
	before, after int64 // µs
}

// evalBracketed runs script s on key with args inside MULTI, between two
// TIME calls. The script must be loaded (MULTI queues EVALSHA; a NOSCRIPT
// would only show at EXEC).
func evalBracketed(t testing.TB, c *redis.Client, s scripts.Spec, key string, args ...any) bracketed {
	t.Helper()
	ctx := context.Background()
	var t0, t1 *redis.TimeCmd
	var ev *redis.Cmd
	_, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		t0 = p.Time(ctx)
		ev = p.EvalSha(ctx, s.SHA1, []string{key}, args...)
		t1 = p.Time(ctx)
		return nil
	})
	if err != nil {
		t.Fatalf("MULTI TIME EVALSHA %s TIME: %v", s.Name, err)
	}
	v, err := ev.Result()
	if err != nil {
		t.Fatalf("EVALSHA %s %s %v: %v", s.Name, key, args, err)
	}
	return bracketed{reply: ints(t, v), before: t0.Val().UnixMicro(), after: t1.Val().UnixMicro()}
}

func ints(t testing.TB, v any) []int64 {
	t.Helper()
	arr, ok := v.([]any)
	if !ok || len(arr) < 6 {
		t.Fatalf("reply %#v: want an array of 6 integers", v)
	}
	out := make([]int64, len(arr))
	for i, x := range arr {
		n, ok := x.(int64)
		if !ok {
			t.Fatalf("reply %#v: field %d is %T", v, i+1, x)
		}
		out[i] = n
	}
	return out
}

// loadScripts loads every script, as a deploy pipeline would.
func loadScripts(t testing.TB, c *redis.Client) {
	t.Helper()
	for _, s := range scripts.Specs() {
		sha, err := c.ScriptLoad(context.Background(), s.Source).Result()
		if err != nil {
			t.Fatalf("SCRIPT LOAD %s: %v", s.Name, err)
		}
		if sha != s.SHA1 {
			t.Fatalf("SCRIPT LOAD %s gave %s, scripts.Specs says %s", s.Name, sha, s.SHA1)
		}
	}
}

// loadLibrary loads the Functions library (FUNCTION LOAD REPLACE), as a
// deploy pipeline would, so that Limiters made afterwards call FCALL.
func loadLibrary(t testing.TB, c *redis.Client) {
	t.Helper()
	name, err := c.FunctionLoadReplace(context.Background(), scripts.Library).Result()
	if err != nil {
		t.Fatalf("FUNCTION LOAD REPLACE: %v", err)
	}
	if name != scripts.LibraryName {
		t.Fatalf("FUNCTION LOAD REPLACE loaded %q, want %q", name, scripts.LibraryName)
	}
}

// script is a's script, found by its name.
func script(t testing.TB, a redisrate.Algorithm) scripts.Spec {
	t.Helper()
	s, ok := scripts.Lookup(a.String())
	if !ok {
		t.Fatalf("no script for algorithm %d", a)
	}
	return s
}

// rawArgs is the ARGV of a call as the Go client would send it.
func rawArgs(t testing.TB, n int64, check bool, limits ...redisrate.Limit) []any {
	t.Helper()
	kind := redisrate.KindAllow
	switch {
	case check:
		kind = redisrate.KindCheck
	case n == 0:
		kind = redisrate.KindPeek
	}
	args, err := redisrate.Args(kind, n, limits...)
	if err != nil {
		t.Fatal(err)
	}
	return args
}
