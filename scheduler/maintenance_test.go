package scheduler

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/pacer-dev/pacer/domain"
	"github.com/pacer-dev/pacer/scheduler/policy"
)

// The bubble's clock starts at 2000-01-01 00:00:00 UTC; the windows of
// these tests start at 00:01 and last a minute.

// untilClock sleeps (in the bubble's fake time) until the wall clock reads
// hh:mm:ss on 2000-01-01 UTC.
func untilClock(hms string) {
	at, _ := time.Parse(time.TimeOnly, hms)
	day := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	time.Sleep(time.Until(day.Add(at.Sub(at.Truncate(24 * time.Hour)))))
}

// drainEvents claims and removes every event of the outbox, oldest first.
func drainEvents(t *testing.T, h *harness) []domain.Event {
	t.Helper()
	var out []domain.Event
	for range 100 {
		evs, err := h.store.ClaimEvents(t.Context(), domain.EventClaim{Member: "t", Now: time.Now(), Until: time.Now().Add(time.Minute), Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) == 0 {
			return out
		}
		for _, ev := range evs {
			out = append(out, ev)
			if err := h.store.EventSent(t.Context(), ev.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Fatal("the outbox does not drain")
	return nil
}

// TestMaintenancePause (contract 15.1), in fake time: sources on "@every
// 1s" in a pause window of a minute are not polled and show paused with
// the window's reason, across a restart inside the window; at its end they
// resume from their next tick, once (not the 60 ticks the window held);
// a source an operator paused inside the window stays paused after it.
func TestMaintenancePause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		body := `maintenance:
  - {name: nightly, schedule: "1 0 * * *", duration: 1m, sources: ["p*"], action: pause}
` + lifecycleDefaults + flakySource("p1", "") + flakySource("pop", "")
		h := start(t, dir, writeConfig(t, dir, body))
		untilClock("00:01:00")
		time.Sleep(1500 * time.Millisecond)
		before := h.source("p1").PollsTotal
		o := h.source("p1")
		if o.State != policy.StatePaused || o.PausedReason != "maintenance: nightly until 00:02" || o.Maintenance == nil ||
			o.Maintenance.Action != "pause" || o.NextRunAt == nil || o.NextRunAt.Before(time.Date(2000, 1, 1, 0, 2, 0, 0, time.UTC)) {
			t.Fatalf("in the window: %+v (maintenance %+v)", o, o.Maintenance)
		}
		x, err := h.s.ExplainSource("p1")
		if err != nil || x.Why != "paused: maintenance: nightly until 00:02" {
			t.Fatalf("why %q (%v)", x.Why, err)
		}
		if _, err := h.s.Pause("pop", "by ops"); err != nil {
			t.Fatal(err)
		}
		untilClock("00:01:20")
		h.stop()
		h = start(t, dir, writeConfig(t, dir, body))
		defer h.stop()
		untilClock("00:01:59")
		if got := h.source("p1").PollsTotal; got != before {
			t.Fatalf("polled %d times inside the window (across a restart)", got-before)
		}
		if o := h.source("p1"); o.State != policy.StatePaused || !strings.HasPrefix(o.PausedReason, "maintenance: nightly") {
			t.Fatalf("after the restart, in the window: %+v", o)
		}
		untilClock("00:02:00")
		time.Sleep(1100 * time.Millisecond) // the first tick is at most 1 s after the end
		synctest.Wait()
		if got := h.source("p1").PollsTotal - before; got < 1 || got > 2 {
			t.Fatalf("%d polls in the 1.1 s after the window; want 1 or 2 (its ticks), not a burst", got)
		}
		if o := h.source("p1"); o.State != policy.StateOK || o.Maintenance != nil {
			t.Fatalf("after the window: %+v", o)
		}
		time.Sleep(5 * time.Second)
		if o := h.source("pop"); o.State != policy.StatePaused || o.PausedReason != "by ops" || o.PollsTotal != 0 && o.LastRunAt.After(time.Date(2000, 1, 1, 0, 1, 0, 0, time.UTC)) {
			t.Fatalf("the operator's pause after the window: %+v", o)
		}
	})
}

// TestMaintenanceSilence (contract 15.1), in fake time: a source that
// enters error inside a silence window is polled as usual but sends
// nothing; its incident, still open at the window's end, is notified then,
// once (an error event with the state and reason of then). A source whose
// incident opened and closed inside the window sends nothing at all.
func TestMaintenanceSilence(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		body := `notify: {command: ["true"], on: [error, recovered]}
maintenance:
  - {name: quiet, schedule: "1 0 * * *", duration: 1m, sources: [s], action: silence}
` + lifecycleDefaults + flakySource("s", "error_after: 2\nbreaker: {failures: 0}\nerror_reprobe: 5s")
		h := start(t, dir, writeConfig(t, dir, body))
		defer h.stop()
		untilClock("00:01:05")
		setFail(t, dir, true)
		h.waitFor("error", 20*time.Second, func() bool { return h.source("s").State == policy.StateError })
		x, _ := h.s.ExplainSource("s")
		if !strings.Contains(x.Why, "notifications held (maintenance: quiet until 00:02)") {
			t.Fatalf("why %q", x.Why)
		}
		untilClock("00:01:58")
		if evs := drainEvents(t, h); len(evs) != 0 {
			t.Fatalf("events inside the silence: %+v", evs)
		}
		if h.stored("s").HeldEvent != "error" {
			t.Fatalf("held %q, want error", h.stored("s").HeldEvent)
		}
		untilClock("00:02:03")
		h.waitFor("the release committed", 5*time.Second, func() bool { return h.stored("s").HeldEvent == "" })
		evs := drainEvents(t, h)
		if len(evs) != 1 || evs[0].Event != "error" || evs[0].State != policy.StateError || !strings.Contains(evs[0].Reason, "consecutive failures") {
			t.Fatalf("at the window's end: %+v; want one error event", evs)
		}
		if d := evs[0].At.Sub(time.Date(2000, 1, 1, 0, 2, 0, 0, time.UTC)); d < 0 || d > 3*time.Second {
			t.Fatalf("released at %s, want at the window's end", evs[0].At)
		}
		setFail(t, dir, false)
		h.waitFor("recovered", 10*time.Second, func() bool { return h.source("s").State == policy.StateOK })
		h.waitFor("recovered committed", 5*time.Second, func() bool { return h.stored("s").ErrorReason == "" })
		if evs := drainEvents(t, h); len(evs) != 1 || evs[0].Event != "recovered" {
			t.Fatalf("after the window: %+v; want recovered", evs)
		}
	})
}

// TestReminders (contract 15.3), in fake time: a source in error is
// reminded every remind_every (new ids, "reminder"), across a restart with
// neither a doubled nor a burst of reminders, and no more once it recovered.
func TestReminders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		body := `notify: {command: ["true"], on: [error, recovered], remind_every: 20s}
` + lifecycleDefaults + flakySource("r", "error_after: 2\nbreaker: {failures: 0}\nerror_reprobe: 30s")
		setFail(t, dir, true)
		h := start(t, dir, writeConfig(t, dir, body))
		h.waitFor("error committed", 20*time.Second, func() bool {
			st, ok, err := h.store.GetState(t.Context(), "r")
			return err == nil && ok && st.ErrorReason != ""
		})
		entered := *h.stored("r").LastErrorAt
		time.Sleep(time.Until(entered.Add(50 * time.Second)))
		h.stop()
		time.Sleep(30 * time.Second) // down across a reminder's time
		h = start(t, dir, writeConfig(t, dir, body))
		time.Sleep(30 * time.Second)
		h.waitFor("committed", 5*time.Second, func() bool { return h.s.deps.flush.Idle() })
		evs := drainEvents(t, h)
		var at []time.Duration
		ids := map[string]bool{}
		for _, ev := range evs {
			if ev.Event != "error" {
				t.Fatalf("event %+v", ev)
			}
			ids[ev.ID] = true
			if ev.Reminder {
				at = append(at, ev.At.Sub(entered).Round(time.Second))
			}
		}
		// Reminders at +20 s and +40 s; down from +50 s to +80 s (the
		// +60 s one falls due then): one at the restart (+80 s), then +100 s.
		if len(evs) != 5 || len(ids) != 5 || len(at) != 4 {
			t.Fatalf("events %d (%d ids), reminders at %v; want the error and 4 reminders", len(evs), len(ids), at)
		}
		for i, want := range []time.Duration{20 * time.Second, 40 * time.Second, 80 * time.Second, 100 * time.Second} {
			if d := at[i] - want; d < -2*time.Second || d > 3*time.Second {
				t.Fatalf("reminders at %v, want near 20s 40s 80s 100s after the error", at)
			}
		}
		defer h.stop()
		setFail(t, dir, false)
		h.waitFor("recovered committed", 40*time.Second, func() bool { return h.stored("r").ErrorReason == "" })
		time.Sleep(time.Minute)
		h.waitFor("committed", 5*time.Second, func() bool { return h.s.deps.flush.Idle() })
		for _, ev := range drainEvents(t, h) {
			if ev.Reminder || ev.Event != "recovered" {
				t.Fatalf("after the recovery: %+v; want recovered alone", ev)
			}
		}
		if h.stored("r").RemindAt != nil {
			t.Fatalf("RemindAt kept after the recovery: %+v", h.stored("r"))
		}
	})
}
