package notify

import (
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pacer-dev/pacer/domain"
)

// TestBackoffCutShortOnceTheTargetAnswers, on a fake clock: after an
// outage the events of b and c wait 4 minutes for their next attempt, a's
// 1 s; once a's retry goes through, b and c do not wait out their backoff:
// the outbox drains at once and pacer_notifications_pending returns to 0
// (contract 10.1, 10.5), instead of minutes later.
func TestBackoffCutShortOnceTheTargetAnswers(t *testing.T) {
	st := openStore(t)
	commitEvents(t, st, []string{"a", "b", "c"}, 1)
	clock := &fakeClock{t: time.Now()}
	// b and c failed often during a long outage: their next attempts lie
	// 4 minutes on.
	now := clock.Now()
	evs, err := st.ClaimEvents(t.Context(), domain.EventClaim{Member: "t", Now: now, Until: now.Add(time.Minute), Limit: 3})
	if err != nil || len(evs) != 3 {
		t.Fatalf("claim: %v, %v", evs, err)
	}
	for _, ev := range evs {
		next := now.Add(4 * time.Minute)
		if ev.Source == "a" {
			next = now.Add(time.Second)
		}
		if err := st.EventFailed(t.Context(), ev.ID, next); err != nil {
			t.Fatal(err)
		}
	}
	rc := &receiver{}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	s, reg := startFake(t, st, webhookNotify(srv.URL), clock)
	idlePasses(t, s)
	if n := len(rc.accepted()); n != 0 {
		t.Fatalf("%d events delivered before any was due", n)
	}
	// a's retry comes due and goes through: b and c follow at once.
	clock.set(now.Add(time.Second))
	waitUntil(t, "every event delivered", 10*time.Second, func() bool { return counter(t, reg, "sent") == 3 })
	idlePasses(t, s)
	idlePasses(t, s)
	if g := pendingGauge(t, reg); g != 0 {
		t.Errorf("pacer_notifications_pending %v after every event was delivered", g)
	}
}

// TestSoleSenderReleasesClaimsAtStart: a killed daemon left an event
// claimed (in delivery when it died); a sender alone on the store delivers
// it at start, not once the claim has run out; a cluster member's sender
// (not Sole) leaves a live claim alone.
func TestSoleSenderReleasesClaimsAtStart(t *testing.T) {
	for _, sole := range []bool{true, false} {
		st := openStore(t)
		commitEvents(t, st, []string{"a"}, 1)
		now := time.Now()
		if evs, err := st.ClaimEvents(t.Context(), domain.EventClaim{Member: "killed", Now: now, Until: now.Add(time.Hour), Limit: 1}); err != nil || len(evs) != 1 {
			t.Fatalf("claim: %v, %v", evs, err)
		}
		rc := &receiver{}
		srv := httptest.NewServer(rc)
		reg := prometheus.NewRegistry()
		s, err := New(webhookNotify(srv.URL), nil, Options{Outbox: st, Registry: reg, Member: "next", Sole: sole, Interval: 50 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		s.Start()
		if sole {
			waitUntil(t, "the killed daemon's event delivered", 10*time.Second, func() bool { return len(rc.accepted()) == 1 })
		} else {
			idlePasses(t, s)
			idlePasses(t, s)
			if n := len(rc.accepted()); n != 0 {
				t.Errorf("a cluster member's sender took an event another member holds (%d delivered)", n)
			}
		}
		s.Stop(5 * time.Second)
		srv.Close()
	}
}
