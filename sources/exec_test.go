package sources

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/config"
)

func execSource(argv ...string) *config.Source {
	return &config.Source{Name: "job", Type: "exec", Command: argv, Timeout: 10 * time.Second}
}

// shell returns an exec source running script with /bin/sh; $1 is arg.
func shell(script, arg string) *config.Source {
	return execSource("/bin/sh", "-c", script, "sh", arg)
}

func TestExecSuccess(t *testing.T) {
	p := NewExec(shell(`printf hello; echo noise >&2`, ""), nil)
	for range 2 { // a poller runs its command afresh on every poll
		res, _ := pollWithin(t, p, 10*time.Second)
		if want := (Result{ExitCode: 0, Bytes: 5, Digest: sha([]byte("hello"))}); res != want {
			t.Errorf("got %+v (%s), want %+v", res, errText(res.Err), want)
		}
	}
}

func TestExecFailure(t *testing.T) {
	long := strings.Repeat("é", 300)
	tests := []struct {
		name, script string
		env          map[string]string
		exit         int
		err          string
	}{
		{"stderr line", `echo first >&2; echo "  boom happened  " >&2; echo >&2; printf "  \n" >&2; exit 3`, nil, 3,
			"exec sh: exit status 3: boom happened"},
		{"stdout when stderr empty", `echo "CRITICAL - backup too old"; exit 2`, nil, 2,
			"exec sh: exit status 2: CRITICAL - backup too old"},
		{"no output", `exit 1`, nil, 1, "exec sh: exit status 1"},
		{"long line cut", `echo "$1" >&2; exit 4`, nil, 4, "exec sh: exit status 4: " + long[:400]},
		{"killed by a signal", `kill -9 $$`, nil, -1, "exec sh: signal: killed"},
		{"secret redacted", `echo "bad token $TOKEN" >&2; exit 1`, map[string]string{"TOKEN": "s3cr3t"}, 1,
			"exec sh: exit status 1: bad token ***"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := shell(tt.script, long)
			src.Env = tt.env
			res, _ := pollWithin(t, NewExec(src, maskSecret), 10*time.Second)
			if errText(res.Err) != tt.err || res.ExitCode != tt.exit {
				t.Errorf("got exit %d, Err %q; want exit %d, Err %q", res.ExitCode, errText(res.Err), tt.exit, tt.err)
			}
		})
	}
}

func TestExecEnvAndDir(t *testing.T) {
	t.Setenv("PACER_TEST_OUTER", "outer")
	t.Setenv("PACER_TEST_OVERRIDE", "daemon")
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	src := shell(`printf "%s|%s|%s|%s\n" "$PACER_TEST_OUTER" "$PACER_TEST_OVERRIDE" "$PACER_TEST_NEW" "$(pwd -P)" >&2; exit 1`, "")
	src.Env = map[string]string{"PACER_TEST_OVERRIDE": "source", "PACER_TEST_NEW": "new"}
	src.Dir = dir
	res, _ := pollWithin(t, NewExec(src, nil), 10*time.Second)
	if want := "exec sh: exit status 1: outer|source|new|" + dir; errText(res.Err) != want {
		t.Errorf("Err = %q, want %q", errText(res.Err), want)
	}
}

func TestExecStartFailure(t *testing.T) {
	badDir := shell("true", "")
	badDir.Dir = "/nonexistent-pacer-dir"
	tests := []struct {
		src *config.Source
		err string
	}{
		{execSource("/nonexistent/pacer-test-cmd"), "exec pacer-test-cmd: fork/exec /nonexistent/pacer-test-cmd: no such file or directory"},
		{execSource("pacer-no-such-command"), "exec pacer-no-such-command: executable file not found in $PATH"},
		{badDir, "exec sh: chdir /nonexistent-pacer-dir: no such file or directory"},
		{execSource(), "exec: empty command"},
	}
	for _, tt := range tests {
		res, _ := pollWithin(t, NewExec(tt.src, nil), 10*time.Second)
		if errText(res.Err) != tt.err || res.ExitCode != -1 || res.Bytes != 0 {
			t.Errorf("%v: got %+v, Err %q; want Err %q", tt.src.Command, res, errText(res.Err), tt.err)
		}
	}
}

func TestExecStdoutCap(t *testing.T) {
	res, _ := pollWithin(t, NewExec(shell(`head -c 1048576 /dev/zero`, ""), nil), 10*time.Second)
	if res.Err != nil || res.Bytes != 1<<20 {
		t.Errorf("got %+v (%s), want 1 MiB counted", res, errText(res.Err))
	}
}

func TestTailBuffer(t *testing.T) {
	tb := &tailBuffer{max: tailSize}
	chunk := []byte(strings.Repeat("x", 999) + "\n")
	for range 1 << 10 {
		tb.Write(chunk)
	}
	tb.Write([]byte(strings.Repeat("y", 5000)))
	tb.Write([]byte("\nlast line\n\n"))
	if tb.n != 1<<10*1000+5000+12 || len(tb.buf) != tailSize || cap(tb.buf) > 2*tailSize {
		t.Errorf("n %d, len %d, cap %d", tb.n, len(tb.buf), cap(tb.buf))
	}
	if got := tb.lastLine(); got != "last line" {
		t.Errorf("lastLine = %q", got)
	}
}

// readPID waits for the pid file written by a test command and parses it.
func readPID(t *testing.T, file string) int {
	t.Helper()
	var pid int
	eventually(t, 5*time.Second, "no pid in "+file, func() bool {
		b, err := os.ReadFile(file)
		if err != nil {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	})
	return pid
}

// The grandchild inherits stdout: only killing the whole group lets the poll
// return at once, and the grandchild must be gone afterwards.
const groupScript = `sleep 1000 & echo $! > "$1"; wait`

func TestExecTimeoutKillsGroup(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	src := shell(groupScript, pidFile)
	src.Timeout = time.Second
	res, took := pollWithin(t, NewExec(src, nil), src.Timeout)
	if errText(res.Err) != "exec sh: timeout after 1s" || !errors.Is(res.Err, context.DeadlineExceeded) || res.ExitCode != -1 {
		t.Errorf("got %+v, Err %q", res, errText(res.Err))
	}
	if took > src.Timeout+waitDelay/2 {
		t.Errorf("poll took %v after a %v timeout", took, src.Timeout)
	}
	pid := readPID(t, pidFile)
	eventually(t, 5*time.Second, "grandchild "+strconv.Itoa(pid)+" still runs", func() bool { return processGone(pid) })
}

func TestExecCancelKillsGroup(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan Result)
	go func() { done <- NewExec(shell(groupScript, pidFile), nil).Poll(ctx) }()
	pid := readPID(t, pidFile)
	cancel()
	select {
	case res := <-done:
		if errText(res.Err) != "exec sh: canceled" || !errors.Is(res.Err, context.Canceled) || res.ExitCode != -1 {
			t.Errorf("got %+v, Err %q", res, errText(res.Err))
		}
	case <-time.After(waitDelay / 2):
		t.Fatal("poll did not return after cancel")
	}
	eventually(t, 5*time.Second, "grandchild "+strconv.Itoa(pid)+" still runs", func() bool { return processGone(pid) })
}
