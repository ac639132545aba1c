// Package localredis runs redisrate's scripts on an in-process Redis, for a
// fallback Limiter that keeps rate limiting a process while its real Redis is
// away:
//
//	local, err := localredis.Start()
//	if err != nil { ... }
//	defer local.Close()
//	lim := redisrate.NewLimiter(rdb, redisrate.WithFallback(local.Limiter()))
//
// The in-process Redis is miniredis (github.com/alicebob/miniredis/v2),
// listening on a loopback port of its own, and the Limiter on it runs the
// very same Lua scripts, byte for byte, that run in Redis: there is no second
// implementation of the algorithms. Its clock is the machine's (TIME), and a
// janitor expires keys as their TTLs run out, so it holds only live state.
//
// Its limits hold per process: n processes falling back at once admit up to
// n times the limit between them. Its state starts empty and is never copied
// to or from Redis.
//
// The package is optional: import it only if you want a fallback, and the
// root package does not pull in miniredis.
package localredis

import (
	"fmt"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/redisrate/redisrate"
)

// janitorEvery is how often TTLs are brought up to date: miniredis expires
// keys only when told how much time passed.
var janitorEvery = time.Second

// Server is an in-process Redis for fallback Limiters. It is safe for
// concurrent use. Close it when done.
type Server struct {
	mr   *miniredis.Miniredis
	rdb  *redis.Client
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// Start starts an in-process Redis on a free 127.0.0.1 port.
func Start() (*Server, error) {
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		return nil, fmt.Errorf("localredis: start the in-process Redis: %w", err)
	}
	s := &Server{
		mr: mr,
		// RESP2: what miniredis speaks most completely. No retries: a
		// failure here is a local bug, better reported than hidden.
		rdb: redis.NewClient(&redis.Options{
			Addr:                  mr.Addr(),
			Protocol:              2,
			MaxRetries:            -1,
			ContextTimeoutEnabled: true,
			DisableIdentity:       true,
		}),
		stop: make(chan struct{}),
		done: make(chan struct{}),
	}
	go s.janitor()
	return s, nil
}

func (s *Server) janitor() {
	defer close(s.done)
	t := time.NewTicker(janitorEvery)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-s.stop:
			return
		case now := <-t.C:
			s.mr.FastForward(now.Sub(last))
			last = now
		}
	}
}

// decisionTimeout is the decision timeout of the Limiters that Limiter
// returns, unless their options set another: the in-process Redis shares
// this process's CPU and compiles each script call, so on a busy machine a
// call can take longer than the Limiter's default decision timeout (200 ms) without
// anything being down, and a fallback that gave up then would fail the
// very calls it is there to decide.
const decisionTimeout = 2 * time.Second

// Limiter returns a Limiter that runs the scripts on s, with a decision
// timeout of 2 s unless opts set another (redisrate.WithDecisionTimeout):
// the in-process Redis shares this process's CPU, so a busy process is not
// an outage of its fallback. Pass it to
// redisrate.WithFallback. Leave out redisrate.WithReadOnlyCheck: miniredis
// refuses TIME inside EVAL_RO.
func (s *Server) Limiter(opts ...redisrate.Option) *redisrate.Limiter {
	return redisrate.NewLimiter(s.rdb, append([]redisrate.Option{redisrate.WithDecisionTimeout(decisionTimeout)}, opts...)...)
}

// Close stops s; Limiters on it return errors afterwards. It is idempotent.
func (s *Server) Close() error {
	var err error
	s.once.Do(func() {
		close(s.stop)
		<-s.done
		err = s.rdb.Close()
		s.mr.Close()
	})
	return err
}
