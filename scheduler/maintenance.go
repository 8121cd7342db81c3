package scheduler

import (
	"time"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/domain"
	"github.com/pacer-dev/pacer/scheduler/maintenance"
	"github.com/pacer-dev/pacer/scheduler/policy"
)

// Maintenance windows and reminders (contract 15.1, 15.3) in the
// scheduler: three hooks, each computed from the configuration and the
// source's stored state, so that they hold across restarts and, in a
// cluster, are applied by the member that polls the source (its commits
// are fenced: no other member's reminder or release is committed).
//
//   - holdForMaintenance, at the dispatch decision: a source due inside a
//     pause window is not dispatched but moved to its first tick after the
//     window (one run, however many ticks the window held);
//   - silence, on a poll's events: inside a window they are kept from the
//     receivers, as one word in the state (maintenance.Hold);
//   - sweepMaintenance, from the loop: at a window's end what was held is
//     notified (maintenance.Release), and reminders fall due
//     (policy.Reminder).

// Sweeps of the sources: a pass over them every sweepEvery while windows
// or reminders are configured, else every idleSweepEvery (a word held by a
// window a reload removed, or by a run before a restart, still goes out).
// A pass looks at sweepChunk sources per turn of the loop, so that the
// lock is never held for long (a whole pass over 100,000 entries took
// 3.5 ms): 100,000 sources take 49 turns, under a second while they are
// polled, at most 49 s on an idle loop (one turn a second).
const (
	sweepEvery     = time.Second
	idleSweepEvery = time.Minute
	sweepChunk     = 2048
)

// maintSweep is where the sweep is: the start of the next pass, and the
// index in the configuration's sources of the next chunk (0: between
// passes).
type maintSweep struct {
	at   time.Time
	next int
}

// holdForMaintenance reports whether e, due at now, is held by a pause
// window; it then waits for its first tick after the window instead
// (maintenance.Resume), its state saved. An operator's pause stands
// (such a source is not in the due heap). mu held.
func (w *workers) holdForMaintenance(e *entry, now time.Time) bool {
	win, ok := maintenance.Pauses(w.cfg, e.name, now)
	if !ok {
		return false
	}
	e.st.NextRunAt = policy.UTCPtr(maintenance.Resume(win, e.timing, &e.st))
	w.save(e, nil)
	w.reschedule(e, now)
	return true
}

// silence keeps the events of a poll of e that ended at end from the
// receivers when e is in a window then, noting them in its state
// (maintenance.Hold); else it returns them. mu held.
func (w *workers) silence(e *entry, evs []domain.Event, end time.Time) []domain.Event {
	if len(evs) == 0 || !maintenance.Silences(w.cfg, e.name, end) {
		return evs
	}
	for _, ev := range evs {
		e.st.HeldEvent = maintenance.Hold(e.st.HeldEvent, ev.Event)
	}
	return nil
}

// sweepMaintenance looks at the next chunk of the sources this member
// polls (a pass begins at most once per sweepEvery, idleSweepEvery without
// windows and reminders): it releases what windows that ended held and
// sends the reminders due. mu held.
func (w *workers) sweepMaintenance(now time.Time) {
	n, srcs := w.cfg.Notify, w.cfg.Sources
	if n == nil || w.stopped || w.maint.next == 0 && now.Before(w.maint.at) {
		return
	}
	if w.maint.next > len(srcs) {
		w.maint.next = 0 // a reload removed sources
	}
	end := min(w.maint.next+sweepChunk, len(srcs))
	for _, src := range srcs[w.maint.next:end] {
		// A source polling now is looked at too (a source due every
		// second would always be): the poll's end applies its outcome to
		// the state as it is then, these fields included.
		e := w.entries[src.Name]
		if e == nil || e.removed || w.dormant(e) {
			continue
		}
		if e.st.HeldEvent == "" && e.st.RemindAt == nil && e.st.ErrorReason == "" {
			continue
		}
		w.sweepEntry(e, n, now)
	}
	if w.maint.next = end; end < len(srcs) {
		return
	}
	every := idleSweepEvery
	if len(w.cfg.Maintenance) > 0 || n.RemindEvery > 0 {
		every = sweepEvery
	}
	w.maint.next, w.maint.at = 0, now.Add(every)
}

// sweepEntry releases e's held word outside any window and applies
// reminders, saving its state (with the events) when either changed it.
// mu held.
func (w *workers) sweepEntry(e *entry, n *config.Notify, now time.Time) {
	var evs []domain.Event
	changed := false
	held := maintenance.Silences(w.cfg, e.name, now)
	if e.st.HeldEvent != "" && !held {
		if ev, ok := maintenance.Release(n, e.name, e.st.HeldEvent, &e.st, now); ok {
			evs = append(evs, ev)
			if ev.Event == config.EventError && e.st.RemindAt != nil {
				e.st.RemindAt = policy.UTCPtr(now.Add(n.RemindEvery)) // the error just sent is the reminder
			}
		}
		e.st.HeldEvent, changed = "", true
	}
	at, ev, due := policy.Reminder(n, e.name, &e.st, now, held)
	if due {
		evs = append(evs, ev)
	}
	if !timeEq(at, e.st.RemindAt) {
		e.st.RemindAt, changed = at, true
	}
	if changed || due {
		w.save(e, nil, evs...)
	}
}

// timeEq reports whether a and b are both nil or the same instant.
func timeEq(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(*b)
}
