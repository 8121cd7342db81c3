package sources

import (
	"context"
	"crypto/rand"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/pacer-dev/pacer/config"
)

const (
	// waitDelay bounds how long Poll waits, once the process has exited or
	// been killed, for processes outside its group that still hold its
	// stdout or stderr open.
	waitDelay = 2 * time.Second
	// tailSize is how much of the end of stdout and stderr is kept to
	// describe a failure.
	tailSize = 4 << 10
	// maxDetail bounds the output line quoted in an error.
	maxDetail = 200
	// envTag names the environment variable that marks every process of
	// one poll (its value is unique per poll), so that the poll's leftovers
	// are found however they left its process group.
	envTag = "PACER_POLL_ID"
)

// execPoller polls an exec source.
type execPoller struct {
	argv     []string
	env      []string
	dir      string
	timeout  time.Duration
	redact   func(string) string
	errorPfx string // "exec <base of argv[0]>"
	capture  bool   // the source has deliver: stdout is kept (Result.Body)
	selects  bool   // the source has a select, whose digest is the result's: stdout is not digested
}

// NewExec returns the poller of the exec source src. Each poll runs
// src.Command (argv, no shell) in src.Dir (when set) with the daemon's
// environment plus src.Env (src.Env wins). redact is applied to every error
// text; nil means no redaction.
//
// The command runs in its own process group, with PACER_POLL_ID set to a
// value unique to the poll. When the poll's context is done (timeout or
// shutdown) the whole group is killed with SIGKILL. When the command's
// process has exited, whatever its outcome (success included), its group is
// killed too: a poll leaves nothing running. When the daemon is a child
// subreaper (BecomeSubreaper), descendants that left the group (setsid, a
// double fork) are reparented to it; the poll then kills every child of the
// daemon whose environment holds its PACER_POLL_ID, round after round
// (for at most 500 ms), and reaps them and any orphaned zombie. Poll then
// waits at most 2 seconds more for processes it could not find (no
// subreaper, a cleared environment, a setuid program) that hold its output
// open; those are not killed.
//
// Stdout is counted into Result.Bytes and digested as it arrives
// (Result.Digest on success, contract 9.2; not for a source with a select,
// whose digest replaces it), and otherwise discarded, unless
// the source has deliver: then it is kept too (Result.Body, a Capture). A poll
// succeeds on exit status 0; otherwise Err is "exec NAME: exit status N:
// LINE", LINE being the last non-empty line of stderr (or else of stdout).
func NewExec(src *config.Source, redact func(string) string) Poller {
	p := &execPoller{
		argv:    src.Command,
		dir:     src.Dir,
		timeout: src.Timeout,
		redact:  orIdentity(redact),
		capture: src.Deliver != nil || src.Checks.NeedsBody(),
		selects: src.Checks.Selects(),
	}
	name := ""
	if len(src.Command) > 0 {
		name = " " + filepath.Base(src.Command[0])
	}
	p.errorPfx = "exec" + name
	keys := make([]string, 0, len(src.Env))
	for k := range src.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	// os/exec keeps the last value of a duplicated key, so src.Env wins.
	p.env = os.Environ()
	for _, k := range keys {
		p.env = append(p.env, k+"="+src.Env[k])
	}
	return p
}

// Poll runs the command once and waits for it.
func (p *execPoller) Poll(ctx context.Context) Result {
	res := Result{ExitCode: -1}
	if len(p.argv) == 0 {
		res.Err = newPollError(p.redact, nil, p.errorPfx, "empty command")
		return res
	}
	stdout := &tailBuffer{max: tailSize, sum: &digester{off: p.selects}}
	if p.capture {
		stdout.keep = NewCapture("")
		defer func() { stdout.keep.Close() }() // nil once handed over
	}
	stderr := &tailBuffer{max: tailSize}
	tag := envTag + "=" + rand.Text()
	cmd := p.command(ctx, tag, stdout, stderr)
	if err := cmd.Start(); err != nil {
		res.Err = p.startError(ctx, err)
		res.Local = ctx.Err() == nil && markLocal(res.Err, err, true)
		return res
	}
	err := wait(cmd, tag)
	res.Bytes = stdout.n
	if err == nil || errors.Is(err, exec.ErrWaitDelay) {
		// Exit status 0; ErrWaitDelay only means that something the command
		// left behind held its output open.
		res.ExitCode = 0
		if err := stdout.keep.Err(); err != nil {
			res.Err = newPollError(p.redact, err, "deliver", err.Error())
			res.Local = ctx.Err() == nil && markLocal(res.Err, err, false) // no descriptor for the spool file
			return res
		}
		res.Digest = stdout.sum.hex()
		res.Body, stdout.keep = stdout.keep, nil
		return res
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		res.Err = newPollError(p.redact, ctxErr, p.errorPfx, ctxDetail(ctxErr, p.timeout))
		return res
	}
	detail := err.Error()
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		res.ExitCode = exitErr.ExitCode() // -1 when killed by a signal
		line := stderr.lastLine()
		if line == "" {
			line = stdout.lastLine()
		}
		if line != "" {
			detail += ": " + line
		}
	}
	res.Err = newPollError(p.redact, err, p.errorPfx, detail)
	return res
}

// command prepares one run of the command, tagged with tag (NAME=VALUE).
func (p *execPoller) command(ctx context.Context, tag string, stdout, stderr *tailBuffer) *exec.Cmd {
	cmd := groupCommand(ctx, p.argv, p.env, tag)
	cmd.Dir = p.dir
	cmd.Stdout = stdout
	cmd.Stderr = stderr
	return cmd
}

// groupCommand prepares argv to run in its own process group with env
// plus tag (NAME=VALUE), the group killed with SIGKILL once ctx is done.
func groupCommand(ctx context.Context, argv, env []string, tag string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	// The full slice expression makes append copy: env is shared.
	cmd.Env = append(env[:len(env):len(env)], tag)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		err := killGroup(cmd.Process.Pid)
		if errors.Is(err, syscall.ESRCH) {
			return os.ErrProcessDone
		}
		return err
	}
	cmd.WaitDelay = waitDelay
	return cmd
}

// killGroup kills the process group led by pid. The child leads its own
// group (pgid == pid) and is not reaped before Wait returns, so the id
// cannot have been reused.
func killGroup(pid int) error {
	return syscall.Kill(-pid, syscall.SIGKILL)
}

// wait waits for cmd and, whatever its outcome, kills what it leaves
// behind before reaping it: its process group once its process has exited
// (not yet reaped, so the group id is still its own), then, when this
// process is a subreaper, the tagged descendants that left the group.
func wait(cmd *exec.Cmd, tag string) error {
	pid := cmd.Process.Pid
	if !waitExited(pid) {
		return cmd.Wait()
	}
	killGroup(pid) // ESRCH: nothing left in the group
	if isSubreaper() {
		sweep(pid, tag)
	}
	return cmd.Wait()
}

// startError describes a command that could not be started.
func (p *execPoller) startError(ctx context.Context, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return newPollError(p.redact, ctxErr, p.errorPfx, ctxDetail(ctxErr, p.timeout))
	}
	detail := err.Error()
	var execErr *exec.Error // lookup in PATH failed: `exec: "x": ...`
	if errors.As(err, &execErr) {
		detail = execErr.Err.Error()
	}
	// With SysProcAttr set, os/exec reports a missing Dir as a missing
	// command ("fork/exec /bin/sh: no such file or directory"); name the
	// directory instead.
	if p.dir != "" {
		if _, statErr := os.Stat(p.dir); statErr != nil {
			var pathErr *os.PathError
			if errors.As(statErr, &pathErr) {
				pathErr.Op = "chdir"
			}
			detail = statErr.Error()
		}
	}
	return newPollError(p.redact, err, p.errorPfx, detail)
}

// tailBuffer counts every byte written to it and keeps the last max bytes;
// with sum set it digests them all, with keep set it keeps them all (a
// write error of keep is its own, sticky, and does not stop the command).
type tailBuffer struct {
	buf  []byte
	max  int
	n    int64
	sum  *digester
	keep *Capture
}

func (t *tailBuffer) Write(b []byte) (int, error) {
	t.n += int64(len(b))
	if t.sum != nil {
		t.sum.Write(b)
	}
	if t.keep != nil {
		t.keep.Write(b) // the error is kept in t.keep (Capture.Err)
	}
	keep := b
	if len(keep) > t.max {
		keep = keep[len(keep)-t.max:]
	}
	if over := len(t.buf) + len(keep) - t.max; over > 0 {
		t.buf = t.buf[:copy(t.buf, t.buf[over:])]
	}
	if t.buf == nil {
		t.buf = make([]byte, 0, t.max)
	}
	t.buf = append(t.buf, keep...)
	return len(b), nil
}

// lastLine returns the last non-empty line kept, trimmed, valid UTF-8 and at
// most maxDetail characters long.
func (t *tailBuffer) lastLine() string {
	s := strings.TrimRight(string(t.buf), " \t\r\n")
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	s = strings.TrimSpace(strings.ToValidUTF8(s, "\uFFFD"))
	if utf8.RuneCountInString(s) > maxDetail {
		s = string([]rune(s)[:maxDetail])
	}
	return s
}
