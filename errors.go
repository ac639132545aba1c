package redisrate

import (
	"errors"
	"fmt"
	"strings"
)

var (
	// ErrInvalid is matched (errors.Is) by every error about bad arguments:
	// from Limit.Validate before any round trip, and from the scripts' own
	// "ERR invalid ..." replies.
	ErrInvalid = errors.New("invalid argument")

	// ErrForeignKey is matched by the error for a key that holds something
	// other than this algorithm's state: another type, a user's value, or
	// another algorithm's state. The key is left exactly as it was.
	ErrForeignKey = errors.New("key holds other data")

	// ErrNoClient is returned by a Limiter that has no Redis client, such as
	// the zero Limiter.
	ErrNoClient = errors.New("redisrate: Limiter has no Redis client; use NewLimiter")

	// ErrBadReply is matched when Redis answers with something that is not a
	// contract reply (for example a script of another version under the same
	// SHA1, or a proxy that rewrites replies).
	ErrBadReply = errors.New("unexpected reply")
)

// invalidError is an argument error worded exactly as the scripts word it,
// without their "ERR " prefix.
type invalidError struct{ msg string }

func invalidf(format string, args ...any) error {
	return &invalidError{msg: fmt.Sprintf(format, args...)}
}

func (e *invalidError) Error() string { return "redisrate: " + e.msg }

func (e *invalidError) Is(target error) bool { return target == ErrInvalid }

// Error is a failed Limiter call: the script and key it concerned and why.
// It matches ErrInvalid, ErrForeignKey or ErrBadReply where one applies, and
// the underlying error (a redis.Error, a context error, a network error).
type Error struct {
	Script string // the script name, e.g. "gcra"
	Key    string // the key as sent to Redis, prefix included
	Err    error  // what went wrong
	kind   error
}

func (e *Error) Error() string {
	key := e.Key
	if len(key) > 64 {
		key = key[:64] + "..."
	}
	return fmt.Sprintf("redisrate: %s on key %q: %v", e.Script, key, e.Err)
}

// Unwrap returns the classification (if any) and the underlying error.
func (e *Error) Unwrap() []error {
	if e.kind != nil {
		return []error{e.kind, e.Err}
	}
	return []error{e.Err}
}

// classify tells argument errors and foreign keys from failures of Redis
// itself by the contract's wording of the scripts' error replies.
func classify(err error) error {
	msg := err.Error()
	switch {
	case strings.HasPrefix(msg, "ERR invalid "), strings.HasPrefix(msg, "ERR incomplete "), strings.HasPrefix(msg, "ERR too many limits"):
		return ErrInvalid
	case strings.HasPrefix(msg, "ERR key holds "):
		return ErrForeignKey
	}
	return nil
}
