package redisrate

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// One pipeline of script calls, sent once: what DecideBatch and the
// per-node queues (pipe.go) both send with.

// wire is one script call as it is sent: a call's part that a pipeline
// needs.
type wire struct {
	s    *script
	how  access
	keys []string
	args []any
}

// connErr sets err, the error of a pipeline's Exec, on each of its
// commands when it is none of theirs: go-redis returns an error reply
// that refused the connection (WRONGPASS, NOAUTH at its handshake) from
// Exec alone, and leaves each command without an error and without a
// reply, which would read as an empty answer.
func connErr(cmds []redis.Cmder, err error) {
	if err == nil {
		return
	}
	if !isRedisError(err) {
		// A network error: recent go-redis sets it on every command, but
		// older releases (v9.17) leave the commands of a pipeline that
		// could not get a connection without error or reply.
		for _, c := range cmds {
			if c.Err() == nil {
				c.SetErr(err)
			}
		}
		return
	}
	for _, c := range cmds {
		if c.Err() != nil {
			return // Redis answered the commands: err is the first one's
		}
	}
	for _, c := range cmds {
		c.SetErr(err)
	}
}

// pipeline sends calls in one pipeline per step (FCALL or EVALSHA first,
// then EVALSHA for "function not found" or OOM, and EVAL for NOSCRIPT:
// only the calls refused so, which Redis did not run), and returns each
// call's last command. It only reads calls. No call is sent twice after a
// network error (noRetry): go-redis would resend the whole pipeline,
// running again the calls Redis had run before the connection broke.
func (l *Limiter) pipeline(ctx context.Context, p pipeliner, calls []wire) []redis.Cmder {
	type sending struct {
		st  step
		cmd redis.Cmder
	}
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	all := make([]sending, len(calls))
	pending := make([]int, len(calls))
	for i := range calls {
		all[i].st = l.loader.first(ctx, calls[i].s)
		pending[i] = i
	}
	for len(pending) > 0 {
		pipe := p.Pipeline()
		for _, i := range pending {
			c := &calls[i]
			all[i].cmd = l.loader.command(ctx, pipe, all[i].st, c.s, c.how, c.keys, c.args, stop)
		}
		cmds, err := pipe.Exec(ctx) // each command carries its own error...
		connErr(cmds, err)          // ...but a connection's
		again := pending[:0]
		for _, i := range pending {
			if ctx.Err() != nil {
				break // a network error: nothing more is sent
			}
			if all[i].st = l.loader.next(all[i].st, all[i].cmd.Err()); all[i].st != stepDone {
				again = append(again, i)
			}
		}
		if ctx.Err() != nil {
			break
		}
		pending = again
	}
	cmds := make([]redis.Cmder, len(all))
	for i := range all {
		cmds[i] = all[i].cmd
	}
	return cmds
}
