//go:build !linux

package redistest

import "syscall"

func sysProcAttr() *syscall.SysProcAttr { return nil }

// lockPort and unlockPort reserve a port across test processes on Linux
// only (see proc_linux.go); elsewhere a port is checked free, no more.
func lockPort(int) bool { return true }

func unlockPort(int) {}
