package policy

import (
	"time"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/domain"
)

// Reminder applies notify.remind_every (contract 15.3) to a source's state
// at now: it returns the state's next RemindAt and, when one is due, the
// reminder (an error event with a new id and Reminder set). held says that
// the source's notifications are held (a maintenance window): no reminder
// goes then, and the one due goes at the window's end, once.
//
// RemindAt is nil unless the source is in error with reminders on. When it
// is first set it is one period after the error (LastErrorAt), or after
// now for a state without one; after a reminder it is one period after
// now, so a daemon that was down for many periods sends one reminder, not
// a burst.
func Reminder(n *config.Notify, name string, st *domain.SourceState, now time.Time, held bool) (*time.Time, domain.Event, bool) {
	if n == nil || n.RemindEvery <= 0 || !n.Wants(config.EventError) || st.ErrorReason == "" {
		return nil, domain.Event{}, false
	}
	if st.RemindAt == nil {
		from := now
		if st.LastErrorAt != nil {
			from = *st.LastErrorAt
		}
		return UTCPtr(CeilMicro(from.Add(n.RemindEvery))), domain.Event{}, false
	}
	if held || now.Before(*st.RemindAt) {
		return st.RemindAt, domain.Event{}, false
	}
	ev := domain.Event{
		ID: domain.NewEventID(), Source: name, Event: config.EventError, State: StateOf(st, now), PreviousState: StateError,
		Reason: st.ErrorReason, ConsecutiveFailures: st.ConsecutiveFailures, At: now.UTC(), Reminder: true,
	}
	return UTCPtr(CeilMicro(now.Add(n.RemindEvery))), ev, true
}
