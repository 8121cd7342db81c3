package policy

import (
	"time"

	"github.com/pacer-dev/pacer/breaker"
	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/domain"
)

// Notification events (contract 10.1) are made here, from a poll's state
// change, and committed by the flusher with the state that caused them
// (contract 10.2); the notify package delivers them from the store.
//
//   - error: the source entered the error state;
//   - open: its breaker opened from closed (a failed half-open probe that
//     opens it again is the same outage, not a new event);
//   - recovered: a source that was in error (re-probed), open or
//     half-open had a successful poll; also the first successful poll of a
//     source reset, or whose configuration changed, while in one of those
//     (domain.SourceState.IncidentOpen), so that every incident is closed.

// PollEvents returns the events of one poll that took a source from prev to
// cur, limited to those n wants; nil without a notify section (nothing is
// allocated then). kind is the poll's outcome, reason its error.
func PollEvents(n *config.Notify, name string, prev, cur *domain.SourceState, kind, reason string, start, end time.Time) []domain.Event {
	if n == nil {
		return nil
	}
	prevShown, curShown := StateOf(prev, start), StateOf(cur, end)
	prevBrk := BreakerOf(prev, start)
	mk := func(event, why string) domain.Event {
		return domain.Event{
			ID: domain.NewEventID(), Source: name, Event: event, State: curShown, PreviousState: prevShown,
			Reason: why, ConsecutiveFailures: cur.ConsecutiveFailures, At: end.UTC(),
		}
	}
	var evs []domain.Event
	if n.Wants(config.EventOpen) && prevBrk == breaker.Closed && cur.BreakerState == breaker.Open {
		evs = append(evs, mk(config.EventOpen, reason))
	}
	if n.Wants(config.EventError) && prev.ErrorReason == "" && cur.ErrorReason != "" {
		evs = append(evs, mk(config.EventError, cur.ErrorReason))
	}
	if n.Wants(config.EventRecovered) && kind == domain.OutcomeSuccess && (prev.ErrorReason != "" || prevBrk != breaker.Closed || prev.IncidentOpen) {
		evs = append(evs, mk(config.EventRecovered, ""))
	}
	return evs
}
