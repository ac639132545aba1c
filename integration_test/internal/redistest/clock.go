package redistest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// A server with a shifted clock (Options.ClockShift) runs with a preload
// library that adds the shift to the wall clock it reads.
//
// The first choice is Debian's libfaketime (package faketime or
// libfaketime, FAKETIME="-2s"). It does not work with Debian's redis-server,
// which links the system jemalloc: libfaketime's initialisation allocates,
// jemalloc's initialisation reads the clock, and the process hangs at start
// (libfaketime issues #130, #327, #478: "Unexpected recursive calls to
// clock_gettime() without proper initialization"; no fix on either side).
// So a probe runs "redis-server --version" under libfaketime once per test
// process, and when that hangs, the server gets a small shim instead,
// compiled by the C compiler from clockShiftC: clock_gettime(CLOCK_REALTIME),
// gettimeofday and time read the kernel with a raw system call (no dynamic
// lookup, no allocation, so nothing to recurse into) and add CLOCKSHIFT_MS.
// The monotonic clocks stay real, as libfaketime's FAKETIME_DONT_FAKE_MONOTONIC
// would leave them: Redis's timers and timeouts run normally.

// clockShiftC is the shim's source.
const clockShiftC = `#define _GNU_SOURCE
#include <stdlib.h>
#include <time.h>
#include <sys/time.h>
#include <sys/syscall.h>
#include <unistd.h>

static long long shift_ns(void) {
	static int done;
	static long long v;
	if (!done) {
		const char *s = getenv("CLOCKSHIFT_MS");
		v = s ? atoll(s) * 1000000LL : 0;
		done = 1;
	}
	return v;
}

static void shift(struct timespec *ts) {
	long long ns = (long long)ts->tv_sec * 1000000000LL + ts->tv_nsec + shift_ns();
	ts->tv_sec = ns / 1000000000LL;
	ts->tv_nsec = ns % 1000000000LL;
}

int clock_gettime(clockid_t id, struct timespec *ts) {
	int r = syscall(SYS_clock_gettime, id, ts);
	if (r == 0 && (id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE)) shift(ts);
	return r;
}

int gettimeofday(struct timeval *tv, void *tz) {
	struct timespec ts;
	int r = syscall(SYS_clock_gettime, CLOCK_REALTIME, &ts);
	(void)tz;
	if (r != 0) return r;
	shift(&ts);
	if (tv) {
		tv->tv_sec = ts.tv_sec;
		tv->tv_usec = ts.tv_nsec / 1000;
	}
	return 0;
}

time_t time(time_t *t) {
	struct timeval tv;
	gettimeofday(&tv, 0);
	if (t) *t = tv.tv_sec;
	return tv.tv_sec;
}
`

var (
	faketimeOnce sync.Once
	faketimeLib  string // libfaketime's path when it works with redis-server
	faketimeWhy  string // why it is not used
)

// libfaketimePaths are where Debian, Ubuntu, Fedora and Homebrew put it.
var libfaketimePaths = []string{
	"/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
	"/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
	"/usr/lib64/faketime/libfaketime.so.1",
	"/usr/lib/faketime/libfaketime.so.1",
	"/usr/local/lib/faketime/libfaketime.so.1",
}

// probeFaketime finds libfaketime and checks that redis-server starts
// under it (it hangs where jemalloc and libfaketime clash).
func probeFaketime() {
	lib := ""
	for _, p := range libfaketimePaths {
		if _, err := os.Stat(p); err == nil {
			lib = p
			break
		}
	}
	if lib == "" {
		faketimeWhy = "libfaketime not installed (Debian: apt-get install faketime)"
		return
	}
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		faketimeWhy = "no redis-server"
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--version")
	cmd.Env = append(os.Environ(), "LD_PRELOAD="+lib, "FAKETIME=-2s")
	if out, err := cmd.Output(); err != nil || len(out) == 0 {
		faketimeWhy = fmt.Sprintf("redis-server under %s does not start (%v): libfaketime and jemalloc clash", lib, err)
		return
	}
	faketimeLib = lib
}

// ClockMethod says how Options.ClockShift is applied on this machine:
// "libfaketime (path)" or "clockshift shim (why libfaketime is not used)".
func ClockMethod() string {
	faketimeOnce.Do(probeFaketime)
	if faketimeLib != "" {
		return "libfaketime (" + faketimeLib + ")"
	}
	return "clockshift shim compiled with cc (" + faketimeWhy + ")"
}

// clockEnv returns the environment variables that shift a redis-server's
// wall clock by d; the shim, when needed, is compiled into dir.
func clockEnv(t testing.TB, d time.Duration, dir string) []string {
	t.Helper()
	faketimeOnce.Do(probeFaketime)
	if faketimeLib != "" {
		return []string{"LD_PRELOAD=" + faketimeLib, fmt.Sprintf("FAKETIME=%+.3fs", d.Seconds()), "FAKETIME_DONT_FAKE_MONOTONIC=1"}
	}
	lib := filepath.Join(dir, "clockshift.so")
	if _, err := os.Stat(lib); err != nil {
		cc, err := exec.LookPath("cc")
		if err != nil {
			noRedis(t, fmt.Sprintf("a shifted clock needs libfaketime that works with redis-server (%s) or a C compiler (apt-get install gcc)", faketimeWhy))
		}
		src := filepath.Join(dir, "clockshift.c")
		if err := os.WriteFile(src, []byte(clockShiftC), 0o600); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(cc, "-shared", "-fPIC", "-O2", "-o", lib, src).CombinedOutput(); err != nil {
			t.Fatalf("compiling the clock shim: %v\n%s", err, out)
		}
	}
	return []string{"LD_PRELOAD=" + lib, "CLOCKSHIFT_MS=" + strconv.FormatInt(d.Milliseconds(), 10)}
}

// ClockOffset measures how far the server's TIME is from this process's
// clock: TIME minus the midpoint of the round trip.
func ClockOffset(ctx context.Context, c redis.UniversalClient) (time.Duration, error) {
	before := time.Now()
	tm, err := c.Time(ctx).Result()
	if err != nil {
		return 0, err
	}
	after := time.Now()
	mid := before.Add(after.Sub(before) / 2)
	return tm.Sub(mid), nil
}

// checkShift fails the test unless TIME on s is off by want (within 300 ms).
func (s *Server) checkShift(want time.Duration) {
	s.t.Helper()
	c := s.Client(&redis.Options{MaxRetries: -1})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	got, err := ClockOffset(ctx, c)
	if err != nil {
		s.t.Fatalf("TIME on %s: %v", s.Addr, err)
	}
	if d := got - want; d < -300*time.Millisecond || d > 300*time.Millisecond {
		s.t.Fatalf("server on %s started with its clock shifted by %v reads %v off: the shift (%s) did not take", s.Addr, want, got, ClockMethod())
	}
	_ = c.Close()
}
