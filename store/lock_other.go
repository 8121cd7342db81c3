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
