package scheduler

import (
	"fmt"
	"time"

	"github.com/pacer-dev/pacer/breaker"
	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/store"
)

// Source states, as shown in status (contract section 4).
const (
	StatePending   = "pending"
	StateOK        = "ok"
	StateBackoff   = "backoff"
	StateThrottled = "throttled"
	StateOpen      = "open"
	StateHalfOpen  = "half-open"
	StateError     = "error"
	StatePaused    = "paused"
)

// AllStates lists every state, for metrics that report each one.
var AllStates = [...]string{StatePending, StateOK, StateBackoff, StateThrottled, StateOpen, StateHalfOpen, StateError, StatePaused}

// StateOf derives the displayed state of a source from its stored state at now.
func StateOf(st *store.SourceState, now time.Time) string {
	switch {
	case st.Paused:
		return StatePaused
	case st.ErrorReason != "":
		return StateError
	case st.LastOutcome == store.OutcomeThrottled:
		return StateThrottled
	}
	if b := breakerOf(st, now); b != breaker.Closed {
		return b
	}
	switch {
	case st.ConsecutiveFailures > 0:
		return StateBackoff
	case st.LastRunAt == nil:
		return StatePending
	}
	return StateOK
}

// breakerOf is the breaker state shown at now: an open breaker whose cooldown
// has passed is half-open (its next call is the probe).
func breakerOf(st *store.SourceState, now time.Time) string {
	switch st.BreakerState {
	case breaker.Open:
		if st.BreakerUntil != nil && !now.Before(*st.BreakerUntil) {
			return breaker.HalfOpen
		}
		return breaker.Open
	case breaker.HalfOpen:
		return breaker.HalfOpen
	}
	return breaker.Closed
}

// kindRejected is the outcome of a poll its breaker refused: nothing was
// called, nothing counts and no record is written; the source waits for the
// cooldown. pacer_polls_total counts it under the same name.
const kindRejected = countRejected

// outcome is what a finished poll contributes to a source's state.
type outcome struct {
	kind       string // store.Outcome* or kindRejected
	err        string // redacted error text, "" on success
	retryAfter string // raw Retry-After of a throttled answer
	start, end time.Time
	brk        breaker.Snapshot // the breaker after the call
	jitter     float64          // position in the backoff jitter band, [0, 1)
}

// applyOutcome returns st updated by one poll (rules 3.4 to 3.8). It is a
// pure function: the scheduler applies it under its lock, the tests call it
// directly.
func applyOutcome(st store.SourceState, src *config.Source, tm timing, o outcome) store.SourceState {
	end := o.end
	var notBefore time.Time // the backoff or the Retry-After
	switch o.kind {
	case store.OutcomeInterrupted:
		// Cut off by shutdown: nothing counts, and the source is due again
		// as soon as a daemon runs it.
		start := o.start
		if st.NextRunAt == nil || st.NextRunAt.After(start) {
			st.NextRunAt = &start
		}
		return st
	case kindRejected:
		setBreaker(&st, o.brk)
		next := nextRun(end, tm, notBefore, o.brk)
		st.NextRunAt = &next
		return st
	}
	st.LastRunAt = ptr(o.start)
	st.LastOutcome = o.kind
	setBreaker(&st, o.brk)
	switch o.kind {
	case store.OutcomeSuccess:
		st.PollsTotal++
		st.ConsecutiveFailures = 0
		st.ConsecutiveThrottles = 0
		st.LastSuccessAt = ptr(end)
	case store.OutcomeThrottled:
		st.PollsTotal++
		st.ThrottledTotal++
		st.ConsecutiveThrottles++
		var ok bool
		if notBefore, ok = breaker.ParseRetryAfter(o.retryAfter, end); !ok {
			notBefore = src.Backoff.NextAttemptAt(end, st.ConsecutiveThrottles, o.jitter)
		}
	case store.OutcomeFailure:
		st.PollsTotal++
		st.FailuresTotal++
		st.ConsecutiveFailures++
		st.ConsecutiveThrottles = 0
		st.LastError, st.LastErrorAt = o.err, ptr(end)
		notBefore = src.Backoff.NextAttemptAt(end, st.ConsecutiveFailures, o.jitter)
		if src.ErrorAfter > 0 && st.ConsecutiveFailures >= src.ErrorAfter {
			st.ErrorReason = fmt.Sprintf("%d consecutive failures; last: %s", st.ConsecutiveFailures, o.err)
			st.NextRunAt = nil
			return st
		}
	}
	next := nextRun(end, tm, notBefore, o.brk)
	st.NextRunAt = &next
	return st
}

// nextRun is the rule "next poll = max(next tick, backoff, breaker
// cooldown, Retry-After)" (rules 3.4 to 3.6), written once, as a pure
// function of now (in the style of x/time/rate's ReserveN(t, n)): the first
// tick of tm after now, no earlier than notBefore (a backoff or a
// Retry-After; zero for none), and, while brk is open, after its Until (the
// breaker lets the probe through strictly after it). The result is rounded
// up to the microsecond, the store's precision.
func nextRun(now time.Time, tm timing, notBefore time.Time, brk breaker.Snapshot) time.Time {
	next := later(tm.next(now), notBefore)
	if brk.State == breaker.Open {
		next = later(next, brk.Until.Add(time.Millisecond))
	}
	return ceilMicro(next)
}

// setBreaker records the breaker state b in st. It is the one place that
// writes st's breaker fields; breakerSnapshot reads them back.
func setBreaker(st *store.SourceState, b breaker.Snapshot) {
	st.BreakerState, st.BreakerUntil = breaker.Closed, nil
	switch b.State {
	case breaker.Open:
		st.BreakerState, st.BreakerUntil = breaker.Open, ptr(b.Until)
	case breaker.HalfOpen:
		st.BreakerState = breaker.HalfOpen
	}
}

// breakerSnapshot is the breaker state recorded in st ("" is closed).
func breakerSnapshot(st *store.SourceState) breaker.Snapshot {
	b := breaker.Snapshot{State: st.BreakerState}
	if b.State == "" {
		b.State = breaker.Closed
	}
	if st.BreakerUntil != nil {
		b.Until = *st.BreakerUntil
	}
	return b
}

// ceilMicro rounds t up to the microsecond, the precision of the store: a
// backoff with jitter falls anywhere, and the state in memory must be the
// state stored, never earlier than what the rules computed.
func ceilMicro(t time.Time) time.Time {
	if r := t.Truncate(time.Microsecond); r.Before(t) {
		return r.Add(time.Microsecond)
	}
	return t
}

// resetState clears failures, throttling, the breaker and the error state
// (an operator's reset, or a changed configuration). The source is next due
// at its first tick after now; counters and history are kept.
func resetState(st store.SourceState, tm timing, now time.Time) store.SourceState {
	st.ConsecutiveFailures = 0
	st.ConsecutiveThrottles = 0
	st.ErrorReason = ""
	setBreaker(&st, breaker.Snapshot{State: breaker.Closed})
	if st.LastOutcome != store.OutcomeSuccess {
		st.LastOutcome = ""
	}
	if st.Paused {
		st.NextRunAt = nil
	} else {
		st.NextRunAt = ptr(nextRun(now, tm, time.Time{}, breaker.Snapshot{State: breaker.Closed}))
	}
	return st
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func ptr(t time.Time) *time.Time {
	t = t.UTC()
	return &t
}

// Operator actions on a source.
const (
	ActionReset   = "reset"
	ActionPause   = "pause"
	ActionResume  = "resume"
	ActionTrigger = "trigger"
)

// ApplyAction applies reset, pause or resume to a stored state at now, for
// the CLI when no daemon is running; the daemon applies the same function.
func ApplyAction(action string, src *config.Source, st store.SourceState, reason string, now time.Time) (store.SourceState, error) {
	st.Name = src.Name
	return applyAction(action, st, newTiming(src.Name, src.Schedule), reason, now)
}

func applyAction(action string, st store.SourceState, tm timing, reason string, now time.Time) (store.SourceState, error) {
	switch action {
	case ActionReset:
		st = resetState(st, tm, now)
	case ActionPause:
		if reason == "" {
			reason = "paused by operator"
		}
		st.Paused = true
		st.PausedReason = reason
		st.NextRunAt = nil
	case ActionResume:
		if !st.Paused {
			return st, nil
		}
		st.Paused = false
		st.PausedReason = ""
		if st.ErrorReason != "" {
			return st, nil
		}
		next := nextRun(now, tm, time.Time{}, breakerSnapshot(&st))
		st.NextRunAt = &next
	default:
		return st, fmt.Errorf("unknown action %q", action)
	}
	st.UpdatedAt = now.UTC()
	return st, nil
}
