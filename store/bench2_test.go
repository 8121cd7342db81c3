package store_test

// Commit-rate and CPU benchmarks of the store (contract target: >= 50,000
// source-state commits/s batched, one writer, WAL; <= 3% of a core for
// 100,000 sources polled once a minute). Each compares SaveBatch with
// a baseline measured in the same run: the same rows written through
// database/sql with prepared single-row statements on the store's own
// connection ("bare"), which is what SQLite itself costs. Run them with
// -run '^$' so that the tests do not run; for example
//
//	go test ./store -run '^$' -bench 'BenchmarkCommitRate' -benchtime=2s
//	go test ./store -run '^$' -bench 'BenchmarkStoreMinuteLoad' -benchtime=1x
//
// PACER_BENCH_WINDOW (default 8s) and PACER_BENCH_ROUNDS (default 3) set
// the window and rounds of BenchmarkStoreMinuteLoad; PACER_BENCH_HISTORY
// (default 10; 100, history.keep's default, is the steady state) the
// records per source already in the store, PACER_BENCH_KINDS (comma-
// separated) the variants to run, PACER_BENCH_TICK (default 50ms, the
// flusher's gathering window) the interval between two commits.

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/bench"
	"github.com/pacer-dev/pacer/domain"
	"github.com/pacer-dev/pacer/store"
)

// healthyState is what the daemon writes after a successful poll: a
// fingerprint, three times, no error.
func healthyState(name string, n int, at time.Time) domain.SourceState {
	next := at.Add(time.Minute)
	return domain.SourceState{Name: name, Fingerprint: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
		NextRunAt: &next, LastRunAt: &at, LastSuccessAt: &at, LastOutcome: domain.OutcomeSuccess,
		BreakerState: "closed", PollsTotal: int64(n), UpdatedAt: at}
}

func healthyRecord(name string, at time.Time) domain.PollRecord {
	code := 200
	return domain.PollRecord{Source: name, StartedAt: at, DurationMs: 10, Outcome: domain.OutcomeSuccess, StatusCode: &code, Bytes: 3}
}

// bareWriter writes SaveBatch's rows through database/sql prepared
// statements (one row each), in one transaction per batch, on the store's
// own connection: the baseline of what SQLite costs without gorm's
// per-batch SQL generation and parsing.
type bareWriter struct {
	db *sql.DB
	// spent, if not nil, accumulates the wall time of each part of a
	// batch: "upsert", "insert", "trim", "commit" (begin included).
	spent map[string]time.Duration
}

func (w bareWriter) since(part string, t time.Time) time.Time {
	now := time.Now()
	if w.spent != nil {
		w.spent[part] += now.Sub(t)
	}
	return now
}

const bareUpsert = `INSERT INTO source_states (skey, name, fingerprint, consecutive_failures, consecutive_throttles,
 next_run_at, last_run_at, last_success_at, last_error, last_outcome, breaker_state, breaker_until, error_reason,
 paused, paused_reason, polls_total, failures_total, throttled_total, updated_at)
 VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)
 ON CONFLICT(skey, name) DO UPDATE SET fingerprint=excluded.fingerprint, consecutive_failures=excluded.consecutive_failures,
 consecutive_throttles=excluded.consecutive_throttles, next_run_at=excluded.next_run_at, last_run_at=excluded.last_run_at,
 last_success_at=excluded.last_success_at, last_error=excluded.last_error, last_outcome=excluded.last_outcome,
 breaker_state=excluded.breaker_state, breaker_until=excluded.breaker_until, error_reason=excluded.error_reason,
 paused=excluded.paused, paused_reason=excluded.paused_reason, polls_total=excluded.polls_total,
 failures_total=excluded.failures_total, throttled_total=excluded.throttled_total, updated_at=excluded.updated_at`

const bareInsert = `INSERT INTO poll_records (skey, source, seq, started_at, duration_ms, outcome, error, status_code, exit_code, bytes)
 VALUES (?1, ?2, (SELECT COALESCE(MAX(seq), 0) + 1 FROM poll_records WHERE skey = ?1 AND source = ?2),?3,?4,?5,?6,?7,?8,?9)`

const bareTrim = `DELETE FROM poll_records WHERE skey = ?1 AND source = ?2
 AND seq <= (SELECT MAX(seq) FROM poll_records WHERE skey = ?1 AND source = ?2) - ?3`

// skeyOf is the store's row key of a source (domain.NameHash in int64's
// signed order).
func skeyOf(name string) int64 { return int64(domain.NameHash(name) ^ 1<<63) }

// recordCodes are r's status and exit codes as the bare SQL binds them
// (NULL when absent).
func recordCodes(r domain.PollRecord) (code, exit any) {
	if r.StatusCode != nil {
		code = *r.StatusCode
	}
	if r.ExitCode != nil {
		exit = *r.ExitCode
	}
	return code, exit
}

func nt(t *time.Time) any {
	if t == nil {
		return nil
	}
	return t.UnixMicro()
}

func (w bareWriter) save(ctx context.Context, states []domain.SourceState, recs []domain.PollRecord, keep int) error {
	t := time.Now()
	tx, err := w.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	t = w.since("commit", t)
	defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op
	up, err := tx.PrepareContext(ctx, bareUpsert)
	if err != nil {
		return err
	}
	ts := time.Now().UnixMicro()
	for _, s := range states {
		if _, err := up.ExecContext(ctx, skeyOf(s.Name), s.Name, s.Fingerprint, s.ConsecutiveFailures, s.ConsecutiveThrottles,
			nt(s.NextRunAt), nt(s.LastRunAt), nt(s.LastSuccessAt), s.LastError, s.LastOutcome, s.BreakerState,
			nt(s.BreakerUntil), s.ErrorReason, s.Paused, s.PausedReason, s.PollsTotal, s.FailuresTotal,
			s.ThrottledTotal, ts); err != nil {
			return err
		}
	}
	t = w.since("upsert", t)
	if len(recs) > 0 {
		ins, err := tx.PrepareContext(ctx, bareInsert)
		if err != nil {
			return err
		}
		for _, r := range recs {
			code, exit := recordCodes(r)
			if _, err := ins.ExecContext(ctx, skeyOf(r.Source), r.Source, r.StartedAt.UnixMicro(), r.DurationMs,
				r.Outcome, r.Error, code, exit, r.Bytes); err != nil {
				return err
			}
		}
		t = w.since("insert", t)
		if keep > 0 {
			trim, err := tx.PrepareContext(ctx, bareTrim)
			if err != nil {
				return err
			}
			for _, r := range recs {
				if _, err := trim.ExecContext(ctx, skeyOf(r.Source), r.Source, keep); err != nil {
					return err
				}
			}
			t = w.since("trim", t)
		}
	}
	err = tx.Commit()
	w.since("commit", t)
	return err
}

// bareRecordsDDL is the baseline's records table: one row per record,
// clustered by source and seq (the store's layout before history blocks).
const bareRecordsDDL = `CREATE TABLE IF NOT EXISTS poll_records (
	skey INTEGER NOT NULL, source TEXT NOT NULL, seq INTEGER NOT NULL,
	started_at INTEGER NOT NULL DEFAULT 0, duration_ms INTEGER NOT NULL DEFAULT 0,
	outcome TEXT NOT NULL DEFAULT '', error TEXT NOT NULL DEFAULT '',
	status_code INTEGER, exit_code INTEGER, bytes INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (skey, source, seq)
) WITHOUT ROWID`

func bare(b *testing.B, s *store.Store) bareWriter {
	db, err := store.GormDB(s).DB()
	if err != nil {
		b.Fatal(err)
	}
	if _, err := db.Exec(bareRecordsDDL); err != nil {
		b.Fatal(err)
	}
	return bareWriter{db: db}
}

// openPopulated opens a new store with n sources and depth records each,
// numbered 1 to depth, written by SaveBatch (keep 100) in large
// transactions; withBare also writes them to the bare writer's table.
func openPopulated(b *testing.B, n, depth int, withBare bool) *store.Store {
	b.Helper()
	s, err := store.Open(filepath.Join(b.TempDir(), "pacer.db"), store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	w := bare(b, s)
	start := time.Now()
	t0 := time.Now().Add(-24 * time.Hour)
	const chunk = 20_000
	for lo := 0; lo < n; lo += chunk {
		hi := min(lo+chunk, n)
		states, recs := healthyBatch(lo, hi, depth, t0)
		if err := s.SaveBatch(context.Background(), states, recs, 100); err != nil {
			b.Fatal(err)
		}
		if withBare {
			if err := w.save(context.Background(), nil, recs, 0); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Logf("store populated: %d sources x %d records in %v", n, depth, time.Since(start).Round(time.Millisecond))
	return s
}

// BenchmarkCommitRate measures the commit throughput (states/s, each with
// its poll record and the trim of its history at keep=100, history full)
// of SaveBatch with one state per transaction (single) and batched, and of
// the bare database/sql writer on the same batches. 20,000 sources. The
// daemon variant is what the flusher does: records numbered by the caller,
// a source's history trimmed once per keep/4 of its records. A batch holds
// sources that are consecutive in phase order (domain.NameHash), as a
// daemon's commit does.
func BenchmarkCommitRate(b *testing.B) {
	const nsrc, keep = 20_000, 100
	s := openPopulated(b, nsrc, keep, true)
	w := bare(b, s)
	names := make([]string, nsrc)
	for i := range names {
		names[i] = fmt.Sprintf("src-%06d", i)
	}
	// In phase order, as the daemon commits them: by domain.NameHash, the
	// order of the tables.
	slices.SortFunc(names, func(a, b string) int { return cmp.Compare(domain.NameHash(a), domain.NameHash(b)) })
	round := 0
	run := func(b *testing.B, batch int, withRecords bool, save func([]domain.SourceState, []domain.PollRecord) error) {
		states := make([]domain.SourceState, batch)
		var recs []domain.PollRecord
		if withRecords {
			recs = make([]domain.PollRecord, batch)
		}
		c0 := bench.CPUTime()
		for b.Loop() {
			now := time.Now()
			for i := range batch {
				name := names[(round+i)%nsrc]
				states[i] = healthyState(name, round, now)
				if withRecords {
					recs[i] = healthyRecord(name, now)
				}
			}
			round += batch
			if err := save(states, recs); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "states/s")
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/state")
		// CPU per state (the whole process: the writer is all that runs);
		// the rest of ns/state is waiting, mostly for the disk (fsync of
		// checkpoints).
		b.ReportMetric(float64(bench.CPUTime()-c0)/float64(b.N*batch), "cpu-ns/state")
	}
	saveBatch := func(states []domain.SourceState, recs []domain.PollRecord) error {
		return s.SaveBatch(context.Background(), states, recs, keep)
	}
	saveBare := func(states []domain.SourceState, recs []domain.PollRecord) error {
		return w.save(context.Background(), states, recs, keep)
	}
	// daemon numbers the records itself and trims a source once per keep/4
	// of its records, as the flusher does.
	seq := make(map[string]int64, nsrc)
	for _, name := range names {
		seq[name] = keep
	}
	saveDaemon := func(states []domain.SourceState, recs []domain.PollRecord) error {
		for i := range recs {
			seq[recs[i].Source]++
			recs[i].Seq = seq[recs[i].Source]
			states[i].HistorySeq = recs[i].Seq
		}
		return s.SaveBatch(context.Background(), states, recs, keep)
	}
	for _, batch := range []int{100, 1000} {
		b.Run(fmt.Sprintf("daemon/state+record/batch=%d", batch), func(b *testing.B) { run(b, batch, true, saveDaemon) })
	}
	for _, batch := range []int{1, 100, 1000, 5000} {
		b.Run(fmt.Sprintf("saveBatch/state+record/batch=%d", batch), func(b *testing.B) { run(b, batch, true, saveBatch) })
		b.Run(fmt.Sprintf("bare/state+record/batch=%d", batch), func(b *testing.B) { run(b, batch, true, saveBare) })
	}
	for _, batch := range []int{1000} {
		b.Run(fmt.Sprintf("saveBatch/state-only/batch=%d", batch), func(b *testing.B) { run(b, batch, false, saveBatch) })
		b.Run(fmt.Sprintf("bare/state-only/batch=%d", batch), func(b *testing.B) { run(b, batch, false, saveBare) })
	}
	// What a bigger page cache is worth (the default is 2 MiB; the records
	// of 20,000 sources take ~300 MiB).
	db := w.db
	if _, err := db.Exec("PRAGMA cache_size = -262144"); err != nil {
		b.Fatal(err)
	}
	b.Run("saveBatch+cache256MiB/state+record/batch=1000", func(b *testing.B) { run(b, 1000, true, saveBatch) })
	if _, err := db.Exec("PRAGMA cache_size = -2000"); err != nil {
		b.Fatal(err)
	}
	// Diagnostic only (not a proposal: it gives up durability on power
	// loss): without fsync, what is left is CPU.
	if _, err := db.Exec("PRAGMA synchronous = OFF"); err != nil {
		b.Fatal(err)
	}
	b.Run("saveBatch+syncOFF/state+record/batch=1000", func(b *testing.B) { run(b, 1000, true, saveBatch) })
	if _, err := db.Exec("PRAGMA synchronous = NORMAL"); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkStoreMinuteLoad replays what the flusher writes for 100,000
// sources polled once a minute: 1,667 states and records per second, in
// commits every 50 ms, history trimmed at 100 (PACER_BENCH_HISTORY records
// per source already stored), and reports the process CPU over the window
// as a share of one core (target: <= 3%). Each round runs, in turn:
//
//   - daemon: what the flusher does, in phase order (the figure for the
//     target): records numbered by the caller (SourceState.HistorySeq),
//     SaveBatchTrim trimming a source once per keep/4 of its records. The
//     phases follow domain.NameHash, the order of the tables, so a commit
//     writes neighbouring rows;
//   - saveBatch: SaveBatch, the store numbering the records (one read per
//     source) and trimming at every record;
//   - bare: the same rows through database/sql prepared single-row
//     statements, trimming at every record (the baseline: SQLite alone);
//   - daemon-scattered: daemon with the sources in a random order, i.e.
//     each commit's rows all over the tables (phases unrelated to the
//     tables' order, as in pacer before its tables were keyed by the hash);
//   - none: the same replay writing nothing, the harness's own CPU (the
//     store's share of a variant is its figure minus this one).
func BenchmarkStoreMinuteLoad(b *testing.B) {
	const nsrc, keep = 100_000, 100
	tick := bench.EnvDuration("PACER_BENCH_TICK", 50*time.Millisecond) // the flusher's flushDelay
	window := bench.EnvDuration("PACER_BENCH_WINDOW", 8*time.Second)
	rounds := bench.EnvInt("PACER_BENCH_ROUNDS", 3)
	kinds := []string{"daemon", "saveBatch", "bare", "daemon-scattered", "none"}
	if k := os.Getenv("PACER_BENCH_KINDS"); k != "" {
		kinds = strings.Split(k, ",") // e.g. daemon,bare
	}
	s := openPopulated(b, nsrc, bench.EnvInt("PACER_BENCH_HISTORY", 10), slices.Contains(kinds, "bare"))
	w := bare(b, s)
	w.spent = map[string]time.Duration{}
	names := make([]string, nsrc)
	for i := range names {
		names[i] = fmt.Sprintf("src-%06d", i)
	}
	// Phase order: the scheduler phases "@every" sources by
	// domain.NameHash, the order of the store's rows.
	phaseOrder := slices.Clone(names)
	slices.SortFunc(phaseOrder, func(a, b string) int { return cmp.Compare(domain.NameHash(a), domain.NameHash(b)) })
	// Scattered: a fixed pseudo-random permutation, what a phase unrelated
	// to the table's order gives (pacer before the tables were keyed by
	// the hash).
	scattered := make([]string, nsrc)
	for i, j := range rand.New(rand.NewPCG(7, 7)).Perm(nsrc) {
		scattered[i] = names[j]
	}
	perTick := float64(nsrc) / 60 * tick.Seconds()
	next := 0
	// seq numbers each source's records as the daemon does
	// (SourceState.HistorySeq), after the populated ones.
	depth := bench.EnvInt("PACER_BENCH_HISTORY", 10)
	seq := make(map[string]int64, nsrc)
	for _, name := range names {
		seq[name] = int64(depth)
	}
	replay := func(order []string, save func([]domain.SourceState, []domain.PollRecord) error) (float64, float64) {
		start := time.Now()
		c0 := bench.CPUTime()
		sent := 0
		var commits []time.Duration
		for k := 1; time.Since(start) < window; k++ {
			time.Sleep(time.Until(start.Add(time.Duration(k) * tick)))
			due := int(perTick * float64(k))
			var states []domain.SourceState
			var recs []domain.PollRecord
			now := time.Now()
			for ; sent < due; sent++ {
				name := order[next]
				next = (next + 1) % nsrc
				seq[name]++
				st, rec := healthyState(name, sent, now), healthyRecord(name, now)
				st.HistorySeq, rec.Seq = seq[name], seq[name]
				states, recs = append(states, st), append(recs, rec)
			}
			t := time.Now()
			if err := save(states, recs); err != nil {
				b.Fatal(err)
			}
			commits = append(commits, time.Since(t))
		}
		cpu := float64(bench.CPUTime()-c0) / float64(time.Since(start))
		slices.Sort(commits)
		return cpu, float64(commits[len(commits)*99/100]) / 1e6
	}
	// daemon is what the flusher does: records numbered by the caller, each
	// source's history trimmed once per keep/4 of its records.
	daemon := func(states []domain.SourceState, recs []domain.PollRecord) error {
		return s.SaveBatch(context.Background(), states, recs, keep)
	}
	// saveBatch leaves the numbering to the store (a read of each source's
	// newest record) and trims at every record.
	saveBatch := func(states []domain.SourceState, recs []domain.PollRecord) error {
		for i := range recs {
			recs[i].Seq = 0
		}
		return s.SaveBatch(context.Background(), states, recs, keep)
	}
	saveBare := func(states []domain.SourceState, recs []domain.PollRecord) error {
		return w.save(context.Background(), states, recs, keep)
	}
	res := map[string][]float64{}
	for r := range rounds {
		for _, kind := range kinds {
			var cpu, p99 float64
			switch kind {
			case "daemon":
				cpu, p99 = replay(phaseOrder, daemon)
			case "saveBatch":
				cpu, p99 = replay(phaseOrder, saveBatch)
			case "bare":
				clear(w.spent)
				cpu, p99 = replay(phaseOrder, saveBare)
				var total time.Duration
				for _, d := range w.spent {
					total += d
				}
				b.Logf("round %d: bare writer's time by part: upsert %.0f%%, insert %.0f%%, trim %.0f%%, begin+commit %.0f%%", r+1,
					100*w.spent["upsert"].Seconds()/total.Seconds(), 100*w.spent["insert"].Seconds()/total.Seconds(),
					100*w.spent["trim"].Seconds()/total.Seconds(), 100*w.spent["commit"].Seconds()/total.Seconds())
			case "daemon-scattered":
				cpu, p99 = replay(scattered, daemon)
			case "none":
				cpu, p99 = replay(phaseOrder, func([]domain.SourceState, []domain.PollRecord) error { return nil })
			}
			res[kind+"-cpu%"] = append(res[kind+"-cpu%"], 100*cpu)
			res[kind+"-p99ms"] = append(res[kind+"-p99ms"], p99)
			b.Logf("round %d: %-20s %6.2f%% of a core, commit p99 %6.1f ms", r+1, kind, 100*cpu, p99)
		}
		if len(res["bare-cpu%"]) > r && len(res["daemon-cpu%"]) > r {
			res["ratio"] = append(res["ratio"], res["daemon-cpu%"][r]/res["bare-cpu%"][r])
		}
	}
	for _, kind := range kinds {
		b.ReportMetric(bench.Median(res[kind+"-cpu%"]), kind+"-cpu%")
	}
	b.ReportMetric(bench.Median(res["ratio"]), "daemon/bare")
	b.ReportMetric(bench.Median(res["daemon-p99ms"]), "commit-p99-ms")
}

// BenchmarkLoadStates measures LoadStates at 100,000 stored sources (the
// start-up read; target for the whole start: <= 2 s) against two bare
// scans on the same connection in the same run: the same columns without
// ORDER BY (a scan in table order instead of a walk of the name index with
// a table lookup per row), and that scan with the five datetime columns
// cast to text and left unparsed (what the driver's datetime parsing,
// which tries its layouts in turn, costs).
//
//	go test ./store -run '^$' -bench BenchmarkLoadStates -benchtime=3x -count 3
func BenchmarkLoadStates(b *testing.B) {
	const n = 100_000
	s := openPopulated(b, n, 0, false)
	db := bare(b, s).db
	const cols = "name, fingerprint, consecutive_failures, consecutive_throttles, next_run_at, last_run_at, " +
		"last_success_at, last_error, last_outcome, breaker_state, breaker_until, error_reason, paused, " +
		"paused_reason, polls_total, failures_total, throttled_total, updated_at"
	b.Run("LoadStates", func(b *testing.B) {
		for b.Loop() {
			states, err := s.LoadStates(context.Background())
			if err != nil || len(states) != n {
				b.Fatal(len(states), err)
			}
		}
	})
	// Baseline: what SQLite and the driver cost, the same rows scanned into
	// plain variables (times left as integers) and thrown away.
	b.Run("bare-scan", func(b *testing.B) {
		for b.Loop() {
			rows, err := db.QueryContext(context.Background(), "SELECT "+cols+" FROM source_states")
			if err != nil {
				b.Fatal(err)
			}
			count := 0
			for rows.Next() {
				var st domain.SourceState
				var next, last, success, until sql.NullInt64
				var updated int64
				if err := rows.Scan(&st.Name, &st.Fingerprint, &st.ConsecutiveFailures, &st.ConsecutiveThrottles,
					&next, &last, &success, &st.LastError, &st.LastOutcome, &st.BreakerState, &until,
					&st.ErrorReason, &st.Paused, &st.PausedReason, &st.PollsTotal, &st.FailuresTotal,
					&st.ThrottledTotal, &updated); err != nil {
					b.Fatal(err)
				}
				count++
			}
			if err := rows.Close(); err != nil || count != n {
				b.Fatal(count, err)
			}
		}
	})
}

// healthyBatch is the healthy states of sources src-lo to src-(hi-1), each
// with depth records numbered from 1, seconds apart from t0.
func healthyBatch(lo, hi, depth int, t0 time.Time) ([]domain.SourceState, []domain.PollRecord) {
	var states []domain.SourceState
	var recs []domain.PollRecord
	for i := lo; i < hi; i++ {
		name := fmt.Sprintf("src-%06d", i)
		st := healthyState(name, depth, t0)
		st.HistorySeq = int64(depth)
		states = append(states, st)
		for d := range depth {
			r := healthyRecord(name, t0.Add(time.Duration(d)*time.Second))
			r.Seq = int64(d + 1)
			recs = append(recs, r)
		}
	}
	return states, recs
}
