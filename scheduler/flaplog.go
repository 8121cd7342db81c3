package scheduler

import (
	"log/slog"
	"time"

	"github.com/pacer-dev/pacer/scheduler/policy"
)

// throttleLogEvery is how often a source's throttle transitions are logged
// at most: a source flapping between ok and throttled (an upstream at its
// rate limit) writes one line when it starts and then one line a minute
// with the number of transitions in between, instead of one per poll
// (rule 3.12 keeps one line per state change for every other change).
const throttleLogEvery = time.Minute

// flapWindow is a source's coalescing of throttle transitions. All fields
// are guarded by table.mu.
type flapWindow struct {
	until      time.Time // throttle transitions before it are coalesced
	logged     string    // the state the source's last line reported
	suppressed int       // throttle transitions not logged since that line
	listed     bool      // in table.flapping
}

// throttleFlip reports whether a change from prev to cur is a throttle
// transition: between throttled and ok (or pending, before the first
// success), the flapping of a source at its upstream's rate limit. Every
// other change, a failure after a throttle (throttled -> backoff) and the
// breaker's included, is always logged.
func throttleFlip(prev, cur string) bool {
	if prev == cur || (prev != policy.StateThrottled && cur != policy.StateThrottled) {
		return false
	}
	other := prev
	if other == policy.StateThrottled {
		other = cur
	}
	switch other {
	case policy.StateOK, policy.StatePending:
		return true
	}
	return false
}

// logPollChange is logChange for the change a poll made, with throttle
// transitions coalesced: the first one logs and opens a window of
// throttleLogEvery; those within the window are counted, and reported by
// one line when it ends (sweepFlaps), or before the source's next other
// change. mu held.
func (t *table) logPollChange(e *entry, prev string, now time.Time, reason string) {
	cur := policy.StateOf(&e.st, now)
	if cur == prev {
		return
	}
	if !throttleFlip(prev, cur) {
		t.flushFlap(e, now, prev)
		t.logChange(e, prev, now, reason)
		return
	}
	if e.flap != nil && now.Before(e.flap.until) {
		e.flap.suppressed++
		if !e.flap.listed {
			e.flap.listed = true
			t.flapping = append(t.flapping, e)
		}
		return
	}
	if e.flap == nil {
		e.flap = &flapWindow{} // its first throttle transition
	}
	t.logChange(e, prev, now, reason)
	e.flap.until = now.Add(throttleLogEvery)
}

// flushFlap writes the line that reports e's coalesced throttle
// transitions, if any, with cur the state they left it in, and opens a new
// window (the line counts as the window's one line). mu held.
func (t *table) flushFlap(e *entry, now time.Time, cur string) {
	if e.flap == nil || e.flap.suppressed == 0 {
		return
	}
	t.logLocked(slog.LevelInfo, "source throttle transitions coalesced", "source", e.name, "from", e.flap.logged, "to", cur,
		"transitions", e.flap.suppressed, "window", throttleLogEvery)
	e.flap.until, e.flap.logged, e.flap.suppressed = now.Add(throttleLogEvery), cur, 0
}

// sweepFlaps reports the coalesced transitions of the sources whose window
// has ended, or all of them (at shutdown), and forgets the sources with
// none left. The loop calls it once a second. mu held.
func (t *table) sweepFlaps(now time.Time, all bool) {
	keep := t.flapping[:0]
	for _, e := range t.flapping {
		switch {
		case e.flap.suppressed == 0 || e.removed || t.entries[e.name] != e:
			e.flap.listed = false
		case !all && now.Before(e.flap.until):
			keep = append(keep, e)
		default:
			t.flushFlap(e, now, policy.StateOf(&e.st, now))
			e.flap.listed = false
		}
	}
	clear(t.flapping[len(keep):])
	t.flapping = keep
}
