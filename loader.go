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
//  1. FCALL of the Functions library (scripts.Library), in a MULTI/EXEC
//     transaction with FCALL_RO redisrate_version (see "Which library runs"
//     below), when the server has this very version of it loaded (FUNCTION
//     LOAD REPLACE): the last FCALL ran it, or, while it was missing,
//     FCALL_RO redisrate_version, asked once a minute, found it;
//  2. otherwise EVALSHA of the script's SHA1;
//  3. and, when the server does not have the script (NOSCRIPT: a new node,
//     a failover, SCRIPT FLUSH), EVAL of its source, which also caches it
//     there, so that the next EVALSHA succeeds.
//
// A call whose transaction finds no library (deleted, or missing on one
// node of a Cluster) or another version is sent again by EVALSHA at once,
// and the loader stops trying FCALL until it finds the library again.
//
// Under maxmemory with noeviction, Redis refuses FCALL of a writing
// function with OOM before it runs, whatever it would decide: a denial, a
// cost past the capacity (CONTRACT.md, "Functions library"); and it
// refuses any command queued in a transaction then, so the transaction of
// a check is refused too. EVALSHA decides every call that would not write
// (guarantee 10), so a call whose transaction was refused so is sent again
// by EVALSHA, which answers a denial, a check or a peek and fails with OOM
// only what would write. Checks and peeks run the no-writes "_ro"
// functions. Calls that may go to a replica (WithReadOnlyCheck) use
// FCALL_RO, EVALSHA_RO and EVAL_RO; on a Cluster, EVALSHA_RO and EVAL_RO
// only: a ClusterClient sends a transaction to the primary.
//
// Which library runs. FUNCTION LOAD REPLACE can swap the library at any
// moment, between any two commands of other clients, and the functions of
// another version have the same names. A check made apart from the call
// (once a minute, say) leaves a window in which every decision comes from
// a library this client does not bundle. So each FCALL is sent in one
// transaction with FCALL_RO redisrate_version: Redis runs the commands of
// a transaction back to back, with no other client's command (FUNCTION
// LOAD included) in between, so the version read is the version of the
// library that decided. A decision whose version is not scripts.
// LibraryVersion is never used: the call is decided again by EVALSHA, whose
// SHA1 names its code exactly, and FCALL waits for the next check.
// The window is closed; what cannot be undone is the run of the other
// library's function in the transactions already on their way when it was
// loaded (any client would have run them).
// The version call names the call's key, so that a Cluster or a Ring sends
// it to the node of the call (the function ignores its keys).
//
// What the transaction costs, against a bare FCALL: two more commands
// (MULTI, EXEC) and the version function per call, in the same round trip,
// and in this process 34 allocations per decision where a bare FCALL
// made 12 (BenchmarkAllowFCall).

// Client is the part of a go-redis v9 client the Limiter uses: its scripting
// commands. *redis.Client, *redis.ClusterClient, *redis.Ring, the client of
// redis.NewFailoverClient and every redis.UniversalClient implement it, and
// also FCALL, pipelines and transactions, which the Limiter uses when the
// client has them.
type Client interface {
	redis.Scripter
}

// txPipeliner is a client that can send a MULTI/EXEC transaction, on which
// FCALL goes (every go-redis client can).
type txPipeliner interface {
	TxPipeline() redis.Pipeliner
}

// functionCaller is a client or a transaction that can FCALL (every go-redis
// client and pipeline can).
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

// functionsRecheck is how long the loader goes by EVALSHA after it found
// the library missing or of another version; then one call asks
// FCALL_RO redisrate_version again.
const functionsRecheck = time.Minute

// errOtherLibrary is the result of an FCALL whose transaction read another
// version than scripts.LibraryVersion, or none: its decision is not used.
var errOtherLibrary = errors.New("redisrate: the server's Functions library is not the version this client bundles")

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
	tx  txPipeliner    // nil: the client cannot send a transaction, so no FCALL
	// cluster: a ClusterClient sends a transaction to the primary of its
	// slot, so reads that may go to a replica do not use one.
	cluster bool

	fnYes    atomic.Bool  // the server has our library: the last check or FCALL found it
	fnUntil  atomic.Int64 // UnixNano before which a library found missing is not looked for again
	checking atomic.Bool  // one caller checks at a time
	now      func() time.Time
}

func newLoader(rdb Client) *loader {
	ld := &loader{rdb: rdb, now: time.Now}
	ld.fc, _ = rdb.(functionCaller)
	ld.tx, _ = rdb.(txPipeliner)
	_, ld.cluster = rdb.(*redis.ClusterClient)
	return ld
}

// first returns the first step for s: FCALL if the library is there.
// On a Cluster, calls that may go to a replica go by EVALSHA_RO: the
// transaction FCALL needs would take them to the primary.
func (ld *loader) first(ctx context.Context, s *script, how access) step {
	if s.function != "" && !(how == accessReplica && ld.cluster) && ld.fc != nil && ld.tx != nil && ld.functions(ctx) {
		return stepFCall
	}
	return stepEvalSha
}

// functions reports whether the server has this version of the library:
// the last FCALL ran it, or, while it is missing, a check (FCALL_RO
// redisrate_version, once per functionsRecheck, one caller at a time; the
// others go on by EVALSHA) finds it. Only servers that have a library
// called redisrate get transactions: some that have no FCALL (miniredis)
// leave a transaction of unknown commands unanswered.
func (ld *loader) functions(ctx context.Context) bool {
	if ld.fnYes.Load() {
		return true
	}
	now := ld.now().UnixNano()
	if now < ld.fnUntil.Load() || !ld.checking.CompareAndSwap(false, true) {
		return false
	}
	defer ld.checking.Store(false)
	v, err := ld.fc.FCallRo(ctx, versionFunction, nil).Result()
	if err != nil && !isRedisError(err) {
		// A network error says nothing of the library: ask again soon.
		ld.fnUntil.Store(now + int64(time.Second))
		return false
	}
	if err == nil && v == any(scripts.LibraryVersion) {
		ld.fnYes.Store(true)
		return true
	}
	ld.fnUntil.Store(now + int64(functionsRecheck))
	return false
}

// noFunctions is the answer to an FCALL that found no library, or another
// version: EVALSHA for functionsRecheck.
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

// queued is one step of a call, queued on a pipeline or a transaction.
type queued struct {
	cmd     *redis.Cmd
	version *redis.Cmd // FCALL: the library's version, read in the same transaction
}

// queue puts one step of a call on c: for FCALL a transaction (see
// "Which library runs"), else a pipeline or, for a single call, a client.
// A call that writes nothing runs the library's no-writes "_ro" function,
// which Redis runs even when it refuses writes under maxmemory.
func (ld *loader) queue(ctx context.Context, c scripter, st step, s *script, how access, keys []string, args []any) queued {
	ro := how == accessReplica
	switch st {
	case stepFCall:
		fc := c.(functionCaller) // a transaction: first chose FCALL only for a client that has them
		version := fc.FCallRo(ctx, versionFunction, keys)
		switch how {
		case accessReplica:
			return queued{cmd: fc.FCallRo(ctx, s.function+"_ro", keys, args...), version: version}
		case accessRead:
			return queued{cmd: fc.FCall(ctx, s.function+"_ro", keys, args...), version: version}
		}
		return queued{cmd: fc.FCall(ctx, s.function, keys, args...), version: version}
	case stepEvalSha:
		if ro {
			return queued{cmd: c.EvalShaRO(ctx, s.sha1, keys, args...)}
		}
		return queued{cmd: c.EvalSha(ctx, s.sha1, keys, args...)}
	default:
		if ro {
			return queued{cmd: c.EvalRO(ctx, s.source, keys, args...)}
		}
		return queued{cmd: c.Eval(ctx, s.source, keys, args...)}
	}
}

// result is the step's reply, once sent. An FCALL's reply, error replies
// included, is used only if its transaction read this client's version of
// the library. A transaction that did not run (a network error, or Redis
// refused the FCALL before it ran: OOM, READONLY, EXECABORT, CROSSSLOT)
// gives the reason; one that ran another library or none, or that this
// server or user cannot send (no FCALL, NOPERM), gives errOtherLibrary.
func (q queued) result() (any, error) {
	v, err := q.cmd.Result()
	if q.version == nil {
		return v, err
	}
	version, verr := q.version.Text()
	switch {
	case verr == nil && version == scripts.LibraryVersion:
		return v, err
	case err != nil && (!isRedisError(err) || isRefusedTx(err) || isExecAbort(verr) && !isNoFunction(err)):
		return v, err
	}
	return nil, errOtherLibrary
}

// next returns the step to try after st failed with err, or stepDone. An
// FCALL that did not run this version of the library sends the call again
// by EVALSHA, and the next ones until the library is found again.
func (ld *loader) next(st step, err error) step {
	switch st {
	case stepFCall:
		switch {
		case errors.Is(err, errOtherLibrary):
			ld.noFunctions()
			return stepEvalSha
		case err != nil && isRefusedTx(err):
			return stepEvalSha // the library is not in question: EVALSHA decides
		}
	case stepEvalSha:
		if err != nil && isNoScript(err) {
			return stepEval
		}
	}
	return stepDone
}

// run sends one call, step after step, and returns the last reply.
func (ld *loader) run(ctx context.Context, s *script, how access, keys []string, args []any) (any, error) {
	st := ld.first(ctx, s, how)
	for {
		var v any
		var err error
		if st == stepFCall {
			tx := ld.tx.TxPipeline()
			q := ld.queue(ctx, tx, st, s, how, keys, args)
			_, _ = tx.Exec(ctx) // each command carries its own error
			v, err = q.result()
		} else {
			v, err = ld.queue(ctx, ld.rdb, st, s, how, keys, args).result()
		}
		if st = ld.next(st, err); st == stepDone {
			return v, err
		}
	}
}

// isRefusedTx matches the replies for which an FCALL's transaction did not
// decide, though the library may be ours, and EVALSHA may: OOM (Redis
// refuses a writing function, and anything queued in a transaction, under
// maxmemory before it runs, even for a denial), EXECABORT (another command
// of the transaction was refused so) and CROSSSLOT (a Cluster client
// cannot send one transaction for keys of several slots: a batch).
func isRefusedTx(err error) bool {
	msg := err.Error()
	return strings.HasPrefix(msg, "OOM ") || strings.HasPrefix(msg, "EXECABORT") || strings.HasPrefix(msg, "CROSSSLOT")
}

// isExecAbort matches the error of a command queued in a transaction that
// Redis discarded.
func isExecAbort(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "EXECABORT")
}

// isNoFunction matches the replies of a server that cannot run our
// function in a transaction: the library is not loaded ("Function not
// found"), the server predates Functions (Redis 6.2: unknown command), or
// the user may not run FCALL, FCALL_RO, MULTI or EXEC (NOPERM), all of
// which EVALSHA may still serve.
func isNoFunction(err error) bool {
	msg := strings.ToLower(err.Error())
	return strings.Contains(msg, "function not found") || strings.Contains(msg, "unknown command") || strings.HasPrefix(msg, "noperm")
}

// isNoScript matches NOSCRIPT anywhere in the message: proxies and some
// managed services wrap the server's error text.
func isNoScript(err error) bool {
	return strings.Contains(err.Error(), "NOSCRIPT")
}

// isRedisError reports an error reply of the server, as opposed to a
// network or context error.
func isRedisError(err error) bool {
	var re redis.Error
	return errors.As(err, &re)
}
