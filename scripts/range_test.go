package scripts_test

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redisrate/redisrate/internal/manifest"
	st "github.com/redisrate/redisrate/scripts/internal/scripttest"
)

// Contract v4's range: limit, burst and cost up to 10^12, period_ms up to
// 366 days, a full drain (burst * period_ms / limit) within 10^12 ms, in
// every script but sliding_log, every reply field exact. Lua's doubles are
// exact below 2^53 only: the scripts decide in one double below it and by
// exact arithmetic on two past it (exact.lua, deep.lua); these tests hold
// both to the model's math/big arithmetic, on miniredis's fake clock and
// on the real servers (EVALSHA and FCALL), drawing limits and periods
// log-uniformly over the whole range and at the switch between the two.

// logUniform draws a whole number from lo to hi, log-uniformly.
func logUniform(rng *rand.Rand, lo, hi int64) int64 {
	v := int64(math.Exp(math.Log(float64(lo)) + rng.Float64()*(math.Log(float64(hi)+1)-math.Log(float64(lo)))))
	return max(lo, min(hi, v))
}

// drainBurst is the largest burst within the range for limit and period:
// min(10^12, floor(10^12 * limit / period_ms)).
func drainBurst(limit, period int64) int64 {
	q := new(big.Int).Quo(new(big.Int).Mul(big.NewInt(1e12), big.NewInt(limit)), big.NewInt(period))
	if !q.IsInt64() || q.Int64() > 1e12 {
		return 1e12
	}
	return q.Int64()
}

// switchBurst is the largest burst whose twice the capacity in units of
// 1/period_us, 2 * burst * period_us, is at most 2^53: level.lua decides
// in one double up to it and by deep.lua past it.
func switchBurst(period int64) int64 { return (1 << 53) / (2 * period * 1000) }

// rangeLimit draws one limit of the range for s: limit and period
// log-uniformly, the burst the default, log-uniform up to the drain's, or
// at the switch of level.lua (and of sliding_window's weight: limit *
// period_us near 2^52).
func rangeLimit(rng *rand.Rand, s manifest.Spec) [3]string {
	period := logUniform(rng, 1, st.MaxPeriodMS)
	if rng.IntN(4) == 0 {
		period = []int64{1000, 60000, 3600000, 86400000, 2592000000, st.MaxPeriodMS}[rng.IntN(6)]
	}
	limit := logUniform(rng, 1, 1e12)
	burst := ""
	switch r := rng.IntN(8); {
	case s.Window && r == 0: // sliding_window's switch: 2 * limit * period_us at 2^53
		limit = max(1, min(1e12, switchBurst(period)+int64(rng.IntN(3))-1))
	case s.Window:
	case r < 3:
	case r < 6:
		burst = fmt.Sprint(logUniform(rng, 1, drainBurst(limit, period)))
	default: // at the switch, one either side, within the drain
		b := switchBurst(period) + int64(rng.IntN(3)) - 1
		if b >= 1 && b <= drainBurst(limit, period) {
			burst = fmt.Sprint(b)
		}
	}
	return [3]string{fmt.Sprint(limit), fmt.Sprint(period), burst}
}

// rangeCall draws a call of 1 to 3 limits (or keys) of the range for s:
// its limits, its cost (0, 1, up to the capacity log-uniformly, past it)
// and its mode.
func rangeCall(rng *rand.Rand, s manifest.Spec, lims [][3]string, capacity int64) []string {
	cost := ""
	switch r := rng.IntN(10); {
	case r == 0:
		cost = "0"
	case r < 3:
	case r < 9:
		cost = fmt.Sprint(logUniform(rng, 1, capacity))
	default:
		cost = fmt.Sprint(capacity + logUniform(rng, 1, capacity))
	}
	mode := []string{"", "", "", "check", "upto", "refund", "force"}[rng.IntN(7)]
	argv := []string{lims[0][0], lims[0][1], lims[0][2], cost, mode}
	for _, l := range lims[1:] {
		argv = append(argv, l[0], l[1], l[2])
	}
	return argv
}

// rangeStep is how far the clock moves before a call, in µs: nothing, a
// unit's interval, up to two periods (log-uniformly), rarely back.
func rangeStep(rng *rand.Rand, call st.Call, back bool) int64 {
	l := call.Limits[rng.IntN(len(call.Limits))]
	P := l.PeriodMS * 1000
	switch r := rng.IntN(10); {
	case r < 2:
		return 0
	case r < 5:
		return rng.Int64N(max(1, 2*P/l.Limit) + 1)
	case r < 9:
		return logUniform(rng, 1, 2*P)
	case back:
		return -logUniform(rng, 1, min(P, 5_000_000))
	}
	return rng.Int64N(1000)
}

// rangeCalls is how many calls TestDifferentialRange makes on miniredis,
// in all: 10^6 in the long run (make test runs it without -race), a share
// of it with -short, and a fiftieth under the race detector, which finds
// nothing in Lua and slows miniredis's, run in this process, many times
// over (make test's -race pass would pass go test's 10 minutes).
func rangeCalls() int {
	switch {
	case testing.Short():
		return 12_000
	case raceEnabled:
		return 20_000
	}
	return 1_000_000
}

// TestDifferentialRange: random call sequences of the range through the
// five scripts other than sliding_log, one key or several, every mode,
// against the model: every reply field, the key's value (its state
// string) and its TTL, after each call. On miniredis rangeCalls() calls
// in all; on the real servers (Redis 7, Valkey 8: make test) 4,000 a
// script, every other call by FCALL of the library.
func TestDifferentialRange(t *testing.T) {
	var specs []manifest.Spec
	for _, s := range manifest.Specs() {
		if !s.Log {
			specs = append(specs, s)
		}
	}
	// miniredis: one server per script, in parallel (each call makes a Lua
	// state: some 0.5 ms of CPU)
	t.Run("miniredis", func(t *testing.T) {
		for si, s := range specs {
			t.Run(s.Name, func(t *testing.T) {
				t.Parallel()
				b := st.Miniredis(t)
				rng := rand.New(rand.NewPCG(36, uint64(si)))
				if err := b.Client.ScriptLoad(st.Ctx, s.Source).Err(); err != nil {
					t.Fatal(err)
				}
				n := rangeSequences(t, b, s, rng, rangeCalls()/len(specs), false)
				t.Logf("%d calls of the range, every reply field, value and TTL equal to the model's", n)
			})
		}
	})
	for _, b := range st.BothClocked(t) {
		if !b.Real {
			continue
		}
		t.Run(b.Name, func(t *testing.T) {
			b.Rebind(t)
			calls := 0
			for si, s := range specs {
				b.LoadLibrary()
				if err := b.Client.ScriptLoad(st.Ctx, s.Source).Err(); err != nil {
					t.Fatal(err)
				}
				rng := rand.New(rand.NewPCG(37, uint64(si)))
				calls += rangeSequences(t, b, s, rng, 4000, true)
			}
			t.Logf("%d calls of the range by EVALSHA and FCALL, every reply field, value and TTL equal to the model's", calls)
		})
	}
}

// rangeSeq is one key's (or keys') sequence of calls.
type rangeSeq struct {
	q        int
	lims     [][3]string
	keys     []string
	models   []*st.Model
	capacity int64
	left     int
	trail    []rangeStep1 // formatted only when the sequence fails
}

// rangeStep1 is one call of a sequence, for its failure message.
type rangeStep1 struct {
	now       int64
	argv      []string
	got       st.Reply
	want      []int64
	fcall     bool
	keyReport string
}

func (r rangeStep1) String() string {
	return fmt.Sprintf("  t=%d %v -> %v (model %v; FCALL %t)%s", r.now, r.argv, r.got, r.want, r.fcall, r.keyReport)
}

// rangeSequences runs total calls of s on b: sequences of 40 calls on
// fresh keys, 64 at a time in step, each step's calls pipelined on one
// clock (miniredis makes a Lua state per call: the round trips are what
// pipelining saves); fcall alternates EVALSHA and FCALL by step. The clock
// starts again in 2026 (on a flushed database) before it passes 2150.
func rangeSequences(t *testing.T, b *st.Backend, s manifest.Spec, rng *rand.Rand, total int, fcall bool) int {
	t.Helper()
	calls, q, failures := 0, 0, 0
	var seqs []*rangeSeq
	restart := func() {
		seqs = nil
		b.Client.FlushDB(st.Ctx)
		b.SetTime(st.Epoch.Add(time.Duration(rng.Int64N(int64(365 * 24 * time.Hour)))).Truncate(time.Microsecond))
	}
	restart()
	for step := 0; calls < total; step++ {
		if b.Now().Year() >= 2150 {
			restart()
		}
		for len(seqs) < 64 {
			q++
			k := 1
			if rng.IntN(5) == 0 {
				k = 2 + rng.IntN(2)
			}
			n := k
			if k == 1 && rng.IntN(4) == 0 {
				n = 2 + rng.IntN(2)
			}
			sq := &rangeSeq{q: q, left: 40, lims: make([][3]string, n)}
			for i := range sq.lims {
				sq.lims[i] = rangeLimit(rng, s)
			}
			for i := 1; i <= k; i++ {
				sq.keys = append(sq.keys, fmt.Sprintf("{r%d}:%s:%d", q, s.Name, i))
				m := st.NewModel(s, micros(b.Now()))
				m.MsClock = b.Real
				sq.models = append(sq.models, m)
			}
			first, perr := st.ParseKeys(s, sq.keys[:1], []string{sq.lims[0][0], sq.lims[0][1], sq.lims[0][2]})
			if perr != "" {
				t.Fatalf("%s %v: %s", s.Name, sq.lims[0], perr)
			}
			sq.capacity = first.Limits[0].Burst
			seqs = append(seqs, sq)
		}
		argvs := make([][]string, len(seqs))
		parsed := make([]st.Call, len(seqs))
		for i, sq := range seqs {
			argvs[i] = rangeCall(rng, s, sq.lims, sq.capacity)
			call, perr := st.ParseKeys(s, sq.keys, argvs[i])
			if perr != "" {
				t.Fatalf("%s %v: %s", s.Name, argvs[i], perr)
			}
			parsed[i] = call
		}
		if step > 0 {
			b.Advance(time.Duration(rangeStep(rng, parsed[rng.IntN(len(parsed))], true)) * time.Microsecond)
		}
		now := micros(b.Now())
		byFCall := fcall && step%2 == 1
		pipe := b.Client.Pipeline()
		cmds := make([]*redis.Cmd, len(seqs))
		for i, sq := range seqs {
			if byFCall {
				cmds[i] = pipe.FCall(st.Ctx, s.Function, sq.keys, anyArgs(argvs[i])...)
			} else {
				cmds[i] = pipe.EvalSha(st.Ctx, s.SHA1, sq.keys, anyArgs(argvs[i])...)
			}
		}
		_, _ = pipe.Exec(st.Ctx)
		var keys []string
		for _, sq := range seqs {
			keys = append(keys, sq.keys...)
		}
		vals, ttls := valuesTTLs(t, b, keys)
		at, kept := 0, seqs[:0]
		for i, sq := range seqs {
			got := st.Decode(cmds[i].Result())
			var want []int64
			if len(sq.keys) == 1 {
				want = sq.models[0].Call(now, parsed[i])
			} else {
				want = st.CallKeys(sq.models, now, parsed[i])
			}
			calls++
			step := rangeStep1{now: now, argv: argvs[i], got: got, want: want, fcall: byFCall}
			bad := got.Err != "" || !slices.Equal(got.Ints, want)
			for j := range sq.keys {
				if v, ttl := vals[at+j], ttls[at+j]; v != sq.models[j].Value() || ttl != sq.models[j].TTL() {
					bad = true
					step.keyReport += fmt.Sprintf("\n  key %d: %q ttl %d, model %q ttl %d", j+1, v, ttl, sq.models[j].Value(), sq.models[j].TTL())
				}
			}
			sq.trail = append(sq.trail, step)
			at += len(sq.keys)
			if bad {
				var lines []string
				for _, r := range sq.trail {
					lines = append(lines, r.String())
				}
				t.Errorf("%s: %s sequence %d, call %d: got %v, model %v\nsequence:\n%s", b.Name, s.Name, sq.q, 40-sq.left, got, want, joinLast(lines, 14))
				if failures++; failures > 10 {
					return calls
				}
				continue // a sequence that failed ends
			}
			if sq.left--; sq.left > 0 {
				kept = append(kept, sq)
			}
		}
		seqs = kept
	}
	return calls
}

func anyArgs(args []string) []any {
	out := make([]any, len(args))
	for i, a := range args {
		out[i] = a
	}
	return out
}

// valuesTTLs is each key's string value ("" when absent) and PTTL, read
// in one round trip.
func valuesTTLs(t *testing.T, b *st.Backend, keys []string) ([]string, []int64) {
	t.Helper()
	pipe := b.Client.Pipeline()
	gets := make([]*redis.StringCmd, len(keys))
	ttls := make([]*redis.Cmd, len(keys))
	for i, k := range keys {
		gets[i] = pipe.Get(st.Ctx, k)
		ttls[i] = pipe.Do(st.Ctx, "PTTL", k)
	}
	_, _ = pipe.Exec(st.Ctx)
	vals, ms := make([]string, len(keys)), make([]int64, len(keys))
	for i := range keys {
		vals[i] = gets[i].Val()
		d, err := ttls[i].Int64()
		if err != nil {
			t.Fatal(err)
		}
		ms[i] = d
	}
	return vals, ms
}
