package flush

import "github.com/pacer-dev/pacer/domain"

// maxSlotEvents bounds the notification events a slot holds while the store
// fails: the newest are kept (a source that flaps through an outage makes
// two events per poll at most).
const maxSlotEvents = 64

// newestEvents returns the last maxSlotEvents of evs and how many older
// ones it dropped.
func newestEvents(evs []domain.Event) ([]domain.Event, int) {
	if len(evs) <= maxSlotEvents {
		return evs, 0
	}
	n := len(evs) - maxSlotEvents
	return append(evs[:0], evs[n:]...), n
}

// noteDropped counts n events of the named source dropped while the store
// fails, logging the first drop of an outage (the end of the outage logs
// the total, see settle). Flusher.mu held.
func (f *Flusher) noteDropped(name string, n int) {
	if n == 0 {
		return
	}
	if f.health.dropped == 0 {
		f.opts.Logger.Warn("notification events dropped: the store has been failing and a source keeps changing state; the newest are kept",
			"source", name, "kept", maxSlotEvents)
	}
	f.health.dropped += n
}

// eventsOf collects the events of a commit's writes, in the order of their
// sources' writes (nil when there are none, as on every commit of a daemon
// without notify).
func eventsOf(taken []write) []domain.Event {
	var evs []domain.Event
	for i := range taken {
		evs = append(evs, taken[i].evs...)
	}
	return evs
}
