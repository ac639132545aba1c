package redisrate

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redisrate/redisrate/scripts"
)

// The loader runs the scripts. They are embedded in package scripts
// (scripts.Specs: each Source with its SHA1, byte for byte the .lua files),
// and a call is made in the cheapest way the server allows:
//
//  1. FCALL of the Functions library (scripts.Library), when the server has
//     this very version of it loaded (FUNCTION LOAD REPLACE; checked with
//     FCALL_RO redisrate_version, once a minute);
//  2. otherwise EVALSHA of the script's SHA1;
//  3. and, when the server does not have the script (NOSCRIPT: a new node,
//     a failover, SCRIPT FLUSH), EVAL of its source, which also caches it
//     there, so that the next EVALSHA succeeds.
//
// A call that gets "function not found" (the library was deleted, or is
// missing on one node of a Cluster) is sent again by EVALSHA at once, and
// the loader stops trying FCALL for a minute. Calls that may go to a replica
// (WithReadOnlyCheck) use FCALL_RO of the function's "_ro" variant,
// EVALSHA_RO and EVAL_RO.

// Client is the part of a go-redis v9 client the Limiter uses: its scripting
// commands. *redis.Client, *redis.ClusterClient, *redis.Ring, the client of
// redis.NewFailoverClient and every redis.UniversalClient implement it, and
// also FCALL and pipelines, which the Limiter uses when the client has them.
type Client interface {
	redis.Scripter
}

// functionCaller is a client that can FCALL (every go-redis client and
// pipeline can).
type functionCaller interface {
	FCall(ctx context.Context, function string, keys []string, args ...any) *redis.Cmd
	FCallRo(ctx context.Context, function string, keys []string, args ...any) *redis.Cmd
}

// script is one script the loader runs.
type script struct {
	name     string // "gcra", ..., "reset"
	source   string
	sha1     string
	function string // its function in the library; "" for none
}

var (
	algoScripts = func() []script {
		out := make([]script, len(specs))
		for i, sp := range specs {
			out[i] = script{name: sp.Name, source: sp.Source, sha1: sp.SHA1, function: sp.Function}
		}
		return out
	}()
	resetScript = script{name: "reset", source: scripts.ResetSource, sha1: scripts.ResetSHA1}
)

// versionFunction answers the library's version (scripts.LibraryVersion).
const versionFunction = scripts.LibraryName + "_version"

// functionsRecheck is how long the loader trusts what it learnt of the
// library: after that it asks FCALL_RO redisrate_version again.
const functionsRecheck = time.Minute

// step is one way to send a call, in the order the loader tries them.
type step uint8

const (
	stepDone    step = iota // nothing more to try
	stepFCall               // FCALL / FCALL_RO
	stepEvalSha             // EVALSHA / EVALSHA_RO
	stepEval                // EVAL / EVAL_RO
)

type loader struct {
	rdb Client
	fc  functionCaller // nil: the client cannot FCALL

	fnYes    atomic.Bool  // the server has our library
	fnUntil  atomic.Int64 // UnixNano until which fnYes holds; 0: never checked
	checking atomic.Bool  // one caller checks at a time
	now      func() time.Time
}

func newLoader(rdb Client) *loader {
	ld := &loader{rdb: rdb, now: time.Now}
	ld.fc, _ = rdb.(functionCaller)
	return ld
}

// first returns the first step for s: FCALL if the library is there.
func (ld *loader) first(ctx context.Context, s *script) step {
	if s.function != "" && ld.fc != nil && ld.functions(ctx) {
		return stepFCall
	}
	return stepEvalSha
}

// functions reports whether the server has this version of the library,
// asking it once per functionsRecheck (one caller asks; the others go on
// with what was known).
func (ld *loader) functions(ctx context.Context) bool {
	now := ld.now().UnixNano()
	if now < ld.fnUntil.Load() || !ld.checking.CompareAndSwap(false, true) {
		return ld.fnYes.Load()
	}
	defer ld.checking.Store(false)
	v, err := ld.fc.FCallRo(ctx, versionFunction, nil).Result()
	if err != nil && !isRedisError(err) {
		// A network error says nothing of the library: ask again soon.
		ld.fnUntil.Store(now + int64(time.Second))
		return ld.fnYes.Load()
	}
	yes := err == nil && v == any(scripts.LibraryVersion)
	ld.fnYes.Store(yes)
	ld.fnUntil.Store(now + int64(functionsRecheck))
	return yes
}

// noFunctions is the answer to a "function not found" from a call: EVALSHA
// until the next check.
func (ld *loader) noFunctions() {
	ld.fnYes.Store(false)
	ld.fnUntil.Store(ld.now().UnixNano() + int64(functionsRecheck))
}

// scripter is what a command is built on: a client or a pipeline.
type scripter interface {
	redis.Scripter
}

// access is what a call may do, and so how it is sent.
type access uint8

const (
	accessWrite   access = iota // a real call: FCALL, EVALSHA, EVAL
	accessRead                  // writes nothing (a check, a peek), on the primary
	accessReplica               // writes nothing, and may go to a replica: FCALL_RO, EVALSHA_RO, EVAL_RO
)

// command queues (on a pipeline) or sends (on a client) one step of a call.
// A call that writes nothing runs the library's no-writes "_ro" function
// (FCALL of it on the primary, FCALL_RO where a replica may answer), which
// Redis runs even when it refuses writes under maxmemory.
func (ld *loader) command(ctx context.Context, c scripter, st step, s *script, how access, keys []string, args []any) *redis.Cmd {
	ro := how == accessReplica
	switch st {
	case stepFCall:
		fc := c.(functionCaller) // first returned stepFCall: the client has FCALL, and so do its pipelines
		switch how {
		case accessReplica:
			return fc.FCallRo(ctx, s.function+"_ro", keys, args...)
		case accessRead:
			return fc.FCall(ctx, s.function+"_ro", keys, args...)
		}
		return fc.FCall(ctx, s.function, keys, args...)
	case stepEvalSha:
		if ro {
			return c.EvalShaRO(ctx, s.sha1, keys, args...)
		}
		return c.EvalSha(ctx, s.sha1, keys, args...)
	default:
		if ro {
			return c.EvalRO(ctx, s.source, keys, args...)
		}
		return c.Eval(ctx, s.source, keys, args...)
	}
}

// next returns the step to try after st failed with err, or stepDone.
func (ld *loader) next(st step, err error) step {
	if err == nil {
		return stepDone
	}
	switch st {
	case stepFCall:
		if isNoFunction(err) {
			ld.noFunctions()
			return stepEvalSha
		}
	case stepEvalSha:
		if isNoScript(err) {
			return stepEval
		}
	}
	return stepDone
}

// run sends one call, step after step, and returns the last reply.
func (ld *loader) run(ctx context.Context, s *script, how access, keys []string, args []any) (any, error) {
	st := ld.first(ctx, s)
	for {
		v, err := ld.command(ctx, ld.rdb, st, s, how, keys, args).Result()
		if st = ld.next(st, err); st == stepDone {
			return v, err
		}
	}
}

// isNoScript matches NOSCRIPT anywhere in the message: proxies and some
// managed services wrap the server's error text.
func isNoScript(err error) bool {
	return strings.Contains(err.Error(), "NOSCRIPT")
}

// isNoFunction matches the replies of a server that cannot FCALL our
// function: the library is not loaded ("Function not found"), the server
// predates Functions (Redis 6.2: unknown command), or the user may not run
// FCALL (NOPERM), all of which EVALSHA may still serve.
func isNoFunction(err error) bool {
	msg := strings.ToLower(err.Error())
	return strings.Contains(msg, "function not found") || strings.Contains(msg, "unknown command") ||
		(strings.Contains(msg, "noperm") && strings.Contains(msg, "fcall"))
}

// isRedisError reports an error reply of the server, as opposed to a
// network or context error.
func isRedisError(err error) bool {
	var re redis.Error
	return errors.As(err, &re)
}
