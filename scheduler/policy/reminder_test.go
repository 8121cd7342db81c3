package policy

import (
	"testing"
	"time"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/domain"
)

// TestReminder: a source in error is reminded every period from its error,
// not while held, once after a long gap (no burst), and never once healthy
// or with reminders off.
func TestReminder(t *testing.T) {
	n := &config.Notify{On: []string{"error", "recovered"}, RemindEvery: 10 * time.Minute}
	t0 := time.Date(2026, 12, 7, 2, 0, 0, 0, time.UTC)
	st := &domain.SourceState{ErrorReason: "5 consecutive failures", ConsecutiveFailures: 5, LastErrorAt: &t0}
	at, _, ok := Reminder(n, "s", st, t0.Add(time.Second), false)
	if ok || at == nil || !at.Equal(t0.Add(10*time.Minute)) {
		t.Fatalf("first: %v %v", at, ok)
	}
	st.RemindAt = at
	if _, _, ok := Reminder(n, "s", st, t0.Add(9*time.Minute), false); ok {
		t.Fatal("reminded early")
	}
	if a, _, ok := Reminder(n, "s", st, t0.Add(11*time.Minute), true); ok || !a.Equal(*at) {
		t.Fatal("reminded while held, or moved the due time")
	}
	late := t0.Add(5 * time.Hour)
	a, ev, ok := Reminder(n, "s", st, late, false)
	if !ok || !ev.Reminder || ev.Event != "error" || ev.Reason != st.ErrorReason || ev.ID == "" || !a.Equal(late.Add(10*time.Minute)) {
		t.Fatalf("due: %v %+v %v", a, ev, ok)
	}
	st.RemindAt = a
	if _, _, ok := Reminder(n, "s", st, late.Add(time.Minute), false); ok {
		t.Fatal("a burst after a long gap")
	}
	healthy := &domain.SourceState{RemindAt: a}
	if a, _, ok := Reminder(n, "s", healthy, late.Add(time.Hour), false); ok || a != nil {
		t.Fatal("a healthy source keeps its reminder")
	}
	off := &config.Notify{On: []string{"error"}}
	if a, _, ok := Reminder(off, "s", st, late.Add(time.Hour), false); ok || a != nil {
		t.Fatal("reminders off")
	}
}
