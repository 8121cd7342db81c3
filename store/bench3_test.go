package store_test

// BenchmarkStoreVsBare measures issue 25's target 1: the store's cost per
// poll against the bare batched SQL that writes the same data in the same
// run. Run it with
//
//	flock /tmp/bench.lock go test ./store -run '^$' -bench BenchmarkStoreVsBare -benchtime=1x
//
// PACER_BENCH_ROUNDS (default 3) sets the rounds; each round writes every
// source once with each writer, in turn (the order alternating from round
// to round), and the figures are the medians of the rounds.

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/bench"
	"github.com/pacer-dev/pacer/domain"
	"github.com/pacer-dev/pacer/store"
)

// batchedWriter is the bare baseline of BenchmarkStoreVsBare: what a
// program writing the same data without pacer's store would run. Each
// batch is one transaction; in it, each state is one execution of a
// prepared single-row upsert of every column of source_states (the
// store's own table, times as integers as the store keeps them), each
// record one prepared insert of a row into poll_records, numbered by the
// caller as the daemon numbers them, and the record keep polls older
// deleted by its primary key, so that the history stays at keep records.
type batchedWriter struct {
	db                  *sql.DB
	upsert, ins, delete *sql.Stmt
}

// allStateColumns are source_states's columns in stateRowArgs's order.
const allStateColumns = "skey, name, fingerprint, consecutive_failures, consecutive_throttles, next_run_at, " +
	"last_run_at, last_success_at, last_error, last_outcome, breaker_state, breaker_until, error_reason, paused, " +
	"paused_reason, polls_total, failures_total, throttled_total, history_seq, updated_at, last_error_at, " +
	"etag, last_modified, digest, last_changed_at, changes_total, incident_open, remind_at, held_event"

func batchedUpsertSQL() string {
	cols := strings.Split(allStateColumns, ", ")
	q := "INSERT INTO source_states (" + allStateColumns + ") VALUES (?" + strings.Repeat(",?", len(cols)-1) +
		") ON CONFLICT (skey, name) DO UPDATE SET "
	for i, c := range cols[2:] {
		if i > 0 {
			q += ", "
		}
		q += c + " = excluded." + c
	}
	return q
}

// newBatchedWriter opens a new store at path (so that the file has the
// store's schema and pragmas), adds the baseline's table of records, and
// prepares the baseline's statements on its connection.
func newBatchedWriter(b *testing.B, path string) batchedWriter {
	s, err := store.Open(path, store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	db, err := store.GormDB(s).DB()
	if err != nil {
		b.Fatal(err)
	}
	if _, err := db.Exec(bareRecordsDDL); err != nil {
		b.Fatal(err)
	}
	w := batchedWriter{db: db}
	for _, p := range []struct {
		st **sql.Stmt
		q  string
	}{
		{&w.upsert, batchedUpsertSQL()},
		{&w.ins, "INSERT INTO poll_records (skey, source, seq, started_at, duration_ms, outcome, error, status_code, exit_code, bytes) VALUES (?,?,?,?,?,?,?,?,?,?)"},
		{&w.delete, "DELETE FROM poll_records WHERE skey = ? AND source = ? AND seq = ?"},
	} {
		if *p.st, err = db.Prepare(p.q); err != nil {
			b.Fatal(err)
		}
	}
	b.Cleanup(func() { _, _, _ = w.upsert.Close(), w.ins.Close(), w.delete.Close() })
	return w
}

func ntStr(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// stateRowArgs are the values of st's row, in allStateColumns's order.
func stateRowArgs(st *domain.SourceState, updated int64) []any {
	return []any{skeyOf(st.Name), st.Name, st.Fingerprint, st.ConsecutiveFailures, st.ConsecutiveThrottles,
		nt(st.NextRunAt), nt(st.LastRunAt), nt(st.LastSuccessAt), st.LastError, st.LastOutcome, st.BreakerState,
		nt(st.BreakerUntil), st.ErrorReason, st.Paused, st.PausedReason, st.PollsTotal, st.FailuresTotal,
		st.ThrottledTotal, st.HistorySeq, updated, nt(st.LastErrorAt), ntStr(st.ETag), ntStr(st.LastModified),
		ntStr(st.Digest), nt(st.LastChangedAt), st.ChangesTotal, st.IncidentOpen, nt(st.RemindAt), ntStr(st.HeldEvent)}
}

// save writes a batch in one transaction; keep > 0 deletes, for each
// record, the one keep polls older.
func (w batchedWriter) save(ctx context.Context, states []domain.SourceState, recs []domain.PollRecord, keep int) error {
	tx, err := w.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op
	up, ins, del := tx.StmtContext(ctx, w.upsert), tx.StmtContext(ctx, w.ins), tx.StmtContext(ctx, w.delete)
	updated := time.Now().UnixMicro()
	for i := range states {
		if _, err := up.ExecContext(ctx, stateRowArgs(&states[i], updated)...); err != nil {
			return err
		}
	}
	for _, r := range recs {
		code, exit := recordCodes(r)
		key := skeyOf(r.Source)
		if _, err := ins.ExecContext(ctx, key, r.Source, r.Seq, r.StartedAt.UnixMicro(), r.DurationMs,
			r.Outcome, r.Error, code, exit, r.Bytes); err != nil {
			return err
		}
		if keep > 0 && r.Seq > int64(keep) {
			if _, err := del.ExecContext(ctx, key, r.Source, r.Seq-int64(keep)); err != nil {
				return err
			}
		}
	}
	return tx.Commit()
}

// BenchmarkStoreVsBare writes, per round, every one of 20,000 sources (100
// records each already stored: the history is full) once through the
// store as the flusher does (Commit of batches of the flusher's size,
// records numbered by the caller, in phase order) and once through the
// bare batched writer on a file of its own, and reports the CPU per poll
// of each (the whole process: the writer is all that runs) and their
// ratio (target: store/bare <= 1.3), medians of the rounds. The batch
// sizes: 250 is the flusher's commit at 100,000 sources polled once a
// minute (1,667 polls/s, a commit every 150 ms), 1,000 a busier daemon's.
func BenchmarkStoreVsBare(b *testing.B) {
	const nsrc, keep = 20_000, 100
	s := openPopulated(b, nsrc, keep, false)
	w := newBatchedWriter(b, filepath.Join(b.TempDir(), "bare.db"))
	t0 := time.Now().Add(-24 * time.Hour)
	for lo := 0; lo < nsrc; lo += 5000 {
		states, recs := healthyBatch(lo, lo+5000, keep, t0)
		if err := w.save(context.Background(), states, recs, 0); err != nil {
			b.Fatal(err)
		}
	}
	names := make([]string, nsrc)
	for i := range names {
		names[i] = fmt.Sprintf("src-%06d", i)
	}
	slices.SortFunc(names, func(a, b string) int { return cmp.Compare(domain.NameHash(a), domain.NameHash(b)) })
	seqs := map[string]map[string]int64{"store": {}, "bare": {}}
	for _, m := range seqs {
		for _, n := range names {
			m[n] = keep
		}
	}
	writers := map[string]func([]domain.SourceState, []domain.PollRecord) error{
		"store": func(st []domain.SourceState, recs []domain.PollRecord) error {
			return s.Commit(context.Background(), domain.Batch{States: st, Records: recs}, keep)
		},
		"bare": func(st []domain.SourceState, recs []domain.PollRecord) error {
			return w.save(context.Background(), st, recs, keep)
		},
	}
	rounds := bench.EnvInt("PACER_BENCH_ROUNDS", 3)
	for _, payload := range []string{"state+record", "state-only"} {
		for _, batch := range []int{250, 1000} {
			b.Run(fmt.Sprintf("%s/batch=%d", payload, batch), func(b *testing.B) {
				for b.Loop() {
					res := map[string][]float64{}
					for r := range rounds {
						order := []string{"store", "bare"}
						if r%2 == 1 {
							order = []string{"bare", "store"}
						}
						for _, kind := range order {
							cpu, wall := writeAll(b, names, batch, payload == "state+record", seqs[kind], writers[kind])
							res[kind+"-cpu"] = append(res[kind+"-cpu"], cpu)
							res[kind+"-wall"] = append(res[kind+"-wall"], wall)
						}
						res["ratio-cpu"] = append(res["ratio-cpu"], res["store-cpu"][r]/res["bare-cpu"][r])
						res["ratio-wall"] = append(res["ratio-wall"], res["store-wall"][r]/res["bare-wall"][r])
						b.Logf("round %d: store %.2f µs CPU (%.2f wall), bare %.2f µs CPU (%.2f wall) per poll: %.2fx",
							r+1, res["store-cpu"][r]/1e3, res["store-wall"][r]/1e3, res["bare-cpu"][r]/1e3,
							res["bare-wall"][r]/1e3, res["ratio-cpu"][r])
					}
					for _, k := range []string{"store-cpu", "bare-cpu", "store-wall", "bare-wall"} {
						b.ReportMetric(bench.Median(res[k]), k+"-ns/poll")
					}
					b.ReportMetric(bench.Median(res["ratio-cpu"]), "store/bare-cpu")
					b.ReportMetric(bench.Median(res["ratio-wall"]), "store/bare-wall")
				}
			})
		}
	}
}

// writeAll writes every source once through save, in batches of batch in
// the order of names, with a record each if withRecords (numbered after
// seq's), and returns the process CPU and the wall time per poll in ns.
func writeAll(b *testing.B, names []string, batch int, withRecords bool, seq map[string]int64,
	save func([]domain.SourceState, []domain.PollRecord) error) (cpu, wall float64) {
	states := make([]domain.SourceState, batch)
	var recs []domain.PollRecord
	start, c0 := time.Now(), bench.CPUTime()
	for lo := 0; lo < len(names); lo += batch {
		now := time.Now()
		part := names[lo:min(lo+batch, len(names))]
		states = states[:len(part)]
		recs = recs[:0]
		for i, name := range part {
			states[i] = healthyState(name, int(seq[name]), now)
			if withRecords {
				seq[name]++
				rec := healthyRecord(name, now)
				rec.Seq = seq[name]
				recs = append(recs, rec)
			}
			states[i].HistorySeq = seq[name]
		}
		if err := save(states, recs); err != nil {
			b.Fatal(err)
		}
	}
	n := float64(len(names))
	return float64(bench.CPUTime()-c0) / n, float64(time.Since(start)) / n
}
