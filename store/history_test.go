package store

import (
	"context"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func intPtr(v int) *int { return &v }

// Records packed one after the other come back field for field, in order,
// whatever their outcome, codes and sizes.
func TestRecordCodec(t *testing.T) {
	at := time.Date(2026, 11, 30, 12, 0, 0, 123456000, time.UTC)
	recs := []PollRecord{
		{StartedAt: at, DurationMs: 12, Outcome: OutcomeSuccess, StatusCode: intPtr(200), Bytes: 3},
		{StartedAt: at.Add(time.Minute), DurationMs: 30000, Outcome: OutcomeFailure,
			Error: "GET https://example.com/status: 502 Bad Gateway", StatusCode: intPtr(502), Bytes: 10 << 20},
		{StartedAt: at, Outcome: OutcomeThrottled, Error: "429 Too Many Requests", StatusCode: intPtr(429)},
		{StartedAt: at, Outcome: OutcomeInterrupted, ExitCode: intPtr(-1)},
		{StartedAt: at, Outcome: "something-new", Error: strings.Repeat("é", 3000), ExitCode: intPtr(255), StatusCode: intPtr(0)},
		{Outcome: OutcomeSuccess, DurationMs: -5, Bytes: -1}, // zero time, odd values
	}
	var blob []byte
	for i := range recs {
		blob = appendRecord(blob, &recs[i], int64(1000+i))
	}
	got, err := decodeBlob("src", blob)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(recs) {
		t.Fatalf("decoded %d records, want %d", len(got), len(recs))
	}
	for i, want := range recs {
		want.Source, want.Seq = "src", int64(1000+i)
		if !want.StartedAt.IsZero() {
			want.StartedAt = want.StartedAt.Truncate(time.Microsecond)
		}
		if !reflect.DeepEqual(got[i], want) {
			t.Errorf("record %d:\n got  %+v\n want %+v", i, got[i], want)
		}
	}

	// A blob cut anywhere but between two records is an error, not a panic
	// nor a short answer.
	var bounds []int
	var b []byte
	for i := range recs {
		b = appendRecord(b, &recs[i], int64(i))
		bounds = append(bounds, len(b))
	}
	for cut := 1; cut < len(b); cut++ {
		_, err := decodeBlob("src", b[:cut])
		atBound := false
		for _, x := range bounds {
			atBound = atBound || x == cut
		}
		if atBound != (err == nil) {
			t.Fatalf("cut at %d (a record boundary: %v): err %v", cut, atBound, err)
		}
		if err != nil && !errors.Is(err, errCorrupt) {
			t.Fatalf("cut at %d: %v is not errCorrupt", cut, err)
		}
	}
}

// FuzzDecodeBlob: no blob makes decoding panic, and a blob that decodes
// re-encodes to records that decode the same.
func FuzzDecodeBlob(f *testing.F) {
	r := PollRecord{StartedAt: time.Unix(1_800_000_000, 0), Outcome: OutcomeFailure, Error: "x", StatusCode: intPtr(500)}
	f.Add(appendRecord(nil, &r, 7))
	f.Add([]byte{})
	f.Add([]byte{0x02, 0x80})
	f.Fuzz(func(t *testing.T, b []byte) {
		recs, err := decodeBlob("s", b)
		if err != nil {
			return
		}
		var again []byte
		for i := range recs {
			again = appendRecord(again, &recs[i], recs[i].Seq)
		}
		back, err := decodeBlob("s", again)
		if err != nil || !reflect.DeepEqual(back, recs) {
			t.Fatalf("re-encoded records decode to %+v, %v; want %+v", back, err, recs)
		}
	})
}

// One record per commit, keep 100: the store holds between keep and
// keep + blockSize records of the source, in a handful of blocks, however
// many were saved.
func TestHistoryStoredBound(t *testing.T) {
	s := openTestStore(t)
	ctx := context.Background()
	const keep = 100
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for seq := int64(1); seq <= 1000; seq++ {
		r := PollRecord{Source: "a", Seq: seq, StartedAt: at.Add(time.Duration(seq) * time.Second), Outcome: OutcomeSuccess}
		if err := s.SaveBatch(ctx, []SourceState{{Name: "a", HistorySeq: seq}}, []PollRecord{r}, keep); err != nil {
			t.Fatal(err)
		}
		if seq%97 != 0 && seq != 1000 {
			continue
		}
		stored, blocks := storedRecords(t, s, "a")
		if min(seq, keep) > int64(stored) || stored > keep+int(blockSize(keep)) {
			t.Fatalf("after %d records: %d stored; want between %d and %d", seq, stored, min(seq, keep), keep+blockSize(keep))
		}
		if blocks > keep/int(blockSize(keep))+1 {
			t.Fatalf("after %d records: %d blocks", seq, blocks)
		}
	}
}

// openTestStore opens a new store in a temporary directory, closed when
// the test ends.
func openTestStore(t *testing.T) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "pacer.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s
}

// storedRecords counts the records of source in its tail and blocks,
// trimmed or not, and its blocks.
func storedRecords(t *testing.T, s *Store, source string) (records, blocks int) {
	t.Helper()
	var tail []byte
	if err := s.sql.QueryRow("SELECT data FROM "+tableTail+" WHERE source = ?", source).Scan(&tail); err != nil {
		t.Fatal(err)
	}
	recs, err := decodeBlob(source, tail)
	if err != nil {
		t.Fatal(err)
	}
	records = len(recs)
	rows, err := s.sql.Query("SELECT data FROM "+tableBlocks+" WHERE source = ?", source)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var b []byte
		if err := rows.Scan(&b); err != nil {
			t.Fatal(err)
		}
		recs, err := decodeBlob(source, b)
		if err != nil {
			t.Fatal(err)
		}
		records += len(recs)
		blocks++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return records, blocks
}

// Records saved again with old numbers land in a newer block than the
// records they replace; History still returns the newest n by number, and
// the tails and blocks stay BLOBs (SQLite's || makes TEXT, whose length()
// stops at a NUL byte).
func TestHistoryReplacedSeqs(t *testing.T) {
	s := openTestStore(t)
	ctx := context.Background()
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	rec := func(seq int64) PollRecord {
		return PollRecord{Source: "a", Seq: seq, StartedAt: at.Add(time.Duration(seq) * time.Second), Outcome: OutcomeSuccess}
	}
	const keep = 100 // blocks of 25
	for seq := int64(1); seq <= 76; seq++ {
		if err := s.SaveBatch(ctx, nil, []PollRecord{rec(seq)}, keep); err != nil {
			t.Fatal(err)
		}
	}
	var again []PollRecord
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
	for _, table := range []string{tableTail, tableBlocks} {
		var n int
		if err := s.sql.QueryRow("SELECT COUNT(*) FROM " + table + " WHERE typeof(data) <> 'blob'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Errorf("%s: %d rows whose data is not a BLOB", table, n)
		}
	}
}
