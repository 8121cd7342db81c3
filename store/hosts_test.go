package store_test

import (
	"testing"
	"time"

	"github.com/pacer-dev/pacer/domain"
	"github.com/pacer-dev/pacer/store"
)

// The host groups' states and host events (contract section 13), through
// runStoreSuite.

func openDSN(t *testing.T, dsn string) *store.Store {
	t.Helper()
	s, err := store.Open(dsn, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// testHostStates: host states round-trip, a second save replaces the
// first, and they survive a reopen.
func testHostStates(t *testing.T, dsn string) {
	s := openDSN(t, dsn)
	if hs, err := s.LoadHosts(t.Context()); err != nil || len(hs) != 0 {
		t.Fatalf("LoadHosts of a new store: %v, %v", hs, err)
	}
	in := []domain.HostState{
		{Host: "api.example", Data: []byte(`{"learned":4}`), UpdatedAt: base()},
		{Host: "127.0.0.1:8080", Data: []byte(`{}`), UpdatedAt: base()},
	}
	if err := s.SaveHosts(t.Context(), in); err != nil {
		t.Fatalf("SaveHosts: %v", err)
	}
	in[0].Data = []byte(`{"learned":6}`)
	if err := s.SaveHosts(t.Context(), in[:1]); err != nil {
		t.Fatalf("SaveHosts again: %v", err)
	}
	if err := s.SaveHosts(t.Context(), []domain.HostState{{Data: []byte("x")}}); err == nil {
		t.Fatal("SaveHosts of a host without a name succeeded")
	}
	s.Close()
	s = openDSN(t, dsn)
	hs, err := s.LoadHosts(t.Context())
	if err != nil || len(hs) != 2 {
		t.Fatalf("LoadHosts after reopen: %v, %v; want 2", hs, err)
	}
	if hs[0].Host != "127.0.0.1:8080" || hs[1].Host != "api.example" || string(hs[1].Data) != `{"learned":6}` ||
		!hs[1].UpdatedAt.Equal(stored(base())) {
		t.Fatalf("LoadHosts = %+v; want both, sorted, the second save's data", hs)
	}
}

// testHostEvents: a host event goes through the outbox with its host and
// number of sources and no source, in order with the others of its host,
// apart from a source's events.
func testHostEvents(t *testing.T, s *store.Store) {
	open := domain.Event{Host: "api.example", Event: "host_open", State: "open", Reason: "connection refused", Sources: 200, At: base()}
	src := event("api.example", "error", base()) // a source named like the host: another key
	if err := s.Commit(t.Context(), domain.Batch{States: []domain.SourceState{fullState("a")}, Events: []domain.Event{open, src}}, 10); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	got := claimEvents(t, s, "m1", base(), 10)
	if len(got) != 2 {
		t.Fatalf("claimed %d events, want 2 (a host's and a source's are apart)", len(got))
	}
	h := got[0]
	if h.Host != "api.example" || h.Source != "" || h.Sources != 200 || h.ConsecutiveFailures != 0 || h.Event != "host_open" {
		t.Fatalf("host event read back as %+v", h)
	}
	if got[1].Source != "api.example" || got[1].Host != "" || got[1].ConsecutiveFailures != 2 {
		t.Fatalf("source event read back as %+v", got[1])
	}
	dropped, err := s.DropEvents(t.Context(), base().Add(time.Hour), base().Add(time.Hour))
	if err != nil || len(dropped) != 2 || dropped[0].Host != "api.example" {
		t.Fatalf("DropEvents = %+v, %v", dropped, err)
	}
}
