package store_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/domain"
	"github.com/pacer-dev/pacer/store"
)

// The outbox of notifications (contract 10.2), through runStoreSuite.

func event(src, name string, at time.Time) domain.Event {
	return domain.Event{Source: src, Event: name, State: "error", PreviousState: "backoff", Reason: "2 consecutive failures",
		ConsecutiveFailures: 2, At: at}
}

func claimEvents(t *testing.T, s *store.Store, member string, now time.Time, n int) []domain.Event {
	t.Helper()
	evs, err := s.ClaimEvents(t.Context(), domain.EventClaim{Member: member, Now: now, Until: now.Add(time.Minute), Limit: n})
	if err != nil {
		t.Fatalf("ClaimEvents: %v", err)
	}
	return evs
}

func pending(t *testing.T, s *store.Store) int {
	t.Helper()
	n, err := s.PendingEvents(t.Context())
	if err != nil {
		t.Fatalf("PendingEvents: %v", err)
	}
	return n
}

// testEventsWithBatch: an event is committed with its batch, with an id,
// and a batch that fails half-way commits none.
func testEventsWithBatch(t *testing.T, s *store.Store, failRecordsOf func(*testing.T, *store.Store, string)) {
	ev := event("a", "error", base())
	if err := s.Commit(t.Context(), domain.Batch{States: []domain.SourceState{fullState("a")}, Events: []domain.Event{ev}}, 10); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	got := claimEvents(t, s, "m1", base(), 10)
	if len(got) != 1 || len(got[0].ID) != 32 || got[0].Source != "a" || got[0].Event != "error" || got[0].Reason != ev.Reason ||
		got[0].ConsecutiveFailures != 2 || !got[0].At.Equal(stored(base())) || got[0].ClaimedBy != "m1" || got[0].PreviousState != "backoff" {
		t.Fatalf("claimed %+v; want the committed event with an id", got)
	}
	failRecordsOf(t, s, "boom")
	err := s.Commit(t.Context(), domain.Batch{
		States:  []domain.SourceState{fullState("b")},
		Records: []domain.PollRecord{record("boom", base(), domain.OutcomeSuccess)},
		Events:  []domain.Event{event("b", "error", base())},
	}, 10)
	if err == nil {
		t.Fatal("Commit with a failing record insert succeeded")
	}
	if n := pending(t, s); n != 1 {
		t.Errorf("pending after a rolled-back batch = %d, want 1 (its event rolled back)", n)
	}
	if err := s.Commit(t.Context(), domain.Batch{Events: []domain.Event{{Event: "error"}}}, 10); err == nil {
		t.Error("Commit of an event without a source succeeded")
	}
}

// testEventClaimOrder: only the oldest event of a source is claimable; the
// next one once it is sent; a claimed event is not claimed again while the
// claim holds.
func testEventClaimOrder(t *testing.T, s *store.Store) {
	var evs []domain.Event
	for i := range 3 {
		evs = append(evs, event("a", fmt.Sprintf("e%d", i), base().Add(time.Duration(i)*time.Second)), event("b", fmt.Sprintf("e%d", i), base()))
	}
	if err := s.Commit(t.Context(), domain.Batch{Events: evs}, 10); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	now := base().Add(time.Minute)
	for i := range 3 {
		got := claimEvents(t, s, "m", now, 10)
		if len(got) != 2 || got[0].Event != fmt.Sprintf("e%d", i) || got[1].Event != got[0].Event || got[0].Source == got[1].Source {
			t.Fatalf("round %d: claimed %+v; want e%d of a and of b", i, got, i)
		}
		if again := claimEvents(t, s, "m2", now, 10); len(again) != 0 {
			t.Fatalf("round %d: claimed again while claimed: %+v", i, again)
		}
		for _, ev := range got {
			if err := s.EventSent(t.Context(), ev.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
	if n := pending(t, s); n != 0 {
		t.Errorf("pending after all sent = %d", n)
	}
}

// testEventRetryAndDrop: a failed event waits for its next attempt and
// keeps its place; a claim that expires frees it; old events are dropped.
func testEventRetryAndDrop(t *testing.T, s *store.Store) {
	if err := s.Commit(t.Context(), domain.Batch{Events: []domain.Event{event("a", "error", base()), event("a", "recovered", base())}}, 10); err != nil {
		t.Fatal(err)
	}
	now := base()
	got := claimEvents(t, s, "m", now, 10)
	if len(got) != 1 || got[0].Event != "error" {
		t.Fatalf("claimed %+v", got)
	}
	if err := s.EventFailed(t.Context(), got[0].ID, now.Add(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	if c := claimEvents(t, s, "m", now.Add(time.Second), 10); len(c) != 0 {
		t.Fatalf("claimed before its next attempt (and past it, the later event): %+v", c)
	}
	c := claimEvents(t, s, "m", now.Add(2*time.Second), 10)
	if len(c) != 1 || c[0].ID != got[0].ID || c[0].Attempts != 1 {
		t.Fatalf("after its next attempt: claimed %+v; want the failed one, 1 attempt", c)
	}
	// The claim runs for a minute; past it another member may claim it.
	if c := claimEvents(t, s, "m2", now.Add(2*time.Minute), 10); len(c) != 1 || c[0].ID != got[0].ID || c[0].ClaimedBy != "m2" {
		t.Fatalf("after the claim expired: %+v", c)
	}
	dropped, err := s.DropEvents(t.Context(), base().Add(time.Second), now.Add(10*time.Minute))
	if err != nil || len(dropped) != 2 || dropped[0].ID != got[0].ID {
		t.Fatalf("DropEvents = %+v, %v; want both, the failed one first", dropped, err)
	}
	if n := pending(t, s); n != 0 {
		t.Errorf("pending after drop = %d", n)
	}
}

// testEventClaimersExclusive: two stores on one database claim and send
// concurrently; every event is claimed by one of them once, and each
// source's events are sent in order.
func testEventClaimersExclusive(t *testing.T, dsn string) {
	s1 := openAt(t, dsn, store.Options{})
	s2 := openAt(t, dsn, store.Options{})
	const sources, per = 5, 12
	var evs []domain.Event
	for i := range per {
		for j := range sources {
			evs = append(evs, event(fmt.Sprintf("s%d", j), fmt.Sprintf("%03d", i), base()))
		}
	}
	if err := s1.Commit(t.Context(), domain.Batch{Events: evs}, 10); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	seen := map[string]string{} // id -> claimer
	order := map[string][]string{}
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for k, s := range []*store.Store{s1, s2} {
		wg.Go(func() {
			member := fmt.Sprintf("m%d", k)
			for range 10 * per * sources {
				got, err := s.ClaimEvents(t.Context(), domain.EventClaim{Member: member, Now: base(), Until: base().Add(time.Hour), Limit: 3})
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				for _, ev := range got {
					if who, dup := seen[ev.ID]; dup {
						errs <- fmt.Errorf("event %s claimed by %s and %s", ev.ID, who, member)
					}
					seen[ev.ID] = member
					order[ev.Source] = append(order[ev.Source], ev.Event)
				}
				done := len(seen) == len(evs)
				mu.Unlock()
				for _, ev := range got {
					if err := s.EventSent(t.Context(), ev.ID); err != nil {
						errs <- err
						return
					}
				}
				if done {
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if len(seen) != len(evs) {
		t.Fatalf("%d of %d events claimed", len(seen), len(evs))
	}
	for src, o := range order {
		if !slices.IsSorted(o) || len(o) != per {
			t.Errorf("events of %s sent in order %v; want %d in order", src, o, per)
		}
	}
}

// testEventTrim: TrimEvents keeps each source's newest events and deletes
// the older ones, oldest first, except one whose claim holds; a source
// within the bound is untouched, and what is kept is claimed in order.
func testEventTrim(t *testing.T, s *store.Store) {
	var evs []domain.Event
	for i := range 6 {
		evs = append(evs, event("a", fmt.Sprintf("e%d", i), base()))
	}
	evs = append(evs, event("b", "e0", base()), event("b", "e1", base()))
	if err := s.Commit(t.Context(), domain.Batch{Events: evs}, 10); err != nil {
		t.Fatal(err)
	}
	now := base()
	claimed := claimEvents(t, s, "m", now, 1) // a's e0, in delivery until now+1m
	if len(claimed) != 1 || claimed[0].Source != "a" || claimed[0].Event != "e0" {
		t.Fatalf("claimed %+v; want a's e0", claimed)
	}
	names := func(evs []domain.Event) []string {
		var out []string
		for _, ev := range evs {
			out = append(out, ev.Source+"/"+ev.Event)
		}
		return out
	}
	got, err := s.TrimEvents(t.Context(), 2, now)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a/e1", "a/e2", "a/e3"}; !slices.Equal(names(got), want) || got[0].ID == "" {
		t.Fatalf("trimmed %v; want %v (the claimed e0 kept, the newest 2 kept, b untouched)", names(got), want)
	}
	if n := pending(t, s); n != 5 {
		t.Fatalf("pending %d after the trim; want 5", n)
	}
	// Once the claim ran out, the claimed one goes too.
	later := now.Add(2 * time.Minute)
	if got, err := s.TrimEvents(t.Context(), 2, later); err != nil || !slices.Equal(names(got), []string{"a/e0"}) {
		t.Fatalf("trimmed %v, %v after the claim; want a/e0", names(got), err)
	}
	var order []string
	for range 3 {
		for _, ev := range claimEvents(t, s, "m", later, 10) {
			order = append(order, ev.Source+"/"+ev.Event)
			if err := s.EventSent(t.Context(), ev.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
	if want := []string{"a/e4", "b/e0", "a/e5", "b/e1"}; !slices.Equal(order, want) {
		t.Errorf("kept events claimed as %v; want %v", order, want)
	}
	if _, err := s.TrimEvents(t.Context(), -1, later); err == nil {
		t.Error("TrimEvents with keep < 0 accepted")
	}
}

// testEventRetryNow: RetryEventsNow cuts a retry backoff short, and with
// releaseClaims gives back a claim that still holds; without it a claim
// holds on, and an event already due is left as it is.
func testEventRetryNow(t *testing.T, s *store.Store) {
	evs := []domain.Event{event("a", "e0", base()), event("b", "e0", base()), event("c", "e0", base())}
	if err := s.Commit(t.Context(), domain.Batch{Events: evs}, 10); err != nil {
		t.Fatal(err)
	}
	now := base()
	for _, ev := range claimEvents(t, s, "m", now, 3) {
		switch ev.Source {
		case "a": // failed: due again in 4 minutes
			if err := s.EventFailed(t.Context(), ev.ID, now.Add(4*time.Minute)); err != nil {
				t.Fatal(err)
			}
		case "b": // failed: due already
			if err := s.EventFailed(t.Context(), ev.ID, now); err != nil {
				t.Fatal(err)
			}
		} // c stays claimed (in delivery, or its daemon was killed)
	}
	got := claimEvents(t, s, "m", now.Add(time.Second), 3)
	if len(got) != 1 || got[0].Source != "b" {
		t.Fatalf("claimed %+v before RetryEventsNow; want only b", got)
	}
	if err := s.EventFailed(t.Context(), got[0].ID, now); err != nil { // b back to unclaimed
		t.Fatal(err)
	}
	n, err := s.RetryEventsNow(t.Context(), now.Add(time.Second), false)
	if err != nil || n != 1 {
		t.Fatalf("RetryEventsNow without claims changed %d, %v; want 1 (a)", n, err)
	}
	got = claimEvents(t, s, "m", now.Add(2*time.Second), 3)
	if len(got) != 2 || got[0].Source != "a" || got[1].Source != "b" {
		t.Fatalf("claimed %+v; want a and b (c's claim holds)", got)
	}
	n, err = s.RetryEventsNow(t.Context(), now.Add(3*time.Second), true)
	if err != nil || n != 3 {
		t.Fatalf("RetryEventsNow releasing claims changed %d, %v; want 3", n, err)
	}
	if got := claimEvents(t, s, "m2", now.Add(3*time.Second), 3); len(got) != 3 {
		t.Fatalf("claimed %d after every claim was released; want 3", len(got))
	}
}

// testIncidentColumnAdded: a store from before source_states.incident_open
// (the column dropped) gains it at open, its states read with no incident
// open, and the column then keeps what is written, on every backend.
func testIncidentColumnAdded(t *testing.T, dsn string) {
	s, err := store.Open(dsn, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	old := fullState("old")
	save(t, s, []domain.SourceState{old}, nil, 10)
	if err := store.GormDB(s).Exec("ALTER TABLE source_states DROP COLUMN incident_open").Error; err != nil {
		t.Fatalf("drop the column: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, dsn, store.Options{})
	if st := mustGet(t, s, "old"); st.IncidentOpen || st.ErrorReason != old.ErrorReason {
		t.Fatalf("a state from before the column: %+v; want its fields, no incident open", st)
	}
	states, err := s.LoadStates(t.Context())
	if err != nil || len(states) != 1 || states[0].IncidentOpen {
		t.Fatalf("LoadStates = %+v, %v; want the state, no incident open", states, err)
	}
	save(t, s, []domain.SourceState{fullState("new")}, nil, 10)
	if st := mustGet(t, s, "new"); !st.IncidentOpen {
		t.Fatalf("the incident written after the column came back: %+v", st)
	}
}
