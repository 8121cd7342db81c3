package scheduler

import (
	"testing"
	"time"
)

// TestCatchUp: a taken-over source whose due time passed is polled at
// once unless its next "@every" tick is within half the period (and a
// second): then that tick takes the missed one's place.
func TestCatchUp(t *testing.T) {
	base := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC) // a tick of phase 0
	sec := func(d float64) time.Time { return base.Add(time.Duration(d * float64(time.Second))) }
	for _, c := range []struct {
		name     string
		every    time.Duration
		due, now time.Time
		want     time.Time
	}{
		{"next tick 200ms away: it takes the missed one's place", time.Second, sec(-1), sec(-0.2), sec(0)},
		{"next tick 600ms away: polled at once", time.Second, sec(-1), sec(-0.6), sec(-1)},
		{"not missed: unchanged", time.Second, sec(0), sec(-0.2), sec(0)},
		{"10s period, next tick 3s away: polled at once", 10 * time.Second, sec(-10), sec(-3), sec(-10)},
		{"10s period, next tick 0.5s away: that tick", 10 * time.Second, sec(-10), sec(-0.5), sec(0)},
		{"a backoff due off the grid, next tick near: that tick", time.Second, sec(-0.7), sec(-0.1), sec(0)},
	} {
		t.Run(c.name, func(t *testing.T) {
			due := c.due
			e := &entry{timing: timing{every: c.every}}
			e.st.NextRunAt = &due
			catchUp(e, c.now)
			if e.st.NextRunAt == nil || !e.st.NextRunAt.Equal(c.want) {
				t.Errorf("due %s at %s: next_run_at %v, want %s", c.due.Format("15:04:05.000"), c.now.Format("15:04:05.000"), e.st.NextRunAt, c.want.Format("15:04:05.000"))
			}
		})
	}
	e := &entry{} // a cron schedule (no period): always at once
	due := sec(-1)
	e.st.NextRunAt = &due
	if catchUp(e, sec(-0.1)); !e.st.NextRunAt.Equal(due) {
		t.Errorf("a source without a period: next_run_at moved to %v", e.st.NextRunAt)
	}
}
