package deliver

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/pacer-dev/pacer/sources"
)

const (
	// headSize is how much of a command's stderr is kept for its error.
	headSize = 4 << 10
	// maxLine bounds the stderr line quoted in an error.
	maxLine = 200
)

// command runs argv with r on its standard input and PACER_SOURCE,
// PACER_DIGEST, PACER_STATUS, PACER_CONTENT_TYPE and PACER_STARTED_AT in
// its environment, as an exec poll runs (its own process group, killed
// whole at the poll's deadline, nothing left running after it). A non-zero
// exit fails with the first line of its stderr. Its stdout goes to
// /dev/null (no pipe, no goroutine to drain it).
func (dl *Deliverer) command(ctx context.Context, argv []string, r Result, redact func(string) string) error {
	target := "command " + filepath.Base(argv[0])
	env := append(dl.env[:len(dl.env):len(dl.env)],
		"PACER_SOURCE="+r.Source,
		"PACER_DIGEST="+r.Digest,
		"PACER_STATUS="+strconv.Itoa(r.Status),
		"PACER_CONTENT_TYPE="+r.ContentType,
		"PACER_STARTED_AT="+r.StartedAt.UTC().Format(time.RFC3339),
	)
	cmd, err := sources.NewGroupCmd(ctx, argv, env)
	if err != nil {
		return failure(ctx, redact, err, target, err.Error())
	}
	stderr := &headBuffer{max: headSize}
	cmd.Stdin = io.Reader(r.Body.Reader())
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		return failureOf(ctx, redact, err, true, target, commandDetail(err, stderr))
	}
	err = cmd.Wait()
	if err == nil || errors.Is(err, exec.ErrWaitDelay) {
		return nil
	}
	return failure(ctx, redact, err, target, commandDetail(err, stderr))
}

// commandDetail describes a command's failure err, with the first line of
// its stderr.
func commandDetail(err error, stderr *headBuffer) string {
	detail := err.Error()
	var execErr *exec.Error
	if errors.As(err, &execErr) {
		detail = execErr.Err.Error()
	}
	if line := stderr.firstLine(); line != "" {
		detail += ": " + line
	}
	return detail
}

// headBuffer keeps the first max bytes written to it and discards the
// rest.
type headBuffer struct {
	buf []byte
	max int
}

func (h *headBuffer) Write(b []byte) (int, error) {
	if room := h.max - len(h.buf); room > 0 {
		h.buf = append(h.buf, b[:min(room, len(b))]...)
	}
	return len(b), nil
}

// firstLine returns the first non-empty line kept, trimmed, valid UTF-8
// and at most maxLine characters long.
func (h *headBuffer) firstLine() string {
	for _, line := range strings.Split(string(bytes.TrimSpace(h.buf)), "\n") {
		s := strings.TrimSpace(strings.ToValidUTF8(line, "\uFFFD"))
		if s == "" {
			continue
		}
		if utf8.RuneCountInString(s) > maxLine {
			s = string([]rune(s)[:maxLine])
		}
		return s
	}
	return ""
}
