package redisrate

import (
	"context"
	"errors"
	"testing"

	"github.com/redis/go-redis/v9"
)

// TestClassify: the scripts' own error replies are the caller's to fix;
// ACL refusals too; anything else is Redis failing.
func TestClassify(t *testing.T) {
	for msg, want := range map[string]error{
		"ERR invalid limit '0': must be a whole number from 1 to 10^15":                   ErrInvalid,
		"ERR invalid numkeys '2': must be 1 (the limiter's key)":                          ErrInvalid,
		"ERR incomplete limit #2: each further limit is the triple limit period_ms burst": ErrInvalid,
		"ERR too many limits (9): must be at most 8":                                      ErrInvalid,
		"ERR key holds a value that is not gcra state: left untouched":                    ErrForeignKey,
		"ERR key holds token_bucket state, not gcra state: left untouched":                ErrForeignKey,
		"ERR key holds a value of another type, not gcra state: left untouched":           ErrForeignKey,
		"ERR key #2 holds a value that is not gcra state: left untouched":                 ErrForeignKey,
		"ERR key #8 holds tb state, not gcra state: left untouched":                       ErrForeignKey,
		"NOPERM User limiter has no permissions to run the 'evalsha' command":             ErrMisconfigured,
		"NOPERM No permissions to access a key":                                           ErrMisconfigured,
		"NOAUTH Authentication required.":                                                 ErrMisconfigured,
		"WRONGPASS invalid username-password pair or user is disabled.":                   ErrMisconfigured,
		"ERR unknown command 'evalsha', with args beginning with: 'abc' '0' ":             ErrMisconfigured,
		"ERR unknown command 'EVALSHA_RO', with args beginning with: ":                    ErrMisconfigured,
		"ERR Could not find scripting engine 'lua'":                                       ErrMisconfigured,
		"ERR Engine 'lua' not found":                                                      ErrMisconfigured,
		"ERR The user executing the script can't run this command or subcommand script: 1a8c67671c988614eb0c618efa73283c54565629, on @user_script:1.":            ErrMisconfigured,
		"ERR ACL failure in script: User lim2 has no permissions to run the 'time' command script: 1a8c67671c988614eb0c618efa73283c54565629, on @user_script:1.": ErrMisconfigured,
		"LOADING Redis is loading the dataset in memory":          ErrUnavailable,
		"OOM command not allowed when used memory > 'maxmemory'.": ErrUnavailable,
		"READONLY You can't write against a read only replica.":   ErrUnavailable,
		"dial tcp 127.0.0.1:1: connect: connection refused":       ErrUnavailable,
	} {
		if got := classify(errors.New(msg)); got != want {
			t.Errorf("classify(%q) = %v, want %v", msg, got, want)
		}
	}
	if got := classify(errors.Join(ErrBadReply, errors.New("x"))); got != ErrUnavailable {
		t.Errorf("a bad reply: %v, want ErrUnavailable", got)
	}
}

// TestPolicyNeverMasksPermission: an ACL refusal is returned as an error
// under every policy, and does not open the breaker: Redis is up.
func TestPolicyNeverMasksPermission(t *testing.T) {
	quietDefaultLog(t)
	for _, p := range []FailurePolicy{FailError, FailClosed, FailOpen} {
		l := testLimiter(noPermClient{}, WithFailurePolicy(p))
		for range 2 {
			res, err := l.Allow(context.Background(), "k", PerSecond(1))
			if !errors.Is(err, ErrMisconfigured) || errors.Is(err, ErrUnavailable) || res != (Result{}) {
				t.Errorf("%v: %+v %v, want ErrMisconfigured", p, res, err)
			}
		}
		if l.health.skip() {
			t.Errorf("%v: an ACL refusal opened the breaker", p)
		}
	}
}

// noPermClient is a Client whose server refuses every script by ACL.
type noPermClient struct{}

func (noPermClient) refuse(ctx context.Context) *redis.Cmd {
	c := redis.NewCmd(ctx)
	c.SetErr(errors.New("NOPERM User limiter has no permissions to run the 'evalsha' command"))
	return c
}

func (c noPermClient) Eval(ctx context.Context, _ string, _ []string, _ ...any) *redis.Cmd {
	return c.refuse(ctx)
}
func (c noPermClient) EvalSha(ctx context.Context, _ string, _ []string, _ ...any) *redis.Cmd {
	return c.refuse(ctx)
}
func (c noPermClient) EvalRO(ctx context.Context, _ string, _ []string, _ ...any) *redis.Cmd {
	return c.refuse(ctx)
}
func (c noPermClient) EvalShaRO(ctx context.Context, _ string, _ []string, _ ...any) *redis.Cmd {
	return c.refuse(ctx)
}
func (noPermClient) ScriptExists(ctx context.Context, _ ...string) *redis.BoolSliceCmd {
	return redis.NewBoolSliceCmd(ctx)
}
func (noPermClient) ScriptLoad(ctx context.Context, _ string) *redis.StringCmd {
	return redis.NewStringCmd(ctx)
}
