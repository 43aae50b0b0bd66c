//go:build windows

package main

import (
	"os"
	"syscall"
	"unsafe"
)

var procLockFileEx = syscall.NewLazyDLL("kernel32.dll").NewProc("LockFileEx")

// Flags of LockFileEx, and the error of a range another handle has locked.
const (
	lockfileFailImmediately = 0x1
	lockfileExclusiveLock   = 0x2
	errorLockViolation      = syscall.Errno(33)
)

// tryLockFile takes an exclusive lock on the first byte of f without
// waiting; held reports that another process has it. Windows drops the lock
// when the process ends, as flock does.
func tryLockFile(f *os.File) (held bool, err error) {
	var ol syscall.Overlapped
	r, _, e := procLockFileEx.Call(f.Fd(), lockfileExclusiveLock|lockfileFailImmediately, 0, 1, 0, uintptr(unsafe.Pointer(&ol)))
	if r != 0 {
		return false, nil
	}
	return e == errorLockViolation, e
}
