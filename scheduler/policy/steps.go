package policy

import (
	"time"

	"github.com/pacer-dev/pacer/breaker"
	"github.com/pacer-dev/pacer/domain"
)

// The pure rules of the steps of the wall clock (the scheduler's steps.go
// says why and when it applies them): a deadline that is a duration from
// when it was set moves with a step; a healthy source's cron tick follows
// the wall clock, as cronie.
const (
	// StepMin is the least change of the skew taken for a step; NTP
	// slews offsets under 128 ms and steps larger ones.
	StepMin = 100 * time.Millisecond
	// cronieWindow is the largest step back after which a cron schedule at
	// given hours does not poll again a time it polled (cronie's 3 hours).
	cronieWindow = 3 * time.Hour
)

// SkewOf is how far the wall time wall lies from the monotonic reading
// mono taken with it, in nanoseconds.
func SkewOf(wall time.Time, mono time.Duration) int64 {
	return NanoKey(wall) - int64(mono)
}

// IsStep reports whether d, a change of the skew, is a step.
func IsStep(d time.Duration) bool { return d >= StepMin || d <= -StepMin }

// StepState moves the times of st, a source's state with timing tm, by
// the step d of the wall clock, read at now after it; it reports whether
// anything changed. It is a pure function, as Apply.
func StepState(st *domain.SourceState, tm Timing, d time.Duration, now time.Time) bool {
	changed := false
	if st.BreakerUntil != nil {
		st.BreakerUntil = UTCPtr(st.BreakerUntil.Add(d))
		changed = true
	}
	if st.NextRunAt != nil {
		if n := steppedNext(st, tm, *st.NextRunAt, d, now); !n.Equal(*st.NextRunAt) {
			st.NextRunAt = UTCPtr(n)
			changed = true
		}
	}
	return changed
}

// steppedNext is the due time next of a source (state st, timing tm)
// after a step d of the wall clock, read at now after it.
func steppedNext(st *domain.SourceState, tm Timing, next time.Time, d time.Duration, now time.Time) time.Time {
	if !next.Before(FarFuture()) {
		return next // never
	}
	moved := CeilMicro(next.Add(d))
	if tm.Every > 0 || tm.Sched == nil || !Healthy(st) || !tm.Next(next.Add(-time.Nanosecond)).Equal(next) {
		// A duration from when it was set: "@every", a backoff, a
		// cooldown, a re-probe, or a time off the cron schedule's ticks.
		return moved
	}
	if d > 0 {
		return next // a tick the step skipped is polled once, now
	}
	tick := Tick(now, tm)
	if _, fixed := tm.Sched.(wallClock); fixed && -d <= cronieWindow && tick.Before(next) {
		return next // a time of day it polled already
	}
	return tick
}

// Healthy reports whether st's next poll is its schedule's tick alone: no
// backoff, throttling, breaker or error state sets it.
func Healthy(st *domain.SourceState) bool {
	return st.ConsecutiveFailures == 0 && st.ConsecutiveThrottles == 0 && st.LastOutcome != domain.OutcomeThrottled &&
		st.ErrorReason == "" && (st.BreakerState == "" || st.BreakerState == breaker.Closed)
}

// ClampLoaded bounds the stored due time of a healthy source whose
// schedule is periodic ("@every", or a cron schedule not at given hours)
// by its schedule's next tick after now. A due time further ahead comes
// only from a step back of the wall clock while no daemon ran, which
// nothing saw: it would silence the source for as long as the step. (A
// backoff or a cooldown may lie further ahead: those of a failing source
// are kept, and so is a schedule at given hours, which a step back does
// not poll again.)
func ClampLoaded(st *domain.SourceState, tm Timing, now time.Time) {
	if st.NextRunAt == nil || st.Paused || !Healthy(st) {
		return
	}
	if _, fixed := tm.Sched.(wallClock); fixed || (tm.Every == 0 && tm.Sched == nil) {
		return
	}
	if tick := Tick(now, tm); st.NextRunAt.After(tick) {
		st.NextRunAt = UTCPtr(tick)
	}
}
