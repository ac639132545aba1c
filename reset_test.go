package redisrate

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestResetKnowsEveryState shows that Reset deletes the state of every
// algorithm (single and several limits) and nothing else.
func TestResetKnowsEveryState(t *testing.T) {
	f := newFakeRedis(t)
	ctx := context.Background()
	l := NewLimiter(f.rdb, WithKeyPrefix("rr:"))
	for a := Algorithm(0); a < numAlgorithms; a++ {
		for _, limits := range [][]Limit{{PerMinute(5).WithAlgorithm(a)}, {PerSecond(2).WithAlgorithm(a), PerHour(9).WithAlgorithm(a)}} {
			key := a.String()
			if _, err := l.AllowMulti(ctx, key, 1, limits...); err != nil {
				t.Fatal(err)
			}
			if n := f.rdb.Exists(ctx, "rr:"+key).Val(); n != 1 {
				t.Fatalf("%s: no state was written", a)
			}
			if err := l.Reset(ctx, key); err != nil {
				t.Fatalf("%s: Reset: %v", a, err)
			}
			if n := f.rdb.Exists(ctx, "rr:"+key).Val(); n != 0 {
				t.Fatalf("%s: Reset left the state", a)
			}
			res, err := l.AllowMulti(ctx, key, 0, limits...)
			if err != nil || res.Remaining != res.Capacity {
				t.Fatalf("%s after Reset: %v, %v; want full capacity", a, res, err)
			}
		}
	}
	if err := l.Reset(ctx, "never-used"); err != nil {
		t.Fatalf("Reset of a missing key: %v", err)
	}
}

// TestResetLeavesUsersDataAlone: a key that is not limiter state is refused
// and left exactly as it was, whatever its type.
func TestResetLeavesUsersDataAlone(t *testing.T) {
	f := newFakeRedis(t)
	ctx := context.Background()
	f.rdb.Set(ctx, "order:42", "shipped", time.Hour)
	f.rdb.Set(ctx, "gcra-ish", "gcra", 0) // a tag without its numbers is still not ours
	f.rdb.RPush(ctx, "queue", "a", "b")
	f.rdb.ZAdd(ctx, "scores", redis.Z{Score: 1, Member: "alice"})
	f.rdb.HSet(ctx, "profile", "name", "bob")
	l := NewLimiter(f.rdb)
	for _, key := range []string{"order:42", "gcra-ish", "queue", "scores", "profile"} {
		before := f.dump(key)
		err := l.Reset(ctx, key)
		if !errors.Is(err, ErrForeignKey) {
			t.Errorf("Reset(%q) = %v, want ErrForeignKey", key, err)
		}
		if after := f.dump(key); after != before {
			t.Errorf("Reset(%q) changed the key: %s -> %s", key, before, after)
		}
	}
}
