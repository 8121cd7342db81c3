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

// tagVerdict is what a sweep makes of a live child's environment.
type tagVerdict int

const (
	untagged  tagVerdict = iota // not this poll's: left alone
	tagged                      // this poll's: killed
	unsettled                   // cannot tell yet: looked at again next round
)

// judgeTag decides whether a live child whose environment read env (nil
// when it could not be opened: not dumpable, or gone) and whose command
// line read cmdline belongs to the poll that tagged it with entry
// (NAME=VALUE). blankBefore says that an earlier round of the same sweep
// already read its environment empty with its command line readable.
//
// An empty environment is not believed at once: between execve's switch to
// the new program's memory and the kernel's writing of its arguments, both
// the environment and the command line read empty (an orphan that left its
// group with setsid(1) is caught there while setsid execs the command), and
// so does a process that is exiting. Only a child whose command line is
// readable and whose environment still reads empty in a later round has a
// cleared environment (env -i): that one cannot be told apart, and escapes.
func judgeTag(env, cmdline, entry []byte, blankBefore bool) tagVerdict {
	switch {
	case env == nil:
		return untagged
	case hasEntry(env, entry):
		return tagged
	case len(env) > 0:
		return untagged
	case len(cmdline) > 0 && blankBefore:
		return untagged
	}
	return unsettled
}

// hasEntry reports whether the NUL-separated environment env holds entry.
func hasEntry(env, entry []byte) bool {
	for kv := range bytes.SplitSeq(env, []byte{0}) {
		if bytes.Equal(kv, entry) {
			return true
		}
	}
	return false
}

// readProc reads /proc/PID/name; nil when it cannot be opened or read.
func readProc(pid int, name string) []byte {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/" + name)
	if err != nil {
		return nil
	}
	if b == nil {
		b = []byte{}
	}
	return b
}

// sweeper is one poll's sweep: what it has killed and what it has seen.
type sweeper struct {
	leader int    // the poll's process, exited, not yet reaped
	entry  []byte // the poll's tag, NAME=VALUE
	sid    int    // this process's session
	killed map[int]bool
	// blank holds the children whose environment read empty, command
	// line readable, in an earlier round (judgeTag's blankBefore).
	blank map[int]bool
}

// sweep kills and reaps what the poll tagged tag left behind once its
// leader (pid leader, exited, not yet reaped) is gone: every child of this
// subreaper whose environment holds tag is killed, zombies that cannot be
// a poll's leader are reaped, round after round (a killed process's own
// children are reparented here when it dies; a child caught in execve is
// looked at again) until a round finds nothing, at most for sweepBound. It
// returns how many processes it killed.
func sweep(leader int, tag string) int {
	sid, _ := unix.Getsid(0)
	s := &sweeper{leader: leader, entry: []byte(tag), sid: sid, killed: map[int]bool{}, blank: map[int]bool{}}
	deadline := time.Now().Add(sweepBound)
	pause := sweepPause
	for time.Now().Before(deadline) {
		busy := false
		for _, pid := range children() {
			if pid == leader {
				continue
			}
			busy = s.one(pid) || busy
		}
		if !busy {
			break
		}
		time.Sleep(pause)
		pause = min(2*pause, sweepPauseMax)
	}
	return len(s.killed)
}

// one handles one child of this process for the sweep: it kills it if it
// is tagged (or waits for it if it is in the poll's killed process group),
// reaps it if it is a zombie that no poll waits for (a poll's leader leads
// its own group in this process's session, unless this sweep killed it),
// and reports whether it did either or must look at it again.
func (s *sweeper) one(pid int) bool {
	st := readStat(pid)
	if !st.hasParsed {
		return false
	}
	if st.state == 'Z' {
		if st.pgid == pid && st.sid == s.sid && !s.killed[pid] {
			return false // maybe a live poll's leader: os/exec reaps it
		}
		var ws unix.WaitStatus
		got, _ := unix.Wait4(pid, &ws, unix.WNOHANG, nil)
		return got == pid
	}
	if st.pgid == s.leader {
		// A member of the poll's own process group, which was killed
		// as a whole: it is dying, and its environment may already be
		// unreadable. Wait for it to become a zombie and reap it.
		s.killed[pid] = true
	}
	if s.killed[pid] {
		// Killed but not yet a zombie: while it exits its environment may
		// no longer be readable. Wait for it (bounded by sweepBound) so
		// that it is reaped, not left a zombie.
		return true
	}
	env := readProc(pid, "environ")
	var cmdline []byte
	if env != nil && len(env) == 0 {
		cmdline = readProc(pid, "cmdline")
	}
	switch judgeTag(env, cmdline, s.entry, s.blank[pid]) {
	case untagged:
		return false
	case unsettled:
		if len(cmdline) > 0 {
			s.blank[pid] = true
		}
		return true
	}
	// pid is an unreaped child of this process: it cannot have been reused.
	if unix.Kill(pid, unix.SIGKILL) == nil {
		s.killed[pid] = true
	}
	return true
}
