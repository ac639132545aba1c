package redisrate

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redisrate/redisrate/scripts"
)

// The loader runs the scripts. They are embedded in package scripts
// (scripts.Specs: each Source with its SHA1, byte for byte the .lua files),
// and a call is made in the cheapest way the server allows:
//
//  1. FCALL of the Functions library (scripts.Library), by the names bound
//     to this very version (see "Which library runs" below), when the
//     server has it loaded (FUNCTION LOAD REPLACE): the last FCALL ran it,
//     or, while it was missing, FCALL_RO redisrate_version, asked once a
//     minute, found it;
//  2. otherwise EVALSHA of the script's SHA1;
//  3. and, when the server does not have the script (NOSCRIPT: a new node,
//     a failover, SCRIPT FLUSH), EVAL of its source, which also caches it
//     there, so that the next EVALSHA succeeds.
//
// A call whose FCALL finds no library (deleted, or missing on one node of a
// Cluster) or another version is sent again by EVALSHA at once, and the
// loader stops trying FCALL until it finds the library again.
//
// Under maxmemory with noeviction, Redis refuses FCALL of a writing
// function with OOM before it runs, whatever it would decide: a denial, a
// cost past the capacity (CONTRACT.md, "Functions library"). EVALSHA
// decides every call that would not write (guarantee 10), so a call whose
// FCALL was refused so is sent again by EVALSHA, which answers a denial, a
// check or a peek and fails with OOM only what would write. Checks and
// peeks run the no-writes "_ro" functions, which Redis runs under OOM too.
// Calls that may go to a replica (WithReadOnlyCheck) use FCALL_RO,
// EVALSHA_RO and EVAL_RO.
//
// Which library runs. FUNCTION LOAD REPLACE can swap the library at any
// moment, between any two commands of other clients, and another version's
// functions have the same contract names (redisrate_gcra). A check made
// apart from the call (once a minute, say) would leave a window in which
// every decision comes from a library this client does not bundle. So the
// loader calls the names the library registers for its own version only
// (scripts.VersionSuffix: redisrate_gcra_v8de87c420f8e): Redis resolves a
// name when it runs the call, so the function that runs is this version's,
// or the call fails with "Function not found" and is decided by EVALSHA,
// whose SHA1 names its code exactly. No window is left, and it costs
// nothing more than a bare FCALL.

// functionCaller is a client or a pipeline that can FCALL (every go-redis
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
	function string // its function in the library, by the name bound to this version; "" for none
	// The command's names, put in an interface once rather than per call
	// (an allocation each): the function, its _ro variant, the SHA1.
	fnArg, roArg, shaArg any
}

var (
	algoScripts = func() []script {
		out := make([]script, len(specs))
		for i, sp := range specs {
			fn := sp.Function + scripts.VersionSuffix
			out[i] = script{name: sp.Name, source: sp.Source, sha1: sp.SHA1, function: fn, fnArg: fn, roArg: roFunction(fn), shaArg: sp.SHA1}
		}
		return out
	}()
	resetScript = script{name: "reset", source: scripts.ResetSource, sha1: scripts.ResetSHA1, shaArg: scripts.ResetSHA1}
)

// versionFunction answers the library's version (scripts.LibraryVersion).
const versionFunction = scripts.LibraryName + "_version"

// functionsRecheck is how long the loader goes by EVALSHA after it found
// the library missing or of another version; then one call asks
// FCALL_RO redisrate_version again.
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
	rdb redis.Scripter
	fc  functionCaller // nil: the client cannot FCALL

	fnYes    atomic.Bool  // the server has our library: the last check or FCALL found it
	fnUntil  atomic.Int64 // UnixNano before which a library found missing is not looked for again
	checking atomic.Bool  // one caller checks at a time
	now      func() time.Time
}

func newLoader(rdb redis.Scripter, clk clock) *loader {
	ld := &loader{rdb: rdb, now: clk.Now}
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

// functions reports whether the server has this version of the library:
// the last FCALL ran it, or, while it is missing, a check (FCALL_RO
// redisrate_version, once per functionsRecheck, one caller at a time; the
// others go on by EVALSHA) finds it.
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

// command puts one step of a call on c, a client or a pipeline. A call
// that writes nothing runs the library's no-writes "_ro" function, which
// Redis runs even when it refuses writes under maxmemory. An algorithm's
// reply, six integers, is read into an IntSliceCmd: a Cmd would box each
// integer of 256 or more in an interface, an allocation each.
//
// stop, when not nil, is called when a network error fails the command
// (noRetry): c is a pipeline whose context stop cancels.
func (ld *loader) command(ctx context.Context, c scripter, st step, s *script, how access, keys []string, args []any, stop context.CancelFunc) redis.Cmder {
	if p, ok := c.(processor); ok && (s.function != "" || stop != nil) {
		var cmd redis.Cmder
		switch {
		case s.function == "":
			cmd = noRetryCmd{redis.NewCmd(ctx, commandArgs(st, s, how, keys, args)...), &noRetry{stop: stop}}
		case stop != nil:
			cmd = &noRetryInts{IntSliceCmd: *redis.NewIntSliceCmd(ctx, commandArgs(st, s, how, keys, args)...), noRetry: noRetry{stop: stop}}
		default:
			cmd = redis.NewIntSliceCmd(ctx, commandArgs(st, s, how, keys, args)...)
		}
		_ = p.Process(ctx, cmd) // a client runs it, a pipeline queues it; the error is the command's
		return cmd
	}
	ro := how == accessReplica
	// A client that is not a processor gets its own copy of keys: the
	// slice then never escapes here, and a one-key call's stays on its
	// caller's stack (an allocation per decision saved).
	own := append([]string(nil), keys...)
	switch st {
	case stepFCall:
		fc := c.(functionCaller) // first chose FCALL only for a client that has it, and so its pipelines
		switch how {
		case accessReplica:
			return fc.FCallRo(ctx, roFunction(s.function), own, args...)
		case accessRead:
			return fc.FCall(ctx, roFunction(s.function), own, args...)
		}
		return fc.FCall(ctx, s.function, own, args...)
	case stepEvalSha:
		if ro {
			return c.EvalShaRO(ctx, s.sha1, own, args...)
		}
		return c.EvalSha(ctx, s.sha1, own, args...)
	default:
		if ro {
			return c.EvalRO(ctx, s.source, own, args...)
		}
		return c.Eval(ctx, s.source, own, args...)
	}
}

// processor is a client or a pipeline that runs any command (every go-redis
// client and pipeline does).
type processor interface {
	Process(ctx context.Context, cmd redis.Cmder) error
}

// commandArgs is the command of one step, as the server takes it.
func commandArgs(st step, s *script, how access, keys []string, args []any) []any {
	ro := how == accessReplica
	out := make([]any, 0, 3+len(keys)+len(args))
	switch {
	case st == stepFCall && ro:
		out = append(out, "fcall_ro", s.roArg)
	case st == stepFCall && how == accessRead:
		out = append(out, "fcall", s.roArg)
	case st == stepFCall:
		out = append(out, "fcall", s.fnArg)
	case st == stepEvalSha && ro:
		out = append(out, "evalsha_ro", s.shaArg)
	case st == stepEvalSha:
		out = append(out, "evalsha", s.shaArg)
	case ro:
		out = append(out, "eval_ro", s.source)
	default:
		out = append(out, "eval", s.source)
	}
	out = append(out, len(keys))
	for _, k := range keys {
		out = append(out, k)
	}
	return append(out, args...)
}

// answer is a script's reply: an algorithm's integers, or any other value
// (reset's). It holds the integers as a slice, not in an interface, which
// would cost an allocation per call.
type answer struct {
	ints  []int64
	other any
}

// reply is a sent command's answer and error.
func reply(cmd redis.Cmder) (answer, error) {
	switch c := cmd.(type) {
	case *noRetryInts:
		cmd = &c.IntSliceCmd
	case noRetryCmd:
		cmd = c.Cmd
	}
	switch c := cmd.(type) {
	case *redis.IntSliceCmd:
		v, err := c.Result()
		return answer{ints: v}, err
	case *redis.Cmd:
		v, err := c.Result()
		return answer{other: v}, err
	}
	return answer{}, cmd.Err()
}

// roFunction is the no-writes variant of function, a name bound to this
// version: redisrate_gcra_ro_v8de87c420f8e for redisrate_gcra_v8de87c420f8e.
func roFunction(function string) string {
	base := strings.TrimSuffix(function, scripts.VersionSuffix)
	return base + "_ro" + scripts.VersionSuffix
}

// next returns the step to try after st failed with err, or stepDone. An
// FCALL that found no function of this version sends the call again by
// EVALSHA, and the next ones until the library is found again; one
// refused under maxmemory (OOM) too, the library not in question.
func (ld *loader) next(st step, err error) step {
	switch st {
	case stepFCall:
		switch {
		case err != nil && isNoFunction(err):
			ld.noFunctions()
			return stepEvalSha
		case err != nil && isOOM(err):
			return stepEvalSha
		}
	case stepEvalSha:
		if err != nil && isNoScript(err) {
			return stepEval
		}
	}
	return stepDone
}

// run sends one call, step after step, and returns the last reply.
func (ld *loader) run(ctx context.Context, s *script, how access, keys []string, args []any) (answer, error) {
	st := ld.first(ctx, s)
	for {
		v, err := reply(ld.command(ctx, ld.rdb, st, s, how, keys, args, nil))
		if st = ld.next(st, err); st == stepDone {
			return v, err
		}
	}
}

// isOOM matches Redis's refusal of a writing command under maxmemory.
func isOOM(err error) bool {
	return strings.HasPrefix(err.Error(), "OOM ")
}

// isNoFunction matches the replies of a server that cannot run our
// function: this version of the library is not loaded ("Function not
// found"), the server predates Functions (Redis 6.2: unknown command), or
// the user may not run FCALL or FCALL_RO (NOPERM), all of which EVALSHA
// may still serve.
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

// noRetryInts and noRetryCmd are a pipeline's commands, which stop go-redis
// from sending the pipeline again after a network error. go-redis retries a
// failed pipeline as a whole (up to MaxRetries), calls Redis has already
// run included: a decision would be made twice. It sets each command's
// error first, and waits for its retry backoff under the pipeline's
// context: cancelled by stop, the retry never starts. (An error reply of
// Redis is no network error: NOSCRIPT and the like are answered by the
// loader, for the calls that got them.)
// noRetryInts is one allocation, the command and its state: a call sent
// alone is one too (pipe.go's one).
type noRetryInts struct {
	redis.IntSliceCmd
	noRetry
}

func (c *noRetryInts) SetErr(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.keep(err) {
		c.IntSliceCmd.SetErr(err)
	}
}

type noRetryCmd struct {
	*redis.Cmd
	*noRetry
}

func (c noRetryCmd) SetErr(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.keep(err) {
		c.Cmd.SetErr(err)
	}
}

// noRetry is a pipeline command's state: whether Redis answered it. A
// Cluster client's pipeline can set a command's error from two of its
// goroutines at once (a slot migrating: the node asked and the node
// moved to), so its state, and the command's error, are set under mu.
type noRetry struct {
	mu       sync.Mutex
	stop     context.CancelFunc
	answered bool // its reply was read: an error set after it (the cancelled retry's) is not its
}

// keep reports whether err is the command's own: not an error set after
// its reply was read. A network error stops the pipeline. An error reply
// (MOVED, ASK, TRYAGAIN on a Cluster) does not count as the answer: a
// Cluster client sends such a command again, to the node Redis named,
// and Redis did not run it.
func (c *noRetry) keep(err error) bool {
	switch {
	case c.answered:
		return false
	case err == nil:
		c.answered = true
	case !isRedisError(err):
		c.stop()
	}
	return true
}
