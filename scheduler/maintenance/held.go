package maintenance

import (
	"time"

	"github.com/pacer-dev/pacer/breaker"
	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/domain"
	"github.com/pacer-dev/pacer/scheduler/policy"
)

// A silence window keeps a source's notification events from the
// receivers. What it kept is one word in the source's state
// (domain.SourceState.HeldEvent), the difference between what the
// receivers were told and what happened, rather than the events
// themselves: an incident opened and closed inside the window cancels out,
// and at the window's end only the state the source is in then is
// notified (Release). The word is stored with the state, so a restart or a
// hand-over to another member within the window loses nothing.

// Hold returns what is held after the event ev is kept from the
// receivers, given held before it.
func Hold(held, ev string) string {
	switch ev {
	case config.EventError, config.EventOpen:
		switch held {
		case "":
			return ev // an incident they were not told of
		case config.EventRecovered:
			return "" // they believe it open, and it is again
		}
		return held
	case config.EventRecovered:
		switch held {
		case config.EventError, config.EventOpen:
			return "" // opened and closed unseen
		case "":
			return config.EventRecovered // they believe it open; it is not
		}
	}
	return held
}

// Release is the event to send at the end of a silence for a source that
// held held and whose state is st at now; ok is false when nothing is to
// be sent (what the receivers believe is true again). An incident still
// open is sent as error (the source is in error) or open (its breaker is
// not closed), with the state and reason of now; one closed inside the
// window is sent as recovered.
func Release(n *config.Notify, name, held string, st *domain.SourceState, now time.Time) (domain.Event, bool) {
	if held == "" || n == nil {
		return domain.Event{}, false
	}
	brk := policy.BreakerOf(st, now)
	inIncident := st.ErrorReason != "" || brk != "" && brk != breaker.Closed
	ev := domain.Event{ID: domain.NewEventID(), Source: name, State: policy.StateOf(st, now),
		ConsecutiveFailures: st.ConsecutiveFailures, At: now.UTC()}
	switch {
	case held != config.EventRecovered && inIncident && st.ErrorReason != "":
		ev.Event, ev.PreviousState, ev.Reason = config.EventError, policy.StateOK, st.ErrorReason
	case held != config.EventRecovered && inIncident:
		ev.Event, ev.PreviousState, ev.Reason = config.EventOpen, policy.StateOK, st.LastError
	case held == config.EventRecovered && !inIncident:
		ev.Event, ev.PreviousState = config.EventRecovered, policy.StateError
	default:
		return domain.Event{}, false
	}
	if !n.Wants(ev.Event) {
		return domain.Event{}, false
	}
	return ev, true
}
