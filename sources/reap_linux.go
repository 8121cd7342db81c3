package sources

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

const (
	// sweepBound bounds the sweep of one poll's leftovers.
	sweepBound = 500 * time.Millisecond
	// sweepPause is the first pause between sweep rounds; it doubles up to
	// sweepPauseMax while killed processes are still dying.
	sweepPause    = time.Millisecond
	sweepPauseMax = 20 * time.Millisecond
)

// BecomeSubreaper makes the calling process a child subreaper
// (PR_SET_CHILD_SUBREAPER): processes that an exec poll's command leaves
// behind, including those that left its process group or session
// (setsid), are reparented to this process when their parent dies, so that
// the poll finds, kills and reaps them when it ends. The daemon calls it
// once at start, before any poll; without it a poll still kills its process
// group, but descendants that left the group escape to init.
//
// The polls' sweeps also reap zombie children that do not lead their own
// process group in the daemon's session (orphans that exited on their
// own), so any other child the daemon starts must be started that way
// (os/exec with Setpgid) or its exit status may be lost.
func BecomeSubreaper() error {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_CHILD_SUBREAPER): %w", err)
	}
	return nil
}

// isSubreaper reports whether this process is a child subreaper.
func isSubreaper() bool {
	var v int32
	err := unix.Prctl(unix.PR_GET_CHILD_SUBREAPER, uintptr(unsafe.Pointer(&v)), 0, 0, 0)
	return err == nil && v != 0
}

// waitExited blocks until the child pid has exited, without reaping it:
// while it is an unreaped zombie its pid, and so its process group id,
// cannot be reused. It reports false if that cannot be waited for.
func waitExited(pid int) bool {
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if !errors.Is(err, unix.EINTR) {
			return err == nil
		}
	}
}

// procStat is what a sweep needs of /proc/PID/stat.
type procStat struct {
	state     byte
	pgid, sid int
	ppid      int
	hasParsed bool
}

// readStat parses /proc/pid/stat.
func readStat(pid int) procStat {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return procStat{}
	}
	f := strings.Fields(string(b[i+2:]))
	if len(f) < 4 {
		return procStat{}
	}
	st := procStat{state: f[0][0], hasParsed: true}
	st.ppid, _ = strconv.Atoi(f[1])
	st.pgid, _ = strconv.Atoi(f[2])
	st.sid, _ = strconv.Atoi(f[3])
	return st
}

// children lists the pids of this process's children: those of every
// thread (an orphan is reparented to one of the subreaper's threads), or,
// without /proc/PID/task/TID/children, from a scan of /proc.
func children() []int {
	files, _ := filepath.Glob("/proc/self/task/*/children")
	var pids []int
	read := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		read++
		for _, s := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(s); err == nil {
				pids = append(pids, pid)
			}
		}
	}
	if read > 0 {
		return pids
	}
	self := os.Getpid()
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		if pid, err := strconv.Atoi(d.Name()); err == nil && readStat(pid).ppid == self {
			pids = append(pids, pid)
		}
	}
	return pids
}

// hasTag reports whether the environment of pid holds entry (NAME=VALUE).
// It cannot be read for a zombie nor for a process that is not dumpable.
func hasTag(pid int, entry []byte) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return false
	}
	for _, kv := range bytes.Split(b, []byte{0}) {
		if bytes.Equal(kv, entry) {
			return true
		}
	}
	return false
}

// sweep kills and reaps what the poll tagged tag left behind once its
// leader (pid leader, exited, not yet reaped) is gone: every child of this
// subreaper whose environment holds tag is killed, zombies that cannot be
// a poll's leader are reaped, round after round (a killed process's own
// children are reparented here when it dies) until a round finds nothing,
// at most for sweepBound. It returns how many processes it killed.
func sweep(leader int, tag string) int {
	entry := []byte(tag)
	sid, _ := unix.Getsid(0)
	killed := map[int]bool{}
	deadline := time.Now().Add(sweepBound)
	pause := sweepPause
	for time.Now().Before(deadline) {
		busy := false
		for _, pid := range children() {
			if pid == leader {
				continue
			}
			busy = sweepOne(pid, leader, entry, sid, killed) || busy
		}
		if !busy {
			break
		}
		time.Sleep(pause)
		pause = min(2*pause, sweepPauseMax)
	}
	return len(killed)
}

// sweepOne handles one child of this process for sweep: it kills it if it
// is tagged (or waits for it if it is in the poll's killed process group), reaps it if it is a zombie that no poll waits for (a poll's
// leader leads its own group in this process's session, unless this sweep
// killed it), and reports whether it did either.
func sweepOne(pid, leader int, entry []byte, sid int, killed map[int]bool) bool {
	st := readStat(pid)
	if !st.hasParsed {
		return false
	}
	if st.state == 'Z' {
		if st.pgid == pid && st.sid == sid && !killed[pid] {
			return false // maybe a live poll's leader: os/exec reaps it
		}
		var ws unix.WaitStatus
		got, _ := unix.Wait4(pid, &ws, unix.WNOHANG, nil)
		return got == pid
	}
	if st.pgid == leader {
		// A member of the poll's own process group, which was killed
		// as a whole: it is dying, and its environment may already be
		// unreadable. Wait for it to become a zombie and reap it.
		killed[pid] = true
	}
	if killed[pid] {
		// Killed but not yet a zombie: while it exits its environment may
		// no longer be readable. Wait for it (bounded by sweepBound) so
		// that it is reaped, not left a zombie.
		return true
	}
	if !hasTag(pid, entry) {
		return false
	}
	// pid is an unreaped child of this process: it cannot have been reused.
	if unix.Kill(pid, unix.SIGKILL) == nil {
		killed[pid] = true
	}
	return true
}
