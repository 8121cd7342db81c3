//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package store

import (
	"errors"
	"os"
)

const (
	lockExclusive = 1
	lockShared    = 2
)

// errWouldBlock is never returned on this platform.
var errWouldBlock = errors.New("lock would block")

// errNoFlock says that this platform has no flock(2).
var errNoFlock = errors.New("daemon lock not supported on this platform")

func flock(*os.File, int) error { return errNoFlock }

func funlock(*os.File) error { return errNoFlock }

// fileID identifies a file; this platform has no inode numbers to offer.
type fileID struct{ dev, ino uint64 }

func (id fileID) valid() bool { return id != fileID{} }

func fileIDOf(*os.File) (fileID, error) { return fileID{}, nil }

func statID(path string) (fileID, error) {
	_, err := os.Stat(path)
	return fileID{}, err
}

func flockHolder(*os.File) int { return 0 }
