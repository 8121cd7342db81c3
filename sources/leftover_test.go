package sources

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// running lists the pids of live processes whose command line is argv.
func running(argv ...string) []int {
	want := []byte(strings.Join(argv, "\x00") + "\x00")
	dirs, _ := os.ReadDir("/proc")
	var pids []int
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + d.Name() + "/cmdline")
		if err == nil && bytes.Equal(b, want) && !processGone(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// zombieChildren lists the children of the test process that are zombies.
func zombieChildren() []int {
	var z []int
	for _, pid := range children() {
		if readStat(pid).state == 'Z' {
			z = append(z, pid)
		}
	}
	return z
}

// assertNoLeftovers checks that no `sleep ARG` runs and that the test
// process has no zombie child left (the poll reaped what it killed).
func assertNoLeftovers(t *testing.T, arg string) {
	t.Helper()
	if pids := running("sleep", arg); len(pids) > 0 {
		t.Errorf("sleep %s still runs after the poll: pids %v", arg, pids)
	}
	if z := zombieChildren(); len(z) > 0 {
		t.Errorf("zombie children left: %v", z)
	}
}

func TestExecLeavesNothingBehind(t *testing.T) {
	tests := []struct {
		name, script, arg string
		timeout           time.Duration
	}{
		{"background job after success", `sleep 301 & echo hi`, "301", 0},
		{"setsid grandchild after success", `setsid sleep 303 & echo hi`, "303", 0},
		{"setsid chain after success", `setsid sh -c 'setsid sleep 304 & wait' & sleep 0.2; echo hi`, "304", 0},
		{"failure", `sleep 306 & exit 3`, "306", 0},
		// An orphan that exited by itself is reparented as a zombie: reaped.
		{"orphan zombie", `(setsid sh -c 'exit 0' &); sleep 0.2`, "none", 0},
		{"setsid grandchild at the timeout", `setsid sleep 302 & wait`, "302", 500 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := shell(tt.script, "")
			if tt.timeout > 0 {
				src.Timeout = tt.timeout
			}
			res, took := pollWithin(t, NewExec(src, nil), src.Timeout)
			if tt.timeout > 0 {
				if !errors.Is(res.Err, context.DeadlineExceeded) {
					t.Errorf("Err = %q, want a timeout", errText(res.Err))
				}
			} else if strings.Contains(tt.script, "exit 3") != (res.ExitCode == 3) || (res.ExitCode == 0) != (res.Err == nil) {
				t.Errorf("got %+v (%s)", res, errText(res.Err))
			}
			// Killed at once, the leftovers release the output: the slot is
			// not held for the 2 s wait delay (as it was before).
			if limit := src.Timeout; tt.timeout == 0 && took > waitDelay*3/4 || tt.timeout > 0 && took > limit+waitDelay*3/4 {
				t.Errorf("poll took %v", took)
			}
			assertNoLeftovers(t, tt.arg)
		})
	}
}

// A poll's sweep kills only its own leftovers: an orphan of another poll
// that still runs is left alone until that poll ends.
func TestExecSweepSparesOtherPolls(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan Result)
	other := shell(`(setsid sleep 305 & echo $! > "$1"); exec sleep 1000`, pidFile)
	go func() { done <- NewExec(other, nil).Poll(ctx) }()
	orphan := readPID(t, pidFile)
	eventually(t, 5*time.Second, "the orphan was not reparented to the test process", func() bool {
		return readStat(orphan).ppid == os.Getpid()
	})
	if res, _ := pollWithin(t, NewExec(shell(`echo hi`, ""), nil), 10*time.Second); res.Err != nil {
		t.Fatal(res.Err)
	}
	if processGone(orphan) {
		t.Fatal("another poll's sweep killed a live poll's process")
	}
	cancel()
	if res := <-done; !errors.Is(res.Err, context.Canceled) {
		t.Errorf("Err = %q, want canceled", errText(res.Err))
	}
	assertNoLeftovers(t, "305")
}

func TestSubreaper(t *testing.T) {
	if !isSubreaper() {
		t.Fatal("BecomeSubreaper did not make the test process a subreaper")
	}
}

// A sweep believes an empty environment only when the command line is
// readable and a later round still reads it empty: a child caught inside
// execve reads both empty, and was once left running as "untagged".
func TestJudgeTag(t *testing.T) {
	entry := []byte("PACER_POLL_ID=7")
	tests := []struct {
		name         string
		env, cmdline []byte
		blankBefore  bool
		want         tagVerdict
	}{
		{"unreadable (not dumpable, gone)", nil, nil, false, untagged},
		{"tagged", []byte("A=1\x00PACER_POLL_ID=7\x00"), nil, false, tagged},
		{"tagged last, no trailing NUL", []byte("A=1\x00PACER_POLL_ID=7"), nil, false, tagged},
		{"another poll's", []byte("PACER_POLL_ID=8\x00"), nil, false, untagged},
		{"a prefix is not the tag", []byte("PACER_POLL_ID=77\x00"), nil, false, untagged},
		{"inside execve: both empty", []byte{}, []byte{}, false, unsettled},
		{"inside execve, seen blank before", []byte{}, []byte{}, true, unsettled},
		{"blank, first look", []byte{}, []byte("sleep\x00"), false, unsettled},
		{"cleared environment, second look", []byte{}, []byte("sleep\x00"), true, untagged},
	}
	for _, tt := range tests {
		if got := judgeTag(tt.env, tt.cmdline, entry, tt.blankBefore); got != tt.want {
			t.Errorf("%s: judgeTag = %d, want %d", tt.name, got, tt.want)
		}
	}
}

// The sweeper looks at a child with a cleared environment twice, then
// leaves it alone; a tagged child is killed at the first look.
func TestSweeperBlankEnvironment(t *testing.T) {
	start := func(env []string, arg string) *exec.Cmd {
		cmd := exec.Command("sleep", arg)
		cmd.Env = env
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		eventually(t, 5*time.Second, "sleep "+arg+" did not start", func() bool { return len(running("sleep", arg)) == 1 })
		return cmd
	}
	blank := start([]string{}, "308")
	tag := start([]string{"PACER_POLL_ID=x1"}, "309")
	s := &sweeper{leader: -1, entry: []byte("PACER_POLL_ID=x1"), killed: map[int]bool{}, blank: map[int]bool{}}
	if !s.one(blank.Process.Pid) {
		t.Error("first look at a blank environment: want another round")
	}
	if s.one(blank.Process.Pid) {
		t.Error("second look at a blank environment with a command line: want it left alone")
	}
	if !s.one(tag.Process.Pid) || !s.killed[tag.Process.Pid] {
		t.Error("a tagged child was not killed")
	}
	if err := tag.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("tagged child: Wait = %v, want killed", err)
	}
	if processGone(blank.Process.Pid) {
		t.Error("the child with a cleared environment was killed")
	}
}
