package scheduler

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/pacer-dev/pacer/breaker"
	"github.com/pacer-dev/pacer/domain"
	"github.com/pacer-dev/pacer/scheduler/policy"
	"github.com/pacer-dev/pacer/scheduler/view"
	"github.com/pacer-dev/pacer/store"
)

// countedSource is an exec source that appends a line to dir/calls on every
// call (the upstream's own count) and fails while dir/fail exists.
func countedSource(name string) string {
	return "  - name: " + name + "\n    type: exec\n    command: [\"/bin/sh\", \"-c\", \"echo call >> calls; test ! -e fail\"]\n    dir: .\n"
}

// calls is how many times the sources of countedSource were called.
func calls(t *testing.T, dir string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "calls"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return strings.Count(string(b), "call\n")
}

// openBeforeRestart runs a scheduler until source s's breaker opens (three
// failures, breaker {failures: 3, cooldown: 30s}), stops it, and returns
// the config body and s as it was.
func openBeforeRestart(t *testing.T, dir string) (string, view.SourceObject) {
	t.Helper()
	body := lifecycleDefaults + countedSource("s")
	setFail(t, dir, true)
	h := start(t, dir, writeConfig(t, dir, body))
	h.waitFor("breaker open", 10*time.Second, func() bool { return h.source("s").State == policy.StateOpen })
	before := h.source("s")
	h.stop()
	if before.ConsecutiveFailures != 3 || before.Breaker != breaker.Open {
		t.Fatalf("before the restart: %+v", before)
	}
	return body, before
}

// After a restart the restored breaker is the one that was open: its probe,
// if it fails, opens it again for a full cooldown (a breaker restored
// closed with no failure would count one failure of three and stay closed).
func TestFailedProbeAfterRestartReopens(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		body, before := openBeforeRestart(t, dir)
		h := start(t, dir, writeConfig(t, dir, body))
		defer h.stop()
		time.Sleep(time.Until(*before.NextRunAt))
		h.waitFor("the probe", 2*time.Second, func() bool { return h.source("s").PollsTotal == before.PollsTotal+1 })
		probeAt := time.Now()
		o := h.source("s")
		if o.State != policy.StateOpen || o.Breaker != breaker.Open || o.ConsecutiveFailures != 4 {
			t.Fatalf("after a failed probe following a restart: %+v; want open with 4 failures", o)
		}
		if o.NextRunAt == nil || o.NextRunAt.Before(probeAt.Add(30*time.Second-time.Second)) {
			t.Fatalf("next poll at %v, %v after the probe; want a full cooldown (30s)", o.NextRunAt, o.NextRunAt.Sub(probeAt))
		}
		h.s.tab.mu.Lock()
		snap := h.s.tab.entries["s"].brk.Snapshot()
		h.s.tab.mu.Unlock()
		if snap.State != breaker.Open {
			t.Fatalf("the live breaker is %+v after the failed probe; want open", snap)
		}
	})
}

// A source open before a restart is open in the live breaker, not only in
// the stored row: due before the breaker's stored time (its stored next
// poll moved earlier, as an older daemon or an operator's edit could leave
// it), it is rejected by the breaker without calling the upstream, and
// polled only once that time has passed.
func TestOpenBeforeRestartRejectsUntilStoredTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		body, _ := openBeforeRestart(t, dir)
		// Make it due in 2s, long before its breaker's Until (30s).
		path := filepath.Join(dir, "pacer.db")
		st, err := store.Open(path, store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		row, ok, err := st.GetState(context.Background(), "s")
		if err != nil || !ok || row.BreakerUntil == nil {
			t.Fatalf("stored state: %+v, %v, %v", row, ok, err)
		}
		until := *row.BreakerUntil
		due := time.Now().Add(2 * time.Second).UTC().Truncate(time.Microsecond)
		row.NextRunAt = &due
		if err := st.SaveBatch(context.Background(), []domain.SourceState{row}, nil, 5); err != nil {
			t.Fatal(err)
		}
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
		n := calls(t, dir)

		h := start(t, dir, writeConfig(t, dir, body))
		defer h.stop()
		h.s.tab.mu.Lock()
		snap := h.s.tab.entries["s"].brk.Snapshot()
		h.s.tab.mu.Unlock()
		if snap.State != breaker.Open || !snap.Until.Equal(until) {
			t.Fatalf("live breaker after the restart: %+v; want open until %v", snap, until)
		}
		h.waitFor("the rejection", 5*time.Second, func() bool { return h.metric("pacer_polls_total", "outcome", "rejected") == 1 })
		if got := calls(t, dir); got != n {
			t.Fatalf("the upstream was called %d times before the breaker's stored time", got-n)
		}
		// The next run is the breaker's probe, the first microsecond after
		// until (breaker.ProbeAt, to the store's precision): read from the
		// state, as the source object shows milliseconds.
		h.s.tab.mu.Lock()
		next := h.s.tab.entries["s"].st.NextRunAt
		h.s.tab.mu.Unlock()
		if o := h.source("s"); o.State != policy.StateOpen || o.PollsTotal != row.PollsTotal || next == nil || !next.After(until) {
			t.Fatalf("after the rejection: %+v (next %v); want open, not polled, next after %v", o, next, until)
		}
		time.Sleep(time.Until(until) - 10*time.Millisecond)
		if got := calls(t, dir); got != n {
			t.Fatalf("the upstream was called before the breaker's stored time %v", until)
		}
		h.waitFor("the probe", 2*time.Second, func() bool { return calls(t, dir) == n+1 })
	})
}
