package main

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/redisrate/redisrate"
	"github.com/redisrate/redisrate/internal/manifest"
	"github.com/redisrate/redisrate/scripts"
)

var demoCommand = command{
	name:    "demo",
	summary: "run one traffic pattern through all six algorithms side by side",
	usage: `Usage: redisrate demo [--limit 10/s] [--burst N] [--algorithm A[,B...]] [--svg FILE] [--redis ADDR] [--tls-ca FILE]

Sends one traffic pattern through all six algorithms side by side, with the
same limit: a steady stream at 60% of the limit, a sudden burst of twice the
burst size across a period boundary, a pause, then a burst of costly requests.
It prints a timeline per algorithm of the units admitted and denied, and a
table: requests admitted and denied, the most units admitted within a quarter
period and within one period, the longest wait imposed on a denied request,
and the largest state kept for the key.

By default it runs on an embedded Redis (miniredis) executing the very same
Lua scripts through the Go client, with a simulated clock: it takes a moment
and prints the same thing on every run. With --redis it runs against a real
Redis in real time, on a shortened pattern (3.5 periods, starting when the
server's clock is on a multiple of the period), and reports the
server's MEMORY USAGE for the state; its keys are deleted afterwards.

Examples:
  redisrate demo
  redisrate demo --limit 100/minute --burst 20 --svg demo.svg
  redisrate demo --algorithm gcra,fixed_window --redis localhost:6379
`,
	setup: func(fs *flag.FlagSet) func(context.Context, []string, io.Writer) error {
		var lf limitFlags
		lf.register(fs, "run only these algorithms, comma separated (default: all six)")
		addr := fs.String("redis", "", "run against this Redis in real time (`ADDR` as host:port or a redis:// URL) instead of the embedded one")
		ca := fs.String("tls-ca", "", tlsCAFlagHelp)
		svg := fs.String("svg", "", "also write the timelines as an SVG chart to `FILE`")
		return func(ctx context.Context, args []string, stdout io.Writer) error {
			if len(args) > 0 {
				return usageErr("unexpected argument %q", args[0])
			}
			if *ca != "" && *addr == "" {
				return usageErr("--tls-ca needs --redis (the embedded Redis needs no TLS)")
			}
			cfg, err := demoConfig(lf)
			if err != nil {
				return err
			}
			cfg.addr, cfg.ca = *addr, *ca
			rep, err := runDemo(ctx, cfg)
			if err != nil {
				return err
			}
			if *svg != "" {
				if err := os.WriteFile(*svg, []byte(rep.svg()), 0o644); err != nil {
					return localErr(fmt.Errorf("--svg: %w", err))
				}
			}
			rep.writeText(stdout)
			if *svg != "" {
				fmt.Fprintf(stdout, "\nwrote the chart to %s\n", *svg)
			}
			return nil
		}
	},
}

type demoCfg struct {
	limit redisrate.Limit // Algorithm ignored: each lane has its own
	algos []redisrate.Algorithm
	addr  string
	ca    string // --tls-ca
}

func demoConfig(lf limitFlags) (demoCfg, error) {
	algoFlag := lf.algorithm
	lf.algorithm = ""
	lim, err := lf.parse()
	if err != nil {
		return demoCfg{}, err
	}
	if lim.Calendar != "" {
		return demoCfg{}, usageErr("--limit: a calendar limit (%s) lasts days: the demo plays a pattern of a few periods; try it with redisrate try", lim)
	}
	// The rate, period and burst must suit GCRA, which takes any valid ones;
	// the window algorithms then run with burst = limit (the manifest's
	// Window flag), and a lane whose script refuses the limit is skipped.
	if err := lim.WithAlgorithm(redisrate.GCRA).Validate(); err != nil {
		return demoCfg{}, usageErr("%s", trimPrefix(err))
	}
	cfg := demoCfg{limit: lim}
	switch {
	case algoFlag != "":
		for _, name := range strings.Split(algoFlag, ",") {
			a, err := redisrate.ParseAlgorithm(name)
			if err != nil {
				return cfg, usageErr("--algorithm: %s", trimPrefix(err))
			}
			if !slices.Contains(cfg.algos, a) {
				cfg.algos = append(cfg.algos, a)
			}
		}
	case limitNamesAlgorithm(lf.limit):
		cfg.algos = []redisrate.Algorithm{lim.Algorithm}
	default:
		for i := range scripts.Specs() {
			cfg.algos = append(cfg.algos, redisrate.Algorithm(i))
		}
	}
	return cfg, nil
}

// limitNamesAlgorithm reports whether a --limit text such as "10/s gcra"
// names an algorithm, which then runs alone.
func limitNamesAlgorithm(s string) bool {
	for _, f := range strings.Fields(s)[1:] {
		if _, err := redisrate.ParseAlgorithm(f); err == nil {
			return true
		}
	}
	return false
}

// The pattern, in periods of the limit, so it tells the same story on any
// numbers: a steady stream at 60% of the rate, a burst of twice the burst
// size in a fifth of a period across a period boundary (where fixed and
// sliding windows turn over), a pause, and 8 requests of a quarter of the
// burst each within one period.
type request struct {
	at   time.Duration
	cost int64
}

type phase struct {
	name     string
	from, to time.Duration
}

type pattern struct {
	reqs   []request
	phases []phase
	total  time.Duration
	desc   []string
}

const maxDemoRequests = 5000

func makePattern(lim redisrate.Limit, short bool) (pattern, error) {
	P := float64(lim.Period)
	R, B := float64(lim.Rate), float64(lim.Capacity())
	steadyEnd, burstAt, costlyAt, end := 3.0, 2.9, 4.5, 6.5
	if short {
		steadyEnd, burstAt, costlyAt, end = 1.0, 0.9, 2.0, 3.5
	}
	at := func(periods float64) time.Duration {
		return time.Duration(math.Round(periods*P/1e3)) * time.Microsecond
	}
	var p pattern
	p.total = at(end)
	p.phases = []phase{
		{"steady", 0, at(steadyEnd)},
		{"burst", at(burstAt), at(burstAt + 0.2)},
		{"pause", at(burstAt + 0.2), at(costlyAt)},
		{"costly", at(costlyAt), at(costlyAt + 1)},
	}
	nSteady := max(3, int(math.Round(0.6*R*steadyEnd)))
	nBurst := max(4, int(math.Round(2*B)))
	cost := max(2, int64(math.Round(B/4)))
	const nCostly = 8
	if n := nSteady + nBurst + nCostly; n > maxDemoRequests {
		return p, usageErr("the pattern for %s would send %d requests to each algorithm, more than the demo's %d: try a smaller rate or burst per period", lim.WithAlgorithm(redisrate.GCRA), n, maxDemoRequests)
	}
	for i := range nSteady {
		p.reqs = append(p.reqs, request{at(steadyEnd * float64(i) / float64(nSteady)), 1})
	}
	for i := range nBurst {
		p.reqs = append(p.reqs, request{at(burstAt + 0.2*float64(i)/float64(nBurst)), 1})
	}
	for i := range nCostly {
		p.reqs = append(p.reqs, request{at(costlyAt + float64(i)/nCostly), cost})
	}
	slices.SortStableFunc(p.reqs, func(a, b request) int { return cmp.Compare(a.at, b.at) })
	p.desc = []string{
		fmt.Sprintf("steady   %d requests, evenly over %s (60%% of the rate)", nSteady, fmtDur(at(steadyEnd))),
		fmt.Sprintf("burst    %d requests within %s from %s, across a period boundary", nBurst, fmtDur(at(0.2)), fmtDur(at(burstAt))),
		fmt.Sprintf("pause    nothing until %s", fmtDur(at(costlyAt))),
		fmt.Sprintf("costly   %d requests of cost %d within %s from %s; then quiet until %s", nCostly, cost, fmtDur(at(1)), fmtDur(at(costlyAt)), fmtDur(p.total)),
	}
	return p, nil
}

type outcome struct {
	request
	res redisrate.Result
}

// lane is one algorithm's run.
type lane struct {
	algo    redisrate.Algorithm
	spec    manifest.Spec // the script's manifest entry
	lim     redisrate.Limit
	key     string
	note    string // why the burst differs, or why the lane was skipped
	skipped bool
	out     []outcome

	memPeak   int64  // MEMORY USAGE, -1 when the server has no MEMORY command
	statePeak int    // bytes of a string state, or members of a sorted set
	stateKind string // "string" or "zset"
}

type report struct {
	cfg     demoCfg
	pat     pattern
	lanes   []*lane
	server  string // what ran the scripts
	real    bool
	memNote string // why MEMORY USAGE is missing
}

// runDemo plays the pattern through every lane, one request at a time, all
// lanes at the same instant, on the embedded Redis with a simulated clock or
// on a real Redis in real time.
func runDemo(ctx context.Context, cfg demoCfg) (*report, error) {
	rep := &report{cfg: cfg, real: cfg.addr != ""}
	var err error
	if rep.pat, err = makePattern(cfg.limit, rep.real); err != nil {
		return nil, err
	}
	if rep.real && cfg.limit.Period > 30*time.Second {
		return nil, usageErr("--redis runs in real time and the pattern for a period of %s would take %s: use a period of at most 30s", fmtDur(cfg.limit.Period), fmtDur(rep.pat.total))
	}
	prefix := "demo:"
	if rep.real {
		var nonce [6]byte
		_, _ = rand.Read(nonce[:])
		prefix = "redisrate:demo:" + hex.EncodeToString(nonce[:]) + ":"
	}
	for _, a := range cfg.algos {
		ln := &lane{algo: a, key: prefix + a.String(), lim: cfg.limit.WithAlgorithm(a)}
		ln.spec, _ = manifest.Lookup(a.String())
		if ln.spec.Window && ln.lim.Burst != 0 && ln.lim.Burst != ln.lim.Rate {
			// The manifest's window flag: burst may only be absent or the limit.
			ln.note = fmt.Sprintf("%s keeps no burst apart from its limit: runs with burst %d", a, ln.lim.Rate)
			ln.lim.Burst = 0
		}
		if err := ln.lim.Validate(); err != nil {
			if len(cfg.algos) == 1 {
				return nil, usageErr("%s", trimPrefix(err))
			}
			ln.skipped, ln.note = true, fmt.Sprintf("%s skipped: %s", a, trimPrefix(err))
		}
		rep.lanes = append(rep.lanes, ln)
	}
	if !slices.ContainsFunc(rep.lanes, func(ln *lane) bool { return !ln.skipped }) {
		return nil, usageErr("%s", strings.TrimPrefix(rep.lanes[0].note, rep.lanes[0].algo.String()+" skipped: "))
	}

	var rdb redis.UniversalClient
	var wait func(at time.Duration) error
	var now func() time.Duration // the time of a call, in the pattern's terms
	if rep.real {
		if rdb, err = connect(ctx, cfg.addr, cfg.ca); err != nil {
			return nil, err
		}
		defer rdb.Close()
		rep.server = "Redis at " + cfg.addr
		if info, err := readInfo(ctx, rdb); err == nil && info["redis_version"] != "" {
			rep.server = serverName(info) + " at " + cfg.addr
		}
		// Start on a multiple of the period by the server's clock, where the
		// sliding window's windows turn over, as the simulated run does.
		start := time.Now()
		if t, err := rdb.Time(ctx).Result(); err == nil {
			start = start.Add(cfg.limit.Period - time.Duration(t.UnixNano()%int64(cfg.limit.Period)))
		}
		now = func() time.Duration { return time.Since(start) }
		wait = func(at time.Duration) error {
			t := time.NewTimer(time.Until(start.Add(at)))
			defer t.Stop()
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-t.C:
				return nil
			}
		}
	} else {
		mr := miniredis.NewMiniRedis()
		if err := mr.Start(); err != nil {
			return nil, localErr(fmt.Errorf("starting the embedded Redis: %w", err))
		}
		defer mr.Close()
		// Windows are aligned to multiples of the period since the epoch: start
		// on one, so the pattern meets the same boundaries on every run.
		base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		if rem := base.UnixNano() % int64(cfg.limit.Period); rem != 0 {
			base = base.Add(cfg.limit.Period - time.Duration(rem))
		}
		mr.SetTime(base)
		c := redis.NewClient(&redis.Options{Addr: mr.Addr(), Protocol: 2, MaxRetries: -1})
		defer c.Close()
		rdb = c
		rep.server = "the embedded Redis (miniredis), simulated clock"
		var last time.Duration
		now = func() time.Duration { return last }
		wait = func(at time.Duration) error {
			mr.SetTime(base.Add(at))
			mr.FastForward(at - last) // expires keys whose TTL ran out
			last = at
			return nil
		}
	}

	// A command line waits as a person would, not as a service does: the
	// embedded Redis runs its Lua in Go, and a real one may be far away.
	limiter := redisrate.NewLimiter(rdb, redisrate.WithDecisionTimeout(cliDecisionTimeout))
	// miniredis answers MEMORY USAGE with its own estimate, far from a real
	// Redis's (431 bytes for a sorted set Redis keeps in 248): not shown.
	memOK := rep.real
	if rep.real {
		defer func() {
			for _, ln := range rep.lanes {
				_ = limiter.Reset(context.WithoutCancel(ctx), ln.key)
			}
		}()
	}
	for _, req := range rep.pat.reqs {
		if err := wait(req.at); err != nil {
			return nil, err
		}
		for _, ln := range rep.lanes {
			if ln.skipped {
				continue
			}
			sent := req
			sent.at = now() // in real time, a little after the plan
			res, err := limiter.AllowN(ctx, ln.key, ln.lim, req.cost)
			if err != nil {
				return nil, err
			}
			ln.out = append(ln.out, outcome{sent, res})
			if !res.Allowed {
				continue
			}
			if err := ln.measure(ctx, rdb, &memOK); err != nil {
				return nil, err
			}
		}
	}
	switch {
	case !rep.real:
		rep.memNote = "n/a: miniredis has no real memory figures"
	case !memOK:
		rep.memNote = "n/a: " + rep.server + " has no MEMORY USAGE"
	}
	return rep, nil
}

// measure records the size of the lane's state after an admitted request,
// keeping the peak: the server's MEMORY USAGE where it has the command, and
// the state itself (bytes of the string, members of the sorted set).
func (ln *lane) measure(ctx context.Context, rdb redis.UniversalClient, memOK *bool) error {
	// One round trip: the state's size by its type (the sliding log keeps a
	// sorted set, the others a string) and, where the server has it, MEMORY USAGE.
	kind := "string"
	var size *redis.IntCmd
	var mem *redis.IntCmd
	// Errors are read per command below: MEMORY USAGE may fail alone.
	_, _ = rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		if ln.spec.Log {
			kind, size = "zset", p.ZCard(ctx, ln.key)
		} else {
			size = p.StrLen(ctx, ln.key)
		}
		if *memOK {
			mem = p.MemoryUsage(ctx, ln.key)
		}
		return nil
	})
	if err := size.Err(); err != nil {
		return err
	}
	if n := int(size.Val()); n > ln.statePeak {
		ln.statePeak, ln.stateKind = n, kind
	}
	if mem == nil {
		return nil
	}
	var rerr redis.Error
	switch err := mem.Err(); {
	case errors.As(err, &rerr) && !isNetErr(err) && !errors.Is(err, redis.Nil):
		*memOK = false // a server without MEMORY USAGE
		ln.memPeak = -1
	case errors.Is(err, redis.Nil):
	case err != nil:
		return err
	case mem.Val() > ln.memPeak:
		ln.memPeak = mem.Val()
	}
	return nil
}

// stats are a lane's summary row.
type stats struct {
	admitted, denied   int
	mostQuarter, most1 int64 // most units admitted in any span of P/4, of P
	longestWait        time.Duration
	never              bool
}

func (ln *lane) stats(P time.Duration) stats {
	var s stats
	var ok []outcome
	for _, o := range ln.out {
		if o.res.Allowed {
			s.admitted++
			ok = append(ok, o)
			continue
		}
		s.denied++
		if o.res.Never() {
			s.never = true
		} else if o.res.RetryAfter > s.longestWait {
			s.longestWait = o.res.RetryAfter
		}
	}
	s.mostQuarter, s.most1 = mostWithin(ok, P/4), mostWithin(ok, P)
	return s
}

// mostWithin returns the most units admitted within any span [t, t+span).
func mostWithin(ok []outcome, span time.Duration) int64 {
	var best, sum int64
	j := 0
	for i := range ok {
		sum += ok[i].cost
		for ok[i].at-ok[j].at >= span {
			sum -= ok[j].cost
			j++
		}
		best = max(best, sum)
	}
	return best
}

// slot is the width of one timeline column: an eighth of the period.
func (r *report) slot() time.Duration { return r.cfg.limit.Period / 8 }

// columns returns units offered, admitted and denied per slot for a lane, or
// for the offered traffic when ln is nil.
func (r *report) columns(ln *lane, slot time.Duration) (admitted, denied []int64) {
	n := int((r.pat.total + slot - 1) / slot)
	admitted, denied = make([]int64, n), make([]int64, n)
	col := func(at time.Duration) int { return min(n-1, int(at/slot)) }
	if ln == nil {
		for _, q := range r.pat.reqs {
			admitted[col(q.at)] += q.cost
		}
		return admitted, denied
	}
	for _, o := range ln.out {
		if o.res.Allowed {
			admitted[col(o.at)] += o.cost
		} else {
			denied[col(o.at)] += o.cost
		}
	}
	return admitted, denied
}

var levels = []rune(" ▁▂▃▄▅▆▇█")

func spark(vals []int64, top int64) string {
	var b strings.Builder
	for _, v := range vals {
		l := 0
		if v > 0 {
			l = int(min(8, max(1, (v*8+top-1)/top))) // ceil(8v/top)
		}
		b.WriteRune(levels[l])
	}
	return strings.TrimRight(b.String(), " ")
}

func (r *report) writeText(w io.Writer) {
	lim := r.cfg.limit
	fmt.Fprintf(w, "redisrate demo: one traffic pattern, limit %s, burst %d, on %s\n", redisrate.Per(lim.Rate, lim.Period), lim.Capacity(), r.server)
	if r.real {
		fmt.Fprintf(w, "real time: a shortened pattern of %s; timings vary a little from run to run\n", fmtDur(r.pat.total))
	} else {
		fmt.Fprintf(w, "the same Lua scripts and Go client as production; identical output on every run\n")
	}
	fmt.Fprintln(w)
	for _, d := range r.pat.desc {
		fmt.Fprintf(w, "  %s\n", d)
	}
	for _, ln := range r.lanes {
		if ln.note != "" {
			fmt.Fprintf(w, "  note: %s\n", ln.note)
		}
	}
	fmt.Fprintln(w)

	slot := r.slot()
	offered, _ := r.columns(nil, slot)
	top := slices.Max(offered)
	const label = 26
	var axis, ticks strings.Builder
	for c := 0; c < len(offered); c += 8 {
		t := fmtDur(time.Duration(c/8) * r.cfg.limit.Period)
		if axis.Len() > c || c+len(t) > len(offered)+2 {
			continue
		}
		axis.WriteString(strings.Repeat(" ", c-axis.Len()) + t)
		ticks.WriteString(strings.Repeat(" ", c-ticks.Len()) + "|")
	}
	fmt.Fprintf(w, "%-*s%s\n%-*s%s\n", label, "time", axis.String(), label, "", ticks.String())
	fmt.Fprintf(w, "%-*s%s\n", label, "offered", spark(offered, top))
	for _, ln := range r.lanes {
		if ln.skipped {
			continue
		}
		ok, no := r.columns(ln, slot)
		fmt.Fprintf(w, "%-15s %-*s%s\n", ln.algo, label-16, "admitted", spark(ok, top))
		fmt.Fprintf(w, "%-15s %-*s%s\n", "", label-16, "denied", spark(no, top))
	}
	fmt.Fprintf(w, "%-*sone column = %s; a full block = %d units\n\n", label, "", fmtDur(slot), top)

	q := fmtDur(r.cfg.limit.Period / 4)
	p := fmtDur(r.cfg.limit.Period)
	header := []string{"algorithm", "admitted", "denied", "most in " + q, "most in " + p, "longest wait", "state (peak)", "MEMORY USAGE"}
	rows := [][]string{header}
	for _, ln := range r.lanes {
		if ln.skipped {
			rows = append(rows, []string{ln.algo.String(), "-", "-", "-", "-", "-", "skipped", "-"})
			continue
		}
		s := ln.stats(r.cfg.limit.Period)
		wait := fmtDur(s.longestWait)
		if s.denied == 0 {
			wait = "-"
		}
		if s.never {
			wait = "never (cost > burst)"
		}
		state := "-"
		switch ln.stateKind {
		case "string":
			state = fmt.Sprintf("string, %d B", ln.statePeak)
		case "zset":
			state = fmt.Sprintf("zset, %d members", ln.statePeak)
		}
		mem := "n/a"
		if ln.memPeak > 0 {
			mem = fmt.Sprintf("%d B", ln.memPeak)
		}
		rows = append(rows, []string{ln.algo.String(), fmt.Sprint(s.admitted), fmt.Sprint(s.denied),
			fmt.Sprint(s.mostQuarter), fmt.Sprint(s.most1), wait, state, mem})
	}
	writeTable(w, rows)
	fmt.Fprintf(w, "\nadmitted, denied: requests. most in %s / %s: the most units admitted within any span that long.\n", q, p)
	fmt.Fprintf(w, "longest wait: the longest retry_after told to a denied request. state: the key's value at its largest.\n")
	switch {
	case r.memNote != "" && r.real:
		fmt.Fprintf(w, "MEMORY USAGE %s.\n", r.memNote)
	case r.memNote != "":
		fmt.Fprintf(w, "MEMORY USAGE %s; run with --redis ADDR to measure a real server's.\n", r.memNote)
	}
}

// writeTable writes rows as columns, the first left aligned, numbers right.
func writeTable(w io.Writer, rows [][]string) {
	width := make([]int, len(rows[0]))
	for _, row := range rows {
		for i, c := range row {
			width[i] = max(width[i], len([]rune(c)))
		}
	}
	for _, row := range rows {
		var b strings.Builder
		for i, c := range row {
			pad := strings.Repeat(" ", width[i]-len([]rune(c)))
			switch {
			case i == 0 || i >= 5:
				b.WriteString(c + pad)
			default:
				b.WriteString(pad + c)
			}
			if i < len(row)-1 {
				b.WriteString("  ")
			}
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
}

// fmtDur writes d briefly: "1s", "250ms", "1m30s", "2h".
func fmtDur(d time.Duration) string {
	switch {
	case d == 0:
		return "0s"
	case d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	case d < time.Second:
		return d.Round(time.Microsecond).String()
	}
	return strings.Replace(d.Round(time.Millisecond).String(), "m0s", "m", 1)
}
