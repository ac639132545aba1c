package main

import (
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
)

// try takes a calendar limit as the docs write it, and names its window's
// key in Redis.
func TestTryCalendar(t *testing.T) {
	mr := miniredis.RunT(t)
	limit := "1/day calendar America/Los_Angeles"
	code, out, errOut := runCmd(t, "try", "--redis", mr.Addr(), "--limit", limit, "user:42")
	if code != 0 || !strings.Contains(out, "fixed_window "+limit) {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, out, _ = runCmd(t, "try", "--redis", mr.Addr(), "--limit", limit, "--json", "user:42")
	if code != exitDenied || !strings.Contains(out, `"limit":"`+limit+`"`) || !strings.Contains(out, `"allowed":false`) {
		t.Fatalf("the second: exit %d, %s", code, out)
	}
	keys := mr.Keys()
	if len(keys) != 1 || !strings.HasPrefix(keys[0], "user:42:20") {
		t.Errorf("keys %v; want user:42 and the day's date", keys)
	}
}
