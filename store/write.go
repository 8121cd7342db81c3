package store

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"gorm.io/gorm"
)

// The write path of SaveBatch is plain SQL through prepared statements:
// gorm would build, and SQLite parse, a new statement for every batch size,
// and gorm adds a RETURNING clause to every insert. Statements are prepared
// once, at Open, for 1, 2, 4, ... maxRows rows; a batch of n rows runs as
// the binary decomposition of n (83 rows = 64 + 16 + 2 + 1).

// rowSizes is how many statements are prepared per table: for 1<<0 up to
// 1<<(rowSizes-1) rows. 64 rows of the widest table bind 1,152 variables,
// far below the limits of SQLite (32,766) and PostgreSQL (65,535).
const rowSizes = 7

// stateColumns lists SourceState's columns in the order scanState reads
// them; stateArgs binds skey first, then these.
const stateColumns = "name, fingerprint, consecutive_failures, consecutive_throttles, next_run_at, last_run_at, " +
	"last_success_at, last_error, last_outcome, breaker_state, breaker_until, error_reason, paused, " +
	"paused_reason, polls_total, failures_total, throttled_total, history_seq, updated_at"

// recordColumns lists PollRecord's columns in the order History reads them;
// recordArgs binds skey first, then these.
const recordColumns = "source, seq, started_at, duration_ms, outcome, error, status_code, exit_code, bytes"

// bindFunc writes the i-th (from 1) bind variable of a statement in the
// syntax of the database: "?" for SQLite, "$i" for PostgreSQL.
type bindFunc func(i int) string

func sqliteBind(int) string { return "?" }

// writer holds the statements of SaveBatch, prepared once per store.
type writer struct {
	states  [rowSizes]*sql.Stmt // states[k] upserts 1<<k states
	records [rowSizes]*sql.Stmt // records[k] upserts 1<<k records
	maxSeq  *sql.Stmt           // (skey, source) → the newest seq, 0 if none
	trim    *sql.Stmt           // (skey, source, seq) deletes its records up to seq
}

// prepareWriter prepares the statements of SaveBatch on db. It must run
// outside any transaction: the store has a single connection.
func prepareWriter(db *sql.DB, bind bindFunc) (w *writer, err error) {
	w = &writer{}
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
	rcols := strings.Split(recordColumns, ", ")
	rsets := make([]string, 0, len(rcols)-2)
	for _, c := range rcols[2:] {
		rsets = append(rsets, c+" = excluded."+c)
	}
	recUpsert := " ON CONFLICT (skey, source, seq) DO UPDATE SET " + strings.Join(rsets, ", ")
	for k := range rowSizes {
		if w.states[k], err = prep(insertSQL(tableStates, "skey, "+stateColumns, 1<<k, bind) + upsert); err != nil {
			return w, err
		}
		if w.records[k], err = prep(insertSQL(tableRecords, "skey, "+recordColumns, 1<<k, bind) + recUpsert); err != nil {
			return w, err
		}
	}
	if w.maxSeq, err = prep("SELECT COALESCE(MAX(seq), 0) FROM " + tableRecords +
		" WHERE skey = " + bind(1) + " AND source = " + bind(2)); err != nil {
		return w, err
	}
	w.trim, err = prep("DELETE FROM " + tableRecords + " WHERE skey = " + bind(1) + " AND source = " + bind(2) +
		" AND seq <= " + bind(3))
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
	for _, st := range slices.Concat(w.states[:], w.records[:], []*sql.Stmt{w.maxSeq, w.trim}) {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	return errors.Join(errs...)
}

// execRows runs, within tx, the statements of stmts that together write n
// rows; args appends the values of row i.
func execRows(ctx context.Context, tx *sql.Tx, stmts *[rowSizes]*sql.Stmt, n int, args func(i int, dst []any) []any) error {
	var vals []any
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
	st := &row.st
	return append(dst, row.key, st.Name, st.Fingerprint, st.ConsecutiveFailures, st.ConsecutiveThrottles,
		microsPtr(st.NextRunAt), microsPtr(st.LastRunAt), microsPtr(st.LastSuccessAt), st.LastError,
		st.LastOutcome, st.BreakerState, microsPtr(st.BreakerUntil), st.ErrorReason, st.Paused,
		st.PausedReason, st.PollsTotal, st.FailuresTotal, st.ThrottledTotal, st.HistorySeq, micros(st.UpdatedAt))
}

// recordArgs appends r's values in recordColumns order, with seq.
func recordArgs(r *PollRecord, seq int64, dst []any) []any {
	return append(dst, skey(r.Source), r.Source, seq, micros(r.StartedAt), r.DurationMs, r.Outcome, r.Error,
		nullable(r.StatusCode), nullable(r.ExitCode), r.Bytes)
}

// nullable turns a nil pointer into SQL NULL and any other into its value.
func nullable[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

// checkColumns compares the column lists of the hand-written SQL with the
// schema gorm derives from the structs, so that a field added to one cannot
// be silently left out of the other.
func checkColumns(db *gorm.DB) error {
	for _, c := range []struct {
		model   any
		columns string
	}{{&SourceState{}, stateColumns}, {&PollRecord{}, recordColumns}} {
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
// database only, in the order given, after the source's stored ones. Times are stored
// in UTC at microsecond precision, and UpdatedAt is set to the commit time.
// When a name occurs more than once in states, the last occurrence wins.
func (s *Store) SaveBatch(ctx context.Context, states []SourceState, records []PollRecord, keep int) error {
	return s.saveBatch(ctx, states, records, keep, nil, true)
}

// SaveBatchTrim is SaveBatch, but it trims the history of the sources in
// trim only (to their newest keep records), whether or not they got a
// record. The daemon trims a source once every few records instead of at
// each one: a trim deletes a range of the source's records in one statement,
// however many there are (readers cap what they return at keep).
func (s *Store) SaveBatchTrim(ctx context.Context, states []SourceState, records []PollRecord, keep int, trim []string) error {
	return s.saveBatch(ctx, states, records, keep, trim, false)
}

func (s *Store) saveBatch(ctx context.Context, states []SourceState, records []PollRecord, keep int, trim []string, trimRecorded bool) error {
	if len(states) == 0 && len(records) == 0 && len(trim) == 0 {
		return nil
	}
	sts, err := prepareStates(states, now())
	if err != nil {
		return fmt.Errorf("store: save batch: %w", err)
	}
	for i := range records {
		if records[i].Source == "" {
			return fmt.Errorf("store: save batch: record #%d has no source", i)
		}
	}
	if err := s.commitBatch(ctx, sts, records, keep, trim, trimRecorded); err != nil {
		return fmt.Errorf("store: save batch: %w", err)
	}
	return nil
}

func (s *Store) commitBatch(ctx context.Context, sts []stateRow, records []PollRecord, keep int, trim []string, trimRecorded bool) (err error) {
	tx, err := s.sql.BeginTx(ctx, nil)
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
	if err := execRows(ctx, tx, &s.w.states, len(sts), func(i int, dst []any) []any {
		return stateArgs(&sts[i], dst)
	}); err != nil {
		return fmt.Errorf("upsert states: %w", err)
	}

	// newest is each source's newest seq: the largest given in this batch,
	// or, for a record without one, read once from the table and advanced.
	newest := map[string]int64{}
	looked := map[string]bool{}
	maxSeq := tx.StmtContext(ctx, s.w.maxSeq)
	lookup := func(src string) (int64, error) {
		if looked[src] {
			return newest[src], nil
		}
		var n int64
		if err := maxSeq.QueryRowContext(ctx, skey(src), src).Scan(&n); err != nil {
			return 0, fmt.Errorf("newest record of %q: %w", src, err)
		}
		looked[src] = true
		newest[src] = max(newest[src], n)
		return newest[src], nil
	}
	seqs := make([]int64, len(records))
	for i := range records {
		src, seq := records[i].Source, records[i].Seq
		if seq <= 0 {
			n, err := lookup(src)
			if err != nil {
				return err
			}
			seq = n + 1
		}
		seqs[i] = seq
		newest[src] = max(newest[src], seq)
	}
	if err := execRows(ctx, tx, &s.w.records, len(records), func(i int, dst []any) []any {
		return recordArgs(&records[i], seqs[i], dst)
	}); err != nil {
		return fmt.Errorf("insert records: %w", err)
	}

	if keep > 0 {
		if trimRecorded {
			trim = make([]string, 0, len(newest))
			for src := range newest {
				trim = append(trim, src)
			}
			slices.Sort(trim)
		}
		del := tx.StmtContext(ctx, s.w.trim)
		for _, src := range trim {
			n, ok := newest[src]
			if !ok {
				var err error
				if n, err = lookup(src); err != nil {
					return err
				}
			}
			if n <= int64(keep) {
				continue
			}
			if _, err := del.ExecContext(ctx, skey(src), src, n-int64(keep)); err != nil {
				return fmt.Errorf("trim history of %q: %w", src, err)
			}
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// stateRow is a state with its row key (skey of its name), computed once.
type stateRow struct {
	key int64
	st  SourceState
}

// prepareStates returns the rows to write, one per name (the last one wins:
// PostgreSQL refuses an upsert that touches a row twice), in the order of
// the table, with UpdatedAt set to ts. Times need no normalising: they are
// stored as microseconds since the epoch, whatever their zone.
func prepareStates(in []SourceState, ts time.Time) ([]stateRow, error) {
	out := make([]stateRow, 0, len(in))
	index := make(map[string]int, len(in))
	for i := range in {
		st := in[i]
		if st.Name == "" {
			return nil, fmt.Errorf("state #%d has no name", i)
		}
		st.UpdatedAt = ts
		if j, ok := index[st.Name]; ok {
			out[j].st = st
			continue
		}
		index[st.Name] = len(out)
		out = append(out, stateRow{key: skey(st.Name), st: st})
	}
	slices.SortFunc(out, func(a, b stateRow) int {
		if c := cmp.Compare(a.key, b.key); c != 0 {
			return c
		}
		return strings.Compare(a.st.Name, b.st.Name)
	})
	return out, nil
}
