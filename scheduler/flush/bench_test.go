package flush

// The flusher's benchmark, reporting against a baseline measured in the
// same run; it asserts no timing (BENCHMARKS.md judges). Run it with
//
//	PACER_BENCH_WINDOW=5s go test ./scheduler/flush -run '^$' -bench 'BenchmarkFlusherSustained' -benchtime=1x -timeout 60m -v
//
// PACER_BENCH_WINDOW (a Go duration, default 8s) sets its measuring window,
// PACER_BENCH_ROUNDS (default 3) its rounds.

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/bench"
	"github.com/pacer-dev/pacer/domain"
	"github.com/pacer-dev/pacer/store"
)

// benchWindow is the measuring window.
func benchWindow() time.Duration { return bench.EnvDuration("PACER_BENCH_WINDOW", 8*time.Second) }

// benchRounds is the number of interleaved rounds (flusher, baseline); the
// reported figures are their medians.
func benchRounds() int { return bench.EnvInt("PACER_BENCH_ROUNDS", 3) }

// BenchmarkFlusherSustained drives the daemon's flusher (its 50 ms
// gathering window, one writer, WAL) with an open-loop stream of poll
// results (state + record; history kept at 100 per source and prefilled to
// 100, so that every record trims one, as in a daemon that has run for a
// while) over 20,000 sources, at a target rate, and reports the commit rate
// achieved and the latency from submit to commit (rule 3.8: a poll's state
// is committed within 250 ms). Target: >= 50,000 states/s with the bound
// held. The baseline in the same run is the store's raw capacity: the same
// states and records committed back to back in batches of 5,000. Sources
// come in phase order and records numbered, as in the daemon; the payload
// is a state alone (state/...) or a state and its record (state+record/...).
func BenchmarkFlusherSustained(b *testing.B) {
	const nsrc, keep = 20_000, 100
	window := benchWindow()
	st, err := store.Open(filepath.Join(b.TempDir(), "pacer.db"), store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	names := make([]string, nsrc)
	for i := range names {
		names[i] = fmt.Sprintf("src-%06d", i)
	}
	// In phase order, as the daemon submits them (domain.NameHash).
	slices.SortFunc(names, func(a, b string) int { return cmp.Compare(domain.NameHash(a), domain.NameHash(b)) })
	// seq numbers each source's records as the daemon does (HistorySeq).
	seq := make(map[string]int64, nsrc)
	for _, name := range names {
		seq[name] = keep
	}
	t0 := time.Now().Add(-time.Hour)
	mk := func(name string, n int, at time.Time) (domain.SourceState, domain.PollRecord) {
		return domain.SourceState{Name: name, PollsTotal: int64(n), LastOutcome: domain.OutcomeSuccess,
				LastRunAt: &at, LastSuccessAt: &at, NextRunAt: &at, UpdatedAt: at},
			domain.PollRecord{Source: name, StartedAt: at, DurationMs: 10, Outcome: domain.OutcomeSuccess}
	}
	fill := time.Now()
	for r := range keep {
		states := make([]domain.SourceState, nsrc)
		recs := make([]domain.PollRecord, nsrc)
		for i, name := range names {
			states[i], recs[i] = mk(name, r, t0.Add(time.Duration(r)*time.Second))
		}
		if err := st.SaveBatch(context.Background(), states, recs, 0); err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("history prefilled: %d sources x %d records in %v", nsrc, keep, time.Since(fill).Round(time.Millisecond))

	// Baseline: the store's capacity, batches of 5,000 back to back.
	capacity := func(withRecords bool) float64 {
		const batch = 5_000
		start := time.Now()
		k := 0
		for time.Since(start) < window/2 {
			states := make([]domain.SourceState, batch)
			var recs []domain.PollRecord
			now := time.Now()
			for i := range batch {
				name := names[(k+i)%nsrc]
				var r domain.PollRecord
				states[i], r = mk(name, k, now)
				if withRecords {
					seq[name]++
					r.Seq, states[i].HistorySeq = seq[name], seq[name]
					recs = append(recs, r)
				}
			}
			if err := st.SaveBatch(context.Background(), states, recs, keep); err != nil {
				b.Fatal(err)
			}
			k += batch
		}
		return float64(k) / time.Since(start).Seconds()
	}

	for _, c := range []struct {
		records bool
		rate    int
	}{{false, 50_000}, {false, 100_000}, {true, 10_000}, {true, 50_000}} {
		rate, payload := c.rate, "state"
		if c.records {
			payload = "state+record"
		}
		b.Run(fmt.Sprintf("%s/rate=%d", payload, rate), func(b *testing.B) {
			var offered, achieved, caps, p50, p99, pmax, cpus []float64
			for range benchRounds() {
				f := New(Options{Committer: Unfenced(st), Logger: slog.New(slog.DiscardHandler), Keep: func() int { return keep }})
				// Latency: the oldest uncommitted submit of each source, read
				// when its commit lands.
				var mu sync.Mutex
				submitted := make(map[string]time.Time, nsrc)
				var lats []time.Duration
				committed := 0
				f.opts.OnSave = func(ns []string) {
					now := time.Now()
					mu.Lock()
					for _, n := range ns {
						if t, ok := submitted[n]; ok {
							lats = append(lats, now.Sub(t))
							delete(submitted, n)
						}
					}
					committed += len(ns)
					mu.Unlock()
				}
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan struct{})
				go func() { defer close(done); f.Run(ctx) }()

				// Open-loop producer: every millisecond, the submissions due.
				start := time.Now()
				next, sent := 0, 0
				c0 := bench.CPUTime()
				for time.Since(start) < window {
					due := int(float64(rate) * time.Since(start).Seconds())
					for ; sent < due; sent++ {
						name := names[next]
						next = (next + 1) % nsrc
						now := time.Now()
						s, r := mk(name, sent, now)
						mu.Lock()
						if _, ok := submitted[name]; !ok {
							submitted[name] = now
						}
						mu.Unlock()
						if c.records {
							seq[name]++
							r.Seq, s.HistorySeq = seq[name], seq[name]
							f.Submit(f.Slot(name), s, &r)
						} else {
							f.Submit(f.Slot(name), s, nil)
						}
					}
					time.Sleep(time.Millisecond)
				}
				elapsed := time.Since(start)
				cpu := float64(bench.CPUTime()-c0) / float64(elapsed)
				cancel() // the commit in progress, if any, is abandoned
				<-done
				mu.Lock()
				// Submissions still waiting count with the wait so far (a
				// lower bound of their latency), so that a backlog shows.
				end := time.Now()
				for _, t := range submitted {
					lats = append(lats, end.Sub(t))
				}
				offered = append(offered, float64(sent)/elapsed.Seconds())
				achieved = append(achieved, float64(committed)/elapsed.Seconds())
				p50 = append(p50, float64(bench.Percentile(lats, 0.50))/1e6)
				p99 = append(p99, float64(bench.Percentile(lats, 0.99))/1e6)
				pmax = append(pmax, float64(bench.Percentile(lats, 1))/1e6)
				cpus = append(cpus, cpu)
				mu.Unlock()
				caps = append(caps, capacity(c.records))
				b.Logf("rate %d: offered %.0f/s, committed %.0f/s, latency p50 %.1fms p99 %.1fms max %.1fms, cpu %.0f%%; store capacity %.0f states/s",
					rate, offered[len(offered)-1], achieved[len(achieved)-1], p50[len(p50)-1], p99[len(p99)-1], pmax[len(pmax)-1], 100*cpu, caps[len(caps)-1])
			}
			b.ReportMetric(bench.Median(offered), "offered/s")
			b.ReportMetric(bench.Median(achieved), "committed/s")
			b.ReportMetric(bench.Median(achieved)/bench.Median(caps), "committed/capacity")
			b.ReportMetric(bench.Median(caps), "capacity/s")
			b.ReportMetric(bench.Median(p50), "lat-p50-ms")
			b.ReportMetric(bench.Median(p99), "lat-p99-ms")
			b.ReportMetric(bench.Median(pmax), "lat-max-ms")
			b.ReportMetric(100*bench.Median(cpus), "cpu%")
		})
	}
}
