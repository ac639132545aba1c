package redisrate

import (
	"sync"
	"time"
)

// Senders: the goroutines that run a send its caller must be able to leave
// (within). A client that does not stop a command at its context's
// deadline (go-redis without ContextTimeoutEnabled) blocks the goroutine
// that sends until Redis answers or the client's own ReadTimeout (3 s by
// default) passes, so a call that is to return at its decision deadline
// sends on another goroutine and waits for it, or for the deadline.
// (A copy of the client by WithTimeout would stop there, on the caller's
// goroutine, but go-redis's copy keeps none of the client's hooks: the
// user's tracing would lose the Limiter's calls. BENCHMARKS.md, "Many
// keys", has what the hand-over costs.)
//
// A goroutine made per send cost one caller about 1.5 times the client CPU
// of a call sent on its own goroutine (issue 37): most of it growing the
// new goroutine's stack to go-redis's depth, each time. A sender that has
// sent keeps its stack and waits for the next send; one that has sent
// nothing for senderIdle ends, so that a Limiter no longer used leaves no
// goroutine behind for long.
//
// The idle timer reads the wall clock, not a Limiter's clock: senders are
// shared by every Limiter, and how long one waits for work decides nothing.

// senderIdle is how long a sender waits for work before it ends.
const senderIdle = 10 * time.Second

// senders are the senders waiting for work, the last to wait first (its
// stack is the likeliest to be in cache).
var senders struct {
	mu   sync.Mutex
	idle []*sender
}

type sender struct {
	work chan func() // buffered: handing work over never waits for the sender to reach its receive
}

// goSend runs f on a sender: one that waits, or a new one.
func goSend(f func()) {
	senders.mu.Lock()
	if n := len(senders.idle); n > 0 {
		s := senders.idle[n-1]
		senders.idle[n-1] = nil
		senders.idle = senders.idle[:n-1]
		senders.mu.Unlock()
		s.work <- f
		return
	}
	senders.mu.Unlock()
	s := &sender{work: make(chan func(), 1)}
	go s.loop(f)
}

// loop runs f, then each send handed over, until a whole senderIdle
// passes without one. Its timer is reset once per senderIdle, not per
// send.
func (s *sender) loop(f func()) {
	idle := time.NewTimer(senderIdle)
	defer idle.Stop()
	used := true
	for {
		f()
		f = nil // what the send held is not kept while waiting
		senders.mu.Lock()
		senders.idle = append(senders.idle, s)
		senders.mu.Unlock()
		for f == nil {
			select {
			case f = <-s.work:
				used = true
			case <-idle.C:
				if !used && s.retire() {
					return
				}
				used = false
				idle.Reset(senderIdle)
			}
		}
	}
}

// retire takes s off the idle list, and reports whether it was on it: a
// sender taken by goSend meanwhile has work coming, and stays.
func (s *sender) retire() bool {
	senders.mu.Lock()
	defer senders.mu.Unlock()
	for i, x := range senders.idle {
		if x == s {
			senders.idle = append(senders.idle[:i], senders.idle[i+1:]...)
			return true
		}
	}
	return false
}
