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

// flushDelay is how long the flusher gathers changes before a commit, so
// that many sources' writes share one transaction. With the commit itself
// this keeps rule 3.8's 250 ms.
const flushDelay = 50 * time.Millisecond

// maxBatch bounds the states of one commit. A backlog (a store that was
// failing, a burst of first states at start-up) is then written as a train
// of short transactions instead of one that grows with the backlog: each
// commit stays short, readers and the watchdog's probe get the connection
// between two of them, and a source's state reaches the store within a
// bounded time of the commit that takes it.
const maxBatch = 2000

// trimEvery is how many records a source gets between two trims of its
// history: trimming is the costliest part of a commit, so it is done for a
// quarter of keep at once (the store holds at most keep + keep/4 records of
// a source; readers return at most keep).
func trimEvery(keep int) int { return max(1, keep/4) }

// flusher is the store's single writer. Sources submit their latest state
// and poll records; it commits them in batches. While the store fails it
// keeps the latest state of each source (and at most history.keep records
// per source) in memory and retries, so nothing is lost once it recovers.
type flusher struct {
	st     *store.Store
	log    *slog.Logger
	clock  Clock
	m      *metrics
	keep   func() int
	onSave func(names []string) // called after a commit, outside mu

	mu      sync.Mutex
	states  map[string]store.SourceState
	records map[string][]store.PollRecord
	// flying holds the records of the commit in progress, so that readers
	// still see them (pendingRecords) until they are in the store.
	flying map[string][]store.PollRecord
	seq    map[string]uint64 // seq of the pending state per source
	saved  map[string]uint64 // last committed seq per source
	// untrimmed counts each source's records committed since its history
	// was last trimmed; a source absent from it is trimmed at its next
	// record (the store may hold a few more than keep after a restart).
	untrimmed map[string]int
	next      uint64
	lastErr   error
	changed   chan struct{} // closed and replaced after every commit attempt
	kick      chan struct{}
}

func newFlusher(st *store.Store, log *slog.Logger, clock Clock, m *metrics, keep func() int) *flusher {
	return &flusher{
		st: st, log: log, clock: clock, m: m, keep: keep,
		states:    map[string]store.SourceState{},
		records:   map[string][]store.PollRecord{},
		seq:       map[string]uint64{},
		saved:     map[string]uint64{},
		untrimmed: map[string]int{},
		changed:   make(chan struct{}),
		kick:      make(chan struct{}, 1),
	}
}

// submit queues a source's state (and a record, if any) for the next commit
// and returns its sequence number.
func (f *flusher) submit(st store.SourceState, rec *store.PollRecord) uint64 {
	f.mu.Lock()
	f.next++
	seq := f.next
	f.states[st.Name] = st
	f.seq[st.Name] = seq
	if rec != nil {
		rs := append(f.records[st.Name], *rec)
		if k := f.keep(); len(rs) > k {
			rs = append(rs[:0], rs[len(rs)-k:]...)
		}
		f.records[st.Name] = rs
	}
	f.mu.Unlock()
	select {
	case f.kick <- struct{}{}:
	default:
	}
	return seq
}

// healthy reports the last commit's error (nil when it succeeded).
func (f *flusher) err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lastErr
}

// pending reports whether the state of name submitted as seq is not yet
// committed while the store is healthy (a poll should then wait for it).
func (f *flusher) pending(name string, seq uint64) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.saved[name] < seq && f.lastErr == nil
}

// waitSaved blocks until the state of name submitted as seq (or later) is
// committed, the store is failing (then the poll goes ahead on the state in
// memory), or ctx is done.
func (f *flusher) waitSaved(ctx context.Context, name string, seq uint64) {
	for {
		f.mu.Lock()
		done := f.saved[name] >= seq || f.lastErr != nil
		ch := f.changed
		f.mu.Unlock()
		if done {
			return
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
	rs := append(slices.Clone(f.flying[name]), f.records[name]...)
	slices.Reverse(rs)
	return rs
}

// run commits until ctx is done, then returns; call flush for the last one.
func (f *flusher) run(ctx context.Context) {
	retry := 100 * time.Millisecond
	for {
		select {
		case <-ctx.Done():
			return
		case <-f.kick:
		}
		t := f.clock.NewTimer(flushDelay)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
		err := f.flushAll(ctx)
		if err != nil {
			// Keep trying with a growing pause; new submissions wait too.
			t := f.clock.NewTimer(retry)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C():
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
	f.mu.Lock()
	if len(f.states) == 0 && len(f.records) == 0 {
		f.mu.Unlock()
		return false, nil
	}
	n := min(len(f.states), maxBatch)
	states := make([]store.SourceState, 0, n)
	names := make([]string, 0, n)
	seqs := make([]uint64, 0, n)
	for name, st := range f.states {
		if len(states) == maxBatch {
			break
		}
		states = append(states, st)
		names = append(names, name)
		seqs = append(seqs, f.seq[name])
	}
	var records []store.PollRecord
	var trim []string
	every := trimEvery(f.keep())
	pendingRecords := make(map[string][]store.PollRecord, len(names))
	// Records come with a state (submit sets both), so taking the records
	// of the states taken leaves none behind.
	for _, name := range names {
		delete(f.states, name)
		rs, ok := f.records[name]
		if !ok {
			continue
		}
		records = append(records, rs...)
		if n, seen := f.untrimmed[name]; !seen || n+len(rs) >= every {
			trim = append(trim, name)
		}
		pendingRecords[name] = rs
		delete(f.records, name)
	}
	more = len(f.states) > 0
	f.flying = pendingRecords
	f.mu.Unlock()

	began := f.clock.Now()
	err = f.st.SaveBatchTrim(ctx, states, records, f.keep(), trim)
	f.m.storeCommit.Observe(f.clock.Now().Sub(began).Seconds())

	f.mu.Lock()
	f.flying = nil
	if err != nil {
		// Put everything back unless a newer state arrived meanwhile.
		for i, st := range states {
			if _, newer := f.states[st.Name]; !newer {
				f.states[st.Name] = st
				f.seq[st.Name] = seqs[i]
			}
		}
		for name, rs := range pendingRecords {
			merged := append(rs, f.records[name]...)
			if k := f.keep(); len(merged) > k {
				merged = merged[len(merged)-k:]
			}
			f.records[name] = merged
		}
		if f.lastErr == nil || f.lastErr.Error() != err.Error() {
			f.log.Error("store write failed; keeping state in memory and retrying", "err", err)
		}
		f.lastErr = err
		f.m.storeErrors.Inc()
	} else {
		if f.lastErr != nil {
			f.log.Info("store recovered", "states", len(states), "records", len(records))
		}
		f.lastErr = nil
		for name, rs := range pendingRecords {
			f.untrimmed[name] += len(rs)
		}
		for _, name := range trim {
			f.untrimmed[name] = 0
		}
		for i, name := range names {
			if seqs[i] > f.saved[name] {
				f.saved[name] = seqs[i]
			}
		}
	}
	close(f.changed)
	f.changed = make(chan struct{})
	f.mu.Unlock()
	if err != nil {
		return false, err
	}
	if f.onSave != nil {
		f.onSave(names)
	}
	return more, nil
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
		t := f.clock.NewTimer(200 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return errors.Join(err, ctx.Err())
		case <-t.C():
		}
	}
}
