package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/pacer-dev/pacer/domain"
	"github.com/pacer-dev/pacer/scheduler/view"
	"github.com/pacer-dev/pacer/store"
)

// Issue 24 item 5: the status table fits 120 columns, with the cluster's
// OWNER column too; it keeps WHY and the "(3m ago)" of the last error on a
// cluster; LAST ERROR and WHY do not repeat each other; FAILS is
// right-aligned under its header.
func TestStatusTableFitsAndDoesNotRepeat(t *testing.T) {
	now := time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC)
	at := now.Add(-3*time.Minute - 5*time.Second)
	owner := "member-a.example.internal"
	long := "GET https://api.example.com/v1/some/long/path?with=query&and=more: 503 Service Unavailable (upstream overloaded)"
	objs := []view.Explained{
		{SourceObject: view.SourceObject{Name: "a-source-with-a-long-name", State: "error", ConsecutiveFailures: 12,
			LastError: long, LastErrorAt: &at, ErrorReason: "12 consecutive failures; last: " + long, Owner: &owner},
			Why: "error: 12 consecutive failures; last: " + long + "; reset to resume"},
		{SourceObject: view.SourceObject{Name: "b", State: "paused", PausedReason: "deploy"}, Why: "paused: deploy"},
	}
	for _, withOwner := range []bool{false, true} {
		var b bytes.Buffer
		statusTable(&b, objs, now, withOwner)
		lines := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
		for _, l := range lines {
			if n := utf8.RuneCountInString(l); n > 120 {
				t.Errorf("owner %v: a line of %d columns (max 120): %q", withOwner, n, l)
			}
		}
		if withOwner && (!strings.Contains(lines[0], "OWNER") || !strings.Contains(lines[1], "member-a")) {
			t.Errorf("cluster table without its OWNER column:\n%s", b.String())
		}
		if !strings.HasSuffix(strings.TrimSpace(lines[0]), "WHY") || !strings.Contains(lines[1], "(3m ago) GET https://") ||
			!strings.Contains(lines[1], "  error: 12 con") || !strings.HasSuffix(lines[2], "paused: deploy") {
			t.Errorf("owner %v: the table lacks WHY, the (3m ago) or the error state's sentence:\n%s", withOwner, b.String())
		}
		if strings.Count(lines[1], "GET https://") != 1 || strings.Count(lines[1], "GET ") != 1 || strings.Count(lines[2], "deploy") != 1 {
			t.Errorf("owner %v: LAST ERROR and WHY repeat each other:\n%s", withOwner, b.String())
		}
		end := strings.Index(lines[0], "FAILS") + len("FAILS")
		if lines[1][end-2:end] != "12" || lines[2][end-1:end] != "0" {
			t.Errorf("owner %v: FAILS not right-aligned under its header:\n%s", withOwner, b.String())
		}
	}
}

// Issue 24 item 5: pacer status says when no daemon holds the store (its
// rows say "due now": nothing polls them), and says nothing of it while one
// does.
func TestStatusSaysNoDaemon(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	cfg := "store: " + filepath.Join(dir, "pacer.db") + "\nsources:\n  - {name: a, type: exec, command: [\"/bin/true\"], schedule: \"@every 1m\"}\n"
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func() (string, string) {
		var out, errOut strings.Builder
		if code := Main([]string{"status", "-config", path}, Env{Stdout: &out, Stderr: &errOut, LookupEnv: func(string) (string, bool) { return "", false }}); code != 0 {
			t.Fatalf("status: exit %d: %s", code, errOut.String())
		}
		return out.String(), errOut.String()
	}
	out, errOut := run()
	if !strings.Contains(errOut, "no daemon holds store") || !strings.Contains(out, "NAME") {
		t.Errorf("status without a daemon: stdout %q stderr %q: want the table and a note that no daemon runs", out, errOut)
	}
	if _, err := os.Stat(filepath.Join(dir, "pacer.db")); err == nil {
		t.Errorf("status created the store")
	}
	lock, err := store.AcquireLock(filepath.Join(dir, "pacer.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = lock.Release() }()
	if _, errOut := run(); strings.Contains(errOut, "no daemon") {
		t.Errorf("status while the daemon lock is held says no daemon: %q", errOut)
	}
}

// Issue 24 item 5: the history table's numbers (DURATION, CODE, BYTES)
// are right-aligned under their headers.
func TestHistoryTableRightAligned(t *testing.T) {
	at := time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC)
	code, exit := 200, 3
	var b bytes.Buffer
	printHistoryTable(&b, []domain.PollRecord{
		{StartedAt: at, Outcome: "success", DurationMs: 12345, StatusCode: &code, Bytes: 1048576},
		{StartedAt: at, Outcome: "failure", DurationMs: 7, ExitCode: &exit, Bytes: 0, Error: "boom"},
	})
	lines := strings.Split(b.String(), "\n")
	for _, h := range []string{"DURATION", "CODE", "BYTES"} {
		end := strings.Index(lines[0], h) + len(h)
		for _, l := range lines[1:3] {
			if end > len(l) || l[end-1] == ' ' || (end < len(l) && l[end] != ' ') {
				t.Errorf("%s: a cell not right-aligned under its header:\n%s", h, b.String())
			}
		}
	}
}
