package sqlcore

import (
	"encoding/hex"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/domain"
)

// The tests of this file pin what is on disk, so that a change to the
// codec, the outcome codes or NameHash fails here instead of making the
// stores already written unreadable (or their rows unreachable).

// goldenRecords are the records whose packed form the golden blobs hold,
// numbered 1 to 5: every known outcome, an unknown one, both codes.
func goldenRecords() []domain.PollRecord {
	at := time.Date(2026, 11, 30, 12, 0, 0, 123456000, time.UTC)
	return []domain.PollRecord{
		{StartedAt: at, DurationMs: 12, Outcome: domain.OutcomeSuccess, StatusCode: intPtr(200), Bytes: 3},
		{StartedAt: at.Add(time.Minute), DurationMs: 30000, Outcome: domain.OutcomeFailure, Error: "502 Bad Gateway",
			StatusCode: intPtr(502), Bytes: 10},
		{StartedAt: at.Add(2 * time.Minute), DurationMs: 1, Outcome: domain.OutcomeThrottled, Error: "429", StatusCode: intPtr(429)},
		{StartedAt: at.Add(3 * time.Minute), DurationMs: 5, Outcome: domain.OutcomeInterrupted, ExitCode: intPtr(-1)},
		{StartedAt: at.Add(4 * time.Minute), Outcome: "new", ExitCode: intPtr(0), StatusCode: intPtr(0), Bytes: 64},
	}
}

// goldenResults are goldenRecords with the fields of version 3: a changed
// result with a SHA-256 digest (of "abc"), an unchanged one with the same
// digest, and a digest that is not 32 bytes of hex (kept as text).
func goldenResults() []domain.PollRecord {
	recs := goldenRecords()
	const abc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
	recs[0].Changed, recs[0].Digest = true, abc
	recs[1].Digest = abc
	recs[4].Changed, recs[4].Digest = true, "md5:900150983cd24fb0"
	return recs
}

// goldenV3 is goldenResults packed by appendRecord: each record is the
// version byte 03, then the fields of version 1, then the result's flags
// (01 changed, 02 raw SHA-256, 04 digest text) and the digest.
const goldenV3 = "030280c9ade3a4dfb00618010001900306" + "03ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" +
	"030480e5c99ca5dfb006e0d403020f3530322042616420476174657761790" + "1ec071402ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" +
	"03068081e6d5a5dfb00602030334323901da060000" +
	"0308809d828fa6dfb0060a040002010000" +
	"030a80b99ec8a6dfb0060000036e657700030000800105146d64353a39303031353039383363643234666230"

// goldenV1 is goldenRecords packed by the version-1 writer (before change
// detection): each record is the version byte 01, then its fields in order.
const goldenV1 = "010280c9ade3a4dfb00618010001900306010480e5c99ca5dfb006e0d403020f35303220426164204761746577617901" +
	"ec071401068081e6d5a5dfb00602030334323901da06000108809d828fa6dfb0060a0400020100010a80b99ec8a6dfb0060000036e6577000300008001"

// goldenLegacy is goldenRecords as the first schema-3 stores packed them
// (written by pacer before the version byte, commit f106e55): no version
// byte, the fields as in version 1.
const goldenLegacy = "0280c9ade3a4dfb006180100019003060480e5c99ca5dfb006e0d403020f35303220426164204761746577617901" +
	"ec0714068081e6d5a5dfb00602030334323901da060008809d828fa6dfb0060a04000201000a80b99ec8a6dfb0060000036e6577000300008001"

func wantGolden(source string) []domain.PollRecord {
	recs := goldenRecords()
	for i := range recs {
		recs[i].Source, recs[i].Seq = source, int64(i+1)
	}
	return recs
}

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRecordFormatGolden: appendRecord writes exactly the golden bytes of
// version 3, and they decode to the records; version-1 blobs still decode
// (unchanged, no digest), alone and followed by version-3 records.
func TestRecordFormatGolden(t *testing.T) {
	recs := goldenResults()
	var blob []byte
	for i := range recs {
		blob = appendRecord(blob, &recs[i], int64(i+1))
	}
	if got := hex.EncodeToString(blob); got != goldenV3 {
		t.Errorf("packed records:\n got  %s\n want %s", got, goldenV3)
	}
	want := goldenResults()
	for i := range want {
		want[i].Source, want[i].Seq = "a", int64(i+1)
	}
	got, err := decodeBlob("a", mustHex(t, goldenV3))
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("golden blob decodes to %+v, %v; want %+v", got, err, want)
	}
	got, err = decodeBlob("a", mustHex(t, goldenV1))
	if err != nil || !reflect.DeepEqual(got, wantGolden("a")) {
		t.Errorf("version-1 blob decodes to %+v, %v; want %+v", got, err, wantGolden("a"))
	}
	mixed := append(mustHex(t, goldenV1), mustHex(t, goldenV3)...)
	got, err = decodeBlob("a", mixed)
	if err != nil || len(got) != 10 || !reflect.DeepEqual(got[5:], want) || !reflect.DeepEqual(got[:5], wantGolden("a")) {
		t.Errorf("version 1 + version 3 decodes to %+v, %v", got, err)
	}
	// A truncated digest is corrupt, not a shorter digest.
	if _, err := decodeBlob("a", mustHex(t, goldenV3)[:40]); !errors.Is(err, errCorrupt) {
		t.Errorf("truncated digest: err %v, want errCorrupt", err)
	}
}

// TestLegacyBlobDecodes: blobs of the first schema-3 stores (no version
// byte) still decode, alone and followed by records of version 3, as a
// tail of such a store is after the upgrade.
func TestLegacyBlobDecodes(t *testing.T) {
	legacy := mustHex(t, goldenLegacy)
	got, err := decodeBlob("a", legacy)
	if err != nil || !reflect.DeepEqual(got, wantGolden("a")) {
		t.Fatalf("legacy blob decodes to %+v, %v; want %+v", got, err, wantGolden("a"))
	}
	r := goldenRecords()[1]
	mixed := appendRecord(legacy, &r, 6)
	got, err = decodeBlob("a", mixed)
	want := append(wantGolden("a"), r)
	want[5].Source, want[5].Seq = "a", 6
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("legacy + version 3 decodes to %+v, %v; want %+v", got, err, want)
	}
	// An odd first byte other than 01 and 03 is a format this pacer does
	// not know.
	_, err = decodeBlob("a", append([]byte{0x05}, mustHex(t, goldenV1)[1:]...))
	if !errors.Is(err, errCorrupt) {
		t.Errorf("record of version 05: err %v, want errCorrupt", err)
	}
}

// TestOutcomeCodes pins the code of each outcome in the packed history.
func TestOutcomeCodes(t *testing.T) {
	for _, c := range []struct {
		outcome string
		code    byte
	}{
		{domain.OutcomeSuccess, 1}, {domain.OutcomeFailure, 2}, {domain.OutcomeThrottled, 3}, {domain.OutcomeInterrupted, 4},
		{"", 0}, {"skipped", 0},
	} {
		if got := outcomeCode(c.outcome); got != c.code {
			t.Errorf("outcomeCode(%q) = %d, want %d", c.outcome, got, c.code)
		}
		if c.code == 0 {
			continue
		}
		if got, ok := outcomeOf(c.code); !ok || got != c.outcome {
			t.Errorf("outcomeOf(%d) = %q, %v; want %q", c.code, got, ok, c.outcome)
		}
	}
	for _, code := range []byte{0, 5, 255} {
		if o, ok := outcomeOf(code); ok {
			t.Errorf("outcomeOf(%d) = %q, ok; want none", code, o)
		}
	}
}

// TestNameHashGolden pins NameHash and the row key derived from it: the
// rows of every stored source are found by them.
func TestNameHashGolden(t *testing.T) {
	for _, c := range []struct {
		name string
		hash uint64
		key  int64
	}{
		{"", 0xefd01f60ba992926, 0x6fd01f60ba992926},
		{"api-1", 0x25a2748fe1d64288, -0x5a5d8b701e29bd78},
		{"api-2", 0x0b8bd922c2c0b582, -0x747426dd3d3f4a7e},
		{"src-000000", 0x71d15b93304599ae, -0x0e2ea46ccfba6652},
		{"é", 0x9d55ccb9ba86763b, 0x1d55ccb9ba86763b},
	} {
		if got := domain.NameHash(c.name); got != c.hash {
			t.Errorf("domain.NameHash(%q) = %#016x, want %#016x", c.name, got, c.hash)
		}
		if got := Skey(c.name); got != c.key {
			t.Errorf("Skey(%q) = %d, want %d", c.name, got, c.key)
		}
	}
}
