package scripttest

import (
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/redisrate/redisrate/internal/redisserver"
)

// A real Redis whose clock the test sets, as miniredis's: the server runs
// with a small preload library that answers the wall clock
// (clock_gettime(CLOCK_REALTIME), gettimeofday, time) from an 8-byte file
// the test writes, nanoseconds since the epoch, and the real clock while
// the file holds 0. The monotonic clocks stay real, so Redis's timers and
// timeouts run normally; TIME, the scripts' clock and the keys' expiry
// follow the file. (libfaketime cannot start Debian's redis-server, whose
// jemalloc reads the clock while libfaketime initialises.)
const clockC = `#define _GNU_SOURCE
#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static volatile long long *set_ns;

__attribute__((constructor)) static void init(void) {
	const char *p = getenv("REDISRATE_CLOCKFILE");
	if (!p) return;
	int fd = open(p, O_RDONLY);
	if (fd < 0) return;
	void *m = mmap(0, 8, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (m != MAP_FAILED) set_ns = m;
}

static int frozen(long long *ns) {
	if (!set_ns) return 0;
	*ns = *set_ns;
	return *ns != 0;
}

int clock_gettime(clockid_t id, struct timespec *ts) {
	long long ns;
	if ((id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE) && frozen(&ns)) {
		ts->tv_sec = ns / 1000000000LL;
		ts->tv_nsec = ns % 1000000000LL;
		return 0;
	}
	return syscall(SYS_clock_gettime, id, ts);
}

int gettimeofday(struct timeval *tv, void *tz) {
	long long ns;
	if (!frozen(&ns)) return syscall(SYS_gettimeofday, tv, tz);
	if (tv) {
		tv->tv_sec = ns / 1000000000LL;
		tv->tv_usec = (ns % 1000000000LL) / 1000;
	}
	return 0;
}

time_t time(time_t *t) {
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	if (t) *t = ts.tv_sec;
	return ts.tv_sec;
}
`

var clockLib struct {
	once sync.Once
	path string
	err  error
}

// clockLibrary compiles the preload library once per test process.
func clockLibrary() (string, error) {
	clockLib.once.Do(func() {
		dir, err := os.MkdirTemp("", "redisrate-clock-")
		if err != nil {
			clockLib.err = err
			return
		}
		src := filepath.Join(dir, "clock.c")
		if err := os.WriteFile(src, []byte(clockC), 0o600); err != nil {
			clockLib.err = err
			return
		}
		lib := filepath.Join(dir, "clock.so")
		out, err := exec.Command("cc", "-shared", "-fPIC", "-O2", "-o", lib, src).CombinedOutput()
		if err != nil {
			clockLib.err = fmt.Errorf("cc: %v: %s", err, out)
			return
		}
		clockLib.path = lib
	})
	return clockLib.path, clockLib.err
}

// RealClock starts a redis-server whose clock the test sets (SetTime,
// Advance), starting at Epoch, like Miniredis's. It needs a C compiler
// (cc); without one it skips, except under CI=true, where it fails.
func RealClock(t testing.TB) *Backend {
	t.Helper()
	return realClock(t, "redis-server")
}

// realClock starts bin (redis-server or valkey-server) on a clock the test
// sets.
func realClock(t testing.TB, bin string) *Backend {
	t.Helper()
	if testing.Short() {
		t.Skip("-short (make unit): miniredis only; make test runs it on " + bin)
	}
	lib, err := clockLibrary()
	if err != nil {
		redisserver.Missing(t, "no C compiler for the clock library: %v", err)
	}
	file := filepath.Join(t.TempDir(), "clock")
	if err := os.WriteFile(file, make([]byte, 8), 0o600); err != nil {
		t.Fatal(err)
	}
	b := startServer(t, bin, []string{"LD_PRELOAD=" + lib, "REDISRATE_CLOCKFILE=" + file})
	b.Name += " (test clock)"
	b.clock = file
	b.SetTime(Epoch)
	if now, err := b.Client.Time(Ctx).Result(); err != nil || !now.Equal(Epoch) {
		t.Fatalf("the clock library did not take on %s: TIME is %v (%v), want %v", bin, now, err, Epoch)
	}
	return b
}

// BothClocked returns a miniredis and every real server that can be started
// (Servers), all with clocks the test sets: the tables that move the clock
// run on gopher-lua and on each server's Lua 5.1 alike. Without a server or
// a C compiler (for the clock library) fewer run, and the test logs why;
// under CI=true all are required.
func BothClocked(t testing.TB) []*Backend {
	t.Helper()
	out := []*Backend{Miniredis(t)}
	if testing.Short() {
		return out // go test -short (make unit): miniredis only
	}
	for _, bin := range Servers {
		if redisserver.Required() {
			out = append(out, realClock(t, bin))
			continue
		}
		if _, err := exec.LookPath(bin); err != nil {
			t.Logf("no %s: the table does not run on it", bin)
			continue
		}
		if _, err := clockLibrary(); err != nil {
			t.Log("the clock library does not build, so the table runs on miniredis only: ", err)
			return out
		}
		out = append(out, realClock(t, bin))
	}
	return out
}

// setRealTime writes t to the clock file of a RealClock server.
func (b *Backend) setRealTime(t time.Time) {
	b.t.Helper()
	var buf [8]byte
	binary.LittleEndian.PutUint64(buf[:], uint64(t.UnixNano()))
	f, err := os.OpenFile(b.clock, os.O_WRONLY, 0)
	if err != nil {
		b.t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(buf[:], 0); err != nil {
		b.t.Fatal(err)
	}
	b.now = t
}

// RealClockServers starts each of Servers that can be started (under
// CI=true, every one must) on a clock the test sets.
func RealClockServers(t testing.TB) []*Backend {
	t.Helper()
	var out []*Backend
	for _, bin := range Servers {
		if available(bin) {
			out = append(out, realClock(t, bin))
		}
	}
	if len(out) == 0 {
		t.Skip("neither redis-server nor valkey-server is installed")
	}
	return out
}
