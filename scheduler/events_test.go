package scheduler

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/pacer-dev/pacer/store"
)

// TestEventsCommittedWithState: a source that enters error and recovers by
// a re-probe leaves error then recovered in the outbox, committed with the
// states; without notify the outbox stays empty.
func TestEventsCommittedWithState(t *testing.T) {
	for _, withNotify := range []bool{true, false} {
		synctest.Test(t, func(t *testing.T) {
			dir := t.TempDir()
			body := lifecycleDefaults + flakySource("re", "error_after: 2\nbreaker: {failures: 0}\nerror_reprobe: 3s")
			if withNotify {
				body = "notify: {command: [\"true\"]}\n" + body
			}
			setFail(t, dir, true)
			h := start(t, dir, writeConfig(t, dir, body))
			defer h.stop()
			h.waitFor("error committed", 30*time.Second, func() bool {
				st, ok, err := h.store.GetState(t.Context(), "re")
				return err == nil && ok && st.ErrorReason != ""
			})
			setFail(t, dir, false)
			h.waitFor("recovery committed", 30*time.Second, func() bool {
				st := h.stored("re")
				return st.ErrorReason == "" && st.LastOutcome == store.OutcomeSuccess
			})
			n, err := h.store.PendingEvents(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if !withNotify {
				if n != 0 {
					t.Fatalf("%d events without notify", n)
				}
				return
			}
			var got []string
			for range 3 {
				evs, err := h.store.ClaimEvents(t.Context(), store.EventClaim{Member: "t", Now: time.Now(), Until: time.Now().Add(time.Minute), Limit: 10})
				if err != nil {
					t.Fatal(err)
				}
				for _, ev := range evs {
					got = append(got, ev.Event+":"+ev.PreviousState)
					if err := h.store.EventSent(t.Context(), ev.ID); err != nil {
						t.Fatal(err)
					}
				}
			}
			if len(got) != 2 || got[0] != "error:backoff" || got[1] != "recovered:error" {
				t.Fatalf("outbox held %v; want error (from backoff), then recovered (from error)", got)
			}
		})
	}
}

// TestFlusherKeepsEventsThroughFailedCommit: events submitted with a state
// wait out a failed commit (the store locked), together with the events of
// a newer state submitted meanwhile, and are committed once, in order.
func TestFlusherKeepsEventsThroughFailedCommit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pacer.db")
	st, f := newTestFlusher(t, path, store.Options{BusyTimeout: 300 * time.Millisecond}, 10)
	woken := 0
	f.onEvents = func() { woken++ }
	release := holdWriteLock(t, path)
	c := f.slot("c")
	f.submit(c, store.SourceState{Name: "c", PollsTotal: 1}, nil, store.Event{Source: "c", Event: "error", At: time.Now()})
	done := make(chan error, 1)
	go func() {
		_, err := f.flush(context.Background())
		done <- err
	}()
	waitCommitStarted(t, f)
	f.submit(c, store.SourceState{Name: "c", PollsTotal: 2}, nil, store.Event{Source: "c", Event: "recovered", At: time.Now()})
	if err := <-done; err == nil {
		t.Fatal("the commit was expected to fail: the store is locked")
	}
	if n, err := st.PendingEvents(t.Context()); err != nil || n != 0 || woken != 0 {
		t.Fatalf("after the failed commit: %d events, %v, woken %d; want none", n, err, woken)
	}
	if err := release(); err != nil {
		t.Fatal(err)
	}
	if err := f.flushAll(t.Context()); err != nil {
		t.Fatal(err)
	}
	evs, err := st.ClaimEvents(t.Context(), store.EventClaim{Member: "t", Now: time.Now(), Until: time.Now().Add(time.Minute), Limit: 10})
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
	f.onDropEvents = func(n int) { dropped += n }
	c := f.slot("c")
	const extra = 6
	for i := range maxSlotEvents + extra {
		f.submit(c, store.SourceState{Name: "c", PollsTotal: int64(i + 1)}, nil,
			store.Event{Source: "c", Event: "error", Reason: fmt.Sprint(i), At: time.Now()})
	}
	if dropped != extra {
		t.Fatalf("dropped %d events; want %d", dropped, extra)
	}
	if err := f.flushAll(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n, err := st.PendingEvents(t.Context()); err != nil || n != maxSlotEvents {
		t.Fatalf("pending %d, %v; want %d", n, err, maxSlotEvents)
	}
	evs, err := st.ClaimEvents(t.Context(), store.EventClaim{Member: "t", Now: time.Now(), Until: time.Now().Add(time.Minute), Limit: 1})
	if err != nil || len(evs) != 1 || evs[0].Reason != fmt.Sprint(extra) {
		t.Fatalf("first event %+v, %v; want the oldest kept (reason %d)", evs, err, extra)
	}
}
