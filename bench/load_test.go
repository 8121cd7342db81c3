package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/scheduler"
	"github.com/pacer-dev/pacer/store"
)

// slowServer is the loopback upstream: every request is held 10 ms. It
// counts completed requests, requests in flight (and their peak) and its
// own open connections, so that the client side's descriptors can be
// told apart from the server's (both live in this process).
type slowServer struct {
	*httptest.Server
	hold     time.Duration
	served   atomic.Int64
	inflight atomic.Int64
	peak     atomic.Int64
	conns    atomic.Int64
	// etag, when set, is the ETag of every answer; a request whose
	// If-None-Match is etag gets a 304 (after the hold), counted in
	// notModified.
	etag        string
	notModified atomic.Int64
	// body is the answer of every request but a 304 ("ok\n" unless set).
	body []byte
	// noFDs: measure does not sample the descriptors (reading /proc/self/fd
	// every 5 ms costs ~10 ms of CPU a second, which at 200 requests a
	// second would be a fifth of the CPU measured on both sides).
	noFDs bool
}

// loadBody is the size of BenchmarkLoad's answers: issue 15's target 1 is
// stated for a 1 KiB body.
const loadBody = 1 << 10

func newSlowServer(b *testing.B, hold time.Duration) *slowServer {
	return newETagServer(b, hold, "")
}

// newBodyServer is newSlowServer answering n bytes to every request.
func newBodyServer(b *testing.B, hold time.Duration, n int) *slowServer {
	return newServer(b, hold, "", bytes.Repeat([]byte("x"), n))
}

// newETagServer is newSlowServer with an ETag (see slowServer.etag).
func newETagServer(b *testing.B, hold time.Duration, etag string) *slowServer {
	return newServer(b, hold, etag, nil)
}

// newServer is the slowServer of hold, etag and body (nil: "ok\n").
func newServer(b *testing.B, hold time.Duration, etag string, body []byte) *slowServer {
	s := &slowServer{hold: hold, etag: etag, body: body}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := s.inflight.Add(1)
		for {
			p := s.peak.Load()
			if n <= p || s.peak.CompareAndSwap(p, n) {
				break
			}
		}
		time.Sleep(s.hold)
		if s.etag != "" {
			w.Header().Set("ETag", s.etag)
			if r.Header.Get("If-None-Match") == s.etag {
				s.notModified.Add(1)
				w.WriteHeader(http.StatusNotModified)
			}
		}
		if s.body != nil {
			_, _ = w.Write(s.body)
		} else {
			_, _ = io.WriteString(w, "ok\n") // dropped after a 304
		}
		s.inflight.Add(-1)
		s.served.Add(1)
	}))
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		switch st {
		case http.StateNew:
			s.conns.Add(1)
		case http.StateClosed, http.StateHijacked:
			s.conns.Add(-1)
		}
	}
	s.Start()
	b.Cleanup(s.Close)
	return s
}

// fds is this process's descriptor count less the server's connections.
func (s *slowServer) fds() int { return OpenFDs("self") - int(s.conns.Load()) }

// phase is what one measuring window observed.
type phase struct {
	rps       float64 // requests completed by the server per second
	peakIn    int64   // peak requests in flight at the server
	peakFDs   int     // peak descriptors of this process minus the server's connections
	baseFDs   int     // the same before the client (pacer or bare) started
	hwmKiB    int64   // peak RSS of the process during the phase (VmHWM after a reset)
	cpu       float64 // process CPU (user+sys) over the window, in cores
	cpuPerReq float64 // process CPU per request served, µs (server side included)
	allocsReq float64 // heap allocations per request served (process-wide, server included)
	bytesReq  float64 // heap bytes allocated per request served (process-wide)
	lagP50    float64 // pacer only: start lag quantiles from pacer_schedule_lag_seconds, ms
	lagP99    float64
	skipped   float64            // pacer only: ticks skipped while busy
	workers   map[string]float64 // pacer only, with PACER_BENCH_STACKS: mean workers per activity
}

// measure runs for window after warm, sampling descriptors every 5 ms.
// baseFDs is the process's descriptor count before the phase started.
func (s *slowServer) measure(baseFDs int, warm, window time.Duration) phase {
	time.Sleep(warm)
	ResetPeakRSS()
	s.peak.Store(s.inflight.Load())
	p := phase{baseFDs: baseFDs}
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	n0, t0, c0 := s.served.Load(), time.Now(), CPUTime()
	if s.noFDs {
		time.Sleep(window)
	}
	for time.Since(t0) < window {
		p.peakFDs = max(p.peakFDs, s.fds())
		time.Sleep(5 * time.Millisecond)
	}
	served, elapsed := s.served.Load()-n0, time.Since(t0)
	runtime.ReadMemStats(&m1)
	p.allocsReq = float64(m1.Mallocs-m0.Mallocs) / float64(max(served, 1))
	p.bytesReq = float64(m1.TotalAlloc-m0.TotalAlloc) / float64(max(served, 1))
	p.rps = float64(served) / elapsed.Seconds()
	p.cpu = float64(CPUTime()-c0) / float64(elapsed)
	p.cpuPerReq = float64(CPUTime()-c0) / 1e3 / float64(max(served, 1))
	p.peakIn = s.peak.Load()
	p.hwmKiB = StatusKiB("self", "VmHWM")
	return p
}

// bareClient is the baseline: a semaphore of k and a Transport allowing k
// connections (all kept idle), requesting back to back until stop.
func bareClient(k int, url string, stop <-chan struct{}) (wait func()) {
	tr := &http.Transport{MaxConnsPerHost: k, MaxIdleConnsPerHost: k, MaxIdleConns: k}
	client := &http.Client{Transport: tr}
	sem := make(chan struct{}, k)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case sem <- struct{}{}:
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				resp, err := client.Get(fmt.Sprintf("%s/s/%d", url, i))
				if err != nil {
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
			}()
		}
	}()
	return func() {
		wg.Wait()
		tr.CloseIdleConnections()
	}
}

// writeConfig is WriteConfig, failing b on an error.
func writeConfig(b *testing.B, dir string, n, k int, schedule, url, admin string) string {
	b.Helper()
	path, err := WriteConfig(dir, n, k, schedule, url, admin)
	if err != nil {
		b.Fatal(err)
	}
	return path
}

// runPacer runs the daemon's code path on cfg (store.Open, scheduler.New
// and Start with the real http pollers, as cli.run does, minus the admin
// API and signals) for warm+window, and returns what the server saw.
func runPacer(b *testing.B, name string, cfg *config.Config, srv *slowServer, warm, window time.Duration) phase {
	b.Helper()
	base := srv.fds()
	st, err := store.Open(cfg.Store, store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	s, err := scheduler.New(cfg, scheduler.Options{Store: st, Registry: reg, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	// Warm up first: a restart makes every source whose tick passed while
	// it was down due at once (the previous round's store), and that
	// catch-up is not what the window measures.
	time.Sleep(warm)
	lag0, skip0 := gather(b, reg)
	stopProf := profile(b, name)
	var stacks chan map[string]float64
	if os.Getenv("PACER_BENCH_STACKS") != "" {
		stacks = make(chan map[string]float64, 1)
		go func() { stacks <- sampleWorkers(0, window) }()
	}
	p := srv.measure(base, 0, window)
	stopProf()
	lag1, skip1 := gather(b, reg)
	if stacks != nil {
		p.workers = <-stacks
	}
	p.lagP50 = 1000 * lag1.sub(lag0).quantile(0.50)
	p.lagP99 = 1000 * lag1.sub(lag0).quantile(0.99)
	p.skipped = skip1 - skip0
	if err := s.Shutdown(10 * time.Second); err != nil {
		b.Error(err)
	}
	if err := st.Close(); err != nil {
		b.Error(err)
	}
	return p
}

// profile writes a CPU profile of the pacer phase to
// $PACER_BENCH_PROFILE_DIR/name.pprof when that variable is set, and the
// allocs profiles at its start and end (name.allocs0.pprof,
// name.allocs.pprof).
func profile(b *testing.B, name string) func() {
	dir := os.Getenv("PACER_BENCH_PROFILE_DIR")
	if dir == "" {
		return func() {}
	}
	base := filepath.Join(dir, strings.NewReplacer("/", "_", ",", "_", "=", "").Replace(name))
	f, err := os.Create(base + ".pprof")
	if err != nil {
		b.Fatal(err)
	}
	writeAllocs(b, base+".allocs0.pprof")
	if err := pprof.StartCPUProfile(f); err != nil {
		b.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
		writeAllocs(b, base+".allocs.pprof")
	}
}

// writeAllocs writes the allocs profile (cumulative since the process
// started) to path: the window's allocations are those of the profile at
// its end less the one at its start (go tool pprof -base start end).
func writeAllocs(b *testing.B, path string) {
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		b.Fatal(err)
	}
}

// sampleWorkers classifies pacer's worker goroutines (those in
// scheduler.(*Scheduler).work) by what they are doing, from a goroutine
// profile taken every 250 ms of the window: polling (in the http poller),
// waiting for the previous state's commit (rule 3.8, flush.Flusher.WaitSaved,
// holding a global permit), waiting for a job, or elsewhere. It returns the
// mean count of each.
func sampleWorkers(warm, window time.Duration) map[string]float64 {
	time.Sleep(warm)
	sum := map[string]float64{}
	n := 0
	for end := time.Now().Add(window); time.Now().Before(end); time.Sleep(250 * time.Millisecond) {
		var buf bytes.Buffer
		if err := pprof.Lookup("goroutine").WriteTo(&buf, 1); err != nil {
			return nil
		}
		for _, g := range strings.Split(buf.String(), "\n\n") {
			if !strings.Contains(g, "scheduler.(*Scheduler).work") {
				continue
			}
			var count float64
			if _, err := fmt.Sscanf(g, "%g @", &count); err != nil {
				continue
			}
			switch {
			case strings.Contains(g, "waitSaved"):
				sum["waitSaved"] += count
			case strings.Contains(g, "sources.(*httpPoller).Poll"):
				sum["polling"] += count
			case strings.Contains(g, "(*fifo).pop"):
				sum["idle"] += count
			default:
				sum["other"] += count
			}
		}
		n++
	}
	for k := range sum {
		sum[k] /= float64(n)
	}
	return sum
}

// hist is a cumulative histogram snapshot.
type hist struct {
	bounds []float64
	counts []float64 // cumulative, per bound; last is +Inf
}

func (h hist) sub(o hist) hist {
	out := hist{bounds: h.bounds, counts: slices.Clone(h.counts)}
	for i := range out.counts {
		if i < len(o.counts) {
			out.counts[i] -= o.counts[i]
		}
	}
	return out
}

// quantile interpolates linearly inside the bucket, as PromQL's
// histogram_quantile does.
func (h hist) quantile(q float64) float64 {
	if len(h.counts) == 0 || h.counts[len(h.counts)-1] == 0 {
		return math.NaN()
	}
	rank := q * h.counts[len(h.counts)-1]
	for i, c := range h.counts {
		if c >= rank {
			lo, prev := 0.0, 0.0
			if i > 0 {
				lo, prev = h.bounds[i-1], h.counts[i-1]
			}
			if i >= len(h.bounds) { // +Inf bucket
				return lo
			}
			if c == prev {
				return h.bounds[i]
			}
			return lo + (h.bounds[i]-lo)*(rank-prev)/(c-prev)
		}
	}
	return math.NaN()
}

func gather(b *testing.B, reg *prometheus.Registry) (lag hist, skipped float64) {
	mfs, err := reg.Gather()
	if err != nil {
		b.Fatal(err)
	}
	for _, mf := range mfs {
		switch mf.GetName() {
		case "pacer_schedule_lag_seconds":
			hh := mf.GetMetric()[0].GetHistogram()
			for _, bk := range hh.GetBucket() {
				lag.bounds = append(lag.bounds, bk.GetUpperBound())
				lag.counts = append(lag.counts, float64(bk.GetCumulativeCount()))
			}
			lag.counts = append(lag.counts, float64(hh.GetSampleCount()))
		case "pacer_polls_total":
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "outcome" && l.GetValue() == "skipped" {
						skipped = m.GetCounter().GetValue()
					}
				}
			}
		}
	}
	return lag, skipped
}

// BenchmarkLoad runs pacer's daemon code path (config.Load, store.Open,
// scheduler.New and Start with the real http pollers and the real SQLite
// store) against a loopback server whose handler holds each request 10 ms
// and answers 1 KiB (issue 15's poll; digested by pacer), with concurrency K, and compares its throughput with the baseline, a
// bare bounded client (semaphore K, Transport with MaxConnsPerHost =
// MaxIdleConnsPerHost = K) measured in the same run (targets: >= 0.95 of
// it at K = 16 and 64, >= 0.90 at K = 256). To keep pacer's K permits
// busy it has 20*K sources on "@every 100ms": twice what K permits can
// serve at 10 ms a poll (the surplus is counted as skipped ticks). Rounds
// alternate baseline and pacer; the figures are medians. It also reports
// the server's peak requests in flight, the peak descriptors of the
// process less the server's connections, the peak RSS of each phase, and
// the start lag from pacer_schedule_lag_seconds (queueing included: the
// permits are saturated by design here; see the load=0.5 case), and the
// heap allocations per request of each side (runtime.MemStats over the
// window, the in-process server's included on both sides).
//
//	go test ./bench -run '^$' -bench BenchmarkLoad -benchtime=1x -timeout 30m
//
// PACER_BENCH_WINDOW (default 5s) and PACER_BENCH_ROUNDS (default 3).
func BenchmarkLoad(b *testing.B) {
	const hold = 10 * time.Millisecond
	window := EnvDuration("PACER_BENCH_WINDOW", 5*time.Second)
	rounds := EnvInt("PACER_BENCH_ROUNDS", 3)
	const warm = 1500 * time.Millisecond
	type tc struct {
		k, n int
		name string
	}
	cases := []tc{{16, 20 * 16, "K=16"}, {64, 20 * 64, "K=64"}, {256, 20 * 256, "K=256"},
		// Half of what 64 permits serve (3,200 polls/s of 6,400): not
		// saturated; the baseline is then the demand, not the bare client.
		{64, 320, "K=64,load=0.5"}}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			srv := newBodyServer(b, hold, loadBody)
			dir := b.TempDir()
			cfg, err := config.Load(writeConfig(b, dir, c.n, c.k, "@every 100ms", srv.URL, ""), os.LookupEnv)
			if err != nil {
				b.Fatal(err)
			}
			var ratios, bare, pacer, lag50, lag99 []float64
			var cpuB, cpuP, cpuReqB, cpuReqP, cpuRatio []float64
			var allocsB, allocsP, bytesB, bytesP []float64
			var peakIn, peakFDs, baseFDs, pacerHWM, bareHWM, barePeakFDs []float64
			unsaturated := strings.Contains(c.name, "load=")
			for r := range rounds {
				bp := phase{rps: float64(c.n) * 10} // the demand: n sources, 10 polls/s each
				if !unsaturated {
					stop := make(chan struct{})
					base := srv.fds()
					wait := bareClient(c.k, srv.URL, stop)
					time.Sleep(warm)
					stopProf := profile(b, fmt.Sprintf("%s-bare-r%d", c.name, r+1))
					bp = srv.measure(base, 0, window)
					stopProf()
					close(stop)
					wait()
				}
				pp := runPacer(b, fmt.Sprintf("%s-r%d", c.name, r+1), cfg, srv, warm, window)
				ratios = append(ratios, pp.rps/bp.rps)
				bare, pacer = append(bare, bp.rps), append(pacer, pp.rps)
				lag50, lag99 = append(lag50, pp.lagP50), append(lag99, pp.lagP99)
				peakIn, peakFDs, baseFDs = append(peakIn, float64(pp.peakIn)), append(peakFDs, float64(pp.peakFDs)), append(baseFDs, float64(pp.baseFDs))
				pacerHWM, bareHWM = append(pacerHWM, float64(pp.hwmKiB)/1024), append(bareHWM, float64(bp.hwmKiB)/1024)
				barePeakFDs = append(barePeakFDs, float64(bp.peakFDs))
				cpuB, cpuP = append(cpuB, bp.cpu), append(cpuP, pp.cpu)
				cpuReqB, cpuReqP = append(cpuReqB, bp.cpuPerReq), append(cpuReqP, pp.cpuPerReq)
				cpuRatio = append(cpuRatio, pp.cpuPerReq/bp.cpuPerReq)
				allocsB, allocsP = append(allocsB, bp.allocsReq), append(allocsP, pp.allocsReq)
				bytesB, bytesP = append(bytesB, bp.bytesReq), append(bytesP, pp.bytesReq)
				b.Logf("round %d: allocations per request bare %.1f (%.0f B) | pacer %.1f (%.0f B)",
					r+1, bp.allocsReq, bp.bytesReq, pp.allocsReq, pp.bytesReq)
				b.Logf("round %d: CPU bare %.2f cores, %.0f µs/req | pacer %.2f cores, %.0f µs/req | pacer/bare CPU per request %.2f",
					r+1, bp.cpu, bp.cpuPerReq, pp.cpu, pp.cpuPerReq, pp.cpuPerReq/bp.cpuPerReq)
				b.Logf("round %d: bare %.0f req/s (peak in flight %d, fds %d, HWM %.0f MiB) | pacer %.0f req/s (peak in flight %d, fds %d, base %d, HWM %.0f MiB, lag p50 %.1fms p99 %.1fms, skipped %.0f) | ratio %.3f",
					r+1, bp.rps, bp.peakIn, bp.peakFDs, float64(bp.hwmKiB)/1024, pp.rps, pp.peakIn, pp.peakFDs, pp.baseFDs,
					float64(pp.hwmKiB)/1024, pp.lagP50, pp.lagP99, pp.skipped, pp.rps/bp.rps)
				if pp.workers != nil {
					b.Logf("round %d: pacer workers (mean of samples): %v", r+1, pp.workers)
				}
			}
			if unsaturated {
				b.ReportMetric(Median(ratios), "pacer/demand")
			} else {
				b.ReportMetric(Median(ratios), "pacer/bare")
			}
			b.ReportMetric(Median(pacer), "pacer-req/s")
			b.ReportMetric(Median(bare), "bare-req/s")
			b.ReportMetric(slices.Max(peakIn), "peak-inflight")
			b.ReportMetric(slices.Max(peakFDs), "peak-fds")
			b.ReportMetric(slices.Max(barePeakFDs), "bare-peak-fds")
			b.ReportMetric(Median(baseFDs), "base-fds")
			b.ReportMetric(slices.Max(peakFDs)-Median(baseFDs), "peak-fds-over-base")
			b.ReportMetric(Median(pacerHWM), "pacer-HWM-MiB")
			b.ReportMetric(Median(bareHWM), "bare-HWM-MiB")
			b.ReportMetric(Median(cpuP), "pacer-cores")
			b.ReportMetric(Median(cpuReqP), "pacer-cpu-us/req")
			b.ReportMetric(Median(allocsP), "pacer-allocs/req")
			b.ReportMetric(Median(bytesP), "pacer-B/req")
			if !unsaturated {
				b.ReportMetric(Median(cpuB), "bare-cores")
				b.ReportMetric(Median(cpuReqB), "bare-cpu-us/req")
				b.ReportMetric(Median(cpuRatio), "cpu/req-pacer/bare")
				b.ReportMetric(Median(allocsB), "bare-allocs/req")
				b.ReportMetric(Median(bytesB), "bare-B/req")
			}
			b.ReportMetric(Median(lag50), "lag-p50-ms")
			b.ReportMetric(Median(lag99), "lag-p99-ms")
		})
	}
}
