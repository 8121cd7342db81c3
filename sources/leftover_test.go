package sources

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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
