package redisrate

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// captureDefaultLog makes slog.Default write to the returned buffer for
// the rest of the test: the log of a Limiter without WithLogger.
func captureDefaultLog(t *testing.T) *syncBuffer {
	t.Helper()
	buf := &syncBuffer{}
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(buf, nil)))
	t.Cleanup(func() { slog.SetDefault(old) })
	return buf
}

// quietDefaultLog keeps the lines of a test's configuration errors out of
// go test's output.
func quietDefaultLog(t *testing.T) { captureDefaultLog(t) }

// TestMisconfiguredIsNoOutage (issue 38, finding 2): a server that wants a
// password the client does not send (NOAUTH), or gets a wrong one
// (WRONGPASS), is a configuration error: under every failure policy the
// call returns an error matching ErrMisconfigured, not ErrUnavailable, no
// policy and no fallback answers it, the breaker stays shut (every call
// asks Redis, so the first call after the fix is decided), and it is
// logged at level Error without WithLogger: once, then once a minute.
func TestMisconfiguredIsNoOutage(t *testing.T) {
	mr := miniredis.RunT(t)
	mr.RequireAuth("sekret")
	fb := newFakeRedis(t)
	for _, c := range []struct {
		name, password, want string
	}{
		{"no password", "", "NOAUTH"},
		{"wrong password", "wrong", "WRONGPASS"},
	} {
		rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), Password: c.password, Protocol: 2, MaxRetries: -1})
		t.Cleanup(func() { _ = rdb.Close() })
		for _, p := range []FailurePolicy{0, FailError, FailClosed, FailOpen} {
			logs := captureDefaultLog(t)
			clk := &fakeClock{t: epoch2026}
			var ends []error
			l := testLimiterOn(clk, rdb, WithFailurePolicy(p), WithFallback(testLimiter(fb.rdb)),
				WithObserver(observerFunc(func(d Decision, res Result, err error) { ends = append(ends, err) })))
			for i := range 3 {
				res, err := l.Allow(context.Background(), "k", PerSecond(1))
				var e *Error
				if !errors.Is(err, ErrMisconfigured) || errors.Is(err, ErrUnavailable) || !errors.As(err, &e) ||
					!strings.Contains(err.Error(), c.want) || res != (Result{}) {
					t.Errorf("%s, %v, call %d: %+v %v; want a *redisrate.Error matching ErrMisconfigured only, saying %s", c.name, p, i, res, err, c.want)
				}
			}
			if l.health.skip() {
				t.Errorf("%s, %v: a configuration error opened the breaker", c.name, p)
			}
			if len(ends) != 3 || !errors.Is(ends[0], ErrMisconfigured) {
				t.Errorf("%s, %v: the observer's End got %v, want 3 errors matching ErrMisconfigured", c.name, p, ends)
			}
			if n := strings.Count(logs.String(), "level=ERROR"); n != 1 || !strings.Contains(logs.String(), "misconfigured") || !strings.Contains(logs.String(), c.want) {
				t.Errorf("%s, %v: %d lines at level Error, want 1 naming the error:\n%s", c.name, p, n, logs)
			}
			clk.Advance(misconfEvery)
			_, _ = l.Allow(context.Background(), "k", PerSecond(1))
			if n := strings.Count(logs.String(), "level=ERROR"); n != 2 || !strings.Contains(logs.String(), "since_last_line=2") {
				t.Errorf("%s, %v: a minute on, %d lines at level Error, want 2, the second counting the 2 calls between:\n%s", c.name, p, n, logs)
			}
		}
	}
}

// TestMisconfiguredServer (issue 38, finding 2): a server without the
// scripting commands (renamed away, or a Valkey without its Lua module)
// answers every call with the same refusal: an error matching
// ErrMisconfigured under every policy, never an outage.
func TestMisconfiguredServer(t *testing.T) {
	quietDefaultLog(t)
	for _, reply := range []string{
		"ERR unknown command 'evalsha', with args beginning with: 'abc' '0' ",
		"ERR Could not find scripting engine 'lua'",
		"NOPERM this user has no permissions to run the 'evalsha' command",
	} {
		f := newFakeRedis(t)
		f.rdb.AddHook(refuseScripts(reply))
		for _, p := range []FailurePolicy{FailError, FailClosed, FailOpen} {
			l := testLimiter(f.rdb, WithFailurePolicy(p))
			res, err := l.Decide(context.Background(), Request{Kind: KindPeek, Key: "k", Limits: []Limit{PerSecond(1)}})
			if !errors.Is(err, ErrMisconfigured) || errors.Is(err, ErrUnavailable) || res.Degraded() && res.Source != SourceRedis {
				t.Errorf("%q, %v: %+v %v, want an error matching ErrMisconfigured", reply, p, res, err)
			}
			if l.health.skip() {
				t.Errorf("%q, %v: opened the breaker", reply, p)
			}
		}
	}
}

// refuseScripts is a go-redis hook that answers every script command with
// the server error reply.
type refuseScripts string

func (refuseScripts) DialHook(next redis.DialHook) redis.DialHook { return next }

func (r refuseScripts) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		switch strings.ToLower(cmd.Name()) {
		case "evalsha", "eval", "evalsha_ro", "eval_ro", "fcall", "fcall_ro", "script":
			cmd.SetErr(serverError(r))
			return cmd.Err()
		}
		return next(ctx, cmd)
	}
}

func (r refuseScripts) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			cmd.SetErr(serverError(r))
		}
		return serverError(r)
	}
}

// serverError is an error reply of the server, as go-redis reports one.
type serverError string

func (e serverError) Error() string { return string(e) }
func (serverError) RedisError()     {}

// observerFunc is an Observer that only watches the ends of decisions.
type observerFunc func(d Decision, res Result, err error)

func (observerFunc) Start(ctx context.Context, _ Decision) context.Context { return ctx }
func (f observerFunc) End(_ context.Context, d Decision, res Result, err error) {
	f(d, res, err)
}
