package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	redis_rate "github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
	"github.com/redisrate/redisrate"
	"github.com/redisrate/redisrate/scripts"
)

// The many-keys mode (-many, issue 37): callers each deciding on a key of
// their own picking among 10,000, uniformly or skewed (10 hot keys take
// 20% of the calls), through the Limiter with its default options (which
// pipelines the calls it has in flight) and through go-redis/redis_rate
// v10, in alternating rounds on one Redis, at 1, 8 and 64 callers.

const (
	manyKeys    = 10000
	manyHot     = 10   // the skewed traffic's hot keys...
	manyHotPerM = 2000 // ...take 20% of the calls (per 10,000)
)

// manyLimit is exhausted by the hot keys of the skewed traffic at 64
// callers and by none of the uniform keys, so that guarantee 4's bound is
// checked where it binds.
var (
	manyLimit     = redisrate.PerSecond(500)
	manyLimitPeer = redis_rate.PerSecond(500)
)

// manySubject is one way of deciding.
type manySubject struct {
	name string
	call func(ctx context.Context, key string) (bool, error)
}

// manyCell is the measure of one subject in one round.
type manyCell struct {
	decisions, errs     int64
	rate                float64 // decisions per second
	p50, p99            time.Duration
	redisCPU, clientCPU time.Duration // per decision
	boundOK             bool
	worstKey            string
	worstAdmitted       int64
	bound               float64
}

// manyRun is the many-keys mode's report; an error when guarantee 4's
// bound is broken on a key.
func manyRun(ctx context.Context, cfg config, addr string, w io.Writer) (string, error) {
	// A user's client: go-redis's defaults, with a pool for 64 callers.
	rdb := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 80})
	defer rdb.Close()
	if err := rdb.FunctionLoadReplace(ctx, scripts.Library).Err(); err != nil {
		return "", fmt.Errorf("loading the Functions library: %w", err)
	}
	l := redisrate.NewLimiter(rdb) // the defaults: decision timeout, pipelining, coalescing
	p := redis_rate.NewLimiter(rdb)
	// The client docs/reliability.md recommends: go-redis stops a command
	// at its context's deadline, so the Limiter needs no goroutine of its
	// own per call to hold the decision timeout.
	rec := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 80, ContextTimeoutEnabled: true})
	defer rec.Close()
	lr := redisrate.NewLimiter(rec)
	subjects := []manySubject{
		{"redisrate (Limiter.Allow, defaults)", func(ctx context.Context, key string) (bool, error) {
			r, err := l.Allow(ctx, key, manyLimit)
			return r.Allowed, err
		}},
		{"redis_rate v10 (Allow)", func(ctx context.Context, key string) (bool, error) {
			r, err := p.Allow(ctx, key, manyLimitPeer)
			return r.Allowed > 0, err
		}},
		{"redisrate, ContextTimeoutEnabled client", func(ctx context.Context, key string) (bool, error) {
			r, err := lr.Allow(ctx, key, manyLimit)
			return r.Allowed, err
		}},
	}
	rounds, round := 5, time.Second
	if cfg.short {
		rounds, round = 2, 200*time.Millisecond
	}
	if cfg.reps > 0 && !cfg.short {
		rounds = cfg.reps
	}
	var r strings.Builder
	fmt.Fprintf(&r, "### Many keys: 10,000 keys, uniform and skewed (10 hot keys take 20%% of calls)\n\n")
	fmt.Fprintf(&r, "Limit %v (GCRA) per key, which the skewed traffic's hot keys exhaust. The Limiter with its default options on go-redis's default client, and (rows \"ContextTimeoutEnabled\") on a client with the setting docs/reliability.md recommends, against redis_rate on the default client. %d alternating rounds of %v per cell; medians of the rounds, and ratios (the Limiter / redis_rate) taken within each round, then their median. Redis CPU: `INFO cpu` (used_cpu_user + used_cpu_sys) delta over the decisions; client CPU: the bench process's getrusage delta over the decisions. go-redis with its default options (PoolSize 80).\n\n", manyLimit, rounds, round)
	r.WriteString("| traffic | callers | decisions/s: Limiter / redis_rate (ratio) | p50 µs | p99 µs | Redis CPU µs/decision (ratio) | client CPU µs/decision (ratio) | guarantee 4 |\n")
	r.WriteString("| --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, skewed := range []bool{false, true} {
		for _, callers := range []int{1, 8, 64} {
			cells := make([][]manyCell, len(subjects))
			for i := 0; i < rounds; i++ {
				for j := range subjects {
					k := (i + j) % len(subjects) // alternate which goes first
					prefix := fmt.Sprintf("many:%d:%v:%d:%d:%d:", k, skewed, callers, i, time.Now().UnixNano())
					c, err := manyCellRun(ctx, rdb, subjects[k], prefix, callers, skewed, round)
					if err != nil {
						return "", err
					}
					if !c.boundOK {
						return "", fmt.Errorf("guarantee 4 broken: %s, key %s admitted %d, bound %.0f", subjects[k].name, c.worstKey, c.worstAdmitted, c.bound)
					}
					cells[k] = append(cells[k], c)
					fmt.Fprintf(w, "many skewed=%v callers=%d round %d: %s %.0f/s p50 %v p99 %v redis %v client %v errors %d\n",
						skewed, callers, i+1, subjects[k].name, c.rate, c.p50, c.p99, c.redisCPU, c.clientCPU, c.errs)
				}
			}
			traffic := "uniform"
			if skewed {
				traffic = "skewed"
			}
			med := func(k int, f func(manyCell) float64) float64 {
				xs := make([]float64, len(cells[k]))
				for i, c := range cells[k] {
					xs[i] = f(c)
				}
				return median(xs)
			}
			ours := 0
			ratio := func(f func(manyCell) float64) float64 {
				xs := make([]float64, len(cells[ours]))
				for i := range cells[ours] {
					xs[i] = f(cells[ours][i]) / f(cells[1][i])
				}
				return median(xs)
			}
			rate := func(c manyCell) float64 { return c.rate }
			rcpu := func(c manyCell) float64 { return float64(c.redisCPU) / 1e3 }
			ccpu := func(c manyCell) float64 { return float64(c.clientCPU) / 1e3 }
			p50 := func(c manyCell) float64 { return float64(c.p50) / 1e3 }
			p99 := func(c manyCell) float64 { return float64(c.p99) / 1e3 }
			for _, ours = range []int{0, 2} {
				var errs int64
				for _, c := range cells[ours] {
					errs += c.errs
				}
				note := "held"
				if errs > 0 {
					note += fmt.Sprintf(" (%d errors: decision timeouts, then the open breaker's answers)", errs)
				}
				what := traffic
				if ours == 2 {
					what += ", ContextTimeoutEnabled"
				}
				fmt.Fprintf(&r, "| %s | %d | %s / %s (**%.2f×**) | %.0f / %.0f | %.0f / %.0f | %.2f / %.2f (**%.2f×**) | %.2f / %.2f (**%.2f×**) | %s |\n",
					what, callers, thousands(int(med(ours, rate))), thousands(int(med(1, rate))), ratio(rate),
					med(ours, p50), med(1, p50), med(ours, p99), med(1, p99),
					med(ours, rcpu), med(1, rcpu), ratio(rcpu), med(ours, ccpu), med(1, ccpu), ratio(ccpu), note)
			}
		}
	}
	return r.String(), nil
}

// manyCellRun runs one subject for d from callers goroutines on keys under
// prefix, and measures it.
func manyCellRun(ctx context.Context, rdb *redis.Client, s manySubject, prefix string, callers int, skewed bool, d time.Duration) (manyCell, error) {
	keys := make([]string, manyKeys)
	for i := range keys {
		keys[i] = prefix + strconv.Itoa(i)
	}
	admitted := make([]atomic.Int64, manyKeys)
	lat := make([][]time.Duration, callers)
	var stop atomic.Bool
	var n, errs atomic.Int64
	var wg sync.WaitGroup
	redis0, err := redisCPU(ctx, rdb)
	if err != nil {
		return manyCell{}, err
	}
	client0 := processCPU()
	begin := time.Now().Round(0)
	for g := 0; g < callers; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			rnd := uint64(g)*0x9E3779B97F4A7C15 + uint64(time.Now().UnixNano())
			mine := make([]time.Duration, 0, 1<<14)
			for !stop.Load() {
				rnd ^= rnd << 13
				rnd ^= rnd >> 7
				rnd ^= rnd << 17
				i := int(rnd % manyKeys)
				if skewed && (rnd>>32)%10000 < manyHotPerM {
					i = int((rnd >> 16) % manyHot)
				}
				t := time.Now()
				ok, err := s.call(ctx, keys[i])
				mine = append(mine, time.Since(t))
				if err != nil {
					errs.Add(1)
					continue
				}
				n.Add(1)
				if ok {
					admitted[i].Add(1)
				}
			}
			lat[g] = mine
		}(g)
	}
	time.Sleep(d)
	stop.Store(true)
	wg.Wait()
	elapsed := time.Now().Round(0).Sub(begin)
	client1 := processCPU()
	redis1, err := redisCPU(ctx, rdb)
	if err != nil {
		return manyCell{}, err
	}
	var all []time.Duration
	for _, xs := range lat {
		all = append(all, xs...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	c := manyCell{decisions: n.Load(), errs: errs.Load(), rate: float64(n.Load()) / elapsed.Seconds(), boundOK: true}
	if len(all) > 0 {
		c.p50, c.p99 = all[len(all)/2], all[len(all)*99/100]
	}
	if c.decisions > 0 {
		c.redisCPU = (redis1 - redis0) / time.Duration(c.decisions)
		c.clientCPU = (client1 - client0) / time.Duration(c.decisions)
	}
	// Guarantee 4 for GCRA: at most burst + rate * t / period over any span
	// t, here the run's (which holds every admission's TIME).
	c.bound = float64(manyLimit.Capacity()) + float64(manyLimit.Rate)*elapsed.Seconds()/manyLimit.Period.Seconds()
	for i := range admitted {
		if a := admitted[i].Load(); a > c.worstAdmitted {
			c.worstAdmitted, c.worstKey = a, keys[i]
		}
	}
	c.boundOK = float64(c.worstAdmitted) <= c.bound
	return c, nil
}

// redisCPU is Redis's CPU time so far (INFO cpu: user + sys).
func redisCPU(ctx context.Context, rdb *redis.Client) (time.Duration, error) {
	info, err := rdb.Info(ctx, "cpu").Result()
	if err != nil {
		return 0, err
	}
	var total float64
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (k == "used_cpu_user" || k == "used_cpu_sys") {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return 0, fmt.Errorf("INFO cpu %s: %w", k, err)
			}
			total += f
		}
	}
	return time.Duration(total * 1e9), nil
}

// processCPU is this process's CPU time so far (user + sys).
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		fmt.Fprintln(os.Stderr, "getrusage:", err)
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
