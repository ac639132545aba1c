package otelrate

import (
	"context"
	"fmt"
	"testing"

	"github.com/redisrate/redisrate"
)

// TestErrorType: each class of a Limiter's errors has its own error.type;
// a deployment the server refuses (issue 38) is not an outage.
func TestErrorType(t *testing.T) {
	for err, want := range map[error]string{
		fmt.Errorf("x: %w", redisrate.ErrMisconfigured): "misconfigured",
		fmt.Errorf("x: %w", redisrate.ErrUnavailable):   "unavailable",
		fmt.Errorf("x: %w", redisrate.ErrInvalid):       "invalid",
		fmt.Errorf("x: %w", context.Canceled):           "canceled",
	} {
		if got := errorType(err); got != want {
			t.Errorf("errorType(%v) = %q, want %q", err, got, want)
		}
	}
}
