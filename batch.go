package redisrate

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Request is one decision of a batch: N units from Key under every one of
// Limits (all or nothing, as AllowMulti), or, with Check, whether they would
// be admitted, recording nothing.
type Request struct {
	Key    string
	Limits []Limit
	N      float64 // the cost, as in AllowN: 1 for one unit; 0 reads the state and takes nothing
	Check  bool    // decide as a real call would, but record nothing (as Check)
}

// BatchError is the error of AllowBatch when some requests failed. Errs is
// indexed like the requests: nil where the request was decided. It matches
// (errors.Is, errors.As) every error it holds.
type BatchError struct {
	Errs []error
}

func (e *BatchError) Error() string {
	var first error
	failed := 0
	for _, err := range e.Errs {
		if err != nil {
			if first == nil {
				first = err
			}
			failed++
		}
	}
	if failed == 1 {
		return first.Error()
	}
	return fmt.Sprintf("redisrate: %d of %d requests failed; first: %v", failed, len(e.Errs), first)
}

// Unwrap returns the errors of the requests that failed.
func (e *BatchError) Unwrap() []error {
	var errs []error
	for _, err := range e.Errs {
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// pipeliner is what every go-redis v9 client offers to send many commands
// in one round trip; a ClusterClient splits them by node itself.
type pipeliner interface {
	Pipeline() redis.Pipeliner
}

// AllowBatch decides many requests, for any keys, algorithms and limits, in
// one round trip: a pipeline of EVALSHA calls. A server that does not have
// a script (a new node, a failover, SCRIPT FLUSH) answers those calls with
// NOSCRIPT; only they are sent again, with EVAL, in a second round trip.
//
// The results are in the order of reqs, always len(reqs) of them. When some
// requests fail (bad arguments, a foreign key, a network error), the error is
// a *BatchError whose Errs says which and why, and their Results are zero;
// the other requests are decided and recorded as usual. Each request is its
// own atomic decision: the batch as a whole is not a transaction.
//
// A client without pipelines (a Client that is not a go-redis client) gets
// the requests one after another.
func (l *Limiter) AllowBatch(ctx context.Context, reqs []Request) ([]Result, error) {
	if l == nil || l.rdb == nil {
		return nil, ErrNoClient
	}
	results := make([]Result, len(reqs))
	errs := make([]error, len(reqs))
	failed := false
	fail := func(i int, err error) {
		errs[i] = err
		failed = true
	}

	type call struct {
		i    int
		s    *Script
		key  string
		args []any
		ro   bool
		sent time.Time
		cmd  *redis.Cmd
	}
	calls := make([]call, 0, len(reqs))
	for i, r := range reqs {
		args, err := callArgs(r.N, r.Check, r.Limits)
		if err != nil {
			fail(i, fmt.Errorf("request %d (key %q): %w", i, r.Key, err))
			continue
		}
		key := l.prefix + r.Key
		sent, cached, hit := l.lookupDenial(key, r.N, r.Limits)
		if hit {
			results[i] = cached
			continue
		}
		calls = append(calls, call{i: i, s: &scripts[r.Limits[0].Algorithm], key: key, args: args, ro: r.Check && l.readOnlyCheck, sent: sent})
	}

	rdb := l.rdb
	if d, ok := rdb.(*denyCacheClient); ok {
		rdb = d.unwrap()
	}
	p, ok := rdb.(pipeliner)
	if !ok {
		for _, c := range calls {
			c.cmd = redis.NewCmd(ctx)
			v, err := run(ctx, rdb, c.s, c.ro, []string{c.key}, c.args)
			c.cmd.SetVal(v)
			c.cmd.SetErr(err)
			l.settle(c.i, c.s, c.key, reqs[c.i], c.sent, c.cmd, results, errs, &failed)
		}
		return finishBatch(results, errs, failed)
	}

	if len(calls) > 0 {
		pipe := p.Pipeline()
		for j := range calls {
			c := &calls[j]
			if c.ro {
				c.cmd = pipe.EvalShaRO(ctx, c.s.SHA1, []string{c.key}, c.args...)
			} else {
				c.cmd = pipe.EvalSha(ctx, c.s.SHA1, []string{c.key}, c.args...)
			}
		}
		_, _ = pipe.Exec(ctx) // each command carries its own error

		// go-redis's Script.Run falls back to EVAL only outside pipelines:
		// here the NOSCRIPT replies are picked out and sent again by source.
		var retry redis.Pipeliner
		for j := range calls {
			c := &calls[j]
			if err := c.cmd.Err(); err != nil && isNoScript(err) {
				if retry == nil {
					retry = p.Pipeline()
				}
				if c.ro {
					c.cmd = retry.EvalRO(ctx, c.s.Source, []string{c.key}, c.args...)
				} else {
					c.cmd = retry.Eval(ctx, c.s.Source, []string{c.key}, c.args...)
				}
			}
		}
		if retry != nil {
			_, _ = retry.Exec(ctx)
		}
		for _, c := range calls {
			l.settle(c.i, c.s, c.key, reqs[c.i], c.sent, c.cmd, results, errs, &failed)
		}
	}
	return finishBatch(results, errs, failed)
}

// settle decodes one reply of a batch into results or errs.
func (l *Limiter) settle(i int, s *Script, key string, r Request, sent time.Time, cmd *redis.Cmd, results []Result, errs []error, failed *bool) {
	v, err := cmd.Result()
	if err == nil {
		var res Result
		if res, err = decodeReply(v, r.Limits); err == nil {
			results[i] = res
			l.storeDenial(key, r.N, r.Limits, res, sent)
			return
		}
	}
	errs[i] = &Error{Script: s.Name, Key: key, Err: err, kind: classify(err)}
	*failed = true
}

func finishBatch(results []Result, errs []error, failed bool) ([]Result, error) {
	if !failed {
		return results, nil
	}
	return results, &BatchError{Errs: errs}
}
