package flush

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"runtime"
	"testing"
	"testing/synctest"
	"time"

	"github.com/pacer-dev/pacer/domain"
	"github.com/pacer-dev/pacer/store"
)

// newTestFlusher opens a store at path, closed when the test ends, and a
// flusher on it that keeps keep records per source.
func newTestFlusher(t *testing.T, path string, opts store.Options, keep int) (*store.Store, *Flusher) {
	t.Helper()
	st, err := store.Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	})
	return st, New(Options{Committer: Unfenced(st), Logger: slog.New(slog.DiscardHandler), Keep: func() int { return keep }})
}

// waitCommitStarted waits until f has a commit in progress: a write of
// some slot is in flight.
func waitCommitStarted(t *testing.T, f *Flusher) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; runtime.Gosched() {
		f.mu.Lock()
		busy := committing(f)
		f.mu.Unlock()
		if busy {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the commit did not start")
		}
	}
}

// committing reports whether f has a commit in progress: a write of some
// slot is in flight. f.mu held.
func committing(f *Flusher) bool {
	for _, sl := range f.book.slots {
		if sl.inFlight {
			return true
		}
	}
	return false
}

// A backlog larger than maxBatch is committed as a train of bounded
// transactions, and all of it, states and records, reaches the store.
func TestFlusherBoundsEachCommit(t *testing.T) {
	st, f := newTestFlusher(t, filepath.Join(t.TempDir(), "pacer.db"), store.Options{}, 3)
	var commits []int
	f.opts.OnSave = func(names []string) { commits = append(commits, len(names)) }

	const n = 2*maxBatch + 17
	at := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	var last uint64
	for i := range n {
		s := domain.SourceState{Name: fmt.Sprintf("s%05d", i), PollsTotal: int64(i)}
		var rec *domain.PollRecord
		if i%100 == 0 {
			rec = &domain.PollRecord{Source: s.Name, StartedAt: at, Outcome: domain.OutcomeSuccess}
		}
		last = f.Submit(f.Slot(s.Name), s, rec)
	}
	if err := f.FlushAll(t.Context()); err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, c := range commits {
		if c > maxBatch {
			t.Errorf("a commit took %d states; the bound is %d", c, maxBatch)
		}
		total += c
	}
	if total != n || len(commits) != 3 {
		t.Errorf("commits %v: %d states in %d commits; want %d in 3", commits, total, len(commits), n)
	}
	if f.Pending(f.Slot(fmt.Sprintf("s%05d", n-1)), last) {
		t.Error("the last state is still pending after flushAll")
	}
	if c := cap(f.book.queue); c > 2*maxBatch {
		t.Errorf("the queue keeps a capacity of %d writes after the backlog; want at most %d", c, 2*maxBatch)
	}
	states, err := st.LoadStates(t.Context())
	if err != nil || len(states) != n {
		t.Fatalf("LoadStates: %d states, %v; want %d", len(states), err, n)
	}
	for i := 0; i < n; i += 100 {
		name := fmt.Sprintf("s%05d", i)
		if h, err := st.History(t.Context(), name, 10); err != nil || len(h) != 1 {
			t.Errorf("history of %s: %d records, %v; want 1", name, len(h), err)
		}
	}
}

// Records stay visible to readers while the commit that carries them is in
// progress (here: waiting for a write lock held by another connection), and
// are in the store once it is done.
func TestFlusherRecordsVisibleDuringCommit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pacer.db")
	st, f := newTestFlusher(t, path, store.Options{BusyTimeout: 10 * time.Second}, 10)

	release := holdWriteLock(t, path)

	rec := domain.PollRecord{Source: "a", Seq: 1, StartedAt: time.Now(), Outcome: domain.OutcomeSuccess}
	f.Submit(f.Slot("a"), domain.SourceState{Name: "a", HistorySeq: 1}, &rec)
	done := make(chan error, 1)
	go func() { done <- f.FlushAll(context.Background()) }()
	waitCommitStarted(t, f)
	if got := f.PendingRecords("a"); len(got) != 1 || got[0].Seq != 1 {
		t.Errorf("during the commit pendingRecords(a) = %+v; want the record", got)
	}
	if err := release(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := f.PendingRecords("a"); len(got) != 0 {
		t.Errorf("after the commit pendingRecords(a) = %+v; want none", got)
	}
	if h, err := st.History(t.Context(), "a", 10); err != nil || len(h) != 1 {
		t.Errorf("stored history: %+v, %v", h, err)
	}
}

// A removed source's slot stays until its last state is committed, then the
// flusher forgets it; a source added again under the same name meanwhile
// keeps the slot, and with it the order of its writes.
func TestFlusherReleasesSlots(t *testing.T) {
	st, f := newTestFlusher(t, filepath.Join(t.TempDir(), "pacer.db"), store.Options{}, 3)
	a, b := f.Slot("a"), f.Slot("b")
	f.Submit(a, domain.SourceState{Name: "a", PollsTotal: 1}, nil)
	f.Release(a, domain.SourceState{})
	f.Release(b, domain.SourceState{}) // nothing pending: dropped at once
	f.mu.Lock()
	_, hasA := f.book.slots["a"]
	_, hasB := f.book.slots["b"]
	f.mu.Unlock()
	if !hasA || hasB {
		t.Fatalf("after release: slot a kept %v (want true), b kept %v (want false)", hasA, hasB)
	}
	if err := f.FlushAll(t.Context()); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	_, hasA = f.book.slots["a"]
	f.mu.Unlock()
	if hasA {
		t.Error("slot a is still held after its last state was committed")
	}
	got, _, err := st.GetState(t.Context(), "a")
	if err != nil || got.PollsTotal != 1 {
		t.Fatalf("stored a: %+v, %v; want PollsTotal 1", got, err)
	}

	// Removed and added again before the commit: one slot, latest state wins.
	c := f.Slot("c")
	f.Submit(c, domain.SourceState{Name: "c", PollsTotal: 1}, nil)
	f.Release(c, domain.SourceState{})
	if again := f.Slot("c"); again != c {
		t.Fatal("a source added again before its commit got a new slot")
	}
	seq := f.Submit(c, domain.SourceState{Name: "c", PollsTotal: 2}, nil)
	if err := f.FlushAll(t.Context()); err != nil {
		t.Fatal(err)
	}
	if f.Pending(c, seq) {
		t.Error("c's latest state is still pending after flushAll")
	}
	if got, _, err := st.GetState(t.Context(), "c"); err != nil || got.PollsTotal != 2 {
		t.Fatalf("stored c: %+v, %v; want PollsTotal 2", got, err)
	}
}

// A source removed and added again while its state is in a commit that
// fails keeps one slot: the state submitted after the re-add is the one
// that reaches the store, not the older one put back by the failure.
func TestFlusherReleaseDuringFailedCommit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pacer.db")
	st, f := newTestFlusher(t, path, store.Options{BusyTimeout: 300 * time.Millisecond}, 10)
	release := holdWriteLock(t, path)
	c := f.Slot("c")
	f.Submit(c, domain.SourceState{Name: "c", PollsTotal: 1}, nil)
	done := make(chan error, 1)
	go func() {
		_, err := f.flush(context.Background())
		done <- err
	}()
	waitCommitStarted(t, f)
	f.Release(c, domain.SourceState{}) // removed during the commit...
	again := f.Slot("c")
	f.Submit(again, domain.SourceState{Name: "c", PollsTotal: 2}, nil) // ...and added again
	if again != c {
		t.Error("the source added again got a second slot while its first was in a commit")
	}
	if err := <-done; err == nil {
		t.Fatal("the commit was expected to fail: the store is locked")
	}
	if err := release(); err != nil {
		t.Fatal(err)
	}
	if err := f.FlushAll(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got, _, err := st.GetState(t.Context(), "c"); err != nil || got.PollsTotal != 2 {
		t.Fatalf("stored c: PollsTotal %d, %v; want 2", got.PollsTotal, err)
	}
}

// A change is committed flushDelay after its submission, not after the
// flusher noticed it; once a commit wrote loadedBatch states or more (a
// daemon under load) the next change waits loadedDelay, and the delay goes
// back to flushDelay after a small commit, or when a poll (waitAt) waits for
// the pending state. In a synctest bubble the commit takes no time, so the
// instants are exact.
func TestFlusherDelayFollowsLoad(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, f := newTestFlusher(t, filepath.Join(t.TempDir(), "pacer.db"), store.Options{}, 3)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { defer close(done); f.Run(ctx) }()
		defer func() { cancel(); <-done }()

		// quiet waits for the commit of seq on sl as an observer that
		// does not hurry it (waitAt does).
		quiet := func(sl *Slot, seq uint64) {
			for {
				f.mu.Lock()
				done, ch := sl.saved >= seq, f.health.changed
				f.mu.Unlock()
				if done {
					return
				}
				<-ch
			}
		}
		// submitN submits the states of n sources and returns when they
		// are committed, how long after the submission; a waiter waits
		// for them as a poll does.
		batch := 0
		submitN := func(n int, gap time.Duration, waiter bool) time.Duration {
			t.Helper()
			start := time.Now()
			var sls []*Slot
			var seqs []uint64
			for i := range n {
				sl := f.Slot(fmt.Sprintf("b%d-s%03d", batch, i))
				seqs = append(seqs, f.Submit(sl, domain.SourceState{Name: sl.name, PollsTotal: 1}, nil))
				sls = append(sls, sl)
				if i == 0 && gap > 0 {
					time.Sleep(gap) // the others come later in the same window
				}
			}
			batch++
			for i, sl := range sls {
				if waiter {
					f.WaitAt(ctx, sl, seqs[i])
				} else {
					quiet(sl, seqs[i])
				}
				if f.Pending(sl, seqs[i]) {
					t.Fatalf("%s: not committed", sl.name)
				}
			}
			return time.Since(start)
		}
		for _, c := range []struct {
			name   string
			n      int
			gap    time.Duration
			waiter bool
			want   time.Duration
		}{
			{"one state, idle", 1, 0, false, flushDelay},
			{"a second change 30ms later shares the first one's commit", 2, 30 * time.Millisecond, false, flushDelay},
			{"a big batch after small ones", loadedBatch, 0, false, flushDelay},
			{"after a big batch", 1, 0, false, loadedDelay},
			{"after a small batch again", 1, 0, false, flushDelay},
			{"a big batch again", loadedBatch, 0, false, flushDelay},
			{"after a big batch, a poll waits for it", 1, 0, true, flushDelay},
			{"a big batch, a poll waits for it", loadedBatch, 0, true, flushDelay},
			{"after a big batch, nobody waits", 1, 0, false, loadedDelay},
		} {
			if got := submitN(c.n, c.gap, c.waiter); got != c.want {
				t.Errorf("%s: committed %v after the first submission, want %v", c.name, got, c.want)
			}
		}
	})
}

// adapt keeps a large commit's delay plus its expected duration (the last
// commit's, scaled by the ratio of the delays) within loadedBudget, between
// flushDelay and loadedDelay; small commits and backlogs get flushDelay.
func TestFlusherAdapt(t *testing.T) {
	for _, c := range []struct {
		name      string
		delay     time.Duration // of the commit that just ended
		n         int
		more      bool
		took      time.Duration
		wantDelay time.Duration
	}{
		{"small commit", loadedDelay, loadedBatch - 1, false, 0, flushDelay},
		{"backlog left", loadedDelay, maxBatch, true, time.Millisecond, flushDelay},
		{"large and instant", flushDelay, loadedBatch, false, 0, loadedDelay},
		{"large, 5ms after 50ms", flushDelay, 500, false, 5 * time.Millisecond, 136363636},
		{"large, as long as its delay", loadedDelay, 1500, false, loadedDelay, 75 * time.Millisecond},
		{"large and slow", loadedDelay, 1500, false, 300 * time.Millisecond, flushDelay},
	} {
		_, f := newTestFlusher(t, filepath.Join(t.TempDir(), "pacer.db"), store.Options{}, 3)
		f.pace.delay.Store(int64(c.delay))
		f.pace.adapt(c.n, c.more, c.took)
		if got := f.pace.current(); got != c.wantDelay {
			t.Errorf("%s: delay %v, want %v", c.name, got, c.wantDelay)
		}
		if c.n >= loadedBatch && !c.more {
			// The expected end of the next commit stays within the budget
			// whenever the delay is not at its floor.
			next := f.pace.current()
			if end := next + time.Duration(float64(c.took)*next.Seconds()/c.delay.Seconds()); next > flushDelay && end > loadedBudget+time.Millisecond {
				t.Errorf("%s: next commit expected to end %v after its oldest change, over %v", c.name, end, loadedBudget)
			}
		}
	}
}

// A cluster member's flusher (Options.LoadedBatch = MemberLoadedBatch)
// gathers longer from 2 states a commit, a single daemon's from 64.
func TestFlusherMemberBatch(t *testing.T) {
	for _, c := range []struct {
		name  string
		batch int
		n     int
		want  time.Duration
	}{
		{"member, 1 state", MemberLoadedBatch, 1, flushDelay},
		{"member, 2 states", MemberLoadedBatch, 2, loadedDelay},
		{"daemon, 8 states", 0, 8, flushDelay},
		{"daemon, 64 states", 0, loadedBatch, loadedDelay},
	} {
		f := New(Options{LoadedBatch: c.batch})
		f.pace.adapt(c.n, false, 0)
		if got := f.pace.current(); got != c.want {
			t.Errorf("%s: delay %v, want %v", c.name, got, c.want)
		}
	}
}
