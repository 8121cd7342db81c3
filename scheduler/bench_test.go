package scheduler

// Benchmarks of the scheduler alone (no network), each reporting ratios
// against a baseline measured in the same run. None of them asserts a
// timing: they report, BENCHMARKS.md judges. Run them one at a time with
// -benchtime=1x (each makes its own interleaved rounds and reports the
// medians), for example
//
//	go test ./scheduler -run '^$' -bench 'BenchmarkSchedulerCPU' -benchtime=1x -timeout 30m
//
// PACER_BENCH_WINDOW (a Go duration, default 8s) sets the measuring window
// of the CPU benchmarks, PACER_BENCH_ROUNDS (default 3) their rounds, and
// PACER_BENCH_PROFILE_DIR, when set, receives a CPU profile of each
// measuring window (pacer-n100000-r1.pprof, cron-n100000-r1.pprof, ...).

import (
	"container/heap"
	"context"
	"fmt"
	"github.com/pacer-dev/pacer/scheduler/queue"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/robfig/cron/v3"

	"github.com/pacer-dev/pacer/bench"
	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/scheduler/policy"
	"github.com/pacer-dev/pacer/sources"
	"github.com/pacer-dev/pacer/store"
)

// benchWindow is the measuring window of the CPU benchmarks.
func benchWindow() time.Duration { return bench.EnvDuration("PACER_BENCH_WINDOW", 8*time.Second) }

// benchRounds is the number of interleaved rounds (pacer, baseline) of the
// comparative benchmarks; the reported figures are their medians.
func benchRounds() int { return bench.EnvInt("PACER_BENCH_ROUNDS", 3) }

// cpuShare measures the CPU used by the whole process during window of
// real time, as a fraction of one core.
func cpuShare(window time.Duration) float64 {
	runtime.GC() // garbage of the set-up is not the measured activity's
	c0, t0 := bench.CPUTime(), time.Now()
	time.Sleep(window)
	c1, t1 := bench.CPUTime(), time.Now()
	return float64(c1-c0) / float64(t1.Sub(t0))
}

// profileWindow starts a CPU profile of the measuring window only, written
// to $PACER_BENCH_PROFILE_DIR/name.pprof when that variable is set (set-up
// and the baseline stay out of the profile), and returns its stop.
func profileWindow(b *testing.B, name string) func() {
	dir := os.Getenv("PACER_BENCH_PROFILE_DIR")
	if dir == "" {
		return func() {}
	}
	f, err := os.Create(filepath.Join(dir, name+".pprof"))
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		b.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			b.Error(err)
		}
	}
}

// benchConfig writes a config of n http sources on schedule (in the
// defaults, as a large deployment would write it) into dir and loads it
// with config.Load, as the daemon does.
func benchConfig(b *testing.B, dir string, n int, schedule string, conc int) *config.Config {
	b.Helper()
	path := writeBenchConfig(b, dir, n, schedule, conc, "http://127.0.0.1:1")
	cfg, err := config.Load(path, os.LookupEnv)
	if err != nil {
		b.Fatalf("config: %v", err)
	}
	return cfg
}

func writeBenchConfig(b *testing.B, dir string, n int, schedule string, conc int, url string) string {
	b.Helper()
	path, err := bench.WriteConfig(dir, n, conc, schedule, url, "")
	if err != nil {
		b.Fatal(err)
	}
	return path
}

// noopPoller returns at once; it records the start lag of each poll: the
// time of the call minus the tick it serves (for "@every" schedules the
// tick is computable from the source's phase).
type noopPoller struct {
	tm  policy.Timing
	rec *lagRecorder
}

func (p noopPoller) Poll(context.Context) sources.Result {
	if p.rec != nil && p.tm.Every > 0 {
		now := time.Now()
		due := p.tm.Next(now.Add(-p.tm.Every)) // the tick in (now-every, now]
		p.rec.add(now.Sub(due))
	}
	return sources.Result{StatusCode: 200, ExitCode: -1}
}

type lagRecorder struct {
	mu  sync.Mutex
	on  bool
	lag []time.Duration
}

func (r *lagRecorder) add(d time.Duration) {
	r.mu.Lock()
	if r.on {
		r.lag = append(r.lag, d)
	}
	r.mu.Unlock()
}

func (r *lagRecorder) start() {
	r.mu.Lock()
	r.on, r.lag = true, r.lag[:0]
	r.mu.Unlock()
}

func (r *lagRecorder) stop() []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.on = false
	return slices.Clone(r.lag)
}

// benchSched is a started scheduler on its own store.
type benchSched struct {
	s   *Scheduler
	st  *store.Store
	reg *prometheus.Registry
}

// startBench opens the store in dir and starts a scheduler on cfg whose
// polls are no-ops (newPoller nil: the real pollers).
func startBench(b *testing.B, dir string, cfg *config.Config, newPoller func(*config.Source) (sources.Poller, error)) *benchSched {
	b.Helper()
	st, err := store.Open(filepath.Join(dir, "pacer.db"), store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	s, err := New(cfg, Options{Store: st, Registry: reg, NewPoller: newPoller})
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	return &benchSched{s: s, st: st, reg: reg}
}

// settle waits until the flusher has committed everything submitted so
// far (after a start: every new source's first state), at most limit.
func (h *benchSched) settle(limit time.Duration) {
	for deadline := time.Now().Add(limit); time.Now().Before(deadline) && !h.s.deps.flush.Idle(); {
		time.Sleep(50 * time.Millisecond)
	}
}

func (h *benchSched) stop(b *testing.B) {
	b.Helper()
	if err := h.s.Shutdown(10 * time.Second); err != nil {
		b.Error(err)
	}
	if err := h.st.Close(); err != nil {
		b.Error(err)
	}
}

// startCron starts robfig/cron/v3's Cron runner with n no-op jobs on the
// same once-a-minute load: "S * * * * *" with S = i%60 spreads them over
// the minute's seconds (cron cannot place a job between seconds; its
// cron.Every(1m) would put every job added in the same second on the same
// second of the minute, a burst pacer's phases avoid). Both runners thus
// fire n/60 jobs per second.
//
// rec, if not nil, records each job's start lag: its start minus the
// second it was due at.
func startCron(b *testing.B, n int, rec *lagRecorder) *cron.Cron {
	b.Helper()
	c := cron.New(cron.WithSeconds())
	noop := func() {
		if rec != nil {
			now := time.Now()
			rec.add(now.Sub(now.Truncate(time.Second)))
		}
	}
	for i := range n {
		if _, err := c.AddFunc(fmt.Sprintf("%d * * * * *", i%60), noop); err != nil {
			b.Fatal(err)
		}
	}
	c.Start()
	return c
}

// spreadSchedule gives cron/v3 pacer's own "@every" activations (a
// per-source phase, to the nanosecond), so that its runner is measured on
// exactly the schedules pacer runs.
type spreadSchedule struct{ tm policy.Timing }

func (s spreadSchedule) Next(t time.Time) time.Time { return s.tm.Next(t) }

// startCronSpread starts cron/v3's Cron runner with n no-op jobs on the
// schedules of pacer's n sources ("@every 1m", phases spread by name).
// rec records each job's start minus its activation.
func startCronSpread(b *testing.B, cfg *config.Config, rec *lagRecorder) *cron.Cron {
	b.Helper()
	c := cron.New()
	for i := range cfg.Sources {
		tm := policy.NewTiming(cfg.Sources[i].Name, cfg.Sources[i].Schedule)
		c.Schedule(spreadSchedule{tm}, cron.FuncJob(func() {
			now := time.Now()
			rec.add(now.Sub(tm.Next(now.Add(-tm.Every))))
		}))
	}
	c.Start()
	return c
}

// commitSeconds is the sum of pacer_store_commit_seconds, read from the
// histogram itself: gathering the registry would also collect the
// per-source gauges (100,000 of them) in the middle of the measurement.
func commitSeconds(b *testing.B, h *benchSched) float64 {
	b.Helper()
	var m dto.Metric
	if err := h.s.deps.m.storeCommit.Write(&m); err != nil {
		b.Fatal(err)
	}
	return m.GetHistogram().GetSampleSum()
}

// BenchmarkSchedulerCPU compares the CPU that pacer's scheduler uses to run
// n sources on "@every 1m" with a no-op poll (target: <= 2% of a core and
// <= 1/10 of the baseline at n = 100,000; p99 start lag <= 20 ms) with
// robfig/cron/v3's Cron runner on the same load. CPU is getrusage
// (user+sys, the whole process) over a window of real time; pacer's figure
// includes its store (the flusher's SQLite commits of each poll's state and
// record), which cron does not have; the time of the flusher's commits
// (pacer_store_commit_seconds: SQLite is CPU-bound, wall ~ CPU) splits it
// into the store's share and the rest (pacer-store-cpu%, pacer-sched-cpu%).
// A second baseline runs cron's runner on pacer's own spread schedules
// (cron-spread: phases to the nanosecond, as the planning figure).
// Rounds alternate pacer, cron and cron-spread.
func BenchmarkSchedulerCPU(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 100_000} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			window, rounds := benchWindow(), benchRounds()
			dir := b.TempDir()
			cfg := benchConfig(b, dir, n, "@every 1m", 64)
			rec, cronRec := &lagRecorder{}, &lagRecorder{}
			var cronP99s []float64
			newPoller := func(src *config.Source) (sources.Poller, error) {
				return noopPoller{tm: policy.NewTiming(src.Name, src.Schedule), rec: rec}, nil
			}
			var pacerCPU, cronCPU, ratios, p50s, p99s, maxs []float64
			var spreadCPU, spreadP99s, storeCPU, schedCPU []float64
			spreadRec := &lagRecorder{}
			var polls int
			var allocB, allocN, gcs []float64
			for r := range rounds {
				// A new store each round: restarting on the previous round's
				// store would make every source whose tick passed while
				// cron was measured due at once (a restart's catch-up), not
				// the steady state measured here.
				for _, suffix := range []string{"", "-wal", "-shm"} {
					if err := os.Remove(cfg.Store + suffix); err != nil && !os.IsNotExist(err) {
						b.Fatal(err)
					}
				}
				h := startBench(b, dir, cfg, newPoller)
				h.settle(2 * time.Minute)
				rec.start()
				stopProf := profileWindow(b, fmt.Sprintf("pacer-n%d-r%d", n, r+1))
				commit0 := commitSeconds(b, h)
				var ms0, ms1 runtime.MemStats
				runtime.ReadMemStats(&ms0)
				p := cpuShare(window)
				runtime.ReadMemStats(&ms1)
				// The flusher's commits are CPU-bound (SQLite, wall ~ CPU):
				// their time is the store's share of p.
				storeShare := (commitSeconds(b, h) - commit0) / window.Seconds()
				stopProf()
				lags := rec.stop()
				h.stop(b)
				polls += len(lags)
				// Allocation per poll in the window, all of pacer's: what the
				// garbage collector has to keep up with.
				allocB = append(allocB, float64(ms1.TotalAlloc-ms0.TotalAlloc)/float64(max(len(lags), 1)))
				allocN = append(allocN, float64(ms1.Mallocs-ms0.Mallocs)/float64(max(len(lags), 1)))
				gcs = append(gcs, float64(ms1.NumGC-ms0.NumGC))

				cs := startCronSpread(b, cfg, spreadRec)
				time.Sleep(time.Second) // its first sort and timer
				spreadRec.start()
				crs := cpuShare(window)
				slags := spreadRec.stop()
				<-cs.Stop().Done()
				spreadCPU = append(spreadCPU, crs)
				spreadP99s = append(spreadP99s, float64(bench.Percentile(slags, 0.99))/1e6)
				storeCPU, schedCPU = append(storeCPU, storeShare), append(schedCPU, p-storeShare)

				c := startCron(b, n, cronRec)
				time.Sleep(time.Second) // its first sort and timer
				cronRec.start()
				stopProf = profileWindow(b, fmt.Sprintf("cron-n%d-r%d", n, r+1))
				cr := cpuShare(window)
				stopProf()
				clags := cronRec.stop()
				<-c.Stop().Done()
				cronP99s = append(cronP99s, float64(bench.Percentile(clags, 0.99))/1e6)

				pacerCPU, cronCPU, ratios = append(pacerCPU, p), append(cronCPU, cr), append(ratios, p/cr)
				p50s = append(p50s, float64(bench.Percentile(lags, 0.50))/1e6)
				p99s = append(p99s, float64(bench.Percentile(lags, 0.99))/1e6)
				maxs = append(maxs, float64(bench.Percentile(lags, 1))/1e6)
				b.Logf("round %d: pacer %.3f%% of a core (%d polls; store %.3f%%, the rest %.3f%%; %.0f B in %.1f allocations per poll, %.0f GCs), cron %.3f%% (p99 lag %.2fms), cron on pacer's spread schedules %.3f%% (p99 lag %.2fms); pacer/cron %.3f, pacer/cron-spread %.3f; lag p50 %.2fms p99 %.2fms max %.2fms",
					r+1, 100*p, len(lags), 100*storeShare, 100*(p-storeShare), allocB[r], allocN[r], gcs[r], 100*cr, cronP99s[r], 100*crs, spreadP99s[r],
					p/cr, p/crs, p50s[r], p99s[r], maxs[r])
			}
			b.ReportMetric(100*bench.Median(pacerCPU), "pacer-cpu%")
			b.ReportMetric(100*bench.Median(cronCPU), "cron-cpu%")
			b.ReportMetric(100*bench.Median(spreadCPU), "cron-spread-cpu%")
			b.ReportMetric(bench.Median(spreadP99s), "cron-spread-lag-p99-ms")
			b.ReportMetric(100*bench.Median(storeCPU), "pacer-store-cpu%")
			b.ReportMetric(100*bench.Median(schedCPU), "pacer-sched-cpu%")
			b.ReportMetric(bench.Median(divide(pacerCPU, spreadCPU)), "pacer/cron-spread")
			b.ReportMetric(bench.Median(ratios), "pacer/cron")
			b.ReportMetric(bench.Median(p50s), "lag-p50-ms")
			b.ReportMetric(bench.Median(p99s), "lag-p99-ms")
			b.ReportMetric(bench.Median(maxs), "lag-max-ms")
			b.ReportMetric(bench.Median(cronP99s), "cron-lag-p99-ms")
			b.ReportMetric(float64(polls)/float64(rounds)/window.Seconds(), "polls/s")
			b.ReportMetric(bench.Median(allocB), "alloc-B/poll")
			b.ReportMetric(bench.Median(allocN), "allocs/poll")
		})
	}
}

// BenchmarkHeap measures the due heap's add, remove and reschedule of one
// source at n = 1k, 10k and 100k sources (contract: O(log n)): on a random
// entry ("add+remove", "reschedule") and the daemon's steady state ("due":
// the loop takes the top, the poll puts it back one period later, a full
// sift-down each time). The heap stays at n. Two layouts run the same
// operations on the same full-size entries (scattered in memory as in the
// daemon): layout=inline is queue.Heap (the due time in the heap's slice), and
// layout=pointer the in-run baseline, container/heap over a slice of
// pointers whose comparisons read each entry's dueAt (the daemon's heap
// before). less/op counts the baseline's comparisons, the O(log n) part
// (queue.Heap runs the same sift); ns/op adds the memory hierarchy.
func BenchmarkHeap(b *testing.B) {
	for _, op := range []string{"add+remove", "reschedule", "due"} {
		for _, n := range []int{1_000, 10_000, 100_000} {
			for _, layout := range []string{"inline", "pointer"} {
				b.Run(fmt.Sprintf("%s/n=%d/layout=%s", op, n, layout), func(b *testing.B) {
					benchHeap(b, op, n, layout == "pointer")
				})
			}
		}
	}
}

func benchHeap(b *testing.B, op string, n int, pointer bool) {
	rng := rand.New(rand.NewPCG(1, uint64(n)))
	base := time.Now()
	var h queue.Heap[*entry]
	ph := &ptrHeap{}
	es := make([]*heapEntry, n)
	sched := func(e *heapEntry, t time.Time) {
		if !pointer {
			h.Schedule(&e.entry.slot, t.UnixNano())
			return
		}
		e.dueAt = t
		if e.idx >= 0 {
			heap.Fix(ph, e.idx)
		} else {
			heap.Push(ph, e)
		}
	}
	remove := func(e *heapEntry) {
		if !pointer {
			h.Remove(&e.entry.slot)
		} else if e.idx >= 0 {
			heap.Remove(ph, e.idx)
		}
	}
	// due pops the entry due first and schedules it a minute later.
	due := func() {
		if pointer {
			e := ph.es[0]
			heap.Remove(ph, 0)
			sched(e, e.dueAt.Add(time.Minute))
			return
		}
		e, at, _ := h.Top()
		h.Remove(&e.slot)
		h.Schedule(&e.slot, at+int64(time.Minute))
	}
	for i := range es {
		es[i] = &heapEntry{idx: -1}
		es[i].entry.slot.Init(&es[i].entry)
		sched(es[i], base.Add(time.Duration(rng.Int64N(int64(time.Minute)))))
	}
	// Pre-draw the entries and times so the loop measures the heap.
	const pre = 1 << 16
	picks := make([]*heapEntry, pre)
	times := make([]time.Time, pre)
	for i := range pre {
		picks[i] = es[rng.IntN(n)]
		times[i] = base.Add(time.Duration(rng.Int64N(int64(time.Minute))))
	}
	// step runs the i-th operation.
	step := func(i int) {
		e, t := picks[i&(pre-1)], times[i&(pre-1)]
		switch op {
		case "add+remove":
			remove(e)
			sched(e, t)
		case "reschedule":
			sched(e, t)
		case "due":
			due()
		}
	}
	i := 0
	for b.Loop() {
		step(i)
		i++
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/logn(n), "ns/op/log2n")
	if pointer {
		ph.less = 0
		const ops = 20_000
		for j := range ops {
			step(j)
		}
		b.ReportMetric(float64(ph.less)/ops, "less/op")
	}
}

// heapEntry is a full-size entry with the due time the baseline layout
// keeps in it (the daemon's entries kept it there before queue.Heap held it).
type heapEntry struct {
	entry
	dueAt time.Time
	idx   int // its position in ptrHeap
}

// ptrHeap is BenchmarkHeap's baseline layout: container/heap over entry
// pointers, each comparison reading two entries' dueAt. It counts its
// comparisons.
type ptrHeap struct {
	es   []*heapEntry
	less int
}

func (h *ptrHeap) Len() int { return len(h.es) }
func (h *ptrHeap) Less(i, j int) bool {
	h.less++
	return h.es[i].dueAt.Before(h.es[j].dueAt)
}
func (h *ptrHeap) Swap(i, j int) {
	h.es[i], h.es[j] = h.es[j], h.es[i]
	h.es[i].idx = i
	h.es[j].idx = j
}
func (h *ptrHeap) Push(x any) {
	e := x.(*heapEntry)
	e.idx = len(h.es)
	h.es = append(h.es, e)
}
func (h *ptrHeap) Pop() any {
	e := h.es[len(h.es)-1]
	e.idx = -1
	h.es = h.es[:len(h.es)-1]
	return e
}

func logn(n int) float64 {
	l := 0.0
	for x := n; x > 1; x >>= 1 {
		l++
	}
	return l
}

// BenchmarkReloadAddOne measures Reload of a configuration that adds one
// source to n running ones (and the next that removes it again), config
// loading excluded. It shows what adding one source costs through the
// daemon's only way to add one: Reload walks the whole configuration, so
// it is O(n) in the number of sources, not O(log n) like the heap.
func BenchmarkReloadAddOne(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 100_000} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			dir := b.TempDir()
			cfgA := benchConfig(b, dir, n, "@every 1h", 16)
			cfgB := benchConfig(b, dir, n+1, "@every 1h", 16)
			h := startBench(b, dir, cfgA, func(src *config.Source) (sources.Poller, error) { return noopPoller{}, nil })
			defer h.stop(b)
			h.settle(time.Minute)
			i := 0
			for b.Loop() {
				cfg := cfgB
				if i%2 == 1 {
					cfg = cfgA
				}
				i++
				if err := h.s.Reload(context.Background(), cfg); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkHeapPerSource measures the live heap per idle source at n
// sources (target: <= 1.5 KiB at 100,000, configuration included): the
// configuration is generated as YAML and loaded with config.Load, the
// scheduler runs with the real pollers (sources.New) on a real store, and
// the heap is read after GC, minus the heap before anything was loaded.
// The sources are idle: "@every 24h" (a handful of polls during the
// measurement, each failing fast on a closed loopback port).
func BenchmarkHeapPerSource(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			dir := b.TempDir()
			path := writeBenchConfig(b, dir, n, "@every 24h", 64, "http://127.0.0.1:1")
			profDir := os.Getenv("PACER_BENCH_PROFILE_DIR")
			if profDir != "" {
				// Sample the allocations made from here on finely enough to
				// attribute the live heap (restored at the end).
				defer func(rate int) { runtime.MemProfileRate = rate }(runtime.MemProfileRate)
				runtime.MemProfileRate = 4096
			}
			heap := func() uint64 {
				var ms runtime.MemStats
				runtime.GC()
				runtime.GC()
				runtime.ReadMemStats(&ms)
				return ms.HeapAlloc
			}
			before := heap()
			cfg, err := config.Load(path, os.LookupEnv)
			if err != nil {
				b.Fatal(err)
			}
			withConfig := heap()
			h := startBench(b, dir, cfg, nil)
			h.settle(time.Minute)
			after := heap()
			fds := bench.OpenFDs("self")
			if profDir != "" {
				f, err := os.Create(filepath.Join(profDir, fmt.Sprintf("heap-n%d.pprof", n)))
				if err != nil {
					b.Fatal(err)
				}
				if err := pprof.WriteHeapProfile(f); err != nil {
					b.Fatal(err)
				}
				_ = f.Close()
			}
			runtime.KeepAlive(cfg)
			h.stop(b)
			per := func(x uint64) float64 { return float64(x) / float64(n) }
			b.ReportMetric(per(after-before), "B/source")
			b.ReportMetric(per(withConfig-before), "config-B/source")
			b.ReportMetric(per(after-withConfig), "runtime-B/source")
			b.ReportMetric(float64(fds), "fds")
			b.Logf("n=%d: %.0f B/source (config %.0f, scheduler+store+pollers %.0f); %d descriptors open",
				n, per(after-before), per(withConfig-before), per(after-withConfig), fds)
		})
	}
}

// divide returns a[i]/b[i].
func divide(a, b []float64) []float64 {
	out := make([]float64, len(a))
	for i := range a {
		out[i] = a[i] / b[i]
	}
	return out
}
