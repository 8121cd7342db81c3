package flush

import (
	"slices"

	"github.com/pacer-dev/pacer/domain"
)

// buffers are the slices of a commit, reused by the next one (flush never
// runs concurrently with itself).
type buffers struct {
	taken   []write
	states  []domain.SourceState
	records []domain.PollRecord
}

// take removes up to maxBatch writes from the front of the queue for a
// commit, with their states and records; their slots are marked in flight.
func (f *Flusher) take() (taken []write, states []domain.SourceState, records []domain.PollRecord, more bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b := &f.book
	n := min(len(b.queue)-b.head, maxBatch)
	if n == 0 {
		return nil, nil, nil, false
	}
	taken = slices.Grow(f.bufs.taken[:0], n)[:n]
	copy(taken, b.queue[b.head:b.head+n])
	clear(b.queue[b.head : b.head+n])
	b.head += n
	b.compact()
	states = slices.Grow(f.bufs.states[:0], n)[:n]
	nrec := 0
	for i := range taken {
		nrec += len(taken[i].recs)
	}
	records = slices.Grow(f.bufs.records[:0], nrec)
	for i := range taken {
		w := &taken[i]
		w.sl.pend = -1
		w.sl.inFlight = true
		states[i] = w.st
		if len(w.recs) == 0 {
			continue
		}
		a := len(records)
		records = append(records, w.recs...)
		w.sl.flying = records[a:len(records):len(records)]
	}
	return taken, states, records, b.head < len(b.queue)
}

// settle ends the commit of taken: on success their slots are saved; on
// failure everything goes back in the queue, under the newer state of a
// source that submitted one meanwhile. Waiters are woken either way. It
// returns the number of notification events dropped to keep a slot within
// maxSlotEvents.
func (f *Flusher) settle(taken []write, nstates, nrecords int, err error) (droppedNow int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err != nil {
		droppedNow = f.requeue(taken)
		if f.health.lastErr == nil || f.health.lastErr.Error() != err.Error() {
			f.opts.Logger.Error("store write failed; keeping state in memory and retrying", "err", err)
		}
		f.health.lastErr = err
		f.opts.CountError()
	} else {
		if f.health.lastErr != nil {
			f.opts.Logger.Info("store recovered", "states", nstates, "records", nrecords)
		}
		if f.health.dropped > 0 {
			f.opts.Logger.Warn("notification events dropped during the store outage", "dropped", f.health.dropped)
			f.health.dropped = 0
		}
		f.health.lastErr = nil
		for i := range taken {
			w := &taken[i]
			sl := w.sl
			sl.flying, sl.inFlight = nil, false
			sl.saved = max(sl.saved, w.seq)
			f.book.dropIfClean(sl)
		}
	}
	close(f.health.changed)
	f.health.changed = make(chan struct{})
	return droppedNow
}

// requeue puts the writes of a failed commit back in the queue, each under
// the newer write its source submitted meanwhile, if any (the records and
// events of both kept, the newest within their bounds). It returns the
// number of events dropped. mu held.
func (f *Flusher) requeue(taken []write) (droppedNow int) {
	k := f.opts.Keep()
	b := &f.book
	for i := range taken {
		w := &taken[i]
		sl := w.sl
		sl.flying, sl.inFlight = nil, false
		if sl.pend >= 0 {
			nw := &b.queue[sl.pend]
			nw.recs = newest(append(w.recs, nw.recs...), k)
			if len(w.evs) > 0 {
				var n int
				nw.evs, n = newestEvents(append(w.evs, nw.evs...))
				f.noteDropped(sl.name, n)
				droppedNow += n
			}
			continue
		}
		sl.pend = len(b.queue)
		b.queue = append(b.queue, *w)
	}
	return droppedNow
}

// recycle clears a commit's buffers and keeps them for the next one. A
// commit after an outage may carry up to keep records per state: its
// records buffer is not kept beyond a few ordinary commits' worth.
func (bu *buffers) recycle(taken []write, states []domain.SourceState, records []domain.PollRecord) {
	clear(taken)
	clear(states)
	clear(records)
	bu.taken, bu.states, bu.records = taken[:0], states[:0], records[:0]
	if cap(bu.records) > 4*maxBatch {
		bu.records = nil
	}
}

// compact reclaims the taken front of the queue: all of it once everything
// is taken, else when it is over half the slice. Flusher.mu held.
func (b *book) compact() {
	switch {
	case b.head == len(b.queue) && cap(b.queue) > 2*maxBatch:
		// A backlog (the first states of 100,000 new sources at start-up)
		// is over: release its slice instead of keeping it for good.
		b.queue, b.head = nil, 0
	case b.head == len(b.queue):
		b.queue, b.head = b.queue[:0], 0
	case b.head > 1024 && 2*b.head > len(b.queue):
		n := copy(b.queue, b.queue[b.head:])
		clear(b.queue[n:])
		b.queue, b.head = b.queue[:n], 0
		for i := range b.queue {
			b.queue[i].sl.pend = i
		}
	}
}
