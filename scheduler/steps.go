package scheduler

import (
	"math"
	"time"

	"github.com/pacer-dev/pacer/breaker"
	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/store"
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
// of the skew by stepMin or more is a step, and every source's times are
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
// that its outcome is moved once, by rebase or by stepPoll.
const (
	// stepMin is the least change of the skew taken for a step; NTP
	// slews offsets under 128 ms and steps larger ones.
	stepMin = 100 * time.Millisecond
	// readSpread bounds the time between the two monotonic readings around
	// a wall reading for the skew to be trusted (a goroutine descheduled
	// between two readings would look like a step).
	readSpread = 10 * time.Millisecond
	// cronieWindow is the largest step back after which a cron schedule at
	// given hours does not poll again a time it polled (cronie's 3 hours).
	cronieWindow = 3 * time.Hour
)

// noSkew is a poll's skew when its reading could not be trusted
// (readClocks): its times are taken as they are.
const noSkew = math.MinInt64

// skewOf is how far the wall time wall lies from the monotonic reading
// mono taken with it, in nanoseconds.
func skewOf(wall time.Time, mono time.Duration) int64 {
	return nanoKey(wall) - int64(mono)
}

// readClocks reads the wall clock between two readings of the monotonic
// one; ok is false when they lie too far apart for the skew to be trusted,
// or when the clock's steps are not the scheduler's to measure.
func (s *Scheduler) readClocks() (wall time.Time, skew int64, ok bool) {
	m1, measured := s.monotonic()
	wall = s.clock.Now()
	if !measured {
		return wall, 0, false
	}
	m2, _ := s.monotonic()
	return wall, skewOf(wall, m1+(m2-m1)/2), m2-m1 <= readSpread
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
func (s *Scheduler) monotonic() (mono time.Duration, measured bool) {
	switch c := s.clock.(type) {
	case Monotonic:
		return c.Monotonic(), true
	case systemClock:
		return time.Since(s.origin), true
	}
	return time.Since(s.origin), false
}

// sinceOrigin is the monotonic time since the scheduler was made, on the
// clock's monotonic clock (Monotonic) or the system's: the watchdog's
// measure of the loop's age, which no step of any wall clock moves.
func (s *Scheduler) sinceOrigin() time.Duration {
	m, _ := s.monotonic()
	return m
}

// now reads the wall clock and, if it stepped since the last reading,
// applies the step to every source (rebase). mu held.
func (s *Scheduler) now() time.Time {
	wall, skew, ok := s.readClocks()
	if !ok {
		return wall
	}
	d := time.Duration(skew - s.skew)
	s.skew = skew
	if isStep(d) {
		s.rebase(d, wall)
	}
	return wall
}

// isStep reports whether d, a change of the skew, is a step.
func isStep(d time.Duration) bool { return d >= stepMin || d <= -stepMin }

// rebase moves every source's times by d, a step of the wall clock that
// now was read after, as the comment at the top of this file says, and
// commits them. mu held.
func (s *Scheduler) rebase(d time.Duration, now time.Time) {
	s.log.Warn("the wall clock stepped; due times moved with it", "step", d.String(), "sources", len(s.entries))
	for _, e := range s.entries {
		if s.dormant(e) {
			continue // another member's: its owner moves it
		}
		if e.flap != nil && !e.flap.until.IsZero() {
			e.flap.until = e.flap.until.Add(d) // its window of coalesced log lines
		}
		if !stepState(&e.st, e.timing, d, now) {
			continue
		}
		if e.brk != nil && !e.busy {
			// Its cooldown, as the breaker compares it with the clock.
			e.brk = s.restoreBreaker(e.src, e.st)
		}
		if e.idx >= 0 && e.st.NextRunAt != nil {
			s.due.schedule(e, *e.st.NextRunAt)
		}
		// Not a poll's outcome: the next poll need not wait for it.
		s.flush.Submit(e.sl, e.st, nil)
	}
	if !s.flapSweepAt.IsZero() {
		s.flapSweepAt = s.flapSweepAt.Add(d)
	}
	s.poke()
}

// stepState moves the times of st, a source's state with timing tm, by
// the step d of the wall clock, read at now after it; it reports whether
// anything changed. It is a pure function, as applyOutcome.
func stepState(st *store.SourceState, tm timing, d time.Duration, now time.Time) bool {
	changed := false
	if st.BreakerUntil != nil {
		st.BreakerUntil = ptr(st.BreakerUntil.Add(d))
		changed = true
	}
	if st.NextRunAt != nil {
		if n := steppedNext(st, tm, *st.NextRunAt, d, now); !n.Equal(*st.NextRunAt) {
			st.NextRunAt = ptr(n)
			changed = true
		}
	}
	return changed
}

// steppedNext is the due time next of a source (state st, timing tm)
// after a step d of the wall clock, read at now after it.
func steppedNext(st *store.SourceState, tm timing, next time.Time, d time.Duration, now time.Time) time.Time {
	if !next.Before(farFuture()) {
		return next // never
	}
	moved := ceilMicro(next.Add(d))
	if tm.every > 0 || tm.sched == nil || !healthy(st) || !tm.next(next.Add(-time.Nanosecond)).Equal(next) {
		// A duration from when it was set: "@every", a backoff, a
		// cooldown, a re-probe, or a time off the cron schedule's ticks.
		return moved
	}
	if d > 0 {
		return next // a tick the step skipped is polled once, now
	}
	tick := nextRun(now, tm, time.Time{}, breaker.Snapshot{State: breaker.Closed})
	if _, fixed := tm.sched.(wallClock); fixed && -d <= cronieWindow && tick.Before(next) {
		return next // a time of day it polled already
	}
	return tick
}

// healthy reports whether st's next poll is its schedule's tick alone: no
// backoff, throttling, breaker or error state sets it.
func healthy(st *store.SourceState) bool {
	return st.ConsecutiveFailures == 0 && st.ConsecutiveThrottles == 0 && st.LastOutcome != store.OutcomeThrottled &&
		st.ErrorReason == "" && (st.BreakerState == "" || st.BreakerState == breaker.Closed)
}

// restoreBreaker is newBreaker on the scheduler's clock.
func (s *Scheduler) restoreBreaker(src *config.Source, st store.SourceState) *breaker.Breaker {
	return newBreaker(src, st).WithClock(s.clock.Now)
}

// stepPoll moves the times of a poll's outcome o, read with the skew
// skew, to the skew the scheduler holds, if a step lies in between: the
// poll ended before a step that the scheduler saw first, or after one it
// has not seen yet (rebase moves them on with every other source's). It
// reports whether it moved them. mu held.
func (s *Scheduler) stepPoll(o *outcome, skew int64) bool {
	d := time.Duration(s.skew - skew)
	if skew == noSkew || !isStep(d) {
		return false
	}
	o.start, o.end = o.start.Add(d), o.end.Add(d)
	if !o.brk.Until.IsZero() {
		o.brk.Until = o.brk.Until.Add(d)
	}
	return true
}

// clampLoaded bounds the stored due time of a healthy source whose
// schedule is periodic ("@every", or a cron schedule not at given hours)
// by its schedule's next tick after now. A due time further ahead comes
// only from a step back of the wall clock while no daemon ran, which
// nothing saw: it would silence the source for as long as the step. (A
// backoff or a cooldown may lie further ahead: those of a failing source
// are kept, and so is a schedule at given hours, which a step back does
// not poll again.)
func clampLoaded(st *store.SourceState, tm timing, now time.Time) {
	if st.NextRunAt == nil || st.Paused || !healthy(st) {
		return
	}
	if _, fixed := tm.sched.(wallClock); fixed || (tm.every == 0 && tm.sched == nil) {
		return
	}
	if tick := nextRun(now, tm, time.Time{}, breaker.Snapshot{State: breaker.Closed}); st.NextRunAt.After(tick) {
		st.NextRunAt = ptr(tick)
	}
}
