package redisrate

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/redisrate/redisrate/internal/hooktest"
)

// TestMain quiets go-redis's log of failed dials: the tests stop Redis on
// purpose, and the failures they expect are asserted, not logged.
func TestMain(m *testing.M) {
	redis.SetLogger(quietLog{})
	os.Exit(m.Run())
}

type quietLog struct{}

func (quietLog) Printf(context.Context, string, ...any) {}

// fakeRedis is a miniredis whose clock only moves when a test moves it, so
// no test sleeps and every reply is exact.
type fakeRedis struct {
	t   testing.TB
	mr  *miniredis.Miniredis
	rdb *redis.Client
	now time.Time
}

// epoch2026 is a fixed "today" for the fake clock, with a fraction of a
// millisecond so that rounding is exercised.
var epoch2026 = time.Date(2026, 11, 22, 12, 0, 0, 123456000, time.UTC)

func newFakeRedis(t testing.TB) *fakeRedis {
	t.Helper()
	mr := miniredis.RunT(t)
	// A minute, not go-redis's 3 s: this miniredis shares the test's CPU,
	// which a busy machine starves (the Limiters' 10 s decision timeout
	// would otherwise never be what ends a slow call).
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), Protocol: 2, ReadTimeout: time.Minute, WriteTimeout: time.Minute})
	t.Cleanup(func() { _ = rdb.Close() })
	f := &fakeRedis{t: t, mr: mr, rdb: rdb}
	f.setClock(epoch2026)
	return f
}

func (f *fakeRedis) setClock(t time.Time) {
	f.now = t
	f.mr.SetTime(t)
}

// advance moves the clock and lets TTLs run out accordingly.
func (f *fakeRedis) advance(d time.Duration) {
	f.now = f.now.Add(d)
	f.mr.SetTime(f.now)
	f.mr.FastForward(d)
}

// eval runs the raw script of a with ARGV args, as any client would.
func (f *fakeRedis) eval(a Algorithm, key string, args ...any) ([]int64, error) {
	f.t.Helper()
	s := specs[a]
	v, err := f.rdb.EvalSha(context.Background(), s.SHA1, []string{key}, args...).Result()
	if err != nil && isNoScript(err) {
		v, err = f.rdb.Eval(context.Background(), s.Source, []string{key}, args...).Result()
	}
	if err != nil {
		return nil, err
	}
	arr := v.([]any)
	out := make([]int64, len(arr))
	for i, x := range arr {
		out[i] = x.(int64)
	}
	return out, nil
}

// mustEval is eval for calls that must succeed.
func (f *fakeRedis) mustEval(a Algorithm, key string, args ...any) []int64 {
	f.t.Helper()
	r, err := f.eval(a, key, args...)
	if err != nil {
		f.t.Fatalf("%s %q %v: %v", a, key, args, err)
	}
	return r
}

// dump returns the key's serialized value and TTL, to prove a call wrote nothing.
func (f *fakeRedis) dump(key string) string {
	f.t.Helper()
	ctx := context.Background()
	typ := f.rdb.Type(ctx, key).Val()
	var val any
	switch typ {
	case "string":
		val = f.rdb.Get(ctx, key).Val()
	case "zset":
		val = f.rdb.ZRangeWithScores(ctx, key, 0, -1).Val()
	case "list":
		val = f.rdb.LRange(ctx, key, 0, -1).Val()
	case "hash":
		val = f.rdb.HGetAll(ctx, key).Val()
	case "set":
		val = f.rdb.SMembers(ctx, key).Val()
	}
	return typ + "|" + fmtAny(val) + "|" + f.rdb.PTTL(ctx, key).Val().String()
}

// cmdLog is a go-redis hook that records the name of every command sent,
// alone or in a pipeline.
type cmdLog struct {
	mu   sync.Mutex
	cmds []string
}

func (h *cmdLog) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *cmdLog) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.add(cmd)
		return next(ctx, cmd)
	}
}
func (h *cmdLog) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			h.add(c)
		}
		return next(ctx, cmds)
	}
}

func (h *cmdLog) add(cmd redis.Cmder) {
	if n := cmd.Name(); n == "hello" || n == "client" { // a new connection's handshake
		return
	}
	h.mu.Lock()
	h.cmds = append(h.cmds, strings.ToUpper(cmd.Name()))
	h.mu.Unlock()
}

func (h *cmdLog) take() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := h.cmds
	h.cmds = nil
	return out
}

// scriptCalls counts the script calls among the commands taken (not the
// FCALL_RO that asks for the library's version).
func (h *cmdLog) scriptCalls() int {
	n := 0
	for _, c := range h.take() {
		if strings.HasPrefix(c, "EVAL") || c == "FCALL" {
			n++
		}
	}
	return n
}

// argLog is a go-redis hook that records every command with its arguments,
// as "evalsha <sha> 1 k 10 1000".
type argLog struct {
	mu   sync.Mutex
	cmds []string
}

func (h *argLog) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *argLog) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		parts := make([]string, len(cmd.Args()))
		for i, a := range cmd.Args() {
			parts[i] = fmt.Sprint(a)
		}
		h.mu.Lock()
		h.cmds = append(h.cmds, strings.Join(parts, " "))
		h.mu.Unlock()
		return next(ctx, cmd)
	}
}
func (h *argLog) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return hooktest.AsCommand(h.ProcessHook, next)
}

func (h *argLog) take() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := h.cmds
	h.cmds = nil
	return out
}

func fmtAny(v any) string { return fmt.Sprintf("%v", v) }
