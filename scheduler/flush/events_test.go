package flush

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/domain"
	"github.com/pacer-dev/pacer/store"
)

// TestFlusherKeepsEventsThroughFailedCommit: events submitted with a state
// wait out a failed commit (the store locked), together with the events of
// a newer state submitted meanwhile, and are committed once, in order.
func TestFlusherKeepsEventsThroughFailedCommit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pacer.db")
	st, f := newTestFlusher(t, path, store.Options{BusyTimeout: 300 * time.Millisecond}, 10)
	woken := 0
	f.opts.OnEvents = func() { woken++ }
	release := holdWriteLock(t, path)
	c := f.Slot("c")
	f.Submit(c, domain.SourceState{Name: "c", PollsTotal: 1}, nil, domain.Event{Source: "c", Event: "error", At: time.Now()})
	done := make(chan error, 1)
	go func() {
		_, err := f.flush(context.Background())
		done <- err
	}()
	waitCommitStarted(t, f)
	f.Submit(c, domain.SourceState{Name: "c", PollsTotal: 2}, nil, domain.Event{Source: "c", Event: "recovered", At: time.Now()})
	if err := <-done; err == nil {
		t.Fatal("the commit was expected to fail: the store is locked")
	}
	if n, err := st.PendingEvents(t.Context()); err != nil || n != 0 || woken != 0 {
		t.Fatalf("after the failed commit: %d events, %v, woken %d; want none", n, err, woken)
	}
	if err := release(); err != nil {
		t.Fatal(err)
	}
	if err := f.FlushAll(t.Context()); err != nil {
		t.Fatal(err)
	}
	evs, err := st.ClaimEvents(t.Context(), domain.EventClaim{Member: "t", Now: time.Now(), Until: time.Now().Add(time.Minute), Limit: 10})
	if err != nil || len(evs) != 1 || evs[0].Event != "error" || woken != 1 {
		t.Fatalf("claimed %+v, %v (woken %d); want the error event first", evs, err, woken)
	}
	if n, err := st.PendingEvents(t.Context()); err != nil || n != 2 {
		t.Fatalf("pending %d, %v; want both events, once each", n, err)
	}
}

// TestFlusherBoundsEventsAndCountsDrops: a source whose events outgrow
// maxSlotEvents before a commit keeps the newest, and the dropped ones are
// reported (pacer_notifications_total{outcome="dropped"} in the daemon).
func TestFlusherBoundsEventsAndCountsDrops(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pacer.db")
	st, f := newTestFlusher(t, path, store.Options{}, 10)
	dropped := 0
	f.opts.OnDropEvents = func(n int) { dropped += n }
	c := f.Slot("c")
	const extra = 6
	for i := range maxSlotEvents + extra {
		f.Submit(c, domain.SourceState{Name: "c", PollsTotal: int64(i + 1)}, nil,
			domain.Event{Source: "c", Event: "error", Reason: fmt.Sprint(i), At: time.Now()})
	}
	if dropped != extra {
		t.Fatalf("dropped %d events; want %d", dropped, extra)
	}
	if err := f.FlushAll(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n, err := st.PendingEvents(t.Context()); err != nil || n != maxSlotEvents {
		t.Fatalf("pending %d, %v; want %d", n, err, maxSlotEvents)
	}
	evs, err := st.ClaimEvents(t.Context(), domain.EventClaim{Member: "t", Now: time.Now(), Until: time.Now().Add(time.Minute), Limit: 1})
	if err != nil || len(evs) != 1 || evs[0].Reason != fmt.Sprint(extra) {
		t.Fatalf("first event %+v, %v; want the oldest kept (reason %d)", evs, err, extra)
	}
}
