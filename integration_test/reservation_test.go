package integration_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redisrate/redisrate"
	"github.com/redisrate/redisrate/integration_test/internal/redistest"
)

// Reservations (issue 30) on a real server: settled down, up past the
// limit, twice, cancelled, and during an outage; a lease refunded by its
// timer on the real clock. The limits are per hour, so that the real
// clock's drain during a test is below one unit.

// left peeks at what key has left under lim.
func left(t *testing.T, l *redisrate.Limiter, key string, lim redisrate.Limit) int64 {
	t.Helper()
	res, err := l.Decide(context.Background(), redisrate.Request{Kind: redisrate.KindPeek, Key: key, Limits: []redisrate.Limit{lim}})
	if err != nil {
		t.Fatalf("peek %s: %v", key, err)
	}
	return res.Remaining
}

func TestReservationSettle(t *testing.T) {
	r := redistest.Open(t)
	l := redistest.NewLimiter(r.Client, redisrate.WithKeyPrefix(r.Key("")))
	ctx := context.Background()
	user, org, model := redisrate.PerHour(1000), redisrate.PerHour(5000), redisrate.PerHour(2000)
	keys := []redisrate.KeyLimit{{Key: "{acme}:user:ada", Limit: user}, {Key: "{acme}", Limit: org}, {Key: "{acme}:model:large", Limit: model}}

	// Settle down: one refund on every key.
	rv, err := l.Reserve(ctx, redisrate.Request{Keys: keys, N: 400})
	if err != nil || !rv.Result.Allowed || rv.Result.Units != 400 {
		t.Fatalf("reserve 400: %+v %v", rv, err)
	}
	if res, err := rv.Settle(ctx, 150); err != nil || res.Units != 250 {
		t.Fatalf("settle 150 of 400: %+v %v, want 250 back", res, err)
	}
	for i, want := range []int64{850, 4850, 1850} {
		if got := left(t, l, keys[i].Key, keys[i].Limit); got != want {
			t.Errorf("%s: %d left, want %d", keys[i].Key, got, want)
		}
	}
	// Twice: an error, and no second refund.
	if _, err := rv.Settle(ctx, 0); !errors.Is(err, redisrate.ErrInvalid) || !strings.Contains(err.Error(), "already settled") {
		t.Errorf("settle twice: %v, want ErrInvalid, already settled", err)
	}
	if got := left(t, l, keys[0].Key, user); got != 850 {
		t.Errorf("after a second Settle: %d left, want 850", got)
	}
	// Cancel: everything back.
	rv, _ = l.Reserve(ctx, redisrate.Request{Keys: keys, N: 300})
	if res, err := rv.Settle(ctx, 0); err != nil || res.Units != 300 || left(t, l, keys[0].Key, user) != 850 {
		t.Errorf("cancel 300: %+v %v", res, err)
	}
	// Up past the limit: a debt that the next call waits for.
	rv, _ = l.Reserve(ctx, redisrate.Request{Keys: keys, N: 800})
	res, err := rv.Settle(ctx, 1700)
	if err != nil || res.Units != 900 || res.Allowed || res.Key != keys[0].Key {
		t.Fatalf("settle 1700 of 800 with 850 left: %+v %v, want 900 forced on the user's key", res, err)
	}
	res, err = l.Decide(ctx, redisrate.Request{Keys: keys})
	if err != nil || res.Allowed || res.Key != keys[0].Key || res.RetryAfter < 50*time.Minute {
		t.Errorf("the next call in debt: %+v %v, want denied by the user's key for about 51 minutes", res, err)
	}
}

// TestReservationOutage: a settlement while Redis is down is not decided:
// under every policy it returns ErrUnavailable (so it can be settled again
// once Redis is back; a nil error would hide that nothing was recorded),
// with the policy's answer, nothing recorded, and the observer counts it.
func TestReservationOutage(t *testing.T) {
	redistest.NeedLocal(t, "stops its server")
	for _, policy := range []redisrate.FailurePolicy{redisrate.FailOpen, redisrate.FailClosed, redisrate.FailError} {
		t.Run(policy.String(), func(t *testing.T) {
			srv := redistest.StartServer(t, redistest.Options{})
			obs := &settleCounter{}
			l := redisrate.NewLimiter(srv.Client(&redis.Options{MaxRetries: -1}), redisrate.WithFailurePolicy(policy), redisrate.WithObserver(obs))
			ctx := context.Background()
			rv, err := l.Reserve(ctx, redisrate.Request{Key: "k", Limits: []redisrate.Limit{redisrate.PerHour(100)}, N: 10})
			if err != nil || rv.Result.Units != 10 {
				t.Fatalf("reserve: %+v %v", rv, err)
			}
			srv.Stop()
			res, err := rv.Settle(ctx, 4)
			if !errors.Is(err, redisrate.ErrUnavailable) {
				t.Errorf("settle: %+v %v, want ErrUnavailable", res, err)
			}
			if policy != redisrate.FailError && (!res.Degraded() || res.Units != 0) {
				t.Errorf("settle: %+v %v, want the policy's answer, nothing recorded", res, err)
			}
			if got := obs.String(); got != fmt.Sprintf("refund ended: 1, degraded %v", policy != redisrate.FailError) {
				t.Errorf("observed %s", got)
			}
		})
	}
}

// settleCounter counts the refunds an observer sees end.
type settleCounter struct {
	mu       sync.Mutex
	refunds  int
	degraded bool
}

func (c *settleCounter) Start(ctx context.Context, _ redisrate.Decision) context.Context { return ctx }

func (c *settleCounter) End(_ context.Context, d redisrate.Decision, res redisrate.Result, _ error) {
	if d.Kind != redisrate.KindRefund {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.refunds++
	c.degraded = res.Degraded() && res.Cause != nil
}

func (c *settleCounter) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return fmt.Sprintf("refund ended: %d, degraded %v", c.refunds, c.degraded)
}

// TestLeaseOnRealClock: a lease's unspent units come back when its
// lifetime ends, by its timer, with nobody calling.
func TestLeaseOnRealClock(t *testing.T) {
	r := redistest.Open(t)
	l := redistest.NewLimiter(r.Client, redisrate.WithKeyPrefix(r.Key("")))
	ctx, lim := context.Background(), redisrate.PerHour(100)
	_, _ = l.AllowN(ctx, "q", lim, 40)
	lease, err := l.Reserve(ctx, redisrate.Request{Kind: redisrate.KindUpTo, Key: "q", Limits: []redisrate.Limit{lim}, N: 100, Lease: 50 * time.Millisecond})
	if err != nil || lease.Result.Units != 60 {
		t.Fatalf("lease of up to 100 with 60 left: %+v %v", lease, err)
	}
	if !lease.Take(25) || lease.Take(36) || !lease.Take(10) {
		t.Fatal("Take 25, 36, 10 of 60: want true, false, true")
	}
	redistest.WaitFor(t, time.Minute, "the lease's 25 unspent units back", func() bool { return left(t, l, "q", lim) == 25 })
	if _, err := lease.Close(ctx); !errors.Is(err, redisrate.ErrInvalid) {
		t.Errorf("settle after the lifetime's refund: %v, want already settled", err)
	}
}
