package localredis

import (
	"context"
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
