package scheduler

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/pacer-dev/pacer/store"
)

// maxBatch bounds the states of one commit. A backlog (a store that was
// failing, a burst of first states at start-up) is then written as a train
// of short transactions instead of one that grows with the backlog: each
// commit stays short, readers and the watchdog's probe get the connection
// between two of them, and a source's state reaches the store within a
// bounded time of the commit that takes it.
const maxBatch = 2000

// flusher is the store's single writer. Sources submit their latest state
// and poll records; it commits them in batches. While the store fails it
// keeps the latest state of each source (and at most history.keep records
// per source) in memory and retries, so nothing is lost once it recovers.
//
// Each source has a slot, which the scheduler's entry keeps: a poll's
// submit, and the check that its previous state is committed (rule 3.8),
// touch the slot and a list of pending writes, never a map keyed by name.
type flusher struct {
	st     Store
	log    *slog.Logger
	clock  Clock
	m      *metrics
	keep   func() int
	onSave func(names []string) // called after a commit, outside mu
	// onEvents is called after a commit that wrote notification events,
	// outside mu (it wakes the sender).
	onEvents func()
	// onDropEvents is called (outside mu) with the number of notification
	// events a slot had to drop to stay within maxSlotEvents.
	onDropEvents func(n int)
	// saveFenced, on a member of a cluster, commits instead of
	// st.Commit; the sources it left out go to onRejected (outside mu):
	// their shards are another member's now, and their writes are dropped.
	saveFenced func(ctx context.Context, b store.Batch, keep int) ([]string, error)
	onRejected func(names []string)

	mu    sync.Mutex
	slots map[string]*slot
	// queue holds the writes not yet taken by a commit, oldest first,
	// from index head on; a slot has at most one (its latest state).
	queue []write
	head  int
	next  uint64
	// delay is the current flushDelay or loadedDelay, after the size of
	// the last commit (flush sets it; run reads it).
	delay   time.Duration
	lastErr error
	// droppedEvents counts the events dropped since the last successful
	// commit (logged once when dropping starts and once when it ends).
	droppedEvents int
	changed       chan struct{} // closed and replaced after every commit attempt
	kick          chan struct{}
	// hurry tells run that a poll (or an operator's command) waits for a
	// pending state: the commit then waits flushDelay, not loadedDelay.
	hurry chan struct{}

	// Buffers of flush, reused from one commit to the next.
	bufTaken   []write
	bufStates  []store.SourceState
	bufRecords []store.PollRecord
}

// maxSlotEvents bounds the notification events a slot holds while the store
// fails: the newest are kept (a source that flaps through an outage makes
// two events per poll at most).
const maxSlotEvents = 64

// slot is one source's bookkeeping in the flusher. Its fields are guarded
// by flusher.mu.
type slot struct {
	name  string
	pend  int    // index of its write in flusher.queue, -1 if none
	saved uint64 // seq of its last committed state
	// flying holds the records of the commit in progress, so that readers
	// still see them (pendingRecords) until they are in the store.
	flying   []store.PollRecord
	inFlight bool // a write of it is in the commit in progress
	released bool // its source is gone: drop the slot once it is clean
	// last is the final state of a released slot's source, newer than the
	// store's until the slot is clean (then the slot is dropped with it).
	last *store.SourceState
}

// write is a source's latest state, its records and its notification
// events (committed in the same transaction as the state that made them),
// waiting for a commit.
type write struct {
	sl   *slot
	at   time.Time // the submission that queued it (its first pending change)
	seq  uint64
	st   store.SourceState
	recs []store.PollRecord
	evs  []store.Event
}

func newFlusher(st Store, log *slog.Logger, clock Clock, m *metrics, keep func() int) *flusher {
	return &flusher{
		st: st, log: log, clock: clock, m: m, keep: keep,
		slots:   map[string]*slot{},
		delay:   flushDelay,
		changed: make(chan struct{}),
		kick:    make(chan struct{}, 1),
		hurry:   make(chan struct{}, 1),
	}
}

// slot returns name's slot, creating it if needed. A source keeps its slot
// for as long as it is configured: the scheduler calls it once per entry.
func (f *flusher) slot(name string) *slot {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.slotLocked(name)
}

func (f *flusher) slotLocked(name string) *slot {
	sl := f.slots[name]
	if sl == nil {
		sl = &slot{name: name, pend: -1}
		f.slots[name] = sl
	}
	sl.released, sl.last = false, nil
	return sl
}

// release drops name's slot once nothing of it is pending: its source was
// removed from the configuration, with last as its final state (which
// released reports until the slot is dropped).
func (f *flusher) release(sl *slot, last store.SourceState) {
	f.mu.Lock()
	defer f.mu.Unlock()
	sl.released, sl.last = true, &last
	f.dropIfClean(sl)
}

// released returns the final state of a removed source whose last writes
// are not all committed yet (its slot is released and not yet dropped):
// the store's state of it is older. ok is false otherwise, and then the
// store holds its final state, if it had one.
func (f *flusher) released(name string) (st store.SourceState, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if sl := f.slots[name]; sl != nil && sl.released && sl.last != nil {
		return *sl.last, true
	}
	return store.SourceState{}, false
}

func (f *flusher) dropIfClean(sl *slot) {
	if sl.released && sl.pend < 0 && !sl.inFlight && f.slots[sl.name] == sl {
		delete(f.slots, sl.name)
	}
}

// submit queues a source's state (and a record, if any, and the events the
// state change made) for the next commit on its slot and returns its
// sequence number. The queue holds at most one write per slot: it never
// outgrows the number of sources.
func (f *flusher) submit(sl *slot, st store.SourceState, rec *store.PollRecord, evs ...store.Event) uint64 {
	f.mu.Lock()
	f.next++
	seq := f.next
	if sl.pend < 0 {
		sl.pend = len(f.queue)
		f.queue = append(f.queue, write{sl: sl, at: f.clock.Now()})
	}
	w := &f.queue[sl.pend]
	w.seq, w.st = seq, st
	if rec != nil {
		w.recs = newest(append(w.recs, *rec), f.keep())
	}
	dropped := 0
	if len(evs) > 0 {
		w.evs, dropped = newestEvents(append(w.evs, evs...))
		f.noteDropped(sl.name, dropped)
	}
	f.mu.Unlock()
	if dropped > 0 && f.onDropEvents != nil {
		f.onDropEvents(dropped)
	}
	select {
	case f.kick <- struct{}{}:
	default:
	}
	return seq
}

// clean reports whether nothing of sl waits for a commit or is in one.
func (f *flusher) clean(sl *slot) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return sl.pend < 0 && !sl.inFlight
}

// err reports the last commit's error (nil when it succeeded).
func (f *flusher) err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lastErr
}

// pending reports whether the state submitted on sl as seq is not yet
// committed while the store is healthy (a poll should then wait for it).
//
// A source found pending hurries the next commit: under load a change waits
// loadedDelay for company, which would hold back a source polled more often
// than that (a schedule of "@every 100ms") if nothing cut it short.
func (f *flusher) pending(sl *slot, seq uint64) bool {
	f.mu.Lock()
	p := sl.saved < seq && f.lastErr == nil
	queued := sl.pend >= 0
	f.mu.Unlock()
	if p && queued {
		f.hurryUp()
	}
	return p
}

// waitSaved blocks until the state of name submitted as seq (or later) is
// committed, the store is failing (then the poll goes ahead on the state in
// memory), or ctx is done.
func (f *flusher) waitSaved(ctx context.Context, name string, seq uint64) {
	f.mu.Lock()
	sl := f.slots[name]
	f.mu.Unlock()
	if sl != nil {
		f.waitAt(ctx, sl, seq)
	}
}

// waitAt is waitSaved on the source's slot.
func (f *flusher) waitAt(ctx context.Context, sl *slot, seq uint64) {
	for {
		f.mu.Lock()
		done := sl.saved >= seq || f.lastErr != nil
		queued := sl.pend >= 0
		ch := f.changed
		f.mu.Unlock()
		if done {
			return
		}
		if queued {
			f.hurryUp()
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return
		}
	}
}

// pendingRecords returns the records of name not yet committed, newest
// first: those waiting for a commit and those of the commit in progress.
func (f *flusher) pendingRecords(name string) []store.PollRecord {
	f.mu.Lock()
	defer f.mu.Unlock()
	sl := f.slots[name]
	if sl == nil {
		return nil
	}
	rs := slices.Clone(sl.flying)
	if sl.pend >= 0 {
		rs = append(rs, f.queue[sl.pend].recs...)
	}
	slices.Reverse(rs)
	return rs
}

// run commits until ctx is done, then returns; call flushFinal for the
// last commit.
func (f *flusher) run(ctx context.Context) {
	retry := 100 * time.Millisecond
	for {
		select {
		case <-ctx.Done():
			return
		case <-f.kick:
		}
		if !f.pause(ctx) {
			return
		}
		err := f.flushAll(ctx)
		if err != nil {
			// Keep trying with a growing pause; new submissions wait too.
			if !sleep(ctx, f.clock, retry) {
				return
			}
			retry = min(retry*2, 5*time.Second)
			select {
			case f.kick <- struct{}{}:
			default:
			}
			continue
		}
		retry = 100 * time.Millisecond
	}
}

// flushAll commits everything pending, maxBatch states per transaction,
// until nothing is left or a commit fails.
func (f *flusher) flushAll(ctx context.Context) error {
	for {
		more, err := f.flush(ctx)
		if err != nil || !more {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

// flush commits up to maxBatch pending states, with their records, in one
// transaction; more reports whether states are left for another.
func (f *flusher) flush(ctx context.Context) (more bool, err error) {
	taken, states, records, more := f.take()
	if len(taken) == 0 {
		return false, nil
	}
	b := store.Batch{States: states, Records: records, Events: eventsOf(taken)}
	began := f.clock.Now()
	var rejected []string
	if f.saveFenced != nil {
		rejected, err = f.saveFenced(ctx, b, f.keep())
	} else {
		err = f.st.Commit(ctx, b, f.keep())
	}
	took := f.clock.Now().Sub(began)
	f.m.storeCommit.Observe(took.Seconds())
	f.adapt(len(taken), more || err != nil, took)
	if n := f.settle(taken, len(states), len(records), err); n > 0 && f.onDropEvents != nil {
		f.onDropEvents(n)
	}
	if len(rejected) > 0 && f.onRejected != nil {
		f.onRejected(rejected)
	}
	if err == nil && len(b.Events) > 0 && f.onEvents != nil {
		f.onEvents()
	}
	if err == nil && f.onSave != nil {
		names := make([]string, len(taken))
		for i := range taken {
			names[i] = taken[i].sl.name
		}
		f.onSave(names)
	}
	f.recycle(taken, states, records)
	if err != nil {
		return false, err
	}
	return more, nil
}

// take removes up to maxBatch writes from the front of the queue for a
// commit, with their states and records; their slots are marked in flight.
// The buffers of one commit are reused by the next (flush never runs
// concurrently with itself).
func (f *flusher) take() (taken []write, states []store.SourceState, records []store.PollRecord, more bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := min(len(f.queue)-f.head, maxBatch)
	if n == 0 {
		return nil, nil, nil, false
	}
	taken = slices.Grow(f.bufTaken[:0], n)[:n]
	copy(taken, f.queue[f.head:f.head+n])
	clear(f.queue[f.head : f.head+n])
	f.head += n
	f.compact()
	states = slices.Grow(f.bufStates[:0], n)[:n]
	nrec := 0
	for i := range taken {
		nrec += len(taken[i].recs)
	}
	records = slices.Grow(f.bufRecords[:0], nrec)
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
	return taken, states, records, f.head < len(f.queue)
}

// settle ends the commit of taken: on success their slots are saved; on
// failure everything goes back in the queue, under the newer state of a
// source that submitted one meanwhile. Waiters are woken either way. It
// returns the number of notification events dropped to keep a slot within
// maxSlotEvents.
func (f *flusher) settle(taken []write, nstates, nrecords int, err error) (droppedNow int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err != nil {
		k := f.keep()
		for i := range taken {
			w := &taken[i]
			sl := w.sl
			sl.flying, sl.inFlight = nil, false
			if sl.pend >= 0 {
				nw := &f.queue[sl.pend]
				nw.recs = newest(append(w.recs, nw.recs...), k)
				if len(w.evs) > 0 {
					var n int
					nw.evs, n = newestEvents(append(w.evs, nw.evs...))
					f.noteDropped(sl.name, n)
					droppedNow += n
				}
				continue
			}
			sl.pend = len(f.queue)
			f.queue = append(f.queue, *w)
		}
		if f.lastErr == nil || f.lastErr.Error() != err.Error() {
			f.log.Error("store write failed; keeping state in memory and retrying", "err", err)
		}
		f.lastErr = err
		f.m.storeErrors.Inc()
	} else {
		if f.lastErr != nil {
			f.log.Info("store recovered", "states", nstates, "records", nrecords)
		}
		if f.droppedEvents > 0 {
			f.log.Warn("notification events dropped during the store outage", "dropped", f.droppedEvents)
			f.droppedEvents = 0
		}
		f.lastErr = nil
		for i := range taken {
			w := &taken[i]
			sl := w.sl
			sl.flying, sl.inFlight = nil, false
			sl.saved = max(sl.saved, w.seq)
			f.dropIfClean(sl)
		}
	}
	close(f.changed)
	f.changed = make(chan struct{})
	return droppedNow
}

// recycle clears a commit's buffers and keeps them for the next one. A
// commit after an outage may carry up to keep records per state: its
// records buffer is not kept beyond a few ordinary commits' worth.
func (f *flusher) recycle(taken []write, states []store.SourceState, records []store.PollRecord) {
	clear(taken)
	clear(states)
	clear(records)
	f.bufTaken, f.bufStates, f.bufRecords = taken[:0], states[:0], records[:0]
	if cap(f.bufRecords) > 4*maxBatch {
		f.bufRecords = nil
	}
}

// newest returns the last k of recs (all of them if there are fewer), in
// recs' array: a source's pending records never exceed history.keep.
func newest(recs []store.PollRecord, k int) []store.PollRecord {
	if len(recs) <= k {
		return recs
	}
	return append(recs[:0], recs[len(recs)-k:]...)
}

// compact reclaims the taken front of the queue: all of it once everything
// is taken, else when it is over half the slice. mu held.
func (f *flusher) compact() {
	switch {
	case f.head == len(f.queue) && cap(f.queue) > 2*maxBatch:
		// A backlog (the first states of 100,000 new sources at start-up)
		// is over: release its slice instead of keeping it for good.
		f.queue, f.head = nil, 0
	case f.head == len(f.queue):
		f.queue, f.head = f.queue[:0], 0
	case f.head > 1024 && 2*f.head > len(f.queue):
		n := copy(f.queue, f.queue[f.head:])
		clear(f.queue[n:])
		f.queue, f.head = f.queue[:n], 0
		for i := range f.queue {
			f.queue[i].sl.pend = i
		}
	}
}

// flushFinal commits what is pending, retrying for up to d.
func (f *flusher) flushFinal(d time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	for {
		err := f.flushAll(ctx)
		if err == nil {
			return nil
		}
		if !sleep(ctx, f.clock, 200*time.Millisecond) {
			return errors.Join(err, ctx.Err())
		}
	}
}
