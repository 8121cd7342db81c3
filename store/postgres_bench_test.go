package store_test

// Benchmarks of the PostgreSQL backend, on the server of
// PACER_TEST_POSTGRES (which must run on this machine: its processes' CPU
// is read from /proc). Target (issue 12): <= 0.2 ms of database CPU per
// poll, state and history included. For example, with scripts/postgres.sh:
//
//	go test ./store -run '^$' -bench 'BenchmarkPostgresCommitRate' -benchtime=2s
//	go test ./store -run '^$' -bench 'BenchmarkPostgresMinuteLoad' -benchtime=1x
//
// BenchmarkPostgresMinuteLoad takes PACER_BENCH_WINDOW, PACER_BENCH_ROUNDS,
// PACER_BENCH_HISTORY and PACER_BENCH_TICK as BenchmarkStoreMinuteLoad.

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/bench"
	"github.com/pacer-dev/pacer/domain"
	"github.com/pacer-dev/pacer/internal/pgtest"
	"github.com/pacer-dev/pacer/store"
)

// serverCPU returns a function that reads the CPU time used so far by the
// PostgreSQL server of s: its postmaster (with its reaped children) and
// every live child (backends, writers, checkpointer, autovacuum).
func serverCPU(b *testing.B, s *store.Store) func() time.Duration {
	b.Helper()
	var backend int
	if err := store.GormDB(s).Raw("SELECT pg_backend_pid()").Row().Scan(&backend); err != nil {
		b.Fatal(err)
	}
	return pgtest.ServerCPU(b, backend)
}

// openPostgresPopulated is openPopulated on a PostgreSQL schema of its own.
func openPostgresPopulated(b *testing.B, n, depth int) *store.Store {
	b.Helper()
	s, err := store.Open(newPostgresDSN(b), store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	start := time.Now()
	t0 := time.Now().Add(-24 * time.Hour)
	const chunk = 5_000
	for lo := 0; lo < n; lo += chunk {
		states, recs := healthyBatch(lo, min(lo+chunk, n), depth, t0)
		if err := s.SaveBatch(context.Background(), states, recs, 100); err != nil {
			b.Fatal(err)
		}
	}
	if err := store.GormDB(s).Exec("ANALYZE").Error; err != nil {
		b.Fatal(err)
	}
	b.Logf("store populated: %d sources x %d records in %v", n, depth, time.Since(start).Round(time.Millisecond))
	return s
}

// phaseOrdered returns n source names in phase order (domain.NameHash), as
// the daemon commits them.
func phaseOrdered(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("src-%06d", i)
	}
	slices.SortFunc(names, func(a, b string) int { return cmp.Compare(domain.NameHash(a), domain.NameHash(b)) })
	return names
}

// BenchmarkPostgresCommitRate: states/s of SaveBatch on PostgreSQL, each
// state with its record, history full at keep=100, records numbered by the
// caller as the flusher does (daemon) or by the store (saveBatch), and the
// CPU per state of this process and of the server.
func BenchmarkPostgresCommitRate(b *testing.B) {
	const nsrc, keep = 20_000, 100
	s := openPostgresPopulated(b, nsrc, keep)
	server := serverCPU(b, s)
	names := phaseOrdered(nsrc)
	seq := make(map[string]int64, nsrc)
	for _, name := range names {
		seq[name] = keep
	}
	round := 0
	run := func(b *testing.B, batch int, numbered bool) {
		states := make([]domain.SourceState, batch)
		recs := make([]domain.PollRecord, batch)
		c0, s0 := bench.CPUTime(), server()
		for b.Loop() {
			now := time.Now()
			for i := range batch {
				name := names[(round+i)%nsrc]
				states[i], recs[i] = healthyState(name, round, now), healthyRecord(name, now)
				if numbered {
					seq[name]++
					recs[i].Seq, states[i].HistorySeq = seq[name], seq[name]
				}
			}
			round += batch
			if err := s.SaveBatch(context.Background(), states, recs, keep); err != nil {
				b.Fatal(err)
			}
		}
		n := float64(b.N * batch)
		b.ReportMetric(n/b.Elapsed().Seconds(), "states/s")
		b.ReportMetric(float64(bench.CPUTime()-c0)/n, "cpu-ns/state")
		b.ReportMetric(float64(server()-s0)/n, "pg-cpu-ns/state")
	}
	for _, batch := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("daemon/state+record/batch=%d", batch), func(b *testing.B) { run(b, batch, true) })
	}
	b.Run("saveBatch/state+record/batch=100", func(b *testing.B) { run(b, 100, false) })
}

// BenchmarkPostgresMinuteLoad replays what the flusher writes for 100,000
// sources polled once a minute (1,667 states and records per second, a
// commit every 50 ms, records numbered by the caller, history kept at 100)
// and reports the server's CPU per poll and per 1,000 polls, and this
// process's CPU, as BenchmarkStoreMinuteLoad does for SQLite. Each round
// replays one window with SaveBatch, then one writing nothing (the
// harness's own CPU, and the server's deferred work).
func BenchmarkPostgresMinuteLoad(b *testing.B) {
	const nsrc, keep = 100_000, 100
	tick := bench.EnvDuration("PACER_BENCH_TICK", 50*time.Millisecond)
	window := bench.EnvDuration("PACER_BENCH_WINDOW", 8*time.Second)
	rounds := bench.EnvInt("PACER_BENCH_ROUNDS", 3)
	depth := bench.EnvInt("PACER_BENCH_HISTORY", 10)
	s := openPostgresPopulated(b, nsrc, depth)
	server := serverCPU(b, s)
	order := phaseOrdered(nsrc)
	seq := make(map[string]int64, nsrc)
	for _, name := range order {
		seq[name] = int64(depth)
	}
	perTick := float64(nsrc) / 60 * tick.Seconds()
	next := 0
	// replay runs the load for one window through save and measures it.
	type measure struct {
		polls, commits  int
		pg              time.Duration // the server's CPU
		client, p99, ms float64       // this process's share of a core; commit p99 and pg ms per poll
	}
	replay := func(save func([]domain.SourceState, []domain.PollRecord) error) measure {
		start := time.Now()
		c0, s0 := bench.CPUTime(), server()
		sent := 0
		var commits []time.Duration
		for k := 1; time.Since(start) < window; k++ {
			time.Sleep(time.Until(start.Add(time.Duration(k) * tick)))
			var states []domain.SourceState
			var recs []domain.PollRecord
			now := time.Now()
			for due := int(perTick * float64(k)); sent < due; sent++ {
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
		elapsed := time.Since(start)
		m := measure{polls: sent, commits: len(commits), pg: server() - s0}
		m.client = 100 * float64(bench.CPUTime()-c0) / float64(elapsed)
		slices.Sort(commits)
		m.p99 = float64(commits[len(commits)*99/100]) / 1e6
		m.ms = float64(m.pg) / float64(sent) / 1e6
		return m
	}
	saveBatch := func(states []domain.SourceState, recs []domain.PollRecord) error {
		return s.SaveBatch(context.Background(), states, recs, keep)
	}
	var pgPerPoll, pgWithAfter, clientCPU, harnessCPU, p99s []float64
	for r := range rounds {
		m := replay(saveBatch)
		// The window writing nothing also catches the server's work that
		// the writes left for later (autovacuum, checkpoints): counted
		// against the polls in pg-cpu-ms/poll+after.
		h := replay(func([]domain.SourceState, []domain.PollRecord) error { return nil })
		pgPerPoll, clientCPU, harnessCPU, p99s = append(pgPerPoll, m.ms), append(clientCPU, m.client), append(harnessCPU, h.client), append(p99s, m.p99)
		pgWithAfter = append(pgWithAfter, float64(m.pg+h.pg)/float64(m.polls)/1e6)
		b.Logf("round %d: %d polls in %d commits: server %v CPU (%.3f ms/poll, %.2f%% of a core), pacer side %.2f%% of a core "+
			"(the harness writing nothing: %.2f%%, server %v), commit p99 %.1f ms",
			r+1, m.polls, m.commits, m.pg, m.ms, 100*m.pg.Seconds()/window.Seconds(), m.client, h.client, h.pg, m.p99)
	}
	b.ReportMetric(bench.Median(pgPerPoll), "pg-cpu-ms/poll")
	b.ReportMetric(1000*bench.Median(pgPerPoll), "pg-cpu-ms/1000polls")
	b.ReportMetric(bench.Median(pgWithAfter), "pg-cpu-ms/poll+after")
	b.ReportMetric(bench.Median(clientCPU), "client-cpu%")
	b.ReportMetric(bench.Median(harnessCPU), "harness-cpu%")
	b.ReportMetric(bench.Median(p99s), "commit-p99-ms")
}
