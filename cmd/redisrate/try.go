package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/redisrate/redisrate"
	"github.com/redisrate/redisrate/scripts"
)

var tryCommand = command{
	name:    "try",
	summary: "make one rate-limit decision and print it",
	usage: `Usage: redisrate try --redis ADDR [--tls-ca FILE] [--algorithm A] [--limit 10/s] [--burst N] [--cost N] [--check] [--json] KEY

Makes one decision for KEY with the bundled script of the algorithm, as the Go
client does, and prints it. --check decides exactly as a real call would but
records nothing. The exit code is 0 when the request is admitted and 1 when
it is denied, so a shell script can branch on it.

Example:
  redisrate try --redis localhost:6379 --algorithm token_bucket --limit 100/minute --burst 20 user:42
`,
	setup: func(fs *flag.FlagSet) func(context.Context, []string, io.Writer) error {
		var lf limitFlags
		lf.register(fs, "the algorithm: "+algorithmNames())
		addr := fs.String("redis", "", redisFlagHelp)
		ca := fs.String("tls-ca", "", tlsCAFlagHelp)
		cost := &wholeFlag{name: "cost", max: maxWhole, v: 1}
		fs.Var(cost, "cost", "the units this request takes, a whole number (`N`); 0 reads the state and takes nothing (a peek)")
		check := fs.Bool("check", false, "decide without recording anything")
		asJSON := fs.Bool("json", false, "print the decision as JSON")
		return func(ctx context.Context, args []string, stdout io.Writer) error {
			if len(args) != 1 {
				if len(args) == 0 {
					return usageErr("the KEY to decide for is missing")
				}
				return usageErr("want one KEY, got %d arguments: %q", len(args), args)
			}
			key := args[0]
			lim, err := lf.parse()
			if err != nil {
				return err
			}
			n := cost.v
			kind := redisrate.KindAllow
			switch {
			case n == 0:
				kind = redisrate.KindPeek
			case *check:
				kind = redisrate.KindCheck
			}
			// A calendar limit's ARGV depends on its window, which Decide
			// plans: its text, with the flags, is checked instead.
			if _, err := redisrate.Args(kind, n, lim); lim.Calendar == "" && err != nil {
				return usageErr("%s", trimPrefix(err))
			} else if _, err := redisrate.ParseLimit(lim.String()); lim.Calendar != "" && err != nil {
				return usageErr("%s", trimPrefix(err))
			}
			rdb, err := connect(ctx, *addr, *ca)
			if err != nil {
				return err
			}
			defer rdb.Close()
			l := redisrate.NewLimiter(rdb, redisrate.WithDecisionTimeout(cliDecisionTimeout))
			res, err := l.Decide(ctx, redisrate.Request{Kind: kind, Key: key, Limits: []redisrate.Limit{lim}, N: n})
			if err != nil {
				return err
			}
			if *asJSON {
				err = printTryJSON(stdout, key, lim, n, *check, res)
			} else {
				printTry(stdout, key, lim, n, *check, res)
			}
			if err != nil {
				return localErr(err)
			}
			if !res.Allowed {
				return &exitError{code: exitDenied, err: fmt.Errorf("denied")}
			}
			return nil
		}
	},
}

type tryJSON struct {
	Key          string `json:"key"`
	Algorithm    string `json:"algorithm"`
	Limit        string `json:"limit"`
	Cost         int64  `json:"cost"`
	Check        bool   `json:"check"`
	Allowed      bool   `json:"allowed"`
	Remaining    int64  `json:"remaining"`
	RetryAfterMs int64  `json:"retry_after_ms"` // -1: never
	ResetAfterMs int64  `json:"reset_after_ms"`
	Capacity     int64  `json:"capacity"`
}

func printTryJSON(w io.Writer, key string, lim redisrate.Limit, cost int64, check bool, r redisrate.Result) error {
	retry := r.RetryAfter.Milliseconds()
	if r.Never() {
		retry = -1
	}
	enc := json.NewEncoder(w)
	return enc.Encode(tryJSON{
		Key: key, Algorithm: lim.Algorithm.String(), Limit: limitText(lim),
		Cost: cost, Check: check, Allowed: r.Allowed, Remaining: r.Remaining,
		RetryAfterMs: retry, ResetAfterMs: r.ResetAfter.Milliseconds(), Capacity: r.Capacity,
	})
}

func printTry(w io.Writer, key string, lim redisrate.Limit, cost int64, check bool, r redisrate.Result) {
	verdict := "ALLOWED"
	if !r.Allowed {
		verdict = "DENIED"
	}
	what := "recorded"
	switch {
	case cost == 0:
		verdict, what = "PEEK", "the state; nothing taken"
	case check:
		what = "checked only, nothing recorded"
	case !r.Allowed:
		what = "nothing recorded"
	}
	fmt.Fprintf(w, "%s  key %q, cost %d, %s %s (%s)\n", verdict, key, cost, lim.Algorithm, limitText(lim), what)
	fmt.Fprintf(w, "  remaining    %d of %d\n", r.Remaining, r.Capacity)
	switch {
	case cost == 0:
	case r.Allowed:
		fmt.Fprintf(w, "  retry after  0s (admitted)\n")
	case r.Never():
		fmt.Fprintf(w, "  retry after  never: the cost is more than the capacity %d\n", r.Capacity)
	default:
		fmt.Fprintf(w, "  retry after  %v\n", r.RetryAfter)
	}
	fmt.Fprintf(w, "  full after   %v\n", r.ResetAfter.Round(time.Millisecond))
}

// algorithmNames lists the algorithms from the scripts' manifest: "gcra
// (default), token_bucket, ...".
func algorithmNames() string {
	var names []string
	for i, s := range scripts.Specs() {
		if i == 0 {
			names = append(names, s.Name+" (default)")
			continue
		}
		names = append(names, s.Name)
	}
	return strings.Join(names, ", ")
}

// limitText is lim without its algorithm, which try prints apart; a
// calendar limit, which fixed_window always decides, as it is written.
func limitText(lim redisrate.Limit) string {
	if lim.Calendar != "" {
		return lim.String()
	}
	return lim.WithAlgorithm(redisrate.GCRA).String()
}
