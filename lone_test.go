package redisrate

import (
	"context"
	"errors"
	"testing"

	"github.com/redis/go-redis/v9"
)

// TestLoneCallNoResendAfterCut: a call sent alone (nothing else in flight)
// whose connection breaks after Redis ran it, mid-reply, is not sent
// again, although go-redis retries a command after a network error
// (MaxRetries: 3): a refund made twice would give back twice what was
// taken. Counted on what reaches Redis through a proxy, on miniredis and
// redis-server, on go-redis's default client (the call sent on a sender)
// and on one with ContextTimeoutEnabled (sent on the caller's goroutine).
func TestLoneCallNoResendAfterCut(t *testing.T) {
	servers(t, func(t *testing.T, addr string, _ *fakeRedis) {
		for _, cte := range []bool{false, true} {
			name := "default_client"
			if cte {
				name = "context_timeout_enabled"
			}
			t.Run(name, func(t *testing.T) {
				p := newCutProxy(t, addr)
				rdb := redis.NewClient(&redis.Options{Addr: p.addr(), Protocol: 2, MaxRetries: 3, ContextTimeoutEnabled: cte})
				t.Cleanup(func() { _ = rdb.Close() })
				l := testLimiter(rdb, WithCircuitBreaker(0))
				ctx := context.Background()
				if _, err := l.Allow(ctx, "warm", PerHour(100)); err != nil { // the script loaded, the connection made
					t.Fatal(err)
				}
				for _, r := range []Request{
					{Kind: KindAllow, Key: "lone", Limits: []Limit{PerHour(100)}},
					{Kind: KindRefund, Key: "lone", Limits: []Limit{PerHour(100)}, N: 1},
					{Kind: KindForce, Key: "lone", Limits: []Limit{PerHour(100)}, N: 1},
				} {
					before, cuts := p.scriptCalls(), p.cuts.Load()
					p.armed.Store(int64(before + 1))
					_, err := l.Decide(ctx, r)
					if got := p.scriptCalls() - before; got != 1 {
						t.Errorf("%v: %d script calls reached Redis; want the call once", r.Kind, got)
					}
					if p.cuts.Load() == cuts {
						t.Fatalf("%v: the proxy cut nothing (err %v)", r.Kind, err)
					}
					if !errors.Is(err, ErrUnavailable) {
						t.Errorf("%v: %v; want ErrUnavailable for a call whose answer was cut", r.Kind, err)
					}
				}
			})
		}
	})
}
