package scheduler

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/pacer-dev/pacer/domain"
	"github.com/pacer-dev/pacer/scheduler/policy"
	"github.com/pacer-dev/pacer/store"
)

// drainOutbox claims and removes every event of st's outbox, in delivery
// order (the oldest of each source first), and returns them as
// "source:event".
func drainOutbox(t *testing.T, st *store.Store) []string {
	t.Helper()
	var got []string
	for range 20 {
		now := time.Now()
		evs, err := st.ClaimEvents(t.Context(), domain.EventClaim{Member: "t", Now: now, Until: now.Add(time.Minute), Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) == 0 {
			return got
		}
		for _, ev := range evs {
			got = append(got, ev.Source+":"+ev.Event)
			if err := st.EventSent(t.Context(), ev.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Fatalf("the outbox did not drain: %v so far", got)
	return nil
}

// TestRecoveredAfterReset: an incident that an error or open event opened
// is closed (contract 10.1): a source reset, or whose configuration
// changed, while in error or open sends recovered on its first successful
// poll after that, also when the daemon restarted in between.
func TestRecoveredAfterReset(t *testing.T) {
	const notify = "notify: {command: [\"true\"], on: [error, open, recovered]}\n"
	inError := flakySource("r", "schedule: \"@every 10s\"\nerror_after: 2\nbreaker: {failures: 0}")
	inOpen := flakySource("r", "schedule: \"@every 10s\"\nerror_after: 0\nbreaker: {failures: 2, cooldown: 1h}")
	for _, c := range []struct {
		name    string
		src     string
		entered func(domain.SourceState) bool
		// clear resets the source (or changes its configuration) in h;
		// it returns the harness that goes on (a restart makes a new one).
		clear func(t *testing.T, h *harness) *harness
		want  []string
	}{
		{"reset in error", inError, inErrorState, resetOf, []string{"r:error", "r:recovered"}},
		{"reset while open", inOpen, openState, resetOf, []string{"r:open", "r:recovered"}},
		{"config changed in error", inError, inErrorState, func(t *testing.T, h *harness) *harness {
			cfg := writeConfig(t, h.dir, notify+lifecycleDefaults+flakySource("r", "schedule: \"@every 10s\"\nerror_after: 3\nbreaker: {failures: 0}"))
			if err := h.s.Reload(t.Context(), cfg); err != nil {
				t.Fatal(err)
			}
			return h
		}, []string{"r:error", "r:recovered"}},
		{"restart between reset and success", inError, inErrorState, func(t *testing.T, h *harness) *harness {
			resetOf(t, h)
			cfg := writeConfig(t, h.dir, notify+lifecycleDefaults+inError)
			h.stop()
			if st := h.stored("r"); st.LastSuccessAt != nil || st.ErrorReason != "" {
				t.Fatalf("before the restart: %+v; want reset, not polled with success yet", st)
			}
			return start(t, h.dir, cfg)
		}, []string{"r:error", "r:recovered"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				dir := t.TempDir()
				setFail(t, dir, true)
				h := start(t, dir, writeConfig(t, dir, notify+lifecycleDefaults+c.src))
				h.waitFor("the incident committed", 2*time.Minute, func() bool {
					st, ok, err := h.store.GetState(t.Context(), "r")
					return err == nil && ok && c.entered(st)
				})
				setFail(t, dir, false)
				h = c.clear(t, h)
				defer h.stop()
				h.waitFor("a success committed", 2*time.Minute, func() bool {
					st, ok, err := h.store.GetState(t.Context(), "r")
					return err == nil && ok && st.LastSuccessAt != nil
				})
				if got := drainOutbox(t, h.store); !slices.Equal(got, c.want) {
					t.Fatalf("outbox %v; want %v", got, c.want)
				}
				if st := h.stored("r"); st.IncidentOpen {
					t.Errorf("the incident is still marked open after recovered: %+v", st)
				}
			})
		})
	}
}

func inErrorState(st domain.SourceState) bool { return st.ErrorReason != "" }
func openState(st domain.SourceState) bool    { return st.BreakerState == "open" }

// resetOf resets r through the scheduler (as the API and the CLI's
// command do).
func resetOf(t *testing.T, h *harness) *harness {
	if o, err := h.s.Reset("r"); err != nil || o.State == policy.StateError || o.State == policy.StateOpen {
		t.Fatalf("reset: %+v, %v", o, err)
	}
	return h
}

// TestResetDuringPollEnteringError: a reset arrives while the poll that
// takes an ok source into error (error_after: 1) is in flight. The reset
// is applied over the poll's outcome: no error event was made, so no
// incident is marked open, and the next success sends no recovered.
func TestResetDuringPollEnteringError(t *testing.T) {
	dir := t.TempDir()
	hold, started := filepath.Join(dir, "hold"), filepath.Join(dir, "started")
	src := "  - name: r\n    type: exec\n    dir: .\n" +
		"    command: [\"/bin/sh\", \"-c\", \"touch started; while [ -e hold ]; do sleep 0.02; done; test ! -e fail\"]\n" +
		"    error_after: 1\n    breaker: {failures: 0}\n"
	h := start(t, dir, writeConfig(t, dir, "notify: {command: [\"true\"], on: [error, open, recovered]}\n"+lifecycleDefaults+src))
	defer h.stop()
	h.waitFor("a first success committed", 10*time.Second, func() bool {
		st, ok, err := h.store.GetState(t.Context(), "r")
		return err == nil && ok && st.LastSuccessAt != nil
	})
	polls := h.stored("r").PollsTotal
	setFail(t, dir, true)
	if err := os.WriteFile(hold, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(started); err != nil {
		t.Fatal(err)
	}
	h.waitFor("the next poll in flight", 10*time.Second, func() bool {
		_, err := os.Stat(started)
		return err == nil
	})
	if _, err := h.s.Reset("r"); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(hold); err != nil {
		t.Fatal(err)
	}
	h.waitFor("the failed poll committed, reset", 10*time.Second, func() bool {
		st, ok, err := h.store.GetState(t.Context(), "r")
		return err == nil && ok && st.PollsTotal == polls+1
	})
	st := h.stored("r")
	if st.ErrorReason != "" || st.ConsecutiveFailures != 0 || st.FailuresTotal != 1 || st.IncidentOpen {
		t.Fatalf("after the reset over the failed poll: %+v; want a failure recorded, no error, no incident open", st)
	}
	if got := drainOutbox(t, h.store); len(got) != 0 {
		t.Fatalf("outbox %v; want nothing (the reset came before the error was committed)", got)
	}
}
