//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package store

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
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

// fileID identifies a file: its device and inode numbers. The zero value
// is no file.
type fileID struct{ dev, ino uint64 }

func (id fileID) valid() bool { return id != fileID{} }

// fileIDOf is the identity of the file f has open.
func fileIDOf(f *os.File) (fileID, error) {
	fi, err := f.Stat()
	if err != nil {
		return fileID{}, err
	}
	return idOfInfo(fi), nil
}

// statID is the identity of the file at path (symbolic links followed).
func statID(path string) (fileID, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileID{}, err
	}
	return idOfInfo(fi), nil
}

func idOfInfo(fi os.FileInfo) fileID {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileID{}
	}
	return fileID{dev: uint64(st.Dev), ino: uint64(st.Ino)} //nolint:unconvert // int32 on some platforms
}

// flockHolder is the pid of the process that holds an exclusive flock on
// the file f has open, from /proc/locks (Linux); 0 when unknown.
func flockHolder(f *os.File) int {
	id, err := fileIDOf(f)
	if err != nil {
		return 0
	}
	b, err := os.ReadFile("/proc/locks")
	if err != nil {
		return 0
	}
	return flockHolderIn(string(b), id)
}

// flockHolderIn finds, in the text of /proc/locks, the holder of an
// exclusive flock on the file id ("1: FLOCK ADVISORY WRITE 4242 fd:01:1234
// 0 EOF"; the device is major:minor in hex). Waiters ("->") are skipped.
func flockHolderIn(locks string, id fileID) int {
	want := fmt.Sprintf("%02x:%02x:%d", unix.Major(id.dev), unix.Minor(id.dev), id.ino)
	for _, line := range strings.Split(locks, "\n") {
		f := strings.Fields(line)
		if len(f) < 6 || f[1] != "FLOCK" || f[3] != "WRITE" || f[5] != want {
			continue
		}
		if pid, err := strconv.Atoi(f[4]); err == nil && pid > 0 {
			return pid
		}
	}
	return 0
}
