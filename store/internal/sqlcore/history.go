package sqlcore

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/pacer-dev/pacer/domain"
)

// Poll history is stored in blocks of records packed into a blob, not one
// row per record. A source's newest records are appended to its row of
// history_tail (one row per source, clustered on NameHash like the states);
// once a record's Seq is a multiple of blockSize(keep), the tail moves to a
// row of history_blocks (keyed by the source and the Seq of its newest
// record), and the blocks whose records are all older than the source's
// newest keep are deleted.
//
// Why: with one row per record, clustered by source, each poll's record
// went into a different page (a source's 100 records fill more than a
// page), so a commit of 83 polls wrote about 83 pages to the WAL, and
// checkpoints wrote them again: 11.4% of a core for 100,000 sources polled
// once a minute with full histories. A tail holds a few hundred bytes, so
// the tails written by one commit (sources polled together are neighbours
// in the hash order) share a few pages, and a block is written once per
// blockSize polls of a source.
//
// history_tail.keep_from is the Seq of the oldest record to keep: records
// below it are trimmed, logically at once (readers skip them), physically
// when the block holding them is deleted.

const (
	tableTail   = "history_tail"
	tableBlocks = "history_blocks"
)

// blockSize is how many records of a source its tail gathers before they
// move to a block: a quarter of keep (so the store holds at most about
// keep + keep/4 records of a source), between 1 and 64, and 32 when
// nothing is trimmed.
func blockSize(keep int) int64 {
	if keep <= 0 {
		return 32
	}
	return int64(min(max(keep/4, 1), 64))
}

// outcomeCode is the packed form of a known outcome; 0, for any other, is
// followed by the outcome's text.
func outcomeCode(o string) byte {
	switch o {
	case domain.OutcomeSuccess:
		return 1
	case domain.OutcomeFailure:
		return 2
	case domain.OutcomeThrottled:
		return 3
	case domain.OutcomeInterrupted:
		return 4
	}
	return 0
}

// outcomeOf is the outcome of a code from 1 to 4; ok is false for any other.
func outcomeOf(code byte) (o string, ok bool) {
	switch code {
	case 1:
		return domain.OutcomeSuccess, true
	case 2:
		return domain.OutcomeFailure, true
	case 3:
		return domain.OutcomeThrottled, true
	case 4:
		return domain.OutcomeInterrupted, true
	}
	return "", false
}

const (
	flagStatus = 1 << iota
	flagExit
)

// recordV1 was the version byte of every record before change detection.
// Blobs are concatenated by SQL (a tail grows by each commit's records, a
// block is a tail moved), so a version byte at the start of a blob would
// end up in the middle: each record carries its own, and a blob may mix
// versions. The first round of schema-3 stores wrote records without one;
// their first byte is that of a zigzag varint of Seq >= 1, which is even,
// so a version byte is odd: 1, 3, 5, ... for the formats to come.
const recordV1 = 0x01

// recordV3 is the version byte of every record appended today: version 1's
// fields, then a flags byte (resultChanged, resultDigest, resultDigestText)
// and the digest, 32 raw bytes for a SHA-256 in hex, or else its text.
// (The next format after 01 is 03, not 02: an even first byte is a record
// of the unversioned format.)
const recordV3 = 0x03

// recordV5 is the format of a record whose poll a condition failed
// (contract 14.5): version 3's fields, then the condition's expression. A
// record without one keeps format 3, which every release since change
// detection reads; a release that predates conditions refuses a version-5
// record as unknown rather than misreading the records after it.
const recordV5 = 0x05

// Flags of a version-3 record's result.
const (
	resultChanged    = 1 << iota // Changed
	resultDigest                 // Digest is 32 bytes in hex: they follow, raw
	resultDigestText             // Digest is something else: its text follows
)

// appendRecord appends r, packed, to b: the version byte, then Seq, start
// (µs), duration, outcome, error, status and exit codes when present,
// bytes. The source is not stored: it is the row's.
func appendRecord(b []byte, r *domain.PollRecord, seq int64) []byte {
	version := byte(recordV3)
	if r.Condition != "" {
		version = recordV5
	}
	b = append(b, version)
	b = binary.AppendVarint(b, seq)
	b = binary.AppendVarint(b, micros(r.StartedAt))
	b = binary.AppendVarint(b, r.DurationMs)
	code := outcomeCode(r.Outcome)
	b = append(b, code)
	if code == 0 {
		b = appendString(b, r.Outcome)
	}
	b = appendString(b, r.Error)
	var flags byte
	if r.StatusCode != nil {
		flags |= flagStatus
	}
	if r.ExitCode != nil {
		flags |= flagExit
	}
	b = append(b, flags)
	if r.StatusCode != nil {
		b = binary.AppendVarint(b, int64(*r.StatusCode))
	}
	if r.ExitCode != nil {
		b = binary.AppendVarint(b, int64(*r.ExitCode))
	}
	b = binary.AppendVarint(b, r.Bytes)
	b = appendResult(b, r)
	if version == recordV5 {
		b = appendString(b, r.Condition)
	}
	return b
}

// appendResult appends a version-3 record's change flags and digest.
func appendResult(b []byte, r *domain.PollRecord) []byte {
	var flags byte
	if r.Changed {
		flags |= resultChanged
	}
	raw, err := hex.DecodeString(r.Digest)
	switch {
	case r.Digest == "":
	case err == nil && len(raw) == 32:
		flags |= resultDigest
	default:
		flags |= resultDigestText
	}
	b = append(b, flags)
	switch {
	case flags&resultDigest != 0:
		b = append(b, raw...)
	case flags&resultDigestText != 0:
		b = appendString(b, r.Digest)
	}
	return b
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

var errCorrupt = errors.New("corrupt history record")

// recordReader decodes the records of one blob in the order they were
// appended.
type recordReader struct {
	b   []byte
	err error
}

func (d *recordReader) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *recordReader) byte() byte {
	if len(d.b) == 0 {
		d.fail()
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *recordReader) string() string {
	n, k := binary.Uvarint(d.b)
	if k <= 0 || n > uint64(len(d.b)-k) {
		d.fail()
		return ""
	}
	s := string(d.b[k : k+int(n)])
	d.b = d.b[k+int(n):]
	return s
}

func (d *recordReader) fail() {
	if d.err == nil {
		d.err = errCorrupt
	}
	d.b = nil
}

// next decodes the next record of source; ok is false at the end of the
// blob or on an error (then d.err is set).
func (d *recordReader) next(source string) (r domain.PollRecord, ok bool) {
	if len(d.b) == 0 || d.err != nil {
		return r, false
	}
	r.Source = source
	// A record without a version byte (an even first byte) is of the
	// unversioned format, which version 1 kept field for field; version 3
	// adds the result's fields at the end.
	var v byte
	if v = d.b[0]; v&1 == 1 {
		d.b = d.b[1:]
		if v != recordV1 && v != recordV3 && v != recordV5 {
			d.err = fmt.Errorf("%w: unknown record format %#02x", errCorrupt, v)
			return r, false
		}
	}
	r.Seq = d.varint()
	r.StartedAt = fromMicros(d.varint())
	r.DurationMs = d.varint()
	if code := d.byte(); code == 0 {
		r.Outcome = d.string()
	} else if o, ok := outcomeOf(code); ok {
		r.Outcome = o
	} else {
		d.fail()
	}
	r.Error = d.string()
	flags := d.byte()
	if flags&flagStatus != 0 {
		v := int(d.varint())
		r.StatusCode = &v
	}
	if flags&flagExit != 0 {
		v := int(d.varint())
		r.ExitCode = &v
	}
	r.Bytes = d.varint()
	if v == recordV3 || v == recordV5 {
		d.result(&r)
	}
	if v == recordV5 {
		r.Condition = d.string()
	}
	return r, d.err == nil
}

// result decodes a version-3 record's change flags and digest into r.
func (d *recordReader) result(r *domain.PollRecord) {
	flags := d.byte()
	r.Changed = flags&resultChanged != 0
	switch {
	case flags&resultDigest != 0:
		if len(d.b) < 32 {
			d.fail()
			return
		}
		r.Digest = hex.EncodeToString(d.b[:32])
		d.b = d.b[32:]
	case flags&resultDigestText != 0:
		r.Digest = d.string()
	}
}

// decodeBlob returns the records packed in b, in the order they were
// appended.
func decodeBlob(source string, b []byte) ([]domain.PollRecord, error) {
	d := recordReader{b: b}
	var out []domain.PollRecord
	for {
		r, ok := d.next(source)
		if !ok {
			break
		}
		out = append(out, r)
	}
	if d.err != nil {
		return nil, fmt.Errorf("%w (after %d records)", d.err, len(out))
	}
	return out, nil
}

// packBuf holds what packRecords builds for one commit: the tail rows, the
// index of a source's row, and one arena for the packed records of every
// source. A commit takes one from writer.packs and puts it back when done,
// so that a daemon's commits reuse them instead of allocating a row, a map
// entry and a growing byte slice per source and commit.
type packBuf struct {
	tails []tailRow
	index map[string]int
	arena []byte
}

// maxPackRows and maxPackArena bound what a packBuf keeps after its commit:
// a commit after an outage may carry keep records per source.
const (
	maxPackRows  = 4 * 2000
	maxPackArena = 1 << 20
)

func (w *writer) getPack() *packBuf {
	if p, _ := w.packs.Get().(*packBuf); p != nil {
		return p
	}
	return &packBuf{index: map[string]int{}}
}

// putPack returns p to the pool, dropping its references to the batch.
func (w *writer) putPack(p *packBuf) {
	if cap(p.tails) > maxPackRows || cap(p.arena) > maxPackArena {
		return
	}
	clear(p.tails)
	p.tails, p.arena = p.tails[:0], p.arena[:0]
	clear(p.index)
	w.packs.Put(p)
}

// packRecords groups records by source, numbers those without a Seq after
// the source's newest (read once per source, within tx), and returns one
// tail row per source in the order of the table, built in p.
func (w *writer) packRecords(ctx context.Context, tx *sql.Tx, p *packBuf, records []domain.PollRecord, keep int) ([]tailRow, error) {
	tails := slices.Grow(p.tails[:0], len(records))
	index := p.index
	block := blockSize(keep)
	var lastSeq *sql.Stmt
	for i := range records {
		r := &records[i]
		j, ok := index[r.Source]
		if !ok {
			j = len(tails)
			index[r.Source] = j
			tails = append(tails, tailRow{key: Skey(r.Source), name: r.Source, keepFrom: -1})
		}
		t := &tails[j]
		seq := r.Seq
		if seq <= 0 {
			if !t.read {
				if lastSeq == nil {
					lastSeq = tx.StmtContext(ctx, w.lastSeq)
				}
				var stored int64
				if err := lastSeq.QueryRowContext(ctx, t.key, t.name).Scan(&stored); err != nil && !errors.Is(err, sql.ErrNoRows) {
					p.tails = tails
					return nil, fmt.Errorf("newest record of %q: %w", t.name, err)
				}
				t.last, t.read = max(t.last, stored), true
			}
			seq = t.last + 1
		}
		t.last = max(t.last, seq)
		t.seal = t.seal || seq%block == 0
		t.data = p.appendTo(t.data, r, seq)
	}
	p.tails = tails
	for i := range tails {
		if keep > 0 {
			tails[i].keepFrom = max(tails[i].last-int64(keep)+1, 0)
		}
	}
	slices.SortFunc(tails, func(a, b tailRow) int {
		if c := cmp.Compare(a.key, b.key); c != 0 {
			return c
		}
		return strings.Compare(a.name, b.name)
	})
	return tails, nil
}

// appendTo appends record r, numbered seq, to data, a source's packed
// records of this batch, and returns it. A source's first record, and the
// next ones while no other source's came between, go to the end of the
// arena; otherwise data is copied out of it (its capacity ends at its
// length, so an append never writes over a neighbour's bytes). A slice
// keeps the arena's old array alive when the arena grows.
func (p *packBuf) appendTo(data []byte, r *domain.PollRecord, seq int64) []byte {
	if len(data) > 0 && (len(p.arena) == 0 || &data[len(data)-1] != &p.arena[len(p.arena)-1]) {
		return appendRecord(data, r, seq)
	}
	a := len(p.arena) - len(data)
	p.arena = appendRecord(p.arena, r, seq)
	return p.arena[a:len(p.arena):len(p.arena)]
}

// BlockSize is blockSize, for the conformance suite.
func BlockSize(keep int) int64 { return blockSize(keep) }

// StoredRecords counts the records of source in its tail and blocks,
// trimmed or not, and its blocks, through the models: the conformance
// suite checks with it what a commit leaves stored.
func (s *Core) StoredRecords(source string) (records, blocks int, err error) {
	var tails []tailModel
	var blks []blockModel
	if err := s.DB.Where("skey = ? AND source = ?", Skey(source), source).Find(&tails).Error; err != nil {
		return 0, 0, err
	}
	if err := s.DB.Where("skey = ? AND source = ?", Skey(source), source).Find(&blks).Error; err != nil {
		return 0, 0, err
	}
	for _, b := range slices.Concat(tailBlobs(tails), blockBlobs(blks)) {
		recs, err := decodeBlob(source, b)
		if err != nil {
			return 0, 0, err
		}
		records += len(recs)
	}
	return records, len(blks), nil
}

func tailBlobs(ts []tailModel) [][]byte {
	out := make([][]byte, len(ts))
	for i := range ts {
		out[i] = ts[i].Data
	}
	return out
}

func blockBlobs(bs []blockModel) [][]byte {
	out := make([][]byte, len(bs))
	for i := range bs {
		out[i] = bs[i].Data
	}
	return out
}
