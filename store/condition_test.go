package store_test

import (
	"testing"
	"time"

	"github.com/pacer-dev/pacer/domain"
	"github.com/pacer-dev/pacer/store"
)

// testHistoryCondition checks that a record keeps the condition that
// failed its poll (contract 14.5), beside records without one, in both
// dialects.
func testHistoryCondition(t *testing.T, s *store.Store) {
	failed := record("a", base().Add(time.Minute), domain.OutcomeFailure)
	failed.Error = `condition failed: body.json.status == "ok" (body.json.status = "degraded")`
	failed.Condition = `body.json.status == "ok"`
	failed.StatusCode = ptr(200)
	recs := []domain.PollRecord{record("a", base(), domain.OutcomeSuccess), failed, record("a", base().Add(2*time.Minute), domain.OutcomeSuccess)}
	save(t, s, nil, recs, 0)
	got, err := s.History(t.Context(), "a", 10)
	if err != nil || len(got) != 3 {
		t.Fatalf("History = %d records, %v; want 3", len(got), err)
	}
	if got[1].Condition != failed.Condition || got[1].Error != failed.Error || got[0].Condition != "" || got[2].Condition != "" {
		t.Fatalf("History conditions = %q, %q, %q; want \"\", %q, \"\"", got[0].Condition, got[1].Condition, got[2].Condition, failed.Condition)
	}
}
