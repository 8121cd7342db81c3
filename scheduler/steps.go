package scheduler

import (
	"log/slog"
	"math"
	"time"

	"github.com/pacer-dev/pacer/scheduler/policy"
)

// Steps of the wall clock. The scheduler keeps its times as wall times:
// the store holds them (a restart resumes from them), status shows them,
// and cron schedules are read on the wall clock. But NTP, or an operator,
// steps the wall clock while the monotonic clock, which the timers run on,
// goes on: after a step of -40 s every due time lay 40 s further in the
// future than when it was set, and nothing was polled for 40 s (for ever,
// near enough, after -1 h), while "why" said "next poll in 40 s".
//
// So the scheduler notes, at each reading of the clocks under its lock,
// how far the wall clock lies from the monotonic one (the skew); a change
// of the skew by policy.StepMin or more is a step, and every source's times are
// moved with it (rebase):
//
//   - a deadline that is a duration from when it was set ("@every" ticks,
//     a backoff, a Retry-After, a breaker's cooldown, an error re-probe, a
//     local error's retry) moves with the wall clock: the time left on the
//     monotonic clock is the same after the step as before;
//   - a healthy source's cron tick follows the wall clock: after a step
//     back it is the wall clock's next tick (never more than one period
//     away), except that a schedule at given hours ("30 2 * * *") does not
//     poll again a time it already polled when the step is under 3 hours,
//     as cronie; after a step forward it stays where it was, so that a
//     tick the step skipped is polled once at once (cronie's catch-up);
//   - the moved times are committed, so that next_run_at in the store, and
//     the "next poll in" of status, read on the stepped wall clock, give
//     the time left.
//
// A poll's times are read outside the lock, with the skew of that moment
// (pollResult.skew): finish moves them to the skew the scheduler holds
// (stepPoll), whether the poll saw a step first or the scheduler did, so
// that its outcome is moved once, by rebase or by stepPoll. The pure rules
// (what moves and where to) are policy's: StepState, ClampLoaded, IsStep.

const (
	// readSpread bounds the time between the two monotonic readings around
	// a wall reading for the skew to be trusted (a goroutine descheduled
	// between two readings would look like a step).
	readSpread = 10 * time.Millisecond
	// noSkew is a poll's skew when its reading could not be trusted
	// (readClocks): its times are taken as they are.
	noSkew = math.MinInt64
)

// clocks reads the scheduler's clock and the monotonic one, and holds the
// skew between them (steps.go's comment).
type clocks struct {
	clock Clock
	// origin is a time.Now reading: the system's monotonic clock is read
	// as the time since.
	origin time.Time
	// skew is how far the wall clock lay from the monotonic one at the
	// last reading under mu. Guarded by table.mu.
	skew int64
}

// readClocks reads the wall clock between two readings of the monotonic
// one; ok is false when they lie too far apart for the skew to be trusted,
// or when the clock's steps are not the scheduler's to measure.
func (k *clocks) readClocks() (wall time.Time, skew int64, ok bool) {
	m1, measured := k.monotonic()
	wall = k.clock.Now()
	if !measured {
		return wall, 0, false
	}
	m2, _ := k.monotonic()
	return wall, policy.SkewOf(wall, m1+(m2-m1)/2), m2-m1 <= readSpread
}

// systemClock is implemented by RealClock, and by the clocks that embed
// it: their Now reads the system's wall clock, whose steps the scheduler
// measures against the system's monotonic clock. A clock on another's time
// is not one: a cluster member's (DatabaseClock) corrects the steps of
// the system's clock by its offset from the database's at every round,
// and the changes of that offset are no steps to move due times by.
type systemClock interface{ systemWall() }

func (RealClock) systemWall() {}

// monotonic reads the monotonic clock: the clock's own (Monotonic), or
// the system's. measured is false for a clock whose steps the scheduler
// does not measure (see systemClock).
func (k *clocks) monotonic() (mono time.Duration, measured bool) {
	switch c := k.clock.(type) {
	case Monotonic:
		return c.Monotonic(), true
	case systemClock:
		return time.Since(k.origin), true
	}
	return time.Since(k.origin), false
}

// sinceOrigin is the monotonic time since the scheduler was made, on the
// clock's monotonic clock (Monotonic) or the system's: the watchdog's
// measure of the loop's age, which no step of any wall clock moves.
func (k *clocks) sinceOrigin() time.Duration {
	m, _ := k.monotonic()
	return m
}

// now reads the wall clock and, if it stepped since the last reading,
// applies the step to every source (rebase). mu held.
func (t *table) now() time.Time {
	wall, skew, ok := t.clk.readClocks()
	if !ok {
		return wall
	}
	d := time.Duration(skew - t.clk.skew)
	t.clk.skew = skew
	if policy.IsStep(d) {
		t.rebase(d, wall)
	}
	return wall
}

// rebase moves every source's times by d, a step of the wall clock that
// now was read after, as the comment at the top of this file says, and
// commits them. mu held.
func (t *table) rebase(d time.Duration, now time.Time) {
	t.logLocked(slog.LevelWarn, "the wall clock stepped; due times moved with it", "step", d.String(), "sources", len(t.entries))
	for _, e := range t.entries {
		if t.dormant(e) {
			continue // another member's: its owner moves it
		}
		if e.flap != nil && !e.flap.until.IsZero() {
			e.flap.until = e.flap.until.Add(d) // its window of coalesced log lines
		}
		if !policy.StepState(&e.st, e.timing, d, now) {
			continue
		}
		if e.brk != nil && !e.slot.Busy() {
			// Its cooldown, as the breaker compares it with the clock.
			e.brk = newBreaker(e.src, e.st)
		}
		if e.slot.Scheduled() && e.st.NextRunAt != nil {
			t.q.Due.Schedule(&e.slot, policy.NanoKey(*e.st.NextRunAt))
		}
		// Not a poll's outcome: the next poll need not wait for it.
		t.flush.Submit(e.sl, e.st, nil)
	}
	if !t.flapSweepAt.IsZero() {
		t.flapSweepAt = t.flapSweepAt.Add(d)
	}
	t.q.Poke()
}

// stepPoll moves the times of a poll's outcome o, read with the skew
// skew, to the skew the scheduler holds, if a step lies in between: the
// poll ended before a step that the scheduler saw first, or after one it
// has not seen yet (rebase moves them on with every other source's). It
// reports whether it moved them. mu held.
func (k *clocks) stepPoll(o *policy.Outcome, skew int64) bool {
	d := time.Duration(k.skew - skew)
	if skew == noSkew || !policy.IsStep(d) {
		return false
	}
	o.Shift(d)
	return true
}
