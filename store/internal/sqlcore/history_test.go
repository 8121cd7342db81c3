package sqlcore

import (
	"encoding/hex"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/domain"
)

func intPtr(v int) *int { return &v }

// Records packed one after the other come back field for field, in order,
// whatever their outcome, codes and sizes.
func TestRecordCodec(t *testing.T) {
	at := time.Date(2026, 11, 30, 12, 0, 0, 123456000, time.UTC)
	recs := []domain.PollRecord{
		{StartedAt: at, DurationMs: 12, Outcome: domain.OutcomeSuccess, StatusCode: intPtr(200), Bytes: 3},
		{StartedAt: at.Add(time.Minute), DurationMs: 30000, Outcome: domain.OutcomeFailure,
			Error: "GET https://example.com/status: 502 Bad Gateway", StatusCode: intPtr(502), Bytes: 10 << 20},
		{StartedAt: at, Outcome: domain.OutcomeThrottled, Error: "429 Too Many Requests", StatusCode: intPtr(429)},
		{StartedAt: at, Outcome: domain.OutcomeInterrupted, ExitCode: intPtr(-1)},
		{StartedAt: at, Outcome: "something-new", Error: strings.Repeat("é", 3000), ExitCode: intPtr(255), StatusCode: intPtr(0)},
		{Outcome: domain.OutcomeSuccess, DurationMs: -5, Bytes: -1}, // zero time, odd values
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
	r := domain.PollRecord{StartedAt: time.Unix(1_800_000_000, 0), Outcome: domain.OutcomeFailure, Error: "x", StatusCode: intPtr(500)}
	f.Add(appendRecord(nil, &r, 7))
	f.Add([]byte{})
	f.Add([]byte{0x02, 0x80})
	for _, golden := range []string{goldenV1, goldenLegacy} {
		b, err := hex.DecodeString(golden)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
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
