// Package maintenance holds the rules of maintenance windows (contract
// 15.1) as pure functions of the configuration, a source's state and now:
// whether a window is in force (Active, For), what a source in a pause
// window shows (Overlay) and when it resumes (Resume), and what a silence
// window keeps from the receivers (Hold) and gives them at its end
// (Release). Nothing is stored about a window: it is computed from its
// schedule, so it holds across restarts and on every cluster member alike.
package maintenance

import (
	"time"

	"github.com/robfig/cron/v3"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/domain"
	"github.com/pacer-dev/pacer/scheduler/policy"
)

// Window is a window in force for a source.
type Window struct {
	Name   string
	Action string // config.MaintenancePause or config.MaintenanceSilence
	// Start and Until bound it: [Start, Until).
	Start, Until time.Time
	// zone is where its times are shown: its CRON_TZ, else now's.
	zone *time.Location
}

// maxLook bounds the starts Active steps over: a window is no longer than
// the gap between two starts (config checks it), so one or two do.
const maxLook = 8

// Active reports the window of m in force at now: the latest start s of
// its schedule with s <= now < s + duration, looking back from now by one
// duration. Starts are those of the scheduler's cron rules (policy.Timing:
// on the wall clock of the schedule's zone across daylight-saving changes,
// a start skipped by spring-forward at the jump, a repeated one once).
func Active(m *config.Maintenance, now time.Time) (start, until time.Time, ok bool) {
	if m.Schedule == nil || m.Duration <= 0 {
		return time.Time{}, time.Time{}, false
	}
	tm := policy.NewTiming("", m.Schedule)
	s := tm.Next(now.Add(-m.Duration))
	if s.After(now) {
		return time.Time{}, time.Time{}, false
	}
	for range maxLook {
		n := tm.Next(s)
		if n.After(now) {
			break
		}
		s = n
	}
	if until := s.Add(m.Duration); now.Before(until) {
		return s, until, true
	}
	return time.Time{}, time.Time{}, false
}

// Next is the first start of m strictly after now (for the page).
func Next(m *config.Maintenance, now time.Time) time.Time {
	return policy.NewTiming("", m.Schedule).Next(now)
}

// For returns the window in force for the source name at now: a pause
// window before a silence window, and among windows of one action the one
// that ends last.
func For(cfg *config.Config, name string, now time.Time) (Window, bool) {
	var best Window
	found := false
	for _, m := range cfg.MaintenanceOf(name) {
		s, u, ok := Active(m, now)
		if !ok {
			continue
		}
		w := Window{Name: m.Name, Action: m.Action, Start: s, Until: u, zone: zoneOf(m.Schedule, now)}
		if !found || better(w, best) {
			best, found = w, true
		}
	}
	return best, found
}

// better reports whether a wins over b: pause over silence, then the
// later end.
func better(a, b Window) bool {
	if (a.Action == config.MaintenancePause) != (b.Action == config.MaintenancePause) {
		return a.Action == config.MaintenancePause
	}
	return a.Until.After(b.Until)
}

// zoneOf is the zone a schedule's times are shown in: its CRON_TZ, else
// the location of now (where a schedule without one is evaluated).
func zoneOf(s config.Schedule, now time.Time) *time.Location {
	if ss, ok := s.(*cron.SpecSchedule); ok && ss.Location != nil && ss.Location != time.Local {
		return ss.Location
	}
	return now.Location()
}

// Reason is the paused reason of a source in a pause window, and the
// words of a silence: "maintenance: nightly-db until 02:30" (the date
// first when the end is not on now's day).
func (w Window) Reason(now time.Time) string {
	loc := w.zone
	if loc == nil {
		loc = now.Location()
	}
	u, n := w.Until.In(loc), now.In(loc)
	layout := "15:04"
	if u.Format(time.DateOnly) != n.Format(time.DateOnly) {
		layout = "Jan 2 15:04"
	}
	return "maintenance: " + w.Name + " until " + u.Format(layout)
}

// Pauses reports whether the source name is in a pause window at now.
func Pauses(cfg *config.Config, name string, now time.Time) (Window, bool) {
	w, ok := For(cfg, name, now)
	return w, ok && w.Action == config.MaintenancePause
}

// Silences reports whether the notifications of the source name are held
// at now: it is in a window, of either action.
func Silences(cfg *config.Config, name string, now time.Time) bool {
	_, ok := For(cfg, name, now)
	return ok
}

// Resume is the first run of a source after a pause window w: the first
// tick of its schedule at or after the window's end (one run, however many
// ticks the window held: no burst), no earlier than its breaker allows.
func Resume(w Window, tm policy.Timing, st *domain.SourceState) time.Time {
	return policy.NextRun(w.Until.Add(-time.Nanosecond), tm, time.Time{}, policy.SnapshotOf(st))
}

// Overlay is the state a source shows at now: st itself, or, in a pause
// window and not paused by an operator (whose pause and reason stand), a
// copy paused with the window's reason. The window in force is returned
// too (nil for none), for the source object's maintenance field.
func Overlay(cfg *config.Config, name string, st *domain.SourceState, now time.Time) (*domain.SourceState, *Window) {
	if len(cfg.Maintenance) == 0 || len(cfg.MaintenanceOf(name)) == 0 {
		return st, nil
	}
	w, ok := For(cfg, name, now)
	if !ok {
		return st, nil
	}
	if w.Action != config.MaintenancePause || st.Paused {
		return st, &w
	}
	c := *st
	c.Paused, c.PausedReason = true, w.Reason(now)
	return &c, &w
}
