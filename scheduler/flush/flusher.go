// Package flush is the store's single writer: the flusher. Sources submit
// their latest state, poll records and notification events on their slot;
// the flusher commits them in batches, a few tens of milliseconds after the
// oldest change (rule 3.8 bounds the whole at 250 ms). While the store
// fails it keeps the latest state of each source (and at most history.keep
// records and maxSlotEvents events per source) in memory and retries, so
// nothing is lost once the store recovers.
//
// The flusher knows nothing of shards or fences: on a member of a cluster
// the scheduler passes a fenced Committer, whose refused sources go to
// Options.OnRejected.
//
// Locks: Flusher.mu guards the slots, the queue of pending writes and the
// commit state (health); it is taken after the scheduler's lock, never
// before it, and no callback of Options is called with it held.
package flush

import (
	"context"
	"errors"
	"github.com/pacer-dev/pacer/internal/clock"
	"log/slog"
	"sync"
	"time"

	"github.com/pacer-dev/pacer/domain"
	"github.com/pacer-dev/pacer/store"
)

// maxBatch bounds the states of one commit. A backlog (a store that was
// failing, a burst of first states at start-up) is then written as a train
// of short transactions instead of one that grows with the backlog: each
// commit stays short, readers and the watchdog's probe get the connection
// between two of them, and a source's state reaches the store within a
// bounded time of the commit that takes it.
const maxBatch = 2000

// Committer commits one batch in a transaction, keeping keep records per
// source. rejected names the sources whose rows it refused (a fenced commit
// of a member of a cluster: their shards are another member's now); their
// writes are dropped.
type Committer interface {
	Commit(ctx context.Context, b domain.Batch, keep int) (rejected []string, err error)
}

// CommitFunc is a func as a Committer.
type CommitFunc func(ctx context.Context, b domain.Batch, keep int) ([]string, error)

// Commit calls c.
func (c CommitFunc) Commit(ctx context.Context, b domain.Batch, keep int) ([]string, error) {
	return c(ctx, b, keep)
}

// Store is what the flusher of a single daemon needs of its store.
type Store interface {
	Commit(ctx context.Context, b domain.Batch, keep int) error
}

var _ Store = (*store.Store)(nil)

// Unfenced is the Committer of a single daemon: st's commits, which refuse
// nothing.
func Unfenced(st Store) Committer {
	return CommitFunc(func(ctx context.Context, b domain.Batch, keep int) ([]string, error) {
		return nil, st.Commit(ctx, b, keep)
	})
}

// Options are a flusher's collaborators. Only Committer is required (and
// only once something is committed); the callbacks are called outside the
// flusher's lock.
type Options struct {
	Committer Committer
	Logger    *slog.Logger // nil: discard
	Clock     clock.Clock  // nil: the wall clock; the scheduler passes its own
	// Keep is the number of records kept per source (history.keep), read
	// at every submission and commit (a reload changes it).
	Keep func() int
	// ObserveCommit is told the duration of every commit, failed ones
	// included (pacer_store_commit_seconds); CountError every failed one
	// (pacer_store_errors_total).
	ObserveCommit func(took time.Duration)
	CountError    func()
	// OnSave is called after a commit with the names of its sources.
	OnSave func(names []string)
	// OnEvents is called after a commit that wrote notification events
	// (it wakes the sender).
	OnEvents func()
	// OnDropEvents is called with the number of notification events a
	// slot had to drop to stay within its bound.
	OnDropEvents func(n int)
	// OnRejected is called with the sources a commit refused (Committer),
	// each with the poll records dropped with its state.
	OnRejected func(refused []Refused)
	// LoadedBatch is the commit size from which the flusher gathers
	// longer than flushDelay (0: loadedBatch; MemberLoadedBatch for a
	// cluster member).
	LoadedBatch int
}

// Refused is a source whose rows a fenced commit refused: its state, its
// Polls poll records (the answered polls dropped with it, which neither
// history nor the counts will show) and its events are dropped.
type Refused struct {
	Name  string
	Polls int
}

// Flusher is the store's single writer (see the package's doc).
//
// Each source has a Slot, which the scheduler's entry keeps: a poll's
// submit, and the check that its previous state is committed (rule 3.8),
// touch the slot and a list of pending writes, never a map keyed by name.
type Flusher struct {
	opts Options

	mu     sync.Mutex
	book   book   // the slots and the writes waiting for a commit (mu)
	health health // the last commit's outcome, and its waiters (mu)
	pace   pace   // the delay before a commit
	kick   chan struct{}
	bufs   buffers // of flush, reused from one commit to the next
}

// health is the outcome of the commits, guarded by Flusher.mu.
type health struct {
	lastErr error // the last commit's error, nil when it succeeded
	// dropped counts the events dropped since the last successful commit
	// (logged once when dropping starts and once when it ends).
	dropped int
	changed chan struct{} // closed and replaced after every commit attempt
}

// New returns a flusher; Run starts its commits.
func New(opts Options) *Flusher {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	if opts.ObserveCommit == nil {
		opts.ObserveCommit = func(time.Duration) {}
	}
	if opts.CountError == nil {
		opts.CountError = func() {}
	}
	f := &Flusher{
		opts:   opts,
		book:   book{slots: map[string]*Slot{}},
		health: health{changed: make(chan struct{})},
		kick:   make(chan struct{}, 1),
	}
	f.pace.init(opts.LoadedBatch)
	return f
}

// Err reports the last commit's error (nil when it succeeded).
func (f *Flusher) Err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.health.lastErr
}

// Run commits until ctx is done, then returns; call FlushFinal for the
// last commit.
func (f *Flusher) Run(ctx context.Context) {
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
		err := f.FlushAll(ctx)
		if err != nil {
			// Keep trying with a growing pause; new submissions wait too.
			if !clock.Sleep(ctx, f.opts.Clock, retry) {
				return
			}
			retry = min(retry*2, 5*time.Second)
			f.kickRun()
			continue
		}
		retry = 100 * time.Millisecond
	}
}

// kickRun tells Run that something is pending.
func (f *Flusher) kickRun() {
	select {
	case f.kick <- struct{}{}:
	default:
	}
}

// FlushAll commits everything pending, maxBatch states per transaction,
// until nothing is left or a commit fails. It must not run beside Run or
// itself (a commit is not reentrant).
func (f *Flusher) FlushAll(ctx context.Context) error {
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
func (f *Flusher) flush(ctx context.Context) (more bool, err error) {
	taken, states, records, more := f.take()
	if len(taken) == 0 {
		return false, nil
	}
	b := domain.Batch{States: states, Records: records, Events: eventsOf(taken)}
	began := f.opts.Clock.Now()
	rejected, err := f.opts.Committer.Commit(ctx, b, f.opts.Keep())
	took := f.opts.Clock.Now().Sub(began)
	f.opts.ObserveCommit(took)
	f.pace.adapt(len(taken), more || err != nil, took)
	if n := f.settle(taken, len(states), len(records), err); n > 0 && f.opts.OnDropEvents != nil {
		f.opts.OnDropEvents(n)
	}
	if len(rejected) > 0 && f.opts.OnRejected != nil {
		f.opts.OnRejected(refusedOf(taken, rejected))
	}
	if err == nil && len(b.Events) > 0 && f.opts.OnEvents != nil {
		f.opts.OnEvents()
	}
	if err == nil && f.opts.OnSave != nil {
		names := make([]string, len(taken))
		for i := range taken {
			names[i] = taken[i].sl.name
		}
		f.opts.OnSave(names)
	}
	f.bufs.recycle(taken, states, records)
	if err != nil {
		return false, err
	}
	return more, nil
}

// FlushFinal commits what is pending, retrying for up to d.
func (f *Flusher) FlushFinal(d time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	for {
		err := f.FlushAll(ctx)
		if err == nil {
			return nil
		}
		if !clock.Sleep(ctx, f.opts.Clock, 200*time.Millisecond) {
			return errors.Join(err, ctx.Err())
		}
	}
}

// refusedOf is, for each source of rejected, the number of poll records
// its write in taken carried.
func refusedOf(taken []write, rejected []string) []Refused {
	polls := make(map[string]int, len(rejected))
	for _, name := range rejected {
		polls[name] = 0
	}
	for i := range taken {
		if n, ok := polls[taken[i].sl.name]; ok {
			polls[taken[i].sl.name] = n + len(taken[i].recs)
		}
	}
	out := make([]Refused, 0, len(rejected))
	for _, name := range rejected {
		out = append(out, Refused{Name: name, Polls: polls[name]})
	}
	return out
}
