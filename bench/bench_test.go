package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redisrate/redisrate/bench/internal/redisserver"

	redis_rate "github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
)

// TestShortRun runs the whole program in its short mode, so that CI
// exercises every measurement and prints the table: a regression shows
// there. It asserts no timings, only that every section is produced and
// the generated block lands in the file between its markers.
func TestShortRun(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		redisserver.Missing(t, "no redis-server on PATH: the benchmark needs a real Redis")
	}
	out := filepath.Join(t.TempDir(), "BENCHMARKS.md")
	if err := os.WriteFile(out, []byte("# prose kept\n\n"+beginMarker+"\nold\n"+endMarker+"\n\nprose after\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	cfg := config{short: true, out: out, server: "redis-server", args: []string{"-short"}}
	if err := run(context.Background(), cfg, &buf); err != nil {
		t.Fatalf("%v\n%s", err, buf.String())
	}
	t.Log("\n" + buf.String())
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	s := string(got)
	for _, want := range []string{
		"# prose kept", "prose after", "cd bench && go run . -short",
		"### Decisions per second", "### Redis CPU per call", "### Client latency",
		"### Targets", "### Go client allocations", "### Memory per key",
		"### Sliding log", "### What a decision costs", "### Batches", "### Deny cache",
		"| gcra |", "| peer (redis_rate) |", "| return 1 (ceiling) |",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("the report lacks %q", want)
		}
	}
	if strings.Contains(s, "\nold\n") || strings.Count(s, beginMarker) != 1 {
		t.Errorf("the generated block was not replaced in place:\n%s", s)
	}
	if strings.Contains(s, "NaN") {
		t.Errorf("the report has NaN cells:\n%s", s)
	}
}

// BenchmarkPeerAllow is the peer's Allow on a real Redis, for
// `go test -bench . -benchmem`: its allocations per decision, to compare
// with BenchmarkAllow in the root package.
func BenchmarkPeerAllow(b *testing.B) {
	ctx := context.Background()
	srv := benchServer(b)
	rdb := benchClient(b, &redis.Options{Addr: srv.Addr})
	l := redis_rate.NewLimiter(rdb)
	lim := redis_rate.Limit{Rate: 1e9, Burst: 1e9, Period: time.Second}
	if _, err := l.Allow(ctx, "bench", lim); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := l.Allow(ctx, "bench", lim); err != nil {
			b.Fatal(err)
		}
	}
}

// The allocation target is met only when the plain Allow meets it; a key
// prefix's extra allocation is said apart.
func TestAllocsMet(t *testing.T) {
	for _, c := range []struct {
		plain, prefixed float64
		want            string
	}{{12, 12, "yes"}, {12, 13, "without a key prefix"}, {14, 15, "**no**"}, {13, 12, "**no**"}} {
		if got := allocsMet(c.plain, c.prefixed); got != c.want {
			t.Errorf("allocsMet(%v, %v) = %q, want %q", c.plain, c.prefixed, got, c.want)
		}
	}
}

// TestHotShortRun runs the hot-key mode briefly: 64 goroutines on one key,
// the Limiter and the peer, then a limit they exhaust, whose units
// admitted the run holds to guarantee 4's bound (it fails otherwise). It
// asserts no speed: that is the full run's figure, on a quiet machine.
func TestHotShortRun(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		redisserver.Missing(t, "no redis-server on PATH: the benchmark needs a real Redis")
	}
	var buf bytes.Buffer
	cfg := config{short: true, hot: true, server: "redis-server", args: []string{"-hot", "-short"}}
	if err := run(context.Background(), cfg, &buf); err != nil {
		t.Fatalf("%v\n%s", err, buf.String())
	}
	t.Log("\n" + buf.String())
	for _, want := range []string{"### Hot key", "| redisrate (Limiter.Allow, coalescing) |", "| redis_rate v10 (Allow) |", "admitted / bound", "| 3 |"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("the hot-key report lacks %q", want)
		}
	}
}

// TestManyShortRun runs the many-keys mode briefly: 10,000 keys, uniform
// and skewed, at 1, 8 and 64 callers, the Limiter and the peer, each
// key's admissions held to guarantee 4's bound (the run fails otherwise).
// It asserts no speed: that is the full run's figure.
func TestManyShortRun(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		redisserver.Missing(t, "no redis-server on PATH: the benchmark needs a real Redis")
	}
	var buf bytes.Buffer
	cfg := config{short: true, many: true, server: "redis-server", args: []string{"-many", "-short"}}
	if err := run(context.Background(), cfg, &buf); err != nil {
		t.Fatalf("%v\n%s", err, buf.String())
	}
	t.Log("\n" + buf.String())
	for _, want := range []string{"### Many keys", "| uniform | 1 |", "| skewed | 64 |", "| uniform, ContextTimeoutEnabled | 1 |"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("the many-keys report lacks %q", want)
		}
	}
}

// benchServer starts a redis-server for a benchmark, stopped when it ends;
// without one the benchmark is skipped.
func benchServer(b *testing.B) *redisserver.Server {
	srv, err := startRedis("redis-server")
	if err != nil {
		b.Skip(err)
	}
	b.Cleanup(srv.Stop)
	return srv
}

// benchClient is a client of opts, closed when the benchmark ends.
func benchClient(b *testing.B, opts *redis.Options) *redis.Client {
	rdb := redis.NewClient(opts)
	b.Cleanup(func() { _ = rdb.Close() })
	return rdb
}
