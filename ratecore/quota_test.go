package ratecore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/redisrate/redisrate"
	"github.com/redisrate/redisrate/internal/hooktest"
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
	rule, err := r.Rule("", "Config.Limits", []redisrate.Limit{redisrate.PerMinute(100)})
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

// quotaHook acts on the commands that touch the quota's keys: it fails
// them (down), or holds each until the test releases it (gate), and counts
// them, and the most in flight at once.
type quotaHook struct {
	down atomic.Bool
	gate chan chan struct{} // nil: no gate; else each command sends its release here and waits for it
	// after, if set, is called with every other command once it is done.
	after func(redis.Cmder)

	mu       sync.Mutex
	calls    int
	inFlight int
	most     int
}

func (h *quotaHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *quotaHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return hooktest.AsCommand(h.ProcessHook, next)
}

func (h *quotaHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !strings.Contains(fmt.Sprint(cmd.Args()...), ":quota}") {
			err := next(ctx, cmd)
			if h.after != nil {
				h.after(cmd)
			}
			return err
		}
		h.mu.Lock()
		h.calls++
		h.inFlight++
		h.most = max(h.most, h.inFlight)
		h.mu.Unlock()
		defer func() {
			h.mu.Lock()
			h.inFlight--
			h.mu.Unlock()
		}()
		if h.gate != nil {
			release := make(chan struct{})
			h.gate <- release
			<-release
		}
		if h.down.Load() {
			err := errors.New("dial tcp 10.0.0.7:6379: connect: connection refused")
			cmd.SetErr(err)
			return err
		}
		return next(ctx, cmd)
	}
}

func (h *quotaHook) count() (calls, most int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.calls, h.most
}

// hookedQuota is quotaRules on a client with h, under the failure policy.
func hookedQuota(t *testing.T, h *quotaHook, quota Quota, policy redisrate.FailurePolicy) (*Rules[req], *Rule, *redisrate.Limiter) {
	t.Helper()
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), MaxRetries: -1})
	rdb.AddHook(h)
	t.Cleanup(func() { _ = rdb.Close() })
	// Each call alone (no coalescing, no pipelining): the hook holds round
	// trips for as long as a test wants, and a pipeline would queue every
	// other call behind a held one (one send in flight per node), where
	// these tests measure the quota's own waits.
	l := redisrate.NewLimiter(rdb, redisrate.WithDecisionTimeout(time.Hour), redisrate.WithCircuitBreaker(0), redisrate.WithCoalescing(false))
	r, err := New(Config[req]{Limiter: l, Name: "api", Key: own, Quota: &quota, FailurePolicy: policy})
	if err != nil {
		t.Fatal(err)
	}
	rule, err := r.Rule("", "Config.Limits", []redisrate.Limit{redisrate.PerMinute(100)})
	if err != nil {
		t.Fatal(err)
	}
	return r, rule, l
}

// TestQuotaOutage: a quota whose Redis node cannot decide (a dead Cluster
// shard: the request's own limits decided) is answered by the failure
// policy, never as a spent quota: 503 (Unavailable, with a Retry-After)
// under FailClosed and FailError, served under FailOpen; a refused
// request's own units go back (#40 finding 1: 429 "Quota Exceeded").
func TestQuotaOutage(t *testing.T) {
	for _, c := range []struct {
		policy redisrate.FailurePolicy
		want   Verdict
	}{{redisrate.FailClosed, Unavailable}, {redisrate.FailError, Unavailable}, {redisrate.FailOpen, Serve}} {
		t.Run(c.policy.String(), func(t *testing.T) {
			h := &quotaHook{}
			h.down.Store(true)
			r, rule, l := hookedQuota(t, h, Quota{Key: "upstream", Limit: redisrate.PerMinute(10)}, c.policy)
			for i := range 3 {
				a := r.Decide(context.Background(), req{key: "a"}, rule, 1)
				if a.Verdict != c.want {
					t.Fatalf("request %d with the quota's node down: verdict %v (%+v); want %v", i, a.Verdict, a, c.want)
				}
				if wait, ok := a.RetryAfter(); c.want == Unavailable && (!ok || wait < time.Second) {
					t.Errorf("request %d: Retry-After %v %v; want at least a second", i, wait, ok)
				}
			}
			if want := int64(100); c.want == Serve {
				want = 97
				if n := left(t, l, "api:a", redisrate.PerMinute(100)); n != want {
					t.Errorf("own units left: %d; want %d", n, want)
				}
			} else if n := left(t, l, "api:a", redisrate.PerMinute(100)); n != want {
				t.Errorf("own units left after 3 refusals: %d; want all %d back", n, want)
			}
		})
	}
}

// TestQuotaFleet: ten processes (Limiters of their own) under one daily
// quota of 1000 with the default lease, each serving a request, leave the
// eleventh process its share (#40 finding 3: 0 of 1000 were left). Under
// a quota whose lease is more than a unit, the idle leases of N processes
// keep at most N × Lease units (the documented bound), and Close gives
// them back.
func TestQuotaFleet(t *testing.T) {
	for _, c := range []struct {
		limit redisrate.Limit
		lease int64 // the default's
	}{{redisrate.PerDay(1000), 1}, {redisrate.PerMinute(6000), 100}} {
		t.Run(c.limit.String(), func(t *testing.T) {
			mr := miniredis.RunT(t)
			rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
			t.Cleanup(func() { _ = rdb.Close() })
			quota := Quota{Key: "upstream", Limit: c.limit}
			var fleet []*Rules[req]
			for p := range 11 {
				l := redisrate.NewLimiter(rdb, redisrate.WithDecisionTimeout(10*time.Second))
				r, err := New(Config[req]{Limiter: l, Name: "api", Key: own, Quota: &quota})
				if err != nil {
					t.Fatal(err)
				}
				rule, _ := r.Rule("", "Config.Limits", []redisrate.Limit{redisrate.PerMinute(100)})
				if a := r.Decide(context.Background(), req{key: "a"}, rule, 1); a.Verdict != Serve {
					t.Fatalf("process %d of the fleet: %+v; want served", p+1, a)
				}
				fleet = append(fleet, r)
				if p == 9 {
					held := c.limit.Capacity() - left(t, l, "{api:quota}:upstream", c.limit)
					if bound := 10 * c.lease; held > bound {
						t.Errorf("10 processes hold %d units of the quota; the bound is 10 × Lease = %d", held, bound)
					}
				}
			}
			for _, r := range fleet {
				if err := r.Close(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			l := redisrate.NewLimiter(rdb, redisrate.WithDecisionTimeout(10*time.Second)) // generous: a loaded test machine
			if n := left(t, l, "{api:quota}:upstream", c.limit); n < c.limit.Capacity()-11 {
				t.Errorf("after Close: %d left; want every unspent unit back (%d)", n, c.limit.Capacity()-11)
			}
		})
	}
}

// TestQuotaLeaseSize: the default leases scale with the rate: a daily
// quota's lives a second, not hours.
func TestQuotaLeaseSize(t *testing.T) {
	for _, c := range []struct {
		limit redisrate.Limit
		lease int64
		life  time.Duration
	}{
		{redisrate.PerDay(1000), 1, time.Second},
		{redisrate.PerDay(10_000_000), 115, time.Second},
		{redisrate.PerSecond(1000), 100, 100 * time.Millisecond},
		{redisrate.PerSecond(5), 1, 100 * time.Millisecond},
		{redisrate.PerMinute(600), 10, time.Second},
		{redisrate.Per(10, time.Millisecond), 1, time.Millisecond},
	} {
		if lease, life := leaseSize(c.limit, 0, 0); lease != c.lease || life != c.life {
			t.Errorf("%v: lease %d for %v; want %d for %v", c.limit, lease, life, c.lease, c.life)
		}
	}
	if lease, life := leaseSize(redisrate.PerDay(1000), 7, time.Minute); lease != 7 || life != time.Minute {
		t.Errorf("given: %d %v", lease, life)
	}
}

// TestQuotaOneRefillAtATime: while one request renews the lease (its
// round trip held by the test), another waits under its own context: it
// ends when that context does, not when the round trip does; and of many
// requests, only one renews at a time (#40 finding 2: one mutex held
// across the round trips serialised the route, whatever the contexts).
func TestQuotaOneRefillAtATime(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	h := &quotaHook{gate: make(chan chan struct{})}
	h.after = func(cmd redis.Cmder) {
		if strings.Contains(fmt.Sprint(cmd.Args()...), "api:b") {
			// The second request's own limit decided: it gives up once
			// it waits for the quota (if it gives up sooner, it ends all
			// the same; the pause only makes the test see the wait).
			time.AfterFunc(50*time.Millisecond, cancel)
		}
	}
	r, rule, _ := hookedQuota(t, h, Quota{Key: "upstream", Limit: redisrate.PerMinute(1000), Lease: 2, Lifetime: time.Minute}, redisrate.FailError)
	first := make(chan Answer)
	go func() { first <- r.Decide(context.Background(), req{key: "a"}, rule, 1) }()
	held := <-h.gate // the first request's lease, in flight
	second := make(chan Answer)
	go func() { second <- r.Decide(ctx, req{key: "b"}, rule, 1) }()
	if a := <-second; a.Verdict != Ended {
		t.Errorf("a request cancelled while another renewed the lease: %+v; want ended", a)
	}
	close(held)
	if a := <-first; a.Verdict != Serve {
		t.Fatalf("the request that renewed the lease: %+v", a)
	}
	go func() {
		for release := range h.gate {
			close(release)
		}
	}()
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if a := r.Decide(context.Background(), req{key: fmt.Sprint("c", i)}, rule, 1); a.Verdict != Serve {
				t.Errorf("request %d: %+v", i, a)
			}
		}()
	}
	wg.Wait()
	close(h.gate)
	if _, most := h.count(); most != 1 {
		t.Errorf("%d quota calls in flight at once; want one renewal at a time", most)
	}
}

// TestQuotaRefusalCached: once the quota refuses, its honest wait is
// answered again with no round trip until it passes, and it says so
// truly: the wait counts down.
func TestQuotaRefusalCached(t *testing.T) {
	h := &quotaHook{}
	r, rule, _ := hookedQuota(t, h, Quota{Key: "upstream", Limit: redisrate.PerHour(2), Lease: 1}, redisrate.FailError)
	ctx := context.Background()
	for i := range 2 {
		if a := r.Decide(ctx, req{key: "a"}, rule, 1); a.Verdict != Serve {
			t.Fatalf("request %d: %+v", i, a)
		}
	}
	a := r.Decide(ctx, req{key: "a"}, rule, 1)
	wait, _ := a.RetryAfter()
	if a.Verdict != Deny || wait <= 0 || wait > 30*time.Minute {
		t.Fatalf("the quota spent: %+v; want a refusal with a wait of up to 30 minutes", a)
	}
	before, _ := h.count()
	for i := range 50 {
		b := r.Decide(ctx, req{key: "a"}, rule, 1)
		if w, _ := b.RetryAfter(); b.Verdict != Deny || w > wait || w <= 0 {
			t.Fatalf("refusal %d: %+v, wait %v; want at most the first's %v", i, b, w, wait)
		}
		if name, _ := b.Binding(); name != "upstream" {
			t.Errorf("refusal %d names %q; want the quota's policy, upstream", i, name)
		}
	}
	if after, _ := h.count(); after != before {
		t.Errorf("50 refusals made %d quota calls; want none until the wait passes", after-before)
	}
}

// TestQuotaNamesItsPolicy: a refusal of the quota names it (its Key) as
// the binding policy, in the fields too (#40 finding 7: it named "").
func TestQuotaNamesItsPolicy(t *testing.T) {
	r, rule, _ := quotaRules(t, Quota{Key: "upstream", Limit: redisrate.PerMinute(1), Lease: 1}, false)
	ctx := context.Background()
	r.Decide(ctx, req{key: "a"}, rule, 1)
	a := r.Decide(ctx, req{key: "a"}, rule, 1)
	name, limit := a.Binding()
	if a.Verdict != Deny || name != "upstream" || limit.Rate != 1 || limit.Period != time.Minute {
		t.Fatalf("the quota's refusal: %+v binds %q %v; want upstream, 1/min", a, name, limit)
	}
	if p, rl := a.Policy(), a.RateLimit(); !strings.Contains(p, `"upstream";q=1;w=60`) || !strings.HasPrefix(rl, `"upstream";r=0`) {
		t.Errorf("fields %q and %q; want the quota's", p, rl)
	}
}

// TestQuotaAlone: a nil rule holds every request to the quota alone, for
// all clients; Close gives the lease back and answers later requests
// Unavailable.
func TestQuotaAlone(t *testing.T) {
	shared := redisrate.PerHour(5)
	r, _, l := quotaRules(t, Quota{Key: "upstream", Limit: shared, Lease: 2}, false)
	ctx := context.Background()
	served := 0
	for i := range 8 {
		if a := r.Decide(ctx, req{key: fmt.Sprint(i)}, nil, 1); a.Verdict == Serve {
			served++
		} else if name, _ := a.Binding(); a.Verdict != Deny || name != "upstream" {
			t.Fatalf("request %d: %+v", i, a)
		}
	}
	if served != 5 {
		t.Errorf("served %d of 8 under a quota of 5", served)
	}
	if err := r.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if a := r.Decide(ctx, req{key: "x"}, nil, 1); a.Verdict != Unavailable || !errors.Is(a.Err, redisrate.ErrNoClient) {
		t.Errorf("a request after Close: %+v; want Unavailable", a)
	}
	if _, err := l.Allow(ctx, "k", shared); err != nil {
		t.Errorf("Config.Limiter after the middleware's Close: %v; want it open", err)
	}
}
