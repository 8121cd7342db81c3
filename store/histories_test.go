package store_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/domain"
	"github.com/pacer-dev/pacer/store"
)

// Histories reads the histories of several sources over one connection
// (the dashboard's table, issue 20 item 4): each is what History answers,
// whether in a tail only, in blocks too, or absent.
func testHistories(t *testing.T, s *store.Store) {
	var recs []domain.PollRecord
	for i := range 70 { // a: 70 records, past the tail into blocks
		recs = append(recs, record("a", base().Add(time.Duration(i)*time.Second), domain.OutcomeSuccess))
	}
	for i := range 3 {
		recs = append(recs, record("b", base().Add(time.Duration(i)*time.Minute), domain.OutcomeFailure))
	}
	for i := range 10 {
		save(t, s, nil, recs[i*len(recs)/10:(i+1)*len(recs)/10], 100)
	}
	names := []string{"b", "a", "never", "a2"}
	got, err := s.Histories(t.Context(), names, 40)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		want, err := s.History(t.Context(), name, 40)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got[name], want) {
			t.Errorf("Histories: %s has %d records, History %d; want the same", name, len(got[name]), len(want))
		}
	}
	if len(got["a"]) != 40 || len(got["b"]) != 3 || len(got["never"]) != 0 {
		t.Errorf("Histories: a %d, b %d, never %d records; want 40, 3, 0", len(got["a"]), len(got["b"]), len(got["never"]))
	}
}
