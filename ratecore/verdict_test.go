package ratecore

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/redisrate/redisrate"
	"github.com/redisrate/redisrate/internal/hooktest"
)

// quotaDown fails every command on the quota's key as a lost connection
// would: the request's own limit is decided, its quota is not.
type quotaDown struct{}

func (quotaDown) DialHook(next redis.DialHook) redis.DialHook { return next }

func (quotaDown) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		for _, a := range cmd.Args() {
			if s, ok := a.(string); ok && strings.Contains(s, ":quota}") {
				cmd.SetErr(errors.New("read tcp: connection reset by peer"))
				return cmd.Err()
			}
		}
		return next(ctx, cmd)
	}
}

func (q quotaDown) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return hooktest.AsCommand(q.ProcessHook, next)
}

// TestUndecidedIsNeverDenied (issue 38, finding 3): a request its limits
// did not decide (the quota's Redis call failed, and the failure policy
// answered) is never answered as a spent quota (Deny: 429,
// ResourceExhausted). FailClosed refuses it as Unavailable (503);
// FailOpen serves it.
func TestUndecidedIsNeverDenied(t *testing.T) {
	for _, c := range []struct {
		policy redisrate.FailurePolicy
		want   Verdict
	}{
		{redisrate.FailClosed, Unavailable},
		{redisrate.FailOpen, Serve},
	} {
		mr := miniredis.RunT(t)
		rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), MaxRetries: -1})
		rdb.AddHook(quotaDown{})
		t.Cleanup(func() { _ = rdb.Close() })
		l := redisrate.NewLimiter(rdb, redisrate.WithDecisionTimeout(10*time.Second), redisrate.WithCircuitBreaker(0))
		r, err := New(Config[req]{Limiter: l, Name: "api", Key: own, FailurePolicy: c.policy,
			Quota: &Quota{Key: "upstream", Limit: redisrate.PerMinute(10), Lease: 4, Lifetime: time.Minute}})
		if err != nil {
			t.Fatal(err)
		}
		rule, err := r.Rule("", "Config.Limits", []redisrate.Limit{redisrate.PerMinute(100)})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			if a := r.Decide(context.Background(), req{key: "a"}, rule, 1); a.Verdict != c.want {
				t.Errorf("%v, request %d: verdict %v (%v), want %v: the quota was not decided", c.policy, i, a.Verdict, a.Result, c.want)
			}
		}
	}
}
