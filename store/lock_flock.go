//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package store

import (
	"errors"
	"os"
	"syscall"
)

const (
	lockExclusive = syscall.LOCK_EX
	lockShared    = syscall.LOCK_SH
)

// errWouldBlock is what flock returns when another open file holds a
// conflicting lock.
const errWouldBlock = syscall.EWOULDBLOCK

// flock takes a lock of the given kind on f without waiting. flock locks
// belong to the open file description: two opens of the same file conflict
// even within one process, and the kernel drops the lock when the last
// descriptor closes, also when the process is killed.
func flock(f *os.File, how int) error {
	return doFlock(f, how|syscall.LOCK_NB)
}

// funlock drops the lock on f.
func funlock(f *os.File) error {
	return doFlock(f, syscall.LOCK_UN)
}

func doFlock(f *os.File, how int) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) {
		for {
			ferr = syscall.Flock(int(fd), how)
			if !errors.Is(ferr, syscall.EINTR) {
				return
			}
		}
	}); err != nil {
		return err
	}
	if ferr != nil {
		return &os.PathError{Op: "flock", Path: f.Name(), Err: ferr}
	}
	return nil
}
