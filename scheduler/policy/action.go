package policy

import (
	"fmt"
	"time"

	"github.com/pacer-dev/pacer/breaker"
	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/domain"
)

// Operator actions on a source.
const (
	ActionReset   = "reset"
	ActionPause   = "pause"
	ActionResume  = "resume"
	ActionTrigger = "trigger"
)

// Reset clears failures, throttling, the breaker and the error state
// (an operator's reset, or a changed configuration). The source is next due
// at its first tick after now; counters and history are kept. A source in
// an incident (error, open or half-open) keeps it marked open, so that its
// next success still sends recovered (contract 10.1).
func Reset(st domain.SourceState, tm Timing, now time.Time) domain.SourceState {
	st.IncidentOpen = InIncident(&st)
	st.ConsecutiveFailures = 0
	st.ConsecutiveThrottles = 0
	st.ErrorReason = ""
	SetBreaker(&st, breaker.Snapshot{State: breaker.Closed})
	if st.LastOutcome != domain.OutcomeSuccess {
		st.LastOutcome = ""
	}
	if st.Paused {
		st.NextRunAt = nil
	} else {
		st.NextRunAt = UTCPtr(Tick(now, tm))
	}
	return st
}

// ApplyAction applies reset, pause or resume to a stored state at now, for
// the CLI when no daemon is running; the daemon applies the same rule
// (Act).
func ApplyAction(action string, src *config.Source, st domain.SourceState, reason string, now time.Time) (domain.SourceState, error) {
	st.Name = src.Name
	return Act(action, st, NewTiming(src.Name, src.Schedule), reason, now)
}

// Act applies the operator's action (reset, pause or resume, with reason)
// to st, a source's state with timing tm, at now.
func Act(action string, st domain.SourceState, tm Timing, reason string, now time.Time) (domain.SourceState, error) {
	switch action {
	case ActionReset:
		st = Reset(st, tm, now)
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
		next := NextRun(now, tm, time.Time{}, SnapshotOf(&st))
		st.NextRunAt = &next
	default:
		return st, fmt.Errorf("unknown action %q", action)
	}
	st.UpdatedAt = now.UTC()
	return st, nil
}
