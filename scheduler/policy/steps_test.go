package policy

import (
	"testing"
	"time"

	"github.com/pacer-dev/pacer/breaker"
	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/domain"
)

// TestSteppedNext: the due time of a source after a step of the wall clock
// (steps.go), case by case. Times are UTC; "now" is read after the step.
func TestSteppedNext(t *testing.T) {
	at := func(s string) time.Time {
		t.Helper()
		v, err := time.Parse(time.DateTime, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	failing := domain.SourceState{ConsecutiveFailures: 2}
	open := domain.SourceState{ConsecutiveFailures: 0, BreakerState: breaker.Open}
	cases := []struct {
		name     string
		schedule string
		st       domain.SourceState
		next     string
		step     time.Duration
		now      string // after the step
		want     string
	}{
		{"every back", "@every 2s", domain.SourceState{}, "2026-01-01 10:00:02", -40 * time.Second, "2026-01-01 09:59:21", "2026-01-01 09:59:22"},
		{"every forward", "@every 2s", domain.SourceState{}, "2026-01-01 10:00:02", time.Hour, "2026-01-01 11:00:01", "2026-01-01 11:00:02"},
		{"periodic cron back", "*/5 * * * *", domain.SourceState{}, "2026-01-01 10:05:00", -time.Hour, "2026-01-01 09:04:30", "2026-01-01 09:05:00"},
		{"periodic cron back a day", "*/5 * * * *", domain.SourceState{}, "2026-01-02 10:05:00", -24 * time.Hour, "2026-01-01 10:04:30", "2026-01-01 10:05:00"},
		{"periodic cron forward: catch-up", "*/5 * * * *", domain.SourceState{}, "2026-01-01 10:05:00", time.Hour, "2026-01-01 11:04:30", "2026-01-01 10:05:00"},
		{"daily back 1h: not again", "30 2 * * *", domain.SourceState{}, "2026-01-02 02:30:00", -time.Hour, "2026-01-01 01:40:00", "2026-01-02 02:30:00"},
		{"daily back 4h: a new time", "30 2 * * *", domain.SourceState{}, "2026-01-02 02:30:00", -4 * time.Hour, "2025-12-31 22:40:00", "2026-01-01 02:30:00"},
		{"daily back 1h before it ran", "30 2 * * *", domain.SourceState{}, "2026-01-01 02:30:00", -time.Hour, "2026-01-01 01:20:00", "2026-01-01 02:30:00"},
		{"cron backoff back", "*/5 * * * *", failing, "2026-01-01 10:07:13", -time.Hour, "2026-01-01 09:04:30", "2026-01-01 09:07:13"},
		{"cron backoff on a tick back", "*/5 * * * *", failing, "2026-01-01 10:10:00", -time.Hour, "2026-01-01 09:04:30", "2026-01-01 09:10:00"},
		{"cron cooldown forward", "*/5 * * * *", open, "2026-01-01 10:10:00", time.Hour, "2026-01-01 11:04:30", "2026-01-01 11:10:00"},
		{"never", "*/5 * * * *", domain.SourceState{}, "2200-01-01 00:00:00", -time.Hour, "2026-01-01 09:04:30", "2200-01-01 00:00:00"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sched, err := config.ParseSchedule(c.schedule)
			if err != nil {
				t.Fatal(err)
			}
			tm := NewTiming("s", sched)
			if tm.Every > 0 {
				tm.Phase = 0
			}
			got := steppedNext(&c.st, tm, at(c.next), c.step, at(c.now))
			if !got.Equal(at(c.want)) {
				t.Errorf("after a step of %v at %s: next %s, want %s", c.step, c.now, got.Format(time.DateTime), c.want)
			}
		})
	}
	// The breaker's cooldown is a duration: it moves with the step.
	st := domain.SourceState{BreakerState: breaker.Open, BreakerUntil: UTCPtr(at("2026-01-01 10:01:00")), NextRunAt: UTCPtr(at("2026-01-01 10:01:00"))}
	if !StepState(&st, NewTiming("s", config.Every{D: 2 * time.Second}), -time.Hour, at("2026-01-01 09:00:30")) ||
		!st.BreakerUntil.Equal(at("2026-01-01 09:01:00")) || !st.NextRunAt.Equal(at("2026-01-01 09:01:00")) {
		t.Errorf("breaker until %v, next %v after -1h, want both 09:01:00", st.BreakerUntil, st.NextRunAt)
	}
}
