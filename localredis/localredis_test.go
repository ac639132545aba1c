package localredis

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redisrate/redisrate"
)

// The janitor expires keys as their TTLs run out, so the in-process Redis
// holds only live state.
func TestJanitorExpires(t *testing.T) {
	defer func(d time.Duration) { janitorEvery = d }(janitorEvery)
	janitorEvery = 5 * time.Millisecond
	s, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if _, err := s.Limiter().Allow(ctx, "k", redisrate.Per(1, 300*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if n := s.mr.DB(0).Keys(); len(n) != 1 {
		t.Fatalf("keys %v, want k", n)
	}
	// The janitor runs on the real clock, as the scripts' TIME does.
	for deadline := time.Now().Add(5 * time.Second); len(s.mr.DB(0).Keys()) != 0; {
		if time.Now().After(deadline) {
			t.Fatalf("keys %v still there 5s after their 300ms TTL", s.mr.DB(0).Keys())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal("second Close:", err)
	}
	if _, err := s.Limiter().Allow(ctx, "k", redisrate.PerSecond(1)); err == nil {
		t.Fatal("Allow on a closed Server succeeded")
	}
}

// TestDecisionTimeout: a call that the in-process Redis answers late, as a
// busy process would (here its lock is held for 400 ms), is still decided
// by it: its Limiters wait decisionTimeout (2 s), not the default 200 ms.
// A Limiter whose options set a shorter timeout gives up at that one.
func TestDecisionTimeout(t *testing.T) {
	s, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	busy := func() {
		s.mr.Lock()
		time.AfterFunc(400*time.Millisecond, s.mr.Unlock)
	}
	busy()
	res, err := s.Limiter().Allow(ctx, "late", redisrate.PerSecond(1))
	if err != nil || !res.Allowed || res.Degraded() {
		t.Fatalf("a late answer: %+v, %v; want it decided by the in-process Redis", res, err)
	}
	busy()
	if _, err := s.Limiter(redisrate.WithDecisionTimeout(50*time.Millisecond)).Allow(ctx, "short", redisrate.PerSecond(1)); !errors.Is(err, redisrate.ErrUnavailable) {
		t.Fatalf("a 50 ms decision timeout set by the caller: %v; want ErrUnavailable", err)
	}
}
