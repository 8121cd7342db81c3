package sqlcore

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"gorm.io/gorm"

	"github.com/pacer-dev/pacer/domain"
)

// The write path of SaveBatch is plain SQL through prepared statements:
// gorm would build, and SQLite parse, a new statement for every batch size,
// and gorm adds a RETURNING clause to every insert. Statements are prepared
// once, at Open, for 1, 2, 4, ... maxRows rows; a batch of n rows runs as
// the binary decomposition of n (83 rows = 64 + 16 + 2 + 1).
//
// Raw SQL, on the hot path of every poll: BenchmarkStoreMinuteLoad (CPU of
// 100,000 sources polled once a minute), BenchmarkCommitRate, and the
// scheduler's BenchmarkFlusherSustained measure it. The tables and their
// columns are the models' (models.go; checkColumns compares).

// rowSizes is how many statements are prepared per table: for 1<<0 up to
// 1<<(rowSizes-1) rows. 64 rows of the widest table bind 1,344 variables,
// far below the limits of SQLite (32,766) and PostgreSQL (65,535).
const rowSizes = 7

// stateColumns lists SourceState's columns in the order scanState reads
// them; stateArgs binds skey first, then these.
const stateColumns = "name, fingerprint, consecutive_failures, consecutive_throttles, next_run_at, last_run_at, " +
	"last_success_at, last_error, last_outcome, breaker_state, breaker_until, error_reason, paused, " +
	"paused_reason, polls_total, failures_total, throttled_total, history_seq, updated_at, last_error_at, " +
	"etag, last_modified, digest, last_changed_at, changes_total, incident_open, remind_at, held_event"

// tailColumns and blockColumns list the columns of a tail and of a block in
// the order SaveBatch binds and copies them.
const (
	tailColumns  = "skey, source, data, last_seq, keep_from"
	blockColumns = "skey, source, last_seq, data"
)

// bindFunc writes the i-th (from 1) bind variable of a statement in the
// syntax of the database: "?" for SQLite, "$i" for PostgreSQL.
type bindFunc func(i int) string

// writer holds the statements of SaveBatch, prepared once per store.
type writer struct {
	states [rowSizes]*sql.Stmt // states[k] upserts 1<<k states
	tails  [rowSizes]*sql.Stmt // tails[k] appends to 1<<k sources' tails
	// narrow[k] upserts the key and hot columns of 1<<k states, and
	// version reads whether another connection wrote (narrow.go); nil
	// where the dialect has no DataVersion.
	narrow  [rowSizes]*sql.Stmt
	version *sql.Stmt
	// lastSeq reads a source's newest Seq (no row: none saved yet).
	lastSeq *sql.Stmt
	// seal moves a source's tail to a block, clear empties the tail, and
	// trim deletes the blocks older than the tail's keep_from.
	seal, clear, trim *sql.Stmt
	// anyCommand finds whether a command is pending (PendingCommands).
	anyCommand *sql.Stmt
	// packs holds *packBuf, packRecords's buffers.
	packs sync.Pool
	// vals holds *[]any, execRows's slices of bind values (a pool: commits
	// of a PostgreSQL store may run concurrently).
	vals sync.Pool
}

// prepareWriter prepares the statements of SaveBatch on db (raw SQL:
// BenchmarkStoreMinuteLoad, BenchmarkCommitRate), in the SQL of d. It must
// run outside any transaction: a SQLite store has a single connection.
func prepareWriter(db *sql.DB, d Dialect) (w *writer, err error) {
	w = &writer{}
	bind := d.Bind
	defer func() {
		if err != nil {
			err = errors.Join(err, w.close())
		}
	}()
	prep := func(query string) (*sql.Stmt, error) {
		st, err := db.Prepare(query)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", query[:min(len(query), 60)], err)
		}
		return st, nil
	}
	cols := strings.Split(stateColumns, ", ")
	sets := make([]string, 0, len(cols)-1)
	for _, c := range cols[1:] {
		sets = append(sets, c+" = excluded."+c)
	}
	upsert := " ON CONFLICT (skey, name) DO UPDATE SET " + strings.Join(sets, ", ")
	// A tail grows by the records of the batch; last_seq and keep_from
	// only move forward.
	tailUpsert := " ON CONFLICT (skey, source) DO UPDATE SET data = " + d.BlobConcat(tableTail+".data", "excluded.data") + ", " +
		"last_seq = CASE WHEN excluded.last_seq > " + tableTail + ".last_seq THEN excluded.last_seq ELSE " + tableTail + ".last_seq END, " +
		"keep_from = CASE WHEN excluded.keep_from > " + tableTail + ".keep_from THEN excluded.keep_from ELSE " + tableTail + ".keep_from END"
	for k := range rowSizes {
		if w.states[k], err = prep(insertSQL(tableStates, "skey, "+stateColumns, 1<<k, bind) + upsert); err != nil {
			return w, err
		}
		if w.tails[k], err = prep(insertSQL(tableTail, tailColumns, 1<<k, bind) + tailUpsert); err != nil {
			return w, err
		}
	}
	if err = w.prepareNarrow(prep, d); err != nil {
		return w, err
	}
	where := " WHERE skey = " + bind(1) + " AND source = " + bind(2)
	if w.lastSeq, err = prep("SELECT last_seq FROM " + tableTail + where); err != nil {
		return w, err
	}
	if w.seal, err = prep("INSERT INTO " + tableBlocks + " (" + blockColumns + ") SELECT " + blockColumns + " FROM " +
		tableTail + where + " AND length(data) > 0 ON CONFLICT (skey, source, last_seq) DO UPDATE SET data = " +
		d.BlobConcat(tableBlocks+".data", "excluded.data")); err != nil {
		return w, err
	}
	// SQLite numbers "?" in order of appearance: the new data comes first
	// (PostgreSQL's $n follow the same order).
	if w.clear, err = prep("UPDATE " + tableTail + " SET data = " + bind(1) + " WHERE skey = " + bind(2) +
		" AND source = " + bind(3)); err != nil {
		return w, err
	}
	if w.anyCommand, err = prep("SELECT 1 FROM " + tableCommands + " WHERE done_at IS NULL AND status = " + bind(1) +
		" LIMIT 1"); err != nil {
		return w, err
	}
	w.trim, err = prep("DELETE FROM " + tableBlocks + where + " AND last_seq < (SELECT keep_from FROM " + tableTail +
		" WHERE skey = " + bind(3) + " AND source = " + bind(4) + ")")
	return w, err
}

// insertSQL writes an INSERT of rows rows into table.
func insertSQL(table, columns string, rows int, bind bindFunc) string {
	ncol := strings.Count(columns, ",") + 1
	var b strings.Builder
	b.WriteString("INSERT INTO " + table + " (" + columns + ") VALUES ")
	v := 1
	for r := range rows {
		if r > 0 {
			b.WriteString(", ")
		}
		b.WriteByte('(')
		for c := range ncol {
			if c > 0 {
				b.WriteString(", ")
			}
			b.WriteString(bind(v))
			v++
		}
		b.WriteByte(')')
	}
	return b.String()
}

func (w *writer) close() error {
	var errs []error
	for _, st := range slices.Concat(w.states[:], w.tails[:], w.narrow[:], []*sql.Stmt{w.version, w.lastSeq, w.seal, w.clear, w.trim, w.anyCommand}) {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	return errors.Join(errs...)
}

// execRows runs, within tx, the statements of stmts that together write n
// rows; args appends the values of row i. The slice of values is w's, reused
// from commit to commit (it is 64 rows' worth: 1,664 values, 26 KiB, which
// a commit used to allocate, growing it, for each of its tables).
func (w *writer) execRows(ctx context.Context, tx *sql.Tx, stmts *[rowSizes]*sql.Stmt, n int, args func(i int, dst []any) []any) error {
	buf, _ := w.vals.Get().(*[]any)
	if buf == nil {
		buf = new([]any)
	}
	defer func() {
		clear((*buf)[:cap(*buf)]) // no references to a batch's strings kept
		w.vals.Put(buf)
	}()
	vals := *buf
	defer func() { *buf = vals[:0] }()
	for i := 0; i < n; {
		k := rowSizes - 1
		for 1<<k > n-i {
			k--
		}
		vals = vals[:0]
		for j := i; j < i+1<<k; j++ {
			vals = args(j, vals)
		}
		if _, err := tx.StmtContext(ctx, stmts[k]).ExecContext(ctx, vals...); err != nil {
			return err
		}
		i += 1 << k
	}
	return nil
}

// stateArgs appends a row's key, then its state's values in stateColumns
// order.
func stateArgs(row *stateRow, dst []any) []any {
	st := row.st
	return append(dst, row.key, st.Name, st.Fingerprint, st.ConsecutiveFailures, st.ConsecutiveThrottles,
		microsPtr(st.NextRunAt), microsPtr(st.LastRunAt), microsPtr(st.LastSuccessAt), st.LastError,
		st.LastOutcome, st.BreakerState, microsPtr(st.BreakerUntil), st.ErrorReason, st.Paused,
		st.PausedReason, st.PollsTotal, st.FailuresTotal, st.ThrottledTotal, st.HistorySeq, row.updated,
		microsPtr(st.LastErrorAt), nullString(st.ETag), nullString(st.LastModified), nullString(st.Digest),
		microsPtr(st.LastChangedAt), st.ChangesTotal, st.IncidentOpen, microsPtr(st.RemindAt), nullString(st.HeldEvent))
}

// nullString is s, or NULL for "" (the additive text columns are nullable).
func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// checkColumns compares the column lists of the hand-written SQL with the
// schema gorm derives from the models, so that a field added to one cannot
// be silently left out of the other.
func checkColumns(db *gorm.DB) error {
	for _, c := range []struct {
		model   any
		columns string
	}{{&stateModel{}, "skey, " + stateColumns}, {&tailModel{}, tailColumns}, {&blockModel{}, blockColumns}} {
		stmt := &gorm.Statement{DB: db}
		if err := stmt.Parse(c.model); err != nil {
			return fmt.Errorf("parse schema: %w", err)
		}
		got := slices.Sorted(slices.Values(stmt.Schema.DBNames))
		want := slices.Sorted(slices.Values(strings.Split(c.columns, ", ")))
		if !slices.Equal(got, want) {
			return fmt.Errorf("columns of %s: the schema has %v, the SQL writes %v", stmt.Schema.Table, got, want)
		}
	}
	return nil
}

// SaveBatch commits, in one transaction, every state (inserted or replacing
// the stored one, all columns), every record, and the trimming of the
// history of each source that got a record down to its newest keep records
// (keep <= 0 keeps all). Either all of it is committed or none of it.
//
// The arguments are not modified: a record without a Seq gets one in the
// database only, in the order given, after the source's stored ones. A
// record with the Seq of a stored one replaces it for readers. Times are
// stored in UTC at microsecond precision, and UpdatedAt is set to the
// commit time. When a name occurs more than once in states, the last
// occurrence wins. It fails, committing nothing, while the database file is
// no longer the one opened (see guard).
func (s *Core) SaveBatch(ctx context.Context, states []domain.SourceState, records []domain.PollRecord, keep int) error {
	return s.Commit(ctx, domain.Batch{States: states, Records: records}, keep)
}

// tailRow is what one batch appends to a source's tail.
type tailRow struct {
	key      int64
	name     string
	data     []byte // its records, packed, in the order given
	last     int64  // the largest Seq of the batch (or stored, once read)
	read     bool   // last includes the stored newest Seq
	keepFrom int64  // -1: no trimming
	seal     bool   // a Seq of the batch is a multiple of the block size
}

// Check, run first in a batch's transaction, returns the rows of the
// batch that may be written (SaveBatchFenced: those of the shards whose
// claim still holds).
type Check func(ctx context.Context, tx *sql.Tx, rows *BatchRows) error

// commitBatchChecked writes the states, records and events of b in one
// transaction, after check (nil: every row is written).
//
// On SQLite the statements run under ctx without its cancellation:
// mattn/go-sqlite3 runs each statement given a cancellable context on a
// goroutine of its own, to interrupt it when the context ends, which costs a
// goroutine, a channel and two hand-offs per statement (a commit has about
// ten) on the path of every poll. The commit checks ctx between its steps
// instead and rolls back once ctx is done; a statement itself is short, and
// one that waits for another process's write lock waits at most the busy
// timeout. PostgreSQL's driver watches the context without a goroutine per
// statement: there ctx is passed on as it is.
func (s *Core) commitBatchChecked(ctx context.Context, b *BatchRows, keep int, check Check) (err error) {
	if k := s.known; k != nil {
		k.mu.Lock()
		defer k.mu.Unlock()
		defer func() {
			if err != nil {
				k.forget()
			} else {
				k.remember(b.sts)
			}
		}()
	}
	live := ctx
	ctx = s.dia.StmtContext(ctx)
	if err := live.Err(); err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	tx, err := s.SQL.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() {
		if err != nil {
			if rerr := tx.Rollback(); rerr != nil && !errors.Is(rerr, sql.ErrTxDone) {
				err = errors.Join(err, fmt.Errorf("rollback: %w", rerr))
			}
		}
	}()
	if check != nil {
		if err = check(ctx, tx, b); err != nil {
			return err
		}
	}
	sts, records := b.sts, b.records
	if err := insertEvents(ctx, tx, s.dia, b.events); err != nil {
		return err
	}
	if err := s.writeStates(ctx, tx, sts); err != nil {
		return fmt.Errorf("upsert states: %w", err)
	}
	if len(records) == 0 {
		return commitLive(live, tx)
	}
	if err := live.Err(); err != nil {
		return fmt.Errorf("append records: %w", err)
	}
	if err := s.w.appendRecords(ctx, tx, records, keep); err != nil {
		return err
	}
	return commitLive(live, tx)
}

// appendRecords appends records to their sources' tails within tx, moves
// the tails that reached a block's end to blocks, and trims the blocks
// older than each source's newest keep records.
func (w *writer) appendRecords(ctx context.Context, tx *sql.Tx, records []domain.PollRecord, keep int) error {
	pack := w.getPack()
	defer w.putPack(pack)
	tails, err := w.packRecords(ctx, tx, pack, records, keep)
	if err != nil {
		return err
	}
	if err := w.execRows(ctx, tx, &w.tails, len(tails), func(i int, dst []any) []any {
		t := &tails[i]
		return append(dst, t.key, t.name, t.data, t.last, t.keepFrom)
	}); err != nil {
		return fmt.Errorf("append records: %w", err)
	}
	seal, clear, trim := tx.StmtContext(ctx, w.seal), tx.StmtContext(ctx, w.clear), tx.StmtContext(ctx, w.trim)
	for i := range tails {
		t := &tails[i]
		if !t.seal {
			continue
		}
		if _, err := seal.ExecContext(ctx, t.key, t.name); err != nil {
			return fmt.Errorf("history of %q: seal block: %w", t.name, err)
		}
		if _, err := clear.ExecContext(ctx, []byte{}, t.key, t.name); err != nil {
			return fmt.Errorf("history of %q: clear tail: %w", t.name, err)
		}
		if _, err := trim.ExecContext(ctx, t.key, t.name, t.key, t.name); err != nil {
			return fmt.Errorf("history of %q: trim: %w", t.name, err)
		}
	}
	return nil
}

// commitLive commits tx unless live is done (the caller then rolls back).
func commitLive(live context.Context, tx *sql.Tx) error {
	if err := live.Err(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// stateRow is a state of a batch with its row key (skey of its name),
// computed once, and the commit's time, which is written as its UpdatedAt
// (the batch's states are not modified, nor copied).
type stateRow struct {
	key     int64
	updated int64 // micros of the commit time
	st      *domain.SourceState
	// sum is the sum of the row's other columns than the hot ones, if
	// summed, and narrow whether they are those last written (narrow.go).
	sum            rowSum
	summed, narrow bool
}

// prepareStates returns the rows to write, one per name (the last one wins:
// PostgreSQL refuses an upsert that touches a row twice), in the order of
// the table, with UpdatedAt set to ts. Times need no normalising: they are
// stored as microseconds since the epoch, whatever their zone. The rows
// point into in. Duplicates are found by the sort (stable, so that the
// last of equal names is the one kept) rather than a map of the names.
func prepareStates(in []domain.SourceState, ts time.Time) ([]stateRow, error) {
	out := make([]stateRow, len(in))
	updated := micros(ts)
	for i := range in {
		st := &in[i]
		if st.Name == "" {
			return nil, fmt.Errorf("state #%d has no name", i)
		}
		out[i] = stateRow{key: Skey(st.Name), updated: updated, st: st}
	}
	slices.SortStableFunc(out, func(a, b stateRow) int {
		if c := cmp.Compare(a.key, b.key); c != 0 {
			return c
		}
		return strings.Compare(a.st.Name, b.st.Name)
	})
	// Keep the last row of each run of equal names.
	n := 0
	for i := range out {
		if i+1 < len(out) && out[i+1].key == out[i].key && out[i+1].st.Name == out[i].st.Name {
			continue
		}
		out[n] = out[i]
		n++
	}
	return out[:n], nil
}
