package redisrate_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redisrate/redisrate"
)

// records is a slog.Handler that keeps every record, at every level.
type records struct {
	mu  sync.Mutex
	all []slog.Record
}

func (h *records) Enabled(context.Context, slog.Level) bool { return true }
func (h *records) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	h.all = append(h.all, r.Clone())
	h.mu.Unlock()
	return nil
}
func (h *records) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *records) WithGroup(string) slog.Handler      { return h }

// TestGoRedisLogRoute: with go-redis's log routed as Example_goRedisLog
// routes it, an outage met by 32 concurrent calls logs one line at level
// Warn and above (the Limiter's), and go-redis's own lines arrive at level
// Debug, marked source=go-redis (issue 22: 24 to 39 "failed to dial" lines
// beside the one Warn).
func TestGoRedisLogRoute(t *testing.T) {
	var h records
	logger := slog.New(&h)
	redis.SetLogger(goRedisLog{logger})
	t.Cleanup(func() { redis.SetLogger(goRedisLog{slog.New(slog.NewTextHandler(io.Discard, nil))}) })

	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialerRetries: 1, DialerRetryTimeout: time.Millisecond}) // no retry wait: the dial's error, not the deadline, reaches the log line at once
	defer rdb.Close()
	meetOutage(redisrate.NewLimiter(rdb, redisrate.WithLogger(logger), redisrate.WithCircuitBreaker(0)))

	h.mu.Lock()
	defer h.mu.Unlock()
	var above, fromRedis int
	for _, r := range h.all {
		source := ""
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "source" {
				source = a.Value.String()
			}
			return true
		})
		switch {
		case r.Level >= slog.LevelInfo:
			above++
			if !strings.HasPrefix(r.Message, "redisrate: Redis cannot decide") {
				t.Errorf("at level %v: %q; want only the Limiter's line", r.Level, r.Message)
			}
		case source == "go-redis" && strings.Contains(r.Message, "failed to dial"):
			fromRedis++
		default:
			t.Errorf("a record at level %v without source=go-redis: %q", r.Level, r.Message)
		}
	}
	if above != 1 {
		t.Errorf("%d records at level Info and above; want 1: an outage logs once", above)
	}
	if fromRedis == 0 {
		t.Error("no go-redis line at level Debug: its log did not reach the logger")
	}
	t.Logf("go-redis logged %d lines at level Debug; 1 line above", fromRedis)
}
