package integration_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/redisrate/redisrate"
	"github.com/redisrate/redisrate/integration_test/internal/redistest"
)

// specialKeys are keys a limiter must take as they are: empty, 512 KiB,
// binary, with hash tags (and things that look like half of one).
func specialKeys() map[string]string {
	return map[string]string{
		"empty":        "",
		"512KiB":       strings.Repeat("k", 512<<10),
		"binary":       "\x00\xff\r\n\t \"'\\%s{}",
		"utf8":         "ключ:用户:🔑",
		"hashtag":      "{user:42}:login",
		"hashtag2":     "{user:42}:payment",
		"empty-tag":    "{}:k",
		"open-brace":   "{k",
		"glob":         "*?[a-z]",
		"nul-in-tag":   "{\x00}",
		"lua-pattern%": "%d+.-",
	}
}

// checkKeys runs every algorithm on every special key: 3 per minute gives
// 3 admissions and a denial, Reset starts again, nothing else is touched.
func checkKeys(t *testing.T, lim *redisrate.Limiter, prefix string) {
	t.Helper()
	ctx := context.Background()
	for name, key := range specialKeys() {
		for _, algo := range redistest.Algorithms {
			limit := redisrate.PerMinute(3).WithAlgorithm(algo)
			k := prefix + algo.String() + key
			for i := range 4 {
				res, err := lim.Allow(ctx, k, limit)
				if err != nil {
					t.Fatalf("%s key (%d bytes), %s, call %d: %v", name, len(k), algo, i+1, err)
				}
				if res.Allowed != (i < 3) {
					t.Fatalf("%s key, %s, call %d: %v", name, algo, i+1, res)
				}
			}
			if err := lim.Reset(ctx, k); err != nil {
				t.Fatalf("%s key, %s: Reset: %v", name, algo, err)
			}
			if res, err := lim.Allow(ctx, k, limit); err != nil || res.Remaining != 2 {
				t.Fatalf("%s key, %s, after Reset: %v, %v", name, algo, res, err)
			}
		}
	}
}

// Special keys on a standalone Redis, and a key past Redis's own 512 MB
// limit is out of reach: a key that large never gets there, so the test
// stops at what a proxy commonly allows (512 KiB) and checks errors stay
// errors.
func TestReliabilityKeys(t *testing.T) {
	srv := redistest.StartServer(t, redistest.Options{})
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = rdb.Close() })
	checkKeys(t, redistest.NewLimiter(rdb), "")
	// The Error of a huge key stays readable: the key is cut in the text.
	lim := redistest.NewLimiter(rdb)
	huge := strings.Repeat("h", 512<<10)
	if err := rdb.Set(context.Background(), huge, "user data", 0).Err(); err != nil {
		t.Fatal(err)
	}
	_, err := lim.Allow(context.Background(), huge, redisrate.PerSecond(1))
	if !errors.Is(err, redisrate.ErrForeignKey) || len(err.Error()) > 400 {
		t.Fatalf("foreign 512 KiB key: %d-byte error %.200q, want ErrForeignKey, short", len(err.Error()), err)
	}
	t.Logf("a foreign 512 KiB key: a %d-byte error: %s", len(err.Error()), err)
}
