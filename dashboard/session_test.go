package dashboard

import (
	"sync"
	"testing"
	"time"
)

// Sessions expire, and the map never holds more than its bound: the one
// expiring soonest goes first.
func TestSessionsBoundedAndExpiring(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	s := newSessions(time.Hour, 3, clock)

	first, err := s.create()
	if err != nil {
		t.Fatal(err)
	}
	if !s.valid(first) || s.valid("") || s.valid("nope") {
		t.Fatalf("valid: a new session is valid, others are not")
	}
	advance(time.Minute)
	var ids []string
	for range 3 {
		id, err := s.create()
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if s.len() != 3 || s.valid(first) {
		t.Errorf("after 4 sessions with room for 3: %d kept, oldest valid %v", s.len(), s.valid(first))
	}
	for _, id := range ids {
		if !s.valid(id) {
			t.Errorf("a newer session was evicted")
		}
	}
	if ids[0] == ids[1] || len(ids[0]) != 43 {
		t.Errorf("session ids are not 32 random bytes: %q %q", ids[0], ids[1])
	}
	advance(time.Hour)
	if s.valid(ids[0]) {
		t.Errorf("a session is valid after its expiry")
	}
	s.drop(ids[1])
	if s.valid(ids[1]) {
		t.Errorf("a dropped session is valid")
	}
}
