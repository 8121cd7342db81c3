package sources

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/internal/waitfor"
)

func TestMain(m *testing.M) {
	if os.Getenv(localEnv) != "" {
		os.Exit(lowFDChild())
	}
	// As the daemon does at start: exec polls find the descendants that
	// left their process group.
	if err := BecomeSubreaper(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	goleak.VerifyTestMain(m)
}

// maskSecret is the redactor of the tests: it masks the marker "s3cr3t".
func maskSecret(s string) string { return strings.ReplaceAll(s, "s3cr3t", "***") }

// pollWithin runs one poll under a context of the given timeout and reports
// how long it took.
func pollWithin(t *testing.T, p Poller, timeout time.Duration) (Result, time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	start := time.Now()
	res := p.Poll(ctx)
	return res, time.Since(start)
}

// errText returns the text of err, or "<nil>".
func errText(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	waitfor.True(t, within, what, cond)
}

func TestNew(t *testing.T) {
	client := NewClients(NewClient(NewTransport(1), nil))
	if _, err := New(&config.Source{Name: "a", Type: "http", URL: "http://127.0.0.1/"}, client, nil); err != nil {
		t.Errorf("http: %v", err)
	}
	if _, err := New(&config.Source{Name: "b", Type: "exec", Command: []string{"/bin/true"}}, nil, nil); err != nil {
		t.Errorf("exec: %v", err)
	}
	if _, err := New(&config.Source{Name: "c", Type: "http"}, nil, nil); err == nil {
		t.Error("http without client: no error")
	}
	_, err := New(&config.Source{Name: "d", Type: "ftp"}, client, nil)
	if want := `source "d": unknown type "ftp"`; errText(err) != want {
		t.Errorf("unknown type: got %q, want %q", errText(err), want)
	}
}

func TestPollErrorUnwrap(t *testing.T) {
	err := newPollError(maskSecret, context.DeadlineExceeded, "GET http://h/?k=s3cr3t", "timeout after 1s")
	if got, want := err.Error(), "GET http://h/?k=***: timeout after 1s"; got != want {
		t.Errorf("text %q, want %q", got, want)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Error("cause lost")
	}
}

// processGone reports whether pid no longer runs (a zombie counts as gone).
func processGone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return errors.Is(err, os.ErrNotExist)
	}
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] == 'Z'
}
