// Package hooktest holds what the tests of several packages need to hook
// the Limiter's calls in go-redis.
package hooktest

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// AsCommand gives a pipeline of one command, which is how the Limiter
// sends a call alone (so that go-redis never resends it), to hook as the
// command by itself, as go-redis gives a command sent alone to a
// ProcessHook; other pipelines go to next. A test hook that holds,
// refuses or logs a call sent alone sees it so.
func AsCommand(hook func(redis.ProcessHook) redis.ProcessHook, next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if len(cmds) != 1 {
			return next(ctx, cmds)
		}
		err := hook(func(ctx context.Context, cmd redis.Cmder) error { return next(ctx, cmds) })(ctx, cmds[0])
		if err != nil && cmds[0].Err() == nil {
			cmds[0].SetErr(err) // as Client.Process does
		}
		return err
	}
}

// Delay is a hook that delays every command and pipeline by its duration:
// a round trip longer than loopback's.
type Delay time.Duration

// DialHook dials at once.
func (d Delay) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook delays a command.
func (d Delay) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		time.Sleep(time.Duration(d))
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook delays a pipeline.
func (d Delay) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		time.Sleep(time.Duration(d))
		return next(ctx, cmds)
	}
}
