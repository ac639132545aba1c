package redistest

import "syscall"

// sysProcAttr has the kernel kill a server whose test binary dies (a panic,
// a timeout, ^C), so no redis-server outlives the test run.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
