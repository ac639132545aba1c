package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	redis_rate "github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
	"github.com/redisrate/redisrate"
	"github.com/redisrate/redisrate/scripts"
)

// The ceiling: the cheapest script call Redis can serve.
const returnOne = "return 1"

// The floor: the commands and the reply every decision needs, and nothing
// else: what a rate limiter script cannot go below.
const floorScript = `local t = redis.call('TIME')
local v = redis.call('GET', KEYS[1])
redis.call('PSETEX', KEYS[1], 3600000, t[1] .. t[2])
return { 1, 2, 3, 4, 5, 6 }`

// allowedRate is the allowed-heavy traffic's limit, per hour: more than any
// caller reaches in a run, while the state lives through it.
const allowedRate = 1000000

// slidingLogCap is sliding_log's cap on limit (CONTRACT.md; the scripts
// refuse more, so a stale figure fails the run rather than measuring
// something else).
const slidingLogCap = 10000

// bare is a subject that calls algorithm a's script directly, with cmd
// (EVALSHA or FCALL), with the arguments the Limiter sends for limits copies
// of the traffic's limit.
func (b *bench) bare(a redisrate.Algorithm, cmd string, limits int) subject {
	spec := scripts.Specs()[a]
	rate := int64(allowedRate)
	if a == redisrate.SlidingLog {
		rate = slidingLogCap // a log of 10^6 entries is what the cap forbids
	}
	var args [2][]any
	for t, lim := range [2]redisrate.Limit{redisrate.PerHour(rate).WithAlgorithm(a), redisrate.PerHour(1).WithAlgorithm(a)} {
		lims := make([]redisrate.Limit, limits)
		for i := range lims {
			lims[i] = lim
		}
		var err error
		if args[t], err = redisrate.Args(redisrate.KindAllow, 1, lims...); err != nil {
			panic(err)
		}
	}
	name := fmt.Sprintf("%s (%s)", a, cmd)
	if limits > 1 {
		name = fmt.Sprintf("%s, %d limits (%s)", a, limits, cmd)
	}
	prefix := fmt.Sprintf("%s:%s:%d:", cmd, a, limits)
	return subject{
		name: name,
		call: func(ctx context.Context, key string, t traffic) (bool, error) {
			var c *redis.Cmd
			if cmd == "FCALL" {
				c = b.rdb.FCall(ctx, spec.Function, []string{prefix + key}, args[t]...)
			} else {
				c = b.rdb.EvalSha(ctx, spec.SHA1, []string{prefix + key}, args[t]...)
			}
			v, err := c.Int64Slice()
			if err != nil {
				return false, err
			}
			return v[0] == 1, nil
		},
	}
}

type traffic int

const (
	// a limit no caller reaches in a run: 10^6 per hour, so that the state
	// lives through the run (at 10^6 per second our keys would expire after
	// 1 ms, exactly as the contract wants, and be created again)
	allowedHeavy traffic = iota
	deniedHeavy          // one unit per hour, taken before the cell starts
)

func (t traffic) String() string { return [...]string{"allowed", "denied"}[t] }

type scenario struct {
	callers int
	keys    int
	traffic traffic
}

func (s scenario) String() string {
	return fmt.Sprintf("%d caller%s, %s key%s, %s", s.callers, plural(s.callers), thousands(s.keys), plural(s.keys), s.traffic)
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// subject is one thing measured: a call that decides for key.
type subject struct {
	name string
	call func(ctx context.Context, key string, t traffic) (allowed bool, err error)
	// prefill takes the one unit of each key of the denied traffic
	prefill func(ctx context.Context, keys []string) error
}

type bench struct {
	cfg      config
	w        io.Writer
	rdb      *redis.Client // the callers' client
	admin    *redis.Client // stats and setup, on its own connection
	oneSHA   string
	floorSHA string
	keys     [2][]string // per traffic: "a:0".. and "d:0"..
	subs     []subject
	ours     map[redisrate.Algorithm]*redisrate.Limiter
	peer     *redis_rate.Limiter
	version  string
}

func newBench(ctx context.Context, cfg config, addr string, w io.Writer) (*bench, error) {
	b := &bench{cfg: cfg, w: w}
	// A pool as large as the most callers, so that no caller waits for a
	// connection instead of for Redis; ContextTimeoutEnabled as the README
	// recommends (the decision deadline then needs no goroutine).
	b.rdb = redis.NewClient(&redis.Options{Addr: addr, PoolSize: 64, MinIdleConns: 64, Protocol: 2, ContextTimeoutEnabled: true})
	b.admin = redis.NewClient(&redis.Options{Addr: addr, PoolSize: 2, Protocol: 2})
	info, err := b.admin.Info(ctx, "server").Result()
	if err != nil {
		return nil, fmt.Errorf("redis at %s: %w", addr, err)
	}
	b.version = infoField(info, "redis_version")
	if b.oneSHA, err = b.admin.ScriptLoad(ctx, returnOne).Result(); err != nil {
		return nil, err
	}
	for _, s := range scripts.Specs() {
		if err := b.admin.ScriptLoad(ctx, s.Source).Err(); err != nil {
			return nil, fmt.Errorf("loading %s: %w", s.Name, err)
		}
	}
	if b.floorSHA, err = b.admin.ScriptLoad(ctx, floorScript).Result(); err != nil {
		return nil, err
	}
	// The Functions library, so that the Limiter (and the FCALL subject)
	// calls it: the cheapest way the scripts can run.
	if err := b.admin.FunctionLoadReplace(ctx, scripts.Library).Err(); err != nil {
		return nil, fmt.Errorf("loading the Functions library: %w", err)
	}
	for t := range b.keys {
		b.keys[t] = make([]string, cfg.keys)
		for i := range b.keys[t] {
			b.keys[t][i] = traffic(t).String()[:1] + ":" + strconv.Itoa(i)
		}
	}
	b.ours = map[redisrate.Algorithm]*redisrate.Limiter{}
	for a := redisrate.GCRA; a <= redisrate.SlidingLog; a++ {
		b.ours[a] = redisrate.NewLimiter(b.rdb, redisrate.WithKeyPrefix("rr:"+a.String()+":"))
	}
	// Ours, as a service runs them: GCRA through the Limiter (which finds the
	// library and calls FCALL), then each script by a bare EVALSHA with the
	// arguments the Limiter sends, and GCRA by a bare FCALL and with 3 limits.
	gcra := b.ours[redisrate.GCRA]
	gcraLims := [2]redisrate.Limit{redisrate.PerHour(allowedRate), redisrate.PerHour(1)}
	b.subs = append(b.subs, subject{
		name: "gcra (Limiter.Allow, FCALL)",
		call: func(ctx context.Context, key string, t traffic) (bool, error) {
			r, err := gcra.Allow(ctx, key, gcraLims[t])
			return r.Allowed, err
		},
	})
	for a := redisrate.GCRA; a <= redisrate.SlidingLog; a++ {
		b.subs = append(b.subs, b.bare(a, "EVALSHA", 1))
	}
	b.subs = append(b.subs, b.bare(redisrate.GCRA, "FCALL", 1), b.bare(redisrate.GCRA, "EVALSHA", 3))
	for i := range b.subs {
		if b.subs[i].prefill == nil {
			call := b.subs[i].call
			b.subs[i].prefill = func(ctx context.Context, keys []string) error {
				return prefillCalls(ctx, keys, func(k string) error { _, err := call(ctx, k, deniedHeavy); return err })
			}
		}
	}
	b.peer = redis_rate.NewLimiter(b.rdb)
	peerLims := [2]redis_rate.Limit{{Rate: 1e6, Burst: 1e6, Period: time.Hour}, redis_rate.PerHour(1)}
	peerCall := func(ctx context.Context, key string, t traffic) (bool, error) {
		r, err := b.peer.Allow(ctx, key, peerLims[t])
		if err != nil {
			return false, err
		}
		return r.Allowed > 0, nil
	}
	b.subs = append(b.subs, subject{
		name: "peer (redis_rate)",
		call: peerCall,
		prefill: func(ctx context.Context, keys []string) error {
			return prefillCalls(ctx, keys, func(k string) error { _, err := peerCall(ctx, k, deniedHeavy); return err })
		},
	})
	b.subs = append(b.subs, subject{
		name: "floor: TIME, GET, PSETEX, 6 integers",
		call: func(ctx context.Context, key string, t traffic) (bool, error) {
			err := b.rdb.EvalSha(ctx, b.floorSHA, []string{"floor:" + key}, "1000000", "3600000").Err()
			return err == nil, err
		},
	})
	b.subs = append(b.subs, subject{
		name: "return 1 (ceiling)",
		call: func(ctx context.Context, key string, t traffic) (bool, error) {
			// the same key and argument count as a decision, so that only
			// the work inside Redis differs
			err := b.rdb.EvalSha(ctx, b.oneSHA, []string{key}, "1000000", "1000").Err()
			return err == nil, err
		},
	})
	return b, nil
}

func (b *bench) close() {
	_ = b.rdb.Close()
	_ = b.admin.Close()
}

func (b *bench) logf(format string, args ...any) {
	fmt.Fprintf(b.w, format, args...)
}

// prefillCalls calls f for every key from 32 goroutines.
func prefillCalls(ctx context.Context, keys []string, f func(string) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for g := 0; g < 32; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(keys) {
					return
				}
				if err := f(keys[i]); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// cell is one measurement: one subject, one scenario, one repetition.
type cell struct {
	perSec    float64 // decisions per second
	allowed   float64 // fraction admitted
	cpu       float64 // Redis µs per script call (commandstats)
	calls     int64   // script calls Redis counted
	p50, p99  time.Duration
	decisions int64
}

// measure runs sub under sc for d and reads Redis's own accounting.
func (b *bench) measure(ctx context.Context, sub subject, sc scenario, d time.Duration) (cell, error) {
	keys := b.keys[sc.traffic][:sc.keys]
	if err := b.admin.ConfigResetStat(ctx).Err(); err != nil {
		return cell{}, err
	}
	var (
		wg              sync.WaitGroup
		stop            atomic.Bool
		decided, admits atomic.Int64
		failures        atomic.Int64
		firstErr        atomic.Value
		lat             = make([][]time.Duration, sc.callers)
	)
	begin := time.Now()
	for g := 0; g < sc.callers; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), uint64(begin.UnixNano())))
			mine := make([]time.Duration, 0, 4096)
			var n, ok int64
			for !stop.Load() {
				key := keys[0]
				if len(keys) > 1 {
					key = keys[rng.IntN(len(keys))]
				}
				t0 := time.Now()
				allowed, err := sub.call(ctx, key, sc.traffic)
				mine = append(mine, time.Since(t0))
				n++
				if err != nil {
					failures.Add(1)
					firstErr.CompareAndSwap(nil, err)
					continue
				}
				if allowed {
					ok++
				}
			}
			decided.Add(n)
			admits.Add(ok)
			lat[g] = mine
		}(g)
	}
	time.Sleep(d)
	stop.Store(true)
	wg.Wait()
	elapsed := time.Since(begin)
	if f := failures.Load(); f > 0 {
		return cell{}, fmt.Errorf("%s, %s: %d calls failed, first: %v", sub.name, sc, f, firstErr.Load())
	}
	calls, usec, err := b.scriptStats(ctx)
	if err != nil {
		return cell{}, err
	}
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	c := cell{
		perSec:    float64(decided.Load()) / elapsed.Seconds(),
		decisions: decided.Load(),
		calls:     calls,
		p50:       quantile(all, 0.50),
		p99:       quantile(all, 0.99),
	}
	if c.decisions > 0 {
		c.allowed = float64(admits.Load()) / float64(c.decisions)
	}
	if calls > 0 {
		c.cpu = usec / float64(calls)
	}
	return c, nil
}

// scriptCommands are the INFO commandstats entries of the ways a script runs.
var scriptCommands = map[string]bool{
	"cmdstat_evalsha": true, "cmdstat_eval": true, "cmdstat_evalsha_ro": true, "cmdstat_eval_ro": true,
	"cmdstat_fcall": true, "cmdstat_fcall_ro": true,
}

// scriptStats sums what INFO commandstats counts for the script commands
// since the last CONFIG RESETSTAT: calls and microseconds inside Redis.
func (b *bench) scriptStats(ctx context.Context) (calls int64, usec float64, err error) {
	info, err := b.admin.Info(ctx, "commandstats").Result()
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !scriptCommands[name] {
			continue
		}
		for _, kv := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "calls":
				n, _ := strconv.ParseInt(v, 10, 64)
				calls += n
			case "usec":
				f, _ := strconv.ParseFloat(v, 64)
				usec += f
			}
		}
	}
	return calls, usec, nil
}

func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q * float64(len(sorted)-1))
	return sorted[i]
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func infoField(info, name string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v
		}
	}
	return "?"
}

func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// cpuModel names the processor, for the report.
func cpuModel() string {
	return fmt.Sprintf("%s/%s, GOMAXPROCS %d", runtime.GOOS, runtime.GOARCH, runtime.GOMAXPROCS(0))
}
