package redistest

import (
	"os"
	"path/filepath"
	"sync"
	"syscall"
)

// sysProcAttr has the kernel kill a server whose test binary dies (a panic,
// a timeout, ^C), so no redis-server outlives the test run.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// portLocks is a file in the temporary directory on whose bytes the test
// processes of a machine lock the ports they hand out (byte p for port p,
// an fcntl lock, which the kernel drops with the process): go test runs
// several packages at once, and a port one process probed free, or whose
// server it stopped for a while (Stop, Kill, then Restart), must not be
// taken by another meanwhile.
var portLocks struct {
	once sync.Once
	f    *os.File
}

// lockPort reserves port p for this process, or reports that another
// process holds it. Without the file nothing is reserved, as before.
func lockPort(p int) bool {
	portLocks.once.Do(func() {
		f, err := os.OpenFile(filepath.Join(os.TempDir(), "redisrate-redistest-ports.lock"), os.O_CREATE|os.O_RDWR, 0o666)
		if err == nil {
			portLocks.f = f
		}
	})
	if portLocks.f == nil {
		return true
	}
	lk := syscall.Flock_t{Type: syscall.F_WRLCK, Whence: 0, Start: int64(p), Len: 1}
	return syscall.FcntlFlock(portLocks.f.Fd(), syscall.F_SETLK, &lk) == nil
}

// unlockPort gives port p back.
func unlockPort(p int) {
	if portLocks.f == nil {
		return
	}
	lk := syscall.Flock_t{Type: syscall.F_UNLCK, Whence: 0, Start: int64(p), Len: 1}
	_ = syscall.FcntlFlock(portLocks.f.Fd(), syscall.F_SETLK, &lk)
}
