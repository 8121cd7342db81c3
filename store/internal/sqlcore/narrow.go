package sqlcore

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"slices"
	"strings"
	"sync"
	"time"
)

// Narrow rows: a poll of a healthy source changes six columns of its state
// row (hotColumns); the other 21 stay as they were. Binding all 29 values
// of a row (one cgo call each, after database/sql's conversion) was about
// as much CPU as SQLite's execution of the row (BenchmarkStoreVsBare's
// profile), so a state whose other columns are those last written is
// upserted with its key and hot columns only: 8 values.
//
// What was last written is known by a sum (two 64-bit hashes, maphash)
// of the other columns' values per row key, kept by the store after each
// commit. It is trusted only while this connection is the only writer:
//
//   - SQLite only (Dialect.DataVersion): the dialect names the statement
//     that tells whether another connection committed since (SQLite's
//     PRAGMA data_version); when it did, the sums are dropped and every
//     row is written whole. PostgreSQL, whose tables members share, keeps
//     the full upsert always;
//   - commits run one at a time under known.mu, from before BEGIN to after
//     the sums are updated, so that no commit decides on sums that another
//     has made stale (SQLite has a single connection anyway);
//   - a commit that fails drops every sum (it may or may not have reached
//     the file): the next writes are whole.
//
// Rows are never deleted from source_states, so a row with a sum exists;
// the narrow upsert is still an INSERT ... ON CONFLICT, valid either way.
//
// The sum covers every column of stateArgs that is not hot, the name
// included (TestSumCoversState fails for a field of the state it leaves
// out). Two different sets of values get the same sum with a
// probability of 2^-128.

// hotColumns are the columns a narrow upsert writes besides the key: those
// a successful poll changes.
const hotColumns = "next_run_at, last_run_at, last_success_at, polls_total, history_seq, updated_at"

// knownRows are the sums of the rows this store last wrote, by row key.
type knownRows struct {
	mu      sync.Mutex
	version int64
	sums    map[int64]rowSum
	seeds   [2]maphash.Seed
	bytes   []byte // a row's encoding while it is summed (mu held)
}

// rowSum is the sum of a row's columns other than the hot ones.
type rowSum [2]uint64

// newKnownRows is the bookkeeping of narrow rows for stateColumns.
func newKnownRows() *knownRows {
	return &knownRows{sums: map[int64]rowSum{}, seeds: [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}}
}

// narrowSQL is the upsert of `rows` narrow rows: their key and hot columns.
func narrowSQL(rows int, bind bindFunc) string {
	hot := strings.Split(hotColumns, ", ")
	sets := make([]string, len(hot))
	for i, c := range hot {
		sets[i] = c + " = excluded." + c
	}
	cols := "skey, name, " + hotColumns
	return insertSQL(tableStates, cols, rows, bind) + " ON CONFLICT (skey, name) DO UPDATE SET " + strings.Join(sets, ", ")
}

// prepareNarrow prepares, with prep, the narrow upserts and the statement
// of the data version, where d has one.
func (w *writer) prepareNarrow(prep func(string) (*sql.Stmt, error), d Dialect) (err error) {
	v := d.DataVersion()
	if v == "" {
		return nil
	}
	for k := range rowSizes {
		if w.narrow[k], err = prep(narrowSQL(1<<k, d.Bind)); err != nil {
			return err
		}
	}
	w.version, err = prep(v)
	return err
}

// sum computes the sum of row's columns other than the hot ones (and the
// key): each value appended to one buffer, tagged and length-prefixed, with
// no value boxed (stateArgs boxes each of its 29: ~20 allocations a row).
// TestSumCoversState checks that it changes with every field of the state
// that is not hot, so that a column added to the state cannot be left out.
// mu held.
func (k *knownRows) sum(row *stateRow) rowSum {
	st := row.st
	b := appendStr(k.bytes[:0], st.Name)
	b = appendStr(b, st.Fingerprint)
	b = appendInt(b, int64(st.ConsecutiveFailures))
	b = appendInt(b, int64(st.ConsecutiveThrottles))
	b = appendStr(b, st.LastError)
	b = appendStr(b, st.LastOutcome)
	b = appendStr(b, st.BreakerState)
	b = appendTime(b, st.BreakerUntil)
	b = appendStr(b, st.ErrorReason)
	b = append(b, 3, boolByte(st.Paused))
	b = appendStr(b, st.PausedReason)
	b = appendInt(b, st.FailuresTotal)
	b = appendInt(b, st.ThrottledTotal)
	b = appendTime(b, st.LastErrorAt)
	b = appendStr(b, st.ETag)
	b = appendStr(b, st.LastModified)
	b = appendStr(b, st.Digest)
	b = appendTime(b, st.LastChangedAt)
	b = appendInt(b, st.ChangesTotal)
	b = append(b, 3, boolByte(st.IncidentOpen))
	b = appendTime(b, st.RemindAt)
	b = appendStr(b, st.HeldEvent)
	k.bytes = b
	return rowSum{maphash.Bytes(k.seeds[0], b), maphash.Bytes(k.seeds[1], b)}
}

func appendStr(b []byte, v string) []byte {
	return append(binary.AppendUvarint(append(b, 4), uint64(len(v))), v...)
}

func appendInt(b []byte, v int64) []byte {
	return binary.LittleEndian.AppendUint64(append(b, 1), uint64(v))
}

// appendTime appends t as stored (microseconds), or a NULL's tag.
func appendTime(b []byte, t *time.Time) []byte {
	if t == nil {
		return append(b, 0)
	}
	return appendInt(b, t.UnixMicro())
}

func boolByte(v bool) byte {
	if v {
		return 1
	}
	return 0
}

// narrowArgs appends the values of row's narrow upsert: the key, the name
// and hotColumns, in the narrow statement's order.
func narrowArgs(row *stateRow, dst []any) []any {
	st := row.st
	return append(dst, row.key, st.Name, microsPtr(st.NextRunAt), microsPtr(st.LastRunAt), microsPtr(st.LastSuccessAt),
		st.PollsTotal, st.HistorySeq, row.updated)
}

// sort reads, within tx, whether another connection wrote since the last
// commit (the statement version; nil: not known, every row whole), then
// marks the rows of sts whose other columns are as last written, and moves
// them to the end of sts, after the whole ones; it returns how many are
// whole. mu held.
func (k *knownRows) sort(ctx context.Context, tx *sql.Tx, version *sql.Stmt, sts []stateRow) (int, error) {
	if version == nil {
		return len(sts), nil
	}
	var v int64
	if err := tx.StmtContext(ctx, version).QueryRowContext(ctx).Scan(&v); err != nil {
		return 0, fmt.Errorf("data version: %w", err)
	}
	if v != k.version {
		clear(k.sums)
		k.version = v
	}
	for i := range sts {
		r := &sts[i]
		r.sum, r.summed = k.sum(r), true
		old, ok := k.sums[r.key]
		r.narrow = ok && old == r.sum
	}
	slices.SortStableFunc(sts, func(a, b stateRow) int { return cmp.Compare(boolByte(a.narrow), boolByte(b.narrow)) })
	if whole := slices.IndexFunc(sts, func(r stateRow) bool { return r.narrow }); whole >= 0 {
		return whole, nil
	}
	return len(sts), nil
}

// writeStates upserts the rows of sts within tx: whole, or narrow those
// whose other columns are as last written (s.known; nil: all whole).
func (s *Core) writeStates(ctx context.Context, tx *sql.Tx, sts []stateRow) error {
	whole := len(sts)
	if s.known != nil {
		var err error
		if whole, err = s.known.sort(ctx, tx, s.w.version, sts); err != nil {
			return err
		}
	}
	if err := s.w.execRows(ctx, tx, &s.w.states, whole, func(i int, dst []any) []any {
		return stateArgs(&sts[i], dst)
	}); err != nil {
		return err
	}
	narrow := sts[whole:]
	return s.w.execRows(ctx, tx, &s.w.narrow, len(narrow), func(i int, dst []any) []any {
		return narrowArgs(&narrow[i], dst)
	})
}

// remember records the sums of the rows of a committed transaction. mu
// held.
func (k *knownRows) remember(sts []stateRow) {
	for i := range sts {
		if r := &sts[i]; r.summed {
			k.sums[r.key] = r.sum
		} else {
			delete(k.sums, r.key)
		}
	}
}

// forget drops every sum: after a commit that failed, the file may hold
// its rows or not. mu held.
func (k *knownRows) forget() { clear(k.sums) }
