package notify

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/config"
)

// TestCommandTarget: the command gets each event as JSON on stdin (a real
// child process), with the documented fields.
func TestCommandTarget(t *testing.T) {
	st := openStore(t)
	dir := t.TempDir()
	commitEvents(t, st, []string{"a"}, 2)
	n := &config.Notify{On: []string{"error"}, Command: []string{"/bin/sh", "-c", `cat >> "$0/events.jsonl"; echo >> "$0/events.jsonl"`, dir},
		Timeout: 5 * time.Second, MaxAge: time.Hour}
	_, reg := startSender(t, st, n)
	waitUntil(t, "2 sent", 10*time.Second, func() bool { return counter(t, reg, "sent") == 2 })
	data, err := os.ReadFile(filepath.Join(dir, "events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 2 {
		t.Fatalf("command got %q", data)
	}
	for i, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("line %d %q: %v", i, l, err)
		}
		for _, k := range []string{"id", "event", "source", "state", "previous_state", "reason", "consecutive_failures", "at"} {
			if _, ok := m[k]; !ok {
				t.Errorf("event %q lacks %q", l, k)
			}
		}
		if m["source"] != "a" || m["event"] != "00"+strconv.Itoa(i) || m["consecutive_failures"] != float64(2) || len(m["id"].(string)) != 32 {
			t.Errorf("event %d = %v", i, m)
		}
	}
}

// TestCommandTimeoutKillsGroup: a command that outlives notify.timeout
// fails, and its whole process group (a background child included) is
// killed; the event stays for a retry.
func TestCommandTimeoutKillsGroup(t *testing.T) {
	st := openStore(t)
	dir := t.TempDir()
	commitEvents(t, st, []string{"a"}, 1)
	pidFile := filepath.Join(dir, "pid")
	n := &config.Notify{On: []string{"error"}, Command: []string{"/bin/sh", "-c", `sleep 300 & echo $! > "$0.tmp"; mv "$0.tmp" "$0"; wait`, pidFile},
		Timeout: 500 * time.Millisecond, MaxAge: time.Hour}
	s, reg := startSender(t, st, n)
	waitUntil(t, "a failed delivery", 10*time.Second, func() bool { return counter(t, reg, "failed") >= 1 })
	s.SetConfig(nil, nil) // no retry while the child is checked
	data, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the background sleep gone", 5*time.Second, func() bool {
		return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) || isZombie(pid)
	})
	if p, err := st.PendingEvents(t.Context()); err != nil || p != 1 {
		t.Errorf("pending after a timed-out delivery: %d, %v; want 1", p, err)
	}
}

// isZombie reports whether pid has exited but is not reaped yet.
func isZombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && len(s) > i+2 && s[i+2] == 'Z'
}
