package store_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/domain"
	"github.com/pacer-dev/pacer/store"
)

// backend is what runStoreSuite needs of a database, in the manner of
// river's riverdrivertest: every test that holds for any backend runs
// through it, each on a database of its own; what only one backend has
// (SQLite's pragmas, WAL, read-only files) is tested apart.
type backend struct {
	// newDSN returns the DSN of a new, empty database (nothing is created
	// until a store opens it).
	newDSN func(t *testing.T) string
	// shown is how the store's errors name the database of dsn (never with
	// a password).
	shown func(dsn string) string
	// failRecordsOf makes every insert of a record of source fail from now
	// on (a trigger, in the backend's own SQL), so that tests can break a
	// batch half-way through.
	failRecordsOf func(t *testing.T, s *store.Store, source string)
	// checkStored, if not nil, checks what only this backend can see of
	// the stored history (SQLite: every packed history is a BLOB).
	checkStored func(t *testing.T, s *store.Store)
	// afterCrash, if not nil, checks what a writer killed right after its
	// commit left behind, before the database is opened again (SQLite: the
	// commit is in the WAL).
	afterCrash func(t *testing.T, dsn string)
}

// open opens a store on a new database, closed when the test ends.
func (b backend) open(t *testing.T) *store.Store {
	t.Helper()
	return openAt(t, b.newDSN(t), store.Options{})
}

// runStoreSuite checks the behaviour every backend must have.
func runStoreSuite(t *testing.T, b backend) {
	open := b.open
	t.Run("RoundTrip", func(t *testing.T) { testRoundTrip(t, open(t)) })
	t.Run("UpsertOverwrites", func(t *testing.T) { testUpsertOverwrites(t, open(t)) })
	t.Run("LoadStatesReturnsAll", func(t *testing.T) { testLoadStates(t, open(t)) })
	t.Run("GetStateMissing", func(t *testing.T) { testGetStateMissing(t, open(t)) })
	t.Run("DuplicateNamesLastWins", func(t *testing.T) { testDuplicateNames(t, open(t)) })
	t.Run("SaveBatchAtomic", func(t *testing.T) { testSaveBatchAtomic(t, open(t), b.failRecordsOf) })
	t.Run("SaveBatchCancelled", func(t *testing.T) { testSaveBatchCancelled(t, open(t)) })
	t.Run("SaveBatchInvalid", func(t *testing.T) { testSaveBatchInvalid(t, open(t)) })
	t.Run("HistoryTrim", func(t *testing.T) { testHistoryTrim(t, open(t)) })
	t.Run("HistoryBlocks", func(t *testing.T) { testHistoryBlocks(t, open(t)) })
	t.Run("HistoryOrderAndLimit", func(t *testing.T) { testHistoryOrder(t, open(t)) })
	t.Run("HistoryGivenSeq", func(t *testing.T) { testHistoryGivenSeq(t, open(t)) })
	t.Run("HistoryStoredBound", func(t *testing.T) { testHistoryStoredBound(t, open(t)) })
	t.Run("HistoryReplacedSeqs", func(t *testing.T) { testHistoryReplacedSeqs(t, open(t), b.checkStored) })
	t.Run("Histories", func(t *testing.T) { testHistories(t, open(t)) })
	t.Run("HistoryCondition", func(t *testing.T) { testHistoryCondition(t, open(t)) })
	t.Run("Commands", func(t *testing.T) { testCommands(t, open(t)) })
	t.Run("PendingCommandsBounded", func(t *testing.T) { testPendingBounded(t, open(t)) })
	t.Run("CommandClaimOrExpire", func(t *testing.T) { testClaimOrExpire(t, b.newDSN(t)) })
	t.Run("Concurrent", func(t *testing.T) { testConcurrent(t, open(t)) })
	t.Run("Writable", func(t *testing.T) { testWritable(t, open(t)) })
	t.Run("ReopenKeepsData", func(t *testing.T) { testReopenKeepsData(t, b.newDSN(t)) })
	t.Run("TwoStoresOneDatabase", func(t *testing.T) { testTwoStores(t, b.newDSN(t)) })
	t.Run("CrashedWriter", func(t *testing.T) { testCrashedWriter(t, b.newDSN(t), b.afterCrash) })
	t.Run("EventsWithBatch", func(t *testing.T) { testEventsWithBatch(t, open(t), b.failRecordsOf) })
	t.Run("EventClaimOrder", func(t *testing.T) { testEventClaimOrder(t, open(t)) })
	t.Run("EventRetryAndDrop", func(t *testing.T) { testEventRetryAndDrop(t, open(t)) })
	t.Run("EventClaimersExclusive", func(t *testing.T) { testEventClaimersExclusive(t, b.newDSN(t)) })
	t.Run("EventTrim", func(t *testing.T) { testEventTrim(t, open(t)) })
	t.Run("EventRetryNow", func(t *testing.T) { testEventRetryNow(t, open(t)) })
	t.Run("HostStates", func(t *testing.T) { testHostStates(t, b.newDSN(t)) })
	t.Run("HostEvents", func(t *testing.T) { testHostEvents(t, open(t)) })
	t.Run("IncidentColumnAdded", func(t *testing.T) { testIncidentColumnAdded(t, b.newDSN(t)) })
	t.Run("SchemaVersionRefused", func(t *testing.T) { testSchemaVersionRefused(t, b.newDSN(t), b.shown) })
}

// base is deliberately not in UTC and carries nanoseconds, to check that the
// store hands back UTC at microsecond precision.
func base() time.Time {
	return time.Date(2026, 11, 30, 10, 5, 0, 123456789, time.FixedZone("UTC+5:30", 5*3600+1800))
}

func ptr[T any](v T) *T { return &v }

// stored is what the store gives back for t.
func stored(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

func storedPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	return ptr(stored(*t))
}

// fullState has every field set to a non-zero value.
func fullState(name string) domain.SourceState {
	b := base()
	return domain.SourceState{
		Name:                 name,
		Fingerprint:          "3f2a9c",
		ConsecutiveFailures:  7,
		ConsecutiveThrottles: 2,
		NextRunAt:            ptr(b.Add(time.Minute)),
		LastRunAt:            ptr(b),
		LastSuccessAt:        ptr(b.Add(-time.Hour)),
		LastError:            "GET https://example.com/status: 502 Bad Gateway",
		LastErrorAt:          ptr(b.Add(-time.Minute)),
		LastOutcome:          domain.OutcomeFailure,
		BreakerState:         "open",
		BreakerUntil:         ptr(b.Add(30 * time.Second)),
		ErrorReason:          "10 consecutive failures; last: boom",
		Paused:               true,
		PausedReason:         "maintenance",
		PollsTotal:           120,
		FailuresTotal:        7,
		ThrottledTotal:       3,
		HistorySeq:           12,
		UpdatedAt:            b.Add(-24 * time.Hour), // replaced by the commit time
		ETag:                 `W/"5f3a-9c"`,
		LastModified:         "Tue, 01 Dec 2026 10:00:00 GMT",
		Digest:               "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
		LastChangedAt:        ptr(b.Add(-2 * time.Hour)),
		ChangesTotal:         41,
		IncidentOpen:         true,
		RemindAt:             ptr(b.Add(-30 * time.Second)),
		HeldEvent:            "recovered",
	}
}

// wantState is st as stored, with UpdatedAt taken from got (checked apart).
func wantState(st domain.SourceState, got domain.SourceState) domain.SourceState {
	st.NextRunAt = storedPtr(st.NextRunAt)
	st.LastRunAt = storedPtr(st.LastRunAt)
	st.LastSuccessAt = storedPtr(st.LastSuccessAt)
	st.BreakerUntil = storedPtr(st.BreakerUntil)
	st.LastErrorAt = storedPtr(st.LastErrorAt)
	st.LastChangedAt = storedPtr(st.LastChangedAt)
	st.RemindAt = storedPtr(st.RemindAt)
	st.UpdatedAt = got.UpdatedAt
	return st
}

func checkUTC(t *testing.T, what string, tm *time.Time) {
	t.Helper()
	if tm != nil && !tm.IsZero() && tm.Location() != time.UTC {
		t.Errorf("%s: location %v, want UTC", what, tm.Location())
	}
}

func checkState(t *testing.T, got, in domain.SourceState, before, after time.Time) {
	t.Helper()
	for what, tm := range map[string]*time.Time{
		"NextRunAt": got.NextRunAt, "LastRunAt": got.LastRunAt, "LastSuccessAt": got.LastSuccessAt,
		"BreakerUntil": got.BreakerUntil, "UpdatedAt": &got.UpdatedAt, "LastErrorAt": got.LastErrorAt,
		"LastChangedAt": got.LastChangedAt, "RemindAt": got.RemindAt,
	} {
		checkUTC(t, what, tm)
	}
	if got.UpdatedAt.Before(before.Truncate(time.Microsecond)) || got.UpdatedAt.After(after) {
		t.Errorf("UpdatedAt = %v, want the commit time, within [%v, %v]", got.UpdatedAt, before, after)
	}
	if want := wantState(in, got); !reflect.DeepEqual(got, want) {
		t.Errorf("state round trip:\n got  %s\n want %s", fmtState(got), fmtState(want))
	}
}

func fmtState(st domain.SourceState) string {
	f := func(t *time.Time) string {
		if t == nil {
			return "nil"
		}
		return t.Format(time.RFC3339Nano) + "(" + t.Location().String() + ")"
	}
	return fmt.Sprintf("%+v next=%s last=%s success=%s until=%s", st,
		f(st.NextRunAt), f(st.LastRunAt), f(st.LastSuccessAt), f(st.BreakerUntil))
}

func save(t *testing.T, s *store.Store, states []domain.SourceState, records []domain.PollRecord, keep int) {
	t.Helper()
	if err := s.SaveBatch(t.Context(), states, records, keep); err != nil {
		t.Fatalf("SaveBatch: %v", err)
	}
}

func mustGet(t *testing.T, s *store.Store, name string) domain.SourceState {
	t.Helper()
	st, ok, err := s.GetState(t.Context(), name)
	if err != nil || !ok {
		t.Fatalf("GetState(%q) = ok %v, err %v; want the state", name, ok, err)
	}
	return st
}

func testRoundTrip(t *testing.T, s *store.Store) {
	full := fullState("full")
	empty := domain.SourceState{Name: "never-polled"} // every time nil, every field zero
	before := time.Now()
	save(t, s, []domain.SourceState{full, empty}, nil, 10)
	after := time.Now()

	checkState(t, mustGet(t, s, "full"), full, before, after)
	checkState(t, mustGet(t, s, "never-polled"), empty, before, after)

	// SaveBatch does not modify its arguments.
	if !reflect.DeepEqual(full, fullState("full")) {
		t.Errorf("SaveBatch modified its argument: %s", fmtState(full))
	}
}

func testUpsertOverwrites(t *testing.T, s *store.Store) {
	save(t, s, []domain.SourceState{fullState("a"), fullState("b")}, nil, 10)

	// Every column is written, zero values and nil times included.
	a2 := domain.SourceState{
		Name:         "a",
		NextRunAt:    ptr(base().Add(time.Hour)),
		LastOutcome:  domain.OutcomeSuccess,
		BreakerState: "closed",
		PollsTotal:   121,
	}
	before := time.Now()
	save(t, s, []domain.SourceState{a2}, nil, 10)
	after := time.Now()
	checkState(t, mustGet(t, s, "a"), a2, before, after)

	// The other source is untouched.
	b := mustGet(t, s, "b")
	if want := wantState(fullState("b"), b); !reflect.DeepEqual(b, want) {
		t.Errorf("b changed:\n got  %s\n want %s", fmtState(b), fmtState(want))
	}
}

func testLoadStates(t *testing.T, s *store.Store) {
	states, err := s.LoadStates(t.Context())
	if err != nil || len(states) != 0 || states == nil {
		t.Fatalf("LoadStates on an empty store = %v (nil: %v), %v; want an empty slice", states, states == nil, err)
	}
	// More than one upsert chunk in one batch, then a second batch that
	// updates some and adds others.
	const n = 1234
	var batch []domain.SourceState
	for i := range n {
		st := fullState(fmt.Sprintf("src-%05d", i))
		st.PollsTotal = int64(i)
		batch = append(batch, st)
	}
	save(t, s, batch, nil, 10)
	var batch2 []domain.SourceState
	for i := n - 10; i < n+5; i++ {
		st := fullState(fmt.Sprintf("src-%05d", i))
		st.PollsTotal = int64(i) * 1000
		batch2 = append(batch2, st)
	}
	save(t, s, batch2, nil, 10)

	states, err = s.LoadStates(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(states) != n+5 {
		t.Fatalf("LoadStates returned %d states, want %d", len(states), n+5)
	}
	// In the order of the table, which is not the order of the names.
	slices.SortFunc(states, func(a, b domain.SourceState) int { return strings.Compare(a.Name, b.Name) })
	for i, st := range states {
		want := int64(i)
		if i >= n-10 {
			want = int64(i) * 1000
		}
		if name := fmt.Sprintf("src-%05d", i); st.Name != name || st.PollsTotal != want {
			t.Fatalf("states[%d] = %s/%d, want %s/%d ", i, st.Name, st.PollsTotal, name, want)
		}
		checkUTC(t, "NextRunAt", st.NextRunAt)
	}
}

func testGetStateMissing(t *testing.T, s *store.Store) {
	save(t, s, []domain.SourceState{fullState("present")}, nil, 10)
	st, ok, err := s.GetState(t.Context(), "absent")
	if err != nil || ok || !reflect.DeepEqual(st, domain.SourceState{}) {
		t.Fatalf("GetState(absent) = %+v, %v, %v; want zero, false, nil", st, ok, err)
	}
}

func testDuplicateNames(t *testing.T, s *store.Store) {
	first, last := fullState("dup"), fullState("dup")
	first.PollsTotal, last.PollsTotal = 1, 2
	save(t, s, []domain.SourceState{first, fullState("other"), last}, nil, 10)
	if got := mustGet(t, s, "dup"); got.PollsTotal != 2 {
		t.Fatalf("PollsTotal = %d, want 2 (the last occurrence wins)", got.PollsTotal)
	}
}

func record(src string, started time.Time, outcome string) domain.PollRecord {
	return domain.PollRecord{Source: src, StartedAt: started, DurationMs: 12, Outcome: outcome, Bytes: 42}
}

// checkNothingOf checks that the failed batch left a and c as they were and
// created no b.
func checkNothingOf(t *testing.T, s *store.Store, a domain.SourceState) {
	t.Helper()
	got := mustGet(t, s, "a")
	if want := wantState(a, got); !reflect.DeepEqual(got, want) {
		t.Errorf("a changed by a failed batch:\n got  %s\n want %s", fmtState(got), fmtState(want))
	}
	if _, ok, err := s.GetState(t.Context(), "b"); err != nil || ok {
		t.Errorf("GetState(b) = %v, %v; a failed batch must create nothing", ok, err)
	}
	hist, err := s.History(t.Context(), "a", 100)
	if err != nil || len(hist) != 1 {
		t.Errorf("History(a) = %d records, %v; want the 1 record from before the failed batch", len(hist), err)
	}
}

func testSaveBatchAtomic(t *testing.T, s *store.Store, failRecordsOf func(*testing.T, *store.Store, string)) {
	a := fullState("a")
	save(t, s, []domain.SourceState{a}, []domain.PollRecord{record("a", base(), domain.OutcomeSuccess)}, 10)
	hist, err := s.History(t.Context(), "a", 10)
	if err != nil || len(hist) != 1 || hist[0].Seq != 1 {
		t.Fatalf("History = %+v, %v; want one record with Seq 1", hist, err)
	}

	// The states are written first; a record then fails. Nothing of the
	// batch may remain.
	failRecordsOf(t, s, "boom")
	a2 := a
	a2.PollsTotal = 999
	err = s.SaveBatch(t.Context(), []domain.SourceState{a2, fullState("b")},
		[]domain.PollRecord{record("a", base().Add(time.Minute), domain.OutcomeFailure), record("boom", base(), domain.OutcomeSuccess)}, 10)
	if err == nil {
		t.Fatal("SaveBatch with a failing record insert succeeded")
	}
	t.Logf("expected error: %v", err)
	checkNothingOf(t, s, a)
	// The store is still usable, and numbering goes on from the stored
	// records, not from the rolled-back ones.
	save(t, s, nil, []domain.PollRecord{record("a", base().Add(2*time.Minute), domain.OutcomeSuccess)}, 10)
	if hist, err := s.History(t.Context(), "a", 10); err != nil || len(hist) != 2 || hist[0].Seq != 2 {
		t.Errorf("History after a rolled-back batch = %+v, %v; want 2 records, the newest with Seq 2", hist, err)
	}
}

func testSaveBatchCancelled(t *testing.T, s *store.Store) {
	a := fullState("a")
	save(t, s, []domain.SourceState{a}, []domain.PollRecord{record("a", base(), domain.OutcomeSuccess)}, 10)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	a2 := a
	a2.PollsTotal = 999
	err := s.SaveBatch(ctx, []domain.SourceState{a2, fullState("b")},
		[]domain.PollRecord{record("a", base().Add(time.Minute), domain.OutcomeFailure)}, 10)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("SaveBatch with a cancelled context = %v; want context.Canceled", err)
	}
	checkNothingOf(t, s, a)
}

func testSaveBatchInvalid(t *testing.T, s *store.Store) {
	if err := s.SaveBatch(t.Context(), []domain.SourceState{fullState("ok"), {}}, nil, 10); err == nil {
		t.Error("SaveBatch accepted a state without a name")
	}
	if err := s.SaveBatch(t.Context(), nil, []domain.PollRecord{record("", base(), domain.OutcomeSuccess)}, 10); err == nil {
		t.Error("SaveBatch accepted a record without a source")
	}
	if _, ok, err := s.GetState(t.Context(), "ok"); err != nil || ok {
		t.Errorf("GetState(ok) = %v, %v; an invalid batch must write nothing", ok, err)
	}
	if err := s.SaveBatch(t.Context(), nil, nil, 10); err != nil {
		t.Errorf("an empty batch: %v", err)
	}
}

func startedAts(recs []domain.PollRecord) []time.Time {
	var out []time.Time
	for _, r := range recs {
		out = append(out, r.StartedAt)
	}
	return out
}

func testHistoryTrim(t *testing.T, s *store.Store) {
	// c gets 5 records with trimming off, and no record later: it is not
	// trimmed by batches that do not concern it.
	var cRecs []domain.PollRecord
	for i := range 5 {
		cRecs = append(cRecs, record("c", base().Add(time.Duration(i)*time.Second), domain.OutcomeSuccess))
	}
	save(t, s, nil, cRecs, 0)

	// Ten batches of one record of a each (and of b every other one), keep 3.
	for i := range 10 {
		st := fullState("a")
		st.PollsTotal = int64(i + 1)
		recs := []domain.PollRecord{record("a", base().Add(time.Duration(i)*time.Minute), domain.OutcomeSuccess)}
		if i%2 == 0 {
			recs = append(recs, record("b", base().Add(time.Duration(i)*time.Minute), domain.OutcomeFailure))
		}
		save(t, s, []domain.SourceState{st}, recs, 3)
		hist, err := s.History(t.Context(), "a", 100)
		if err != nil {
			t.Fatal(err)
		}
		if want := min(i+1, 3); len(hist) != want {
			t.Fatalf("after batch %d: %d records of a, want %d", i, len(hist), want)
		}
	}
	hist, err := s.History(t.Context(), "a", 100)
	if err != nil {
		t.Fatal(err)
	}
	var want []time.Time
	for i := 9; i >= 7; i-- {
		want = append(want, stored(base().Add(time.Duration(i)*time.Minute)))
	}
	if got := startedAts(hist); !reflect.DeepEqual(got, want) {
		t.Errorf("history of a = %v, want the newest 3, newest first: %v", got, want)
	}
	if hb, err := s.History(t.Context(), "b", 100); err != nil || len(hb) != 3 {
		t.Errorf("history of b: %d records, %v; want 3", len(hb), err)
	}
	if hc, err := s.History(t.Context(), "c", 100); err != nil || len(hc) != 5 {
		t.Errorf("history of c: %d records, %v; want its 5 (c got no record since)", len(hc), err)
	}

	// Newest means last saved, whatever the start times: with equal ones,
	// the last inserted records are the ones kept.
	same := base().Add(time.Hour)
	var tie []domain.PollRecord
	for i := range 4 {
		r := record("t", same, domain.OutcomeSuccess)
		r.Bytes = int64(i)
		tie = append(tie, r)
	}
	save(t, s, nil, tie, 2)
	ht, err := s.History(t.Context(), "t", 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(ht) != 2 || ht[0].Bytes != 3 || ht[1].Bytes != 2 || ht[0].Seq != 4 || ht[1].Seq != 3 {
		t.Errorf("tied history = %+v; want records 3 then 2", ht)
	}

	// A batch with more records of one source than keep.
	var many []domain.PollRecord
	for i := range 10 {
		many = append(many, record("m", base().Add(time.Duration(i)*time.Second), domain.OutcomeSuccess))
	}
	save(t, s, nil, many, 3)
	if hm, err := s.History(t.Context(), "m", 100); err != nil || len(hm) != 3 ||
		!hm[0].StartedAt.Equal(stored(base().Add(9*time.Second))) {
		t.Errorf("history of m = %v, %v; want the newest 3", startedAts(hm), err)
	}
}

func testHistoryOrder(t *testing.T, s *store.Store) {
	full := domain.PollRecord{
		Source: "a", StartedAt: base().Add(3 * time.Minute), DurationMs: 1234, Outcome: domain.OutcomeFailure,
		Error: "GET https://example.com/status: 502 Bad Gateway", StatusCode: ptr(502), ExitCode: ptr(3), Bytes: 10 << 20,
	}
	// Start times out of order on purpose, with another source in between:
	// the order is the order of saving.
	recs := []domain.PollRecord{
		record("a", base().Add(1*time.Minute), domain.OutcomeSuccess),
		full,
		record("other", base().Add(10*time.Minute), domain.OutcomeSuccess),
		record("a", base().Add(5*time.Minute), domain.OutcomeThrottled),
		record("a", base(), domain.OutcomeInterrupted),
		record("a", base().Add(2*time.Minute), domain.OutcomeSuccess),
	}
	save(t, s, nil, recs, 0)

	got, err := s.History(t.Context(), "a", 3)
	if err != nil {
		t.Fatal(err)
	}
	want := []time.Time{stored(base().Add(2 * time.Minute)), stored(base()), stored(base().Add(5 * time.Minute))}
	if !reflect.DeepEqual(startedAts(got), want) {
		t.Fatalf("History(a, 3) = %v, want %v", startedAts(got), want)
	}
	all, err := s.History(t.Context(), "a", 100)
	if err != nil || len(all) != 5 {
		t.Fatalf("History(a, 100) = %d records, %v; want all 5", len(all), err)
	}
	// The records of a commit are packed side by side: a's after other's
	// must neither have taken other's bytes nor overwritten them.
	if want := stored(base().Add(1 * time.Minute)); !all[4].StartedAt.Equal(want) {
		t.Errorf("a's oldest record started at %v, want %v", all[4].StartedAt, want)
	}
	if o, err := s.History(t.Context(), "other", 100); err != nil || len(o) != 1 ||
		!o[0].StartedAt.Equal(stored(base().Add(10*time.Minute))) || o[0].Outcome != domain.OutcomeSuccess {
		t.Fatalf("History(other) = %+v, %v; want its one record", o, err)
	}
	for i, r := range all {
		if r.Seq != int64(5-i) {
			t.Errorf("record %d has Seq %d, want %d", i, r.Seq, 5-i)
		}
	}
	r := all[3]
	checkUTC(t, "StartedAt", &r.StartedAt)
	full.Seq, full.StartedAt = 2, stored(full.StartedAt)
	if !reflect.DeepEqual(r, full) {
		t.Errorf("record round trip:\n got  %+v\n want %+v", r, full)
	}
	if got[0].StatusCode != nil || got[0].ExitCode != nil {
		t.Errorf("nil codes came back as %v, %v", got[0].StatusCode, got[0].ExitCode)
	}
	if none, err := s.History(t.Context(), "a", 0); err != nil || len(none) != 0 {
		t.Errorf("History(a, 0) = %d records, %v; want none", len(none), err)
	}
	if unknown, err := s.History(t.Context(), "unknown", 10); err != nil || unknown == nil || len(unknown) != 0 {
		t.Errorf("History(unknown) = %v, %v; want an empty, non-nil slice", unknown, err)
	}

	// Times in any zone come back as the same instant, in UTC.
	east := time.Date(2026, 1, 1, 15, 30, 0, 0, time.FixedZone("E", 5*3600+1800))
	west := time.Date(2026, 1, 1, 4, 0, 0, 0, time.FixedZone("W", -7*3600))
	save(t, s, nil, []domain.PollRecord{record("z", west, domain.OutcomeSuccess), record("z", east, domain.OutcomeSuccess)}, 1)
	hz, err := s.History(t.Context(), "z", 10)
	if err != nil || len(hz) != 1 || !hz[0].StartedAt.Equal(east) || hz[0].StartedAt.Location() != time.UTC {
		t.Errorf("History(z) = %v, %v; want only %v (the last saved)", startedAts(hz), err, east.UTC())
	}
}

func testCommands(t *testing.T, s *store.Store) {
	ctx := t.Context()
	pending, err := s.PendingCommands(ctx)
	if err != nil || pending == nil || len(pending) != 0 {
		t.Fatalf("PendingCommands on an empty store = %v, %v; want an empty slice", pending, err)
	}
	before := time.Now()
	cmds := []*domain.Command{
		{Source: "a", Action: "pause", Reason: "maintenance"},
		{Source: "b", Action: "trigger"},
		{Source: "c", Action: "reset"},
	}
	for _, c := range cmds {
		if err := s.EnqueueCommand(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	after := time.Now()
	for i, c := range cmds {
		if c.ID == 0 || (i > 0 && c.ID <= cmds[i-1].ID) {
			t.Errorf("command %d has ID %d; want increasing IDs", i, c.ID)
		}
		checkUTC(t, "CreatedAt", &c.CreatedAt)
		if c.CreatedAt.Before(before.Truncate(time.Microsecond)) || c.CreatedAt.After(after) {
			t.Errorf("CreatedAt = %v, want now", c.CreatedAt)
		}
	}

	for _, c := range cmds {
		if c.Status != domain.CommandPending {
			t.Errorf("enqueued command %d: status %q, want pending", c.ID, c.Status)
		}
	}
	pending, err = s.PendingCommands(ctx)
	if err != nil || len(pending) != 3 {
		t.Fatalf("PendingCommands = %v, %v; want 3", pending, err)
	}
	for i := range pending {
		if !reflect.DeepEqual(pending[i], *cmds[i]) {
			t.Errorf("pending[%d] = %+v, want %+v (oldest first)", i, pending[i], *cmds[i])
		}
	}

	if err := s.CompleteCommand(ctx, cmds[1].ID, "source b is paused", "conflict"); err != nil {
		t.Fatal(err)
	}
	if err := s.CompleteCommand(ctx, cmds[0].ID, "", ""); err != nil {
		t.Fatal(err)
	}
	pending, err = s.PendingCommands(ctx)
	if err != nil || len(pending) != 1 || pending[0].ID != cmds[2].ID {
		t.Fatalf("PendingCommands after completing two = %+v, %v; want only command 3", pending, err)
	}

	got, err := s.GetCommand(ctx, cmds[1].ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.DoneAt == nil || got.Result != "source b is paused" || got.Code != "conflict" || got.Source != "b" || got.Action != "trigger" ||
		got.Status != domain.CommandDone {
		t.Errorf("completed command = %+v", got)
	}
	checkUTC(t, "DoneAt", got.DoneAt)

	// Completing again keeps the first result.
	if err := s.CompleteCommand(ctx, cmds[1].ID, "other", "not_found"); err != nil {
		t.Errorf("completing a done command: %v", err)
	}
	if again, err := s.GetCommand(ctx, cmds[1].ID); err != nil || !reflect.DeepEqual(again, got) {
		t.Errorf("command after a second completion = %+v, %v; want %+v", again, err, got)
	}

	if err := s.CompleteCommand(ctx, 999999, "", ""); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("CompleteCommand(unknown) = %v, want ErrNotFound", err)
	}
	if _, err := s.GetCommand(ctx, 999999); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetCommand(unknown) = %v, want ErrNotFound", err)
	}
	if err := s.EnqueueCommand(ctx, nil); err == nil {
		t.Error("EnqueueCommand(nil) succeeded")
	}
}

func testPendingBounded(t *testing.T, s *store.Store) {
	var first uint64
	for i := range store.MaxPendingCommands + 5 {
		c := &domain.Command{Source: fmt.Sprint("s", i), Action: "trigger"}
		if err := s.EnqueueCommand(t.Context(), c); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = c.ID
		}
	}
	pending, err := s.PendingCommands(t.Context())
	if err != nil || len(pending) != store.MaxPendingCommands || pending[0].ID != first {
		t.Fatalf("PendingCommands = %d commands, %v; want the oldest %d", len(pending), err, store.MaxPendingCommands)
	}
}

func testWritable(t *testing.T, s *store.Store) {
	for range 2 {
		if err := s.Writable(t.Context()); err != nil {
			t.Fatalf("Writable: %v", err)
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := s.Writable(ctx); err == nil {
		t.Error("Writable with a cancelled context succeeded")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Writable(t.Context()); err == nil {
		t.Error("Writable on a closed store succeeded")
	}
}

// testConcurrent uses one store from several goroutines at once, as the
// daemon does (flusher, admin API, command loop, watchdog).
func testConcurrent(t *testing.T, s *store.Store) {
	const workers, rounds = 8, 20
	var wg sync.WaitGroup
	errs := make(chan error, workers*rounds)
	for w := range workers {
		wg.Go(func() {
			name := fmt.Sprint("w", w)
			for i := range rounds {
				st := fullState(name)
				st.PollsTotal = int64(i + 1)
				rec := record(name, base().Add(time.Duration(i)*time.Second), domain.OutcomeSuccess)
				if err := s.SaveBatch(t.Context(), []domain.SourceState{st}, []domain.PollRecord{rec}, 5); err != nil {
					errs <- err
				}
				if _, err := s.LoadStates(t.Context()); err != nil {
					errs <- err
				}
				if _, err := s.History(t.Context(), name, 10); err != nil {
					errs <- err
				}
				if err := s.Writable(t.Context()); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for w := range workers {
		name := fmt.Sprint("w", w)
		if st := mustGet(t, s, name); st.PollsTotal != rounds {
			t.Errorf("%s: PollsTotal %d, want %d", name, st.PollsTotal, rounds)
		}
		if h, err := s.History(t.Context(), name, 100); err != nil || len(h) != 5 {
			t.Errorf("%s: %d records, %v; want 5", name, len(h), err)
		}
	}
}

// testHistoryBlocks saves many records of a source, in batches of 1 to 7,
// numbered by the caller or not, across many moves of its tail into blocks,
// and checks after every batch that History returns exactly its newest keep
// records, newest first, each with its own content; a source that gets no
// record meanwhile keeps all of its own.
func testHistoryBlocks(t *testing.T, s *store.Store) {
	save(t, s, nil, []domain.PollRecord{record("quiet", base(), domain.OutcomeSuccess)}, 3)
	for _, keep := range []int{1, 8, 100} {
		name := fmt.Sprintf("k%d", keep)
		var seq int64
		total := 3*keep + 40
		for seq < int64(total) {
			n := int(seq%7) + 1
			var recs []domain.PollRecord
			for range n {
				seq++
				r := record(name, base().Add(time.Duration(seq)*time.Second), domain.OutcomeSuccess)
				r.Bytes = seq
				if seq%3 != 0 {
					r.Seq = seq // the others are numbered by the store
				}
				recs = append(recs, r)
			}
			save(t, s, nil, recs, keep)
			h, err := s.History(t.Context(), name, keep+10)
			if err != nil {
				t.Fatal(err)
			}
			if want := min(int(seq), keep); len(h) != want {
				t.Fatalf("keep %d, after seq %d: %d records, want %d", keep, seq, len(h), want)
			}
			for i, r := range h {
				if want := seq - int64(i); r.Seq != want || r.Bytes != want ||
					!r.StartedAt.Equal(stored(base().Add(time.Duration(want)*time.Second))) {
					t.Fatalf("keep %d, after seq %d: record %d is %+v, want seq %d", keep, seq, i, r, want)
				}
			}
		}
	}
	if h, err := s.History(t.Context(), "quiet", 10); err != nil || len(h) != 1 {
		t.Errorf("history of quiet: %d records, %v; want its 1", len(h), err)
	}
}

// The daemon numbers its records itself (SourceState.HistorySeq): given
// numbers are kept, a record with the number of a stored one replaces it,
// trimming counts from the largest number, and a record without a number
// goes after the newest.
func testHistoryGivenSeq(t *testing.T, s *store.Store) {
	rec := func(seq int64, bytes int64) domain.PollRecord {
		r := record("g", base().Add(time.Duration(seq)*time.Second), domain.OutcomeSuccess)
		r.Seq, r.Bytes = seq, bytes
		return r
	}
	seqs := func() []int64 {
		t.Helper()
		h, err := s.History(t.Context(), "g", 100)
		if err != nil {
			t.Fatal(err)
		}
		var out []int64
		for _, r := range h {
			out = append(out, r.Seq)
		}
		return out
	}
	st := fullState("g")
	st.HistorySeq = 12
	save(t, s, []domain.SourceState{st}, []domain.PollRecord{rec(10, 1), rec(11, 1), rec(12, 1)}, 0)
	if got := mustGet(t, s, "g").HistorySeq; got != 12 {
		t.Errorf("HistorySeq = %d, want 12", got)
	}
	if got, want := seqs(), []int64{12, 11, 10}; !reflect.DeepEqual(got, want) {
		t.Fatalf("seqs = %v, want %v", got, want)
	}
	// Seq 11 again replaces the stored one; nothing is added.
	save(t, s, nil, []domain.PollRecord{rec(11, 99)}, 0)
	h, err := s.History(t.Context(), "g", 100)
	if err != nil || len(h) != 3 || h[1].Bytes != 99 {
		t.Fatalf("after replacing seq 11: %+v, %v", h, err)
	}
	// Numbers given up to 20 with keep 4: seqs 17-20 remain.
	var more []domain.PollRecord
	for q := int64(13); q <= 20; q++ {
		more = append(more, rec(q, 1))
	}
	save(t, s, nil, more, 4)
	if got, want := seqs(), []int64{20, 19, 18, 17}; !reflect.DeepEqual(got, want) {
		t.Fatalf("after keep 4: seqs = %v, want %v", got, want)
	}
	// Without a number: after the newest.
	save(t, s, nil, []domain.PollRecord{record("g", base(), domain.OutcomeFailure)}, 0)
	if got := seqs(); got[0] != 21 {
		t.Errorf("a record without a number got %d, want 21", got[0])
	}
}

// testClaimOrExpire: the daemon's claim and the CLI's expiry of a command,
// through two handles on one database, are exclusive: whichever comes
// first wins, the other reports that it lost, and a command that was
// withdrawn is never handed out again. Then both race on many commands:
// each has exactly one winner.
func testClaimOrExpire(t *testing.T, dsn string) {
	ctx := t.Context()
	cliSide, daemon := openAt(t, dsn, store.Options{}), openAt(t, dsn, store.Options{})
	status := func(id uint64) domain.Command {
		t.Helper()
		c, err := cliSide.GetCommand(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	claimed := &domain.Command{Source: "a", Action: "pause"}
	expired := &domain.Command{Source: "b", Action: "trigger"}
	for _, c := range []*domain.Command{claimed, expired} {
		if err := cliSide.EnqueueCommand(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	if ok, err := daemon.ClaimCommand(ctx, claimed.ID); err != nil || !ok {
		t.Fatalf("ClaimCommand(pending) = %v, %v; want true", ok, err)
	}
	if ok, err := cliSide.ExpireCommand(ctx, claimed.ID, "expired"); err != nil || ok {
		t.Errorf("ExpireCommand(claimed) = %v, %v; want false (the daemon has it)", ok, err)
	}
	if ok, err := daemon.ClaimCommand(ctx, claimed.ID); err != nil || ok {
		t.Errorf("second ClaimCommand = %v, %v; want false", ok, err)
	}
	if c := status(claimed.ID); c.Status != domain.CommandApplying || c.DoneAt != nil {
		t.Errorf("claimed command = %+v; want applying, not done", c)
	}
	// Claimed and not completed: what a daemon killed in between leaves.
	if o, err := cliSide.OrphanedCommands(ctx); err != nil || len(o) != 1 || o[0].ID != claimed.ID {
		t.Errorf("OrphanedCommands = %+v, %v; want the claimed command only", o, err)
	}
	if err := daemon.CompleteCommand(ctx, claimed.ID, "", ""); err != nil {
		t.Fatal(err)
	}
	if c := status(claimed.ID); c.Status != domain.CommandDone || c.DoneAt == nil || c.Result != "" {
		t.Errorf("completed command = %+v; want done, no error", c)
	}

	if ok, err := cliSide.ExpireCommand(ctx, expired.ID, "expired: no answer"); err != nil || !ok {
		t.Fatalf("ExpireCommand(pending) = %v, %v; want true", ok, err)
	}
	if ok, err := daemon.ClaimCommand(ctx, expired.ID); err != nil || ok {
		t.Errorf("ClaimCommand(expired) = %v, %v; want false", ok, err)
	}
	if p, err := daemon.PendingCommands(ctx); err != nil || len(p) != 0 {
		t.Errorf("PendingCommands = %+v, %v; want none (one done, one expired)", p, err)
	}
	if o, err := daemon.OrphanedCommands(ctx); err != nil || len(o) != 0 {
		t.Errorf("OrphanedCommands = %+v, %v; want none (one done, one expired)", o, err)
	}
	if err := daemon.CompleteCommand(ctx, expired.ID, "", ""); err != nil {
		t.Fatal(err)
	}
	if c := status(expired.ID); c.Status != domain.CommandExpired || c.Result != "expired: no answer" || c.DoneAt == nil {
		t.Errorf("expired command after a late completion = %+v; want it still expired", c)
	}

	const n = 40
	ids := make([]uint64, n)
	for i := range ids {
		c := &domain.Command{Source: fmt.Sprint("s", i), Action: "trigger"}
		if err := cliSide.EnqueueCommand(ctx, c); err != nil {
			t.Fatal(err)
		}
		ids[i] = c.ID
	}
	claims, expiries := make([]bool, n), make([]bool, n)
	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	wg.Go(func() {
		for i := range ids {
			ok, err := daemon.ClaimCommand(ctx, ids[i])
			claims[i] = ok
			errs <- err
		}
	})
	wg.Go(func() {
		for i := n - 1; i >= 0; i-- {
			ok, err := cliSide.ExpireCommand(ctx, ids[i], "expired")
			expiries[i] = ok
			errs <- err
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	for i := range ids {
		want := map[bool]string{true: domain.CommandApplying, false: domain.CommandExpired}[claims[i]]
		if claims[i] == expiries[i] || status(ids[i]).Status != want {
			t.Errorf("command %d: claimed %v, expired %v, status %q; want exactly one winner", ids[i], claims[i], expiries[i], status(ids[i]).Status)
		}
	}
}
