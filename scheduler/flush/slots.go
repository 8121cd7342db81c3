package flush

import (
	"context"
	"slices"
	"time"

	"github.com/pacer-dev/pacer/domain"
)

// Slot is one source's place in the flusher: its pending write, the
// sequence number of its last committed state, the records of the commit
// in progress. Its fields are guarded by Flusher.mu.
type Slot struct {
	name  string
	pend  int    // index of its write in book.queue, -1 if none
	saved uint64 // seq of its last committed state
	// flying holds the records of the commit in progress, so that readers
	// still see them (PendingRecords) until they are in the store.
	flying   []domain.PollRecord
	inFlight bool // a write of it is in the commit in progress
	released bool // its source is gone: drop the slot once it is clean
	// last is the final state of a released slot's source, newer than the
	// store's until the slot is clean (then the slot is dropped with it).
	last *domain.SourceState
}

// write is a source's latest state, its records and its notification
// events (committed in the same transaction as the state that made them),
// waiting for a commit.
type write struct {
	sl   *Slot
	at   time.Time // the submission that queued it (its first pending change)
	seq  uint64
	st   domain.SourceState
	recs []domain.PollRecord
	evs  []domain.Event
}

// book is the flusher's table of slots and its queue of pending writes,
// guarded by Flusher.mu.
type book struct {
	slots map[string]*Slot
	// queue holds the writes not yet taken by a commit, oldest first,
	// from index head on; a slot has at most one (its latest state).
	queue []write
	head  int
	next  uint64 // the last sequence number handed out
}

// Slot returns name's slot, creating it if needed. A source keeps its slot
// for as long as it is configured: the scheduler calls it once per entry.
func (f *Flusher) Slot(name string) *Slot {
	f.mu.Lock()
	defer f.mu.Unlock()
	sl := f.book.slots[name]
	if sl == nil {
		sl = &Slot{name: name, pend: -1}
		f.book.slots[name] = sl
	}
	sl.released, sl.last = false, nil
	return sl
}

// Release drops sl once nothing of it is pending: its source was removed
// from the configuration, with last as its final state (which Released
// reports until the slot is dropped).
func (f *Flusher) Release(sl *Slot, last domain.SourceState) {
	f.mu.Lock()
	defer f.mu.Unlock()
	sl.released, sl.last = true, &last
	f.book.dropIfClean(sl)
}

// Released returns the final state of a removed source whose last writes
// are not all committed yet (its slot is released and not yet dropped):
// the store's state of it is older. ok is false otherwise, and then the
// store holds its final state, if it had one.
func (f *Flusher) Released(name string) (st domain.SourceState, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if sl := f.book.slots[name]; sl != nil && sl.released && sl.last != nil {
		return *sl.last, true
	}
	return domain.SourceState{}, false
}

// dropIfClean forgets a released slot with nothing pending. mu held.
func (b *book) dropIfClean(sl *Slot) {
	if sl.released && sl.pend < 0 && !sl.inFlight && b.slots[sl.name] == sl {
		delete(b.slots, sl.name)
	}
}

// Submit queues a source's state (and a record, if any, and the events the
// state change made) for the next commit on its slot and returns its
// sequence number. The queue holds at most one write per slot: it never
// outgrows the number of sources.
func (f *Flusher) Submit(sl *Slot, st domain.SourceState, rec *domain.PollRecord, evs ...domain.Event) uint64 {
	f.mu.Lock()
	f.book.next++
	seq := f.book.next
	if sl.pend < 0 {
		sl.pend = len(f.book.queue)
		f.book.queue = append(f.book.queue, write{sl: sl, at: f.opts.Clock.Now()})
	}
	w := &f.book.queue[sl.pend]
	w.seq, w.st = seq, st
	if rec != nil {
		w.recs = newest(append(w.recs, *rec), f.opts.Keep())
	}
	dropped := 0
	if len(evs) > 0 {
		w.evs, dropped = newestEvents(append(w.evs, evs...))
		f.noteDropped(sl.name, dropped)
	}
	f.mu.Unlock()
	if dropped > 0 && f.opts.OnDropEvents != nil {
		f.opts.OnDropEvents(dropped)
	}
	f.kickRun()
	return seq
}

// Clean reports whether nothing of sl waits for a commit or is in one.
func (f *Flusher) Clean(sl *Slot) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return sl.pend < 0 && !sl.inFlight
}

// Idle reports whether nothing waits for a commit or is in one.
func (f *Flusher) Idle() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.book.head < len(f.book.queue) {
		return false
	}
	for _, sl := range f.book.slots {
		if sl.inFlight {
			return false
		}
	}
	return true
}

// Pending reports whether the state submitted on sl as seq is not yet
// committed while the store is healthy (a poll should then wait for it).
//
// A source found pending hurries the next commit: under load a change waits
// loadedDelay for company, which would hold back a source polled more often
// than that (a schedule of "@every 100ms") if nothing cut it short.
func (f *Flusher) Pending(sl *Slot, seq uint64) bool {
	f.mu.Lock()
	p := sl.saved < seq && f.health.lastErr == nil
	queued := sl.pend >= 0
	f.mu.Unlock()
	if p && queued {
		f.pace.hurryUp()
	}
	return p
}

// WaitSaved blocks until the state of name submitted as seq (or later) is
// committed, the store is failing (then the poll goes ahead on the state in
// memory), or ctx is done.
func (f *Flusher) WaitSaved(ctx context.Context, name string, seq uint64) {
	f.mu.Lock()
	sl := f.book.slots[name]
	f.mu.Unlock()
	if sl != nil {
		f.WaitAt(ctx, sl, seq)
	}
}

// WaitAt is WaitSaved on the source's slot.
func (f *Flusher) WaitAt(ctx context.Context, sl *Slot, seq uint64) {
	for {
		f.mu.Lock()
		done := sl.saved >= seq || f.health.lastErr != nil
		queued := sl.pend >= 0
		ch := f.health.changed
		f.mu.Unlock()
		if done {
			return
		}
		if queued {
			f.pace.hurryUp()
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return
		}
	}
}

// PendingRecords returns the records of name not yet committed, newest
// first: those waiting for a commit and those of the commit in progress.
func (f *Flusher) PendingRecords(name string) []domain.PollRecord {
	f.mu.Lock()
	defer f.mu.Unlock()
	sl := f.book.slots[name]
	if sl == nil {
		return nil
	}
	rs := slices.Clone(sl.flying)
	if sl.pend >= 0 {
		rs = append(rs, f.book.queue[sl.pend].recs...)
	}
	slices.Reverse(rs)
	return rs
}

// newest returns the last k of recs (all of them if there are fewer), in
// recs' array: a source's pending records never exceed history.keep.
func newest(recs []domain.PollRecord, k int) []domain.PollRecord {
	if len(recs) <= k {
		return recs
	}
	return append(recs[:0], recs[len(recs)-k:]...)
}
