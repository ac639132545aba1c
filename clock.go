package redisrate

import (
	"context"
	"time"
)

// clock is the Limiter's time source, and everything it does with time:
// the breaker's probes and outage log, the loader's rechecks, the deny
// cache's waits, Wait's sleeps and the timers that end leases. Tests give
// a Limiter a fake one (export_test.go).
type clock interface {
	Now() time.Time
	Sleep(ctx context.Context, d time.Duration) error
	// AfterFunc runs f in a goroutine of its own after d; the function it
	// returns stops it, as time.Timer's Stop does.
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

type realClock struct{}

// orReal is c, or the real clock for the zero Limiter's options.
func orReal(c clock) clock {
	if c == nil {
		return realClock{}
	}
	return c
}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) AfterFunc(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop }

// Sleep waits for d or until ctx is done, whichever comes first.
func (realClock) Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
