package policy

import (
	"time"

	"github.com/pacer-dev/pacer/breaker"
	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/domain"
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
	// StateBlocked is shown, never stored: a source not polled because
	// its host is open or throttled or a dependency fails (contract 13).
	StateBlocked = "blocked"
)

// NumStates is the number of states, the length of States.
const NumStates = 9

// States lists every state, in the order of status, for metrics that
// report each one. It returns a fresh array: nothing can change the list.
func States() [NumStates]string {
	return [...]string{StatePending, StateOK, StateBackoff, StateThrottled, StateOpen, StateHalfOpen, StateError, StatePaused, StateBlocked}
}

// StateOf derives the displayed state of a source from its stored state at now.
func StateOf(st *domain.SourceState, now time.Time) string {
	switch {
	case st.Paused:
		return StatePaused
	case st.ErrorReason != "":
		return StateError
	case st.LastOutcome == domain.OutcomeThrottled:
		return StateThrottled
	}
	if b := BreakerOf(st, now); b != breaker.Closed {
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

// Silent reports whether a source is in error and not re-probed (rule 3.7
// without error_reprobe, contract 10.4): it is not polled at all.
func Silent(st *domain.SourceState, src *config.Source) bool {
	return st.ErrorReason != "" && src.ErrorReprobe <= 0
}

// BreakerOf is the breaker state shown at now: an open breaker whose
// cooldown has passed is half-open (its next call is the probe), by the
// breaker's own rule (breaker.Snapshot.StateAt, the one home of the
// half-open boundary). An open state stored without its end stays open.
func BreakerOf(st *domain.SourceState, now time.Time) string {
	if st.BreakerState == breaker.Open && st.BreakerUntil == nil {
		return breaker.Open
	}
	return SnapshotOf(st).StateAt(now)
}

// SetBreaker records the breaker state b in st. It is the one place that
// writes st's breaker fields; SnapshotOf reads them back.
func SetBreaker(st *domain.SourceState, b breaker.Snapshot) {
	st.BreakerState, st.BreakerUntil = breaker.Closed, nil
	switch b.State {
	case breaker.Open:
		st.BreakerState, st.BreakerUntil = breaker.Open, UTCPtr(b.Until)
	case breaker.HalfOpen:
		st.BreakerState = breaker.HalfOpen
	}
}

// SnapshotOf is the breaker state recorded in st ("" is closed), as a
// breaker is restored from it (breaker.New).
func SnapshotOf(st *domain.SourceState) breaker.Snapshot {
	b := breaker.Snapshot{State: st.BreakerState}
	if b.State == "" {
		b.State = breaker.Closed
	}
	if st.BreakerUntil != nil {
		b.Until = *st.BreakerUntil
	}
	return b
}

// InIncident reports whether a success of the source in state st closes an
// incident (sends recovered): it is in error, its breaker is not closed
// (open, or half-open once the cooldown passed), or a reset or a changed
// configuration cleared those before a success did.
func InIncident(st *domain.SourceState) bool {
	return st.IncidentOpen || st.ErrorReason != "" || SnapshotOf(st).State != breaker.Closed
}
