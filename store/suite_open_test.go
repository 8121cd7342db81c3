package store_test

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/domain"
	"github.com/pacer-dev/pacer/store"
)

// The tests of the suite that open a database more than once, or look at
// how the history is stored.

func testReopenKeepsData(t *testing.T, dsn string) {
	s, err := store.Open(dsn, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	full := fullState("a")
	before := time.Now()
	rec := record("a", base(), domain.OutcomeSuccess)
	rec.Changed, rec.Digest = true, full.Digest
	save(t, s, []domain.SourceState{full}, []domain.PollRecord{rec}, 10)
	after := time.Now()
	c := &domain.Command{Source: "a", Action: "pause"}
	if err := s.EnqueueCommand(t.Context(), c); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openAt(t, dsn, store.Options{})
	checkState(t, mustGet(t, s, "a"), full, before, after)
	// The validators, digest and change counters of the state (checkState)
	// and of the record survive the restart.
	if h, err := s.History(t.Context(), "a", 10); err != nil || len(h) != 1 || !h[0].Changed || h[0].Digest != full.Digest {
		t.Errorf("History after reopen = %+v, %v; want 1 changed record with digest %s", h, err, full.Digest)
	}
	if p, err := s.PendingCommands(t.Context()); err != nil || len(p) != 1 || p[0].ID != c.ID {
		t.Errorf("PendingCommands after reopen = %+v, %v", p, err)
	}
}

// testTwoStores: a second Store on a database whose first Store is still
// open (never closed) sees all that the first committed, and the other way
// round.
func testTwoStores(t *testing.T, dsn string) {
	s1 := openAt(t, dsn, store.Options{})
	save(t, s1, []domain.SourceState{fullState("one")}, nil, 10)
	s2 := openAt(t, dsn, store.Options{})
	mustGet(t, s2, "one")
	save(t, s2, []domain.SourceState{fullState("two")}, nil, 10)
	mustGet(t, s1, "two")
}

// testCrashedWriter: what a process committed survives its kill -9.
func testCrashedWriter(t *testing.T, dsn string, afterCrash func(*testing.T, string)) {
	kill9(t, startChild(t, "save", dsn))
	if afterCrash != nil {
		afterCrash(t, dsn)
	}
	s := openAt(t, dsn, store.Options{})
	if st := mustGet(t, s, "crash"); st.PollsTotal != 41 || st.NextRunAt == nil {
		t.Errorf("state after the crash = %s", fmtState(st))
	}
	if h, err := s.History(t.Context(), "crash", 10); err != nil || len(h) != 1 {
		t.Errorf("history after the crash = %d, %v; want 1", len(h), err)
	}
}

// testSchemaVersionRefused: a store written by another schema version is
// refused before anything in it is touched, with an error that names both
// versions and the store.
func testSchemaVersionRefused(t *testing.T, dsn string, shown func(string) string) {
	s, err := store.Open(dsn, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := store.GormDB(s).Exec("UPDATE pacer_meta SET value = '1' WHERE key = 'schema_version'").Error; err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2, err := store.Open(dsn, store.Options{})
	if err == nil {
		_ = s2.Close()
		t.Fatal("Open accepted a store with schema version 1")
	}
	msg := err.Error()
	if !strings.Contains(msg, "schema version 1") || !strings.Contains(msg, "version 3") || !strings.Contains(msg, shown(dsn)) {
		t.Errorf("error %q does not name both versions and the store", msg)
	}
}

// testHistoryStoredBound: one record per commit, keep 100: the store holds
// between keep and keep + blockSize records of the source, in a handful of
// blocks, however many were saved.
func testHistoryStoredBound(t *testing.T, s *store.Store) {
	ctx := context.Background()
	const keep = 100
	block := int(store.BlockSize(keep))
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for seq := int64(1); seq <= 1000; seq++ {
		r := domain.PollRecord{Source: "a", Seq: seq, StartedAt: at.Add(time.Duration(seq) * time.Second), Outcome: domain.OutcomeSuccess}
		if err := s.SaveBatch(ctx, []domain.SourceState{{Name: "a", HistorySeq: seq}}, []domain.PollRecord{r}, keep); err != nil {
			t.Fatal(err)
		}
		if seq%97 != 0 && seq != 1000 {
			continue
		}
		stored, blocks, err := store.StoredRecords(s, "a")
		if err != nil {
			t.Fatal(err)
		}
		if min(seq, keep) > int64(stored) || stored > keep+block {
			t.Fatalf("after %d records: %d stored; want between %d and %d", seq, stored, min(seq, keep), keep+block)
		}
		if blocks > keep/block+1 {
			t.Fatalf("after %d records: %d blocks", seq, blocks)
		}
	}
}

// testHistoryReplacedSeqs: records saved again with old numbers land in a
// newer block than the records they replace; History still returns the
// newest n by number.
func testHistoryReplacedSeqs(t *testing.T, s *store.Store, checkStored func(*testing.T, *store.Store)) {
	ctx := context.Background()
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	rec := func(seq int64) domain.PollRecord {
		return domain.PollRecord{Source: "a", Seq: seq, StartedAt: at.Add(time.Duration(seq) * time.Second), Outcome: domain.OutcomeSuccess}
	}
	const keep = 100 // blocks of 25
	for seq := int64(1); seq <= 76; seq++ {
		if err := s.SaveBatch(ctx, nil, []domain.PollRecord{rec(seq)}, keep); err != nil {
			t.Fatal(err)
		}
	}
	var again []domain.PollRecord
	for seq := int64(1); seq <= 40; seq++ {
		again = append(again, rec(seq))
	}
	if err := s.SaveBatch(ctx, nil, again, keep); err != nil {
		t.Fatal(err)
	}
	h, err := s.History(ctx, "a", 5)
	if err != nil {
		t.Fatal(err)
	}
	var got []int64
	for _, r := range h {
		got = append(got, r.Seq)
	}
	if want := []int64{76, 75, 74, 73, 72}; !reflect.DeepEqual(got, want) {
		t.Errorf("History(5) seqs = %v, want %v", got, want)
	}
	if checkStored != nil {
		checkStored(t, s)
	}
}
