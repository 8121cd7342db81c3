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

// outcome is what a finished poll contributes to a source's state.
type outcome struct {
	kind       string // store.Outcome*
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
	if o.kind == store.OutcomeInterrupted {
		// Cut off by shutdown: nothing counts, and the source is due again
		// as soon as a daemon runs it.
		start := o.start
		if st.NextRunAt == nil || st.NextRunAt.After(start) {
			st.NextRunAt = &start
		}
		return st
	}
	end := o.end
	st.LastRunAt = ptr(o.start)
	st.LastOutcome = o.kind
	st.BreakerState = o.brk.State
	st.BreakerUntil = nil
	if o.brk.State == breaker.Open {
		st.BreakerUntil = ptr(o.brk.Until)
	}
	next := tm.next(end)
	backoff := breaker.Backoff(src.Backoff)
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
		if at, ok := breaker.ParseRetryAfter(o.retryAfter, end); ok {
			next = later(next, at)
		} else {
			next = later(next, backoff.NextAttemptAtR(end, st.ConsecutiveThrottles, o.jitter))
		}
	case store.OutcomeFailure:
		st.PollsTotal++
		st.FailuresTotal++
		st.ConsecutiveFailures++
		st.ConsecutiveThrottles = 0
		st.LastError = o.err
		next = later(next, backoff.NextAttemptAtR(end, st.ConsecutiveFailures, o.jitter))
		if src.ErrorAfter > 0 && st.ConsecutiveFailures >= src.ErrorAfter {
			st.ErrorReason = fmt.Sprintf("%d consecutive failures; last: %s", st.ConsecutiveFailures, o.err)
			st.NextRunAt = nil
			return st
		}
	}
	if st.BreakerUntil != nil {
		// gobreaker lets the probe through strictly after the expiry.
		next = later(next, st.BreakerUntil.Add(time.Millisecond))
	}
	next = ceilMicro(next)
	st.NextRunAt = &next
	return st
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
	st.BreakerState = breaker.Closed
	st.BreakerUntil = nil
	if st.LastOutcome != store.OutcomeSuccess {
		st.LastOutcome = ""
	}
	if st.Paused {
		st.NextRunAt = nil
	} else {
		st.NextRunAt = ptr(tm.next(now))
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
		next := tm.next(now)
		if st.BreakerState == breaker.Open && st.BreakerUntil != nil {
			next = later(next, st.BreakerUntil.Add(time.Millisecond))
		}
		st.NextRunAt = &next
	default:
		return st, fmt.Errorf("unknown action %q", action)
	}
	st.UpdatedAt = now.UTC()
	return st, nil
}
