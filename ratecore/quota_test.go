package ratecore

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/redisrate/redisrate"
)

// quotaRules are Rules on a miniredis of their own, every request of a
// rule of 100 a minute per client, under quota.
func quotaRules(t *testing.T, quota Quota, shadow bool) (*Rules[req], *Rule, *redisrate.Limiter) {
	t.Helper()
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	l := redisrate.NewLimiter(rdb, redisrate.WithDecisionTimeout(10*time.Second))
	r, err := New(Config[req]{Limiter: l, Name: "api", Key: own, Quota: &quota, Shadow: shadow})
	if err != nil {
		t.Fatal(err)
	}
	rule, err := r.Rule("", "Config.Limits", []redisrate.Limit{redisrate.PerMinute(100)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r, rule, l
}

// left is what a peek of key under limit says remains.
func left(t *testing.T, l *redisrate.Limiter, key string, limit redisrate.Limit) int64 {
	t.Helper()
	res, err := l.Decide(context.Background(), redisrate.Request{Kind: redisrate.KindPeek, Key: key, Limits: []redisrate.Limit{limit}})
	if err != nil {
		t.Fatal(err)
	}
	return res.Remaining
}

// TestQuotaShared: a quota of 10 a minute, leased 4 at a time, serves 10
// requests of 14 clients, whatever their own limits leave; the 4 it
// refuses get an honest wait, and their own units back.
func TestQuotaShared(t *testing.T) {
	shared := redisrate.PerMinute(10)
	r, rule, l := quotaRules(t, Quota{Key: "upstream", Limit: shared, Lease: 4, Lifetime: time.Minute}, false)
	ctx := context.Background()
	served, refused := 0, 0
	for i := range 14 {
		client := req{key: string(rune('a' + i))}
		switch a := r.Decide(ctx, client, rule, 1); a.Verdict {
		case Serve:
			served++
		case Deny:
			refused++
			if wait, ok := a.RetryAfter(); !ok || wait <= 0 || wait > time.Minute {
				t.Errorf("client %s refused by the quota with a wait of %v, %v", client.key, wait, ok)
			}
			if n := left(t, l, "api:"+client.key, redisrate.PerMinute(100)); n != 100 {
				t.Errorf("client %s refused by the quota has %d of its own 100 left; want them all back", client.key, n)
			}
		default:
			t.Fatalf("client %s: %+v", client.key, a)
		}
	}
	if served != 10 || refused != 4 {
		t.Errorf("served %d, refused %d of 14; want the quota's 10 served", served, refused)
	}
	if n := left(t, l, "{api:quota}:upstream", shared); n != 0 {
		t.Errorf("the quota has %d left in Redis; want 0", n)
	}
}

// TestQuotaLeaseGoesBack: what a lease has not spent when its lifetime
// ends goes back to the quota, with no request to take it back.
func TestQuotaLeaseGoesBack(t *testing.T) {
	shared := redisrate.PerHour(10)
	r, rule, l := quotaRules(t, Quota{Key: "upstream", Limit: shared, Lease: 5, Lifetime: 50 * time.Millisecond}, false)
	if a := r.Decide(context.Background(), req{key: "a"}, rule, 1); a.Verdict != Serve {
		t.Fatalf("the first request: %+v", a)
	}
	if n := left(t, l, "{api:quota}:upstream", shared); n != 5 {
		t.Fatalf("the quota has %d left with a lease of 5 out; want 5", n)
	}
	deadline := time.Now().Add(10 * time.Second)
	for left(t, l, "{api:quota}:upstream", shared) != 9 {
		if time.Now().After(deadline) {
			t.Fatal("the lease's 4 unspent units did not go back after its lifetime")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestQuotaShadow: in shadow mode a request the quota refuses is served
// all the same.
func TestQuotaShadow(t *testing.T) {
	r, rule, _ := quotaRules(t, Quota{Key: "upstream", Limit: redisrate.PerMinute(1), Lease: 1, Lifetime: time.Minute}, true)
	for i := range 3 {
		if a := r.Decide(context.Background(), req{key: "a"}, rule, 1); a.Verdict != Serve {
			t.Fatalf("request %d in shadow mode: %+v; want served", i, a)
		}
	}
}

// TestQuotaChecked: a quota's key, limit, lease and lifetime are checked.
func TestQuotaChecked(t *testing.T) {
	for _, q := range []Quota{
		{Key: "", Limit: redisrate.PerSecond(1)},
		{Key: "a:b", Limit: redisrate.PerSecond(1)},
		{Key: "up", Limit: redisrate.PerSecond(0)},
		{Key: "up", Limit: redisrate.PerSecond(1), Lease: -1},
		{Key: "up", Limit: redisrate.PerSecond(1), Lifetime: -time.Second},
	} {
		if _, err := rules(t, Config[req]{Quota: &q}); err == nil {
			t.Errorf("%+v: accepted", q)
		}
	}
}
