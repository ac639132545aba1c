package redisrate_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redisrate/redisrate"
)

// goRedisLog sends go-redis's own log lines to a slog.Logger at level
// Debug, marked source=go-redis: set it with redis.SetLogger, once, at
// start-up. go-redis logs each failed dial of each connection (dozens of
// lines as an outage begins), which the Limiter's WithLogger reports once:
// at level Info an outage then logs one line, and at level Debug go-redis's
// detail is still there. docs/observability.md shows it (checked by
// internal/readmetest).
//
// goRedisLog:start
type goRedisLog struct{ logger *slog.Logger }

func (g goRedisLog) Printf(ctx context.Context, format string, v ...any) {
	if g.logger.Enabled(ctx, slog.LevelDebug) {
		g.logger.DebugContext(ctx, fmt.Sprintf(format, v...), slog.String("source", "go-redis"))
	}
}

// goRedisLog:end

// meetOutage makes 32 calls at once, as a busy service does when Redis
// goes away.
func meetOutage(limiter *redisrate.Limiter) {
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = limiter.Allow(context.Background(), "user:42", redisrate.PerSecond(5))
		}()
	}
	wg.Wait()
}

// An outage with go-redis's log routed to the service's logger: 32
// concurrent calls meet a Redis that refuses connections, and the log, at
// level Info, says so once.
func Example_goRedisLog() {
	noTime := func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{ReplaceAttr: noTime}))
	redis.SetLogger(goRedisLog{logger})

	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialerRetries: 1, DialerRetryTimeout: time.Millisecond}) // down
	defer rdb.Close()
	meetOutage(redisrate.NewLimiter(rdb, redisrate.WithLogger(logger)))
	// Output:
	// level=WARN msg="redisrate: Redis cannot decide; calls follow the fallback and the failure policy until it answers again" error="dial tcp 127.0.0.1:1: connect: connection refused" cause="connection refused" script=gcra key=user:… policy=fail-error fallback=false probe_every=200ms
}
