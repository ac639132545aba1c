package redisrate

import (
	"errors"
	"fmt"
	"strings"
)

var (
	// ErrInvalid is matched (errors.Is) by every error about bad arguments:
	// from ParseLimit, Limit.Validate and Args before any round trip, and
	// from the scripts' own "ERR invalid ..." replies. It is the caller's
	// to fix: no failure policy ever answers for it.
	ErrInvalid = errors.New("invalid argument")

	// ErrForeignKey is matched by the error for a key that holds something
	// other than this algorithm's state: another type, a user's value, or
	// another algorithm's state. The key is left exactly as it was. Like
	// ErrInvalid, it is always returned, whatever the failure policy.
	ErrForeignKey = errors.New("key holds other data")

	// ErrMisconfigured is matched by the error of a call that the server
	// refused for a reason of the deployment, which no retry cures: the
	// client did not authenticate (NOAUTH) or its password is wrong
	// (WRONGPASS), the ACL denies a command or a key the scripts need
	// (NOPERM), or the server runs no scripts (a command renamed away or
	// unknown, "unknown command"; a Valkey without its Lua module, "Could
	// not find scripting engine"). The error carries the server's words.
	//
	// Redis is up, so it is no outage: not ErrUnavailable, and the circuit
	// breaker is not tripped. Like ErrInvalid, it is always returned,
	// whatever the failure policy and the fallback, so that limits are never
	// silently off: a FailOpen service would otherwise serve every request
	// unlimited for as long as the deployment lives. The Limiter also logs
	// it at level Error, through WithLogger's logger or else slog.Default:
	// at its first occurrence and then once a minute while it lasts. Find
	// it at start-up, before the first request, with a KindPeek Decide (see
	// docs/reliability.md).
	ErrMisconfigured = errors.New("refused by the server's configuration")

	// ErrUnavailable is matched by the error of any call that Redis could
	// not decide: unreachable, timed out, loading, failing over, refusing
	// writes (OOM, READONLY), the circuit breaker open after such a
	// failure, or any error reply other than the scripts' own argument and
	// foreign-key errors. It is what a failure policy and a fallback answer
	// for (see FailurePolicy), for every kind of call alike.
	ErrUnavailable = errors.New("redis unavailable")

	// ErrCircuitOpen is matched, together with ErrUnavailable, by the
	// cause of a call the circuit breaker answered without asking Redis
	// (see WithCircuitBreaker): Redis failed a moment ago and has not
	// answered a probe since. Metrics and logs can tell these apart from
	// calls that waited for Redis and failed.
	ErrCircuitOpen = errors.New("circuit breaker open")

	// ErrBadReply is matched, together with ErrUnavailable, when Redis
	// answers with something that is not a contract reply (a script of
	// another version under the same SHA1, a proxy that rewrites replies).
	ErrBadReply = errors.New("unexpected reply")

	// ErrNoClient is matched by the error of every call on a Limiter that
	// has no usable Redis client: the zero Limiter, one NewLimiter was
	// given a nil client (a nil *redis.Client too) or a nil Option, or one
	// closed by Limiter.Close.
	ErrNoClient = errors.New("redisrate: Limiter has no Redis client; use NewLimiter")

	// ErrExceedsCapacity is matched by the error of Wait, WaitN and
	// Decide's KindWait when the cost is more than the capacity of a limit: the
	// request can never be admitted (Result.Never), so waiting would never
	// end.
	ErrExceedsCapacity = errors.New("cost exceeds the capacity of the limit: it can never be admitted")
)

// noClientError is ErrNoClient with what made the Limiter unusable.
type noClientError struct{ why string }

func (e *noClientError) Error() string {
	return "redisrate: Limiter has no usable Redis client: " + e.why
}

func (e *noClientError) Is(target error) bool { return target == ErrNoClient }

// invalidError is an argument error worded exactly as the scripts word it,
// without their "ERR " prefix.
type invalidError struct{ msg string }

func invalidf(format string, args ...any) error {
	return &invalidError{msg: fmt.Sprintf(format, args...)}
}

func (e *invalidError) Error() string { return "redisrate: " + e.msg }

func (e *invalidError) Is(target error) bool { return target == ErrInvalid }

// Error is a failed call: the script and key it concerned and why. It
// matches ErrInvalid, ErrForeignKey, ErrMisconfigured or ErrUnavailable
// (and ErrBadReply) as the failure is classified, and the underlying error (a
// redis.Error, a network error). A call whose caller cancelled its context,
// or let its deadline pass, before Redis decided matches the context's
// error (context.Canceled, context.DeadlineExceeded) and none of the
// classes: it is not a failure of Redis.
type Error struct {
	Script string // the script name, e.g. "gcra", or "reset"
	Key    string // the key as sent to Redis, prefix included
	Err    error  // what went wrong
	kind   error
}

// Error returns the script, the key (cut to 64 bytes) and the cause.
func (e *Error) Error() string {
	key := e.Key
	if len(key) > 64 {
		key = key[:64] + "..."
	}
	return fmt.Sprintf("redisrate: %s on key %q: %v", e.Script, key, e.Err)
}

// Unwrap returns the classification and the underlying error.
func (e *Error) Unwrap() []error {
	if e.kind != nil {
		return []error{e.kind, e.Err}
	}
	return []error{e.Err}
}

// unavailable reports whether a failure policy answers for e.
func (e *Error) unavailable() bool { return e.kind == ErrUnavailable }

// classify tells argument errors and foreign keys from failures of Redis
// itself by the contract's wording of the scripts' error replies.
func classify(err error) error {
	if errors.Is(err, ErrBadReply) {
		return ErrUnavailable
	}
	msg := err.Error()
	switch {
	case strings.HasPrefix(msg, "ERR invalid "), strings.HasPrefix(msg, "ERR incomplete "), strings.HasPrefix(msg, "ERR too many limits"):
		return ErrInvalid
	case strings.HasPrefix(msg, "ERR key holds "), foreignKeyAt(msg):
		return ErrForeignKey
	case strings.HasPrefix(msg, "CROSSSLOT"): // keys of one call in different slots of a Cluster
		return ErrInvalid
	case misconfigured(msg):
		return ErrMisconfigured
	}
	return ErrUnavailable
}

// misconfigured reports a server's error reply that no retry cures: what
// it says is wrong with the deployment (ErrMisconfigured).
func misconfigured(msg string) bool {
	for _, p := range [...]string{
		"NOAUTH",                              // no password given to a server that wants one
		"WRONGPASS",                           // a wrong password, or a disabled user
		"NOPERM",                              // the ACL: a command or key the scripts need
		"ERR unknown command",                 // scripting renamed away, or *_RO before Redis 7
		"ERR Could not find scripting engine", // Valkey without its Lua module
		"ERR Engine 'lua' not found",          // ... as its FUNCTION commands say it
		"ERR ACL failure in script",           // Valkey: the ACL refused a command a script calls
	} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	// Redis: the ACL refused a command a script calls (TIME, GET, ...).
	return strings.HasPrefix(msg, "ERR ") && strings.Contains(msg, "The user executing the script can't run this command")
}

// foreignKeyAt matches a script's error about the value of one key of a
// call of several keys, which names its position: "ERR key #2 holds ...".
func foreignKeyAt(msg string) bool {
	rest, ok := strings.CutPrefix(msg, "ERR key #")
	if !ok {
		return false
	}
	i := strings.IndexByte(rest, ' ')
	return i > 0 && strings.HasPrefix(rest[i:], " holds ")
}

// BatchError is the error of DecideBatch when some requests got an error.
// Errs is indexed like the requests: nil where the request was decided
// (by Redis, the deny cache, the fallback or the failure policy). It
// matches (errors.Is, errors.As) every error it holds.
type BatchError struct {
	Errs []error // by request index; nil where the request was decided
}

// Error says how many requests failed, and the first error.
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
