//go:build linux

package store

import (
	"testing"

	"golang.org/x/sys/unix"
)

// TestFlockHolderIn reads the holder of a file's exclusive flock out of
// /proc/locks text: shared locks, POSIX locks, waiters and other files are
// not it.
func TestFlockHolderIn(t *testing.T) {
	id := fileID{dev: unix.Mkdev(0xfd, 1), ino: 1234}
	for _, c := range []struct {
		name, locks string
		want        int
	}{
		{"holder", "1: FLOCK  ADVISORY  WRITE 4242 fd:01:1234 0 EOF\n", 4242},
		{"among others", "1: POSIX  ADVISORY  WRITE 7 fd:01:1234 1073741824 1073741824\n" +
			"2: FLOCK  ADVISORY  READ  8 fd:01:1234 0 EOF\n" +
			"3: FLOCK  ADVISORY  WRITE 9 fd:01:999 0 EOF\n" +
			"4: FLOCK  ADVISORY  WRITE 4242 fd:01:1234 0 EOF\n", 4242},
		{"a waiter is not the holder", "1: -> FLOCK  ADVISORY  WRITE 5 fd:01:1234 0 EOF\n", 0},
		{"none", "", 0},
		{"other device", "1: FLOCK  ADVISORY  WRITE 4242 fd:02:1234 0 EOF\n", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := flockHolderIn(c.locks, id); got != c.want {
				t.Errorf("flockHolderIn = %d, want %d", got, c.want)
			}
		})
	}
}
