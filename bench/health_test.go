package bench

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// healthShape is the workload of a health-check daemon's users (issue 25,
// target 8): n endpoints on schedule against a loopback upstream that
// answers a small 200 after 10 ms, a SQLite store, the default concurrency.
type healthShape struct {
	n        int
	schedule string
}

// BenchmarkHealth2k measures the built daemon on 2,000 http sources on
// "@every 10s" (200 polls/s): CPU-s per 1,000 polls (the daemon's
// utime+stime over the window, polls counted at the upstream) and its RSS
// (VmRSS) at 30 s, 150 s and the window's end after start, and the creep
// (end minus 30 s). The window is PACER_BENCH_WINDOW (default 60s; the
// record in BENCHMARKS.md uses 300s), the rounds PACER_BENCH_ROUNDS
// (default 3). PACER_BENCH_DUMP_DIR, when set, receives each daemon's
// /proc/PID/smaps at the window's end. PACER_BENCH_BASE_BIN names a baseline binary (e.g. built
// from an older commit) run on the same config in alternating rounds; the
// ratios to it are then reported too.
//
//	mkdir /tmp/health-base && git archive ff2ef57 | tar -x -C /tmp/health-base
//	(cd /tmp/health-base && go build -o /tmp/pacer-base .)
//	PACER_BENCH_BASE_BIN=/tmp/pacer-base PACER_BENCH_WINDOW=300s \
//	  go test ./bench -run '^$' -bench 'BenchmarkHealth2k$' -benchtime=1x -timeout 60m
func BenchmarkHealth2k(b *testing.B) {
	runHealth(b, healthShape{n: 2000, schedule: "@every 10s"})
}

// BenchmarkHealth10k is BenchmarkHealth2k on 10,000 sources on
// "@every 60s" (167 polls/s).
//
//	go test ./bench -run '^$' -bench 'BenchmarkHealth10k$' -benchtime=1x -timeout 60m
func BenchmarkHealth10k(b *testing.B) {
	runHealth(b, healthShape{n: 10_000, schedule: "@every 60s"})
}

// healthRun is one daemon's figures over the window.
type healthRun struct {
	cpuPer1k float64          // CPU-s per 1,000 polls
	polls    int64            // polls seen by the upstream in the window
	rss      map[int]float64  // second after start -> VmRSS MiB
	endRSS   float64          // VmRSS at the end, MiB
	smaps    map[string]int64 // smaps_rollup fields at the end, KiB
	metrics  map[string]float64
}

func runHealth(b *testing.B, shape healthShape) {
	rounds := EnvInt("PACER_BENCH_ROUNDS", 3)
	window := EnvDuration("PACER_BENCH_WINDOW", 60*time.Second)
	var polls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		polls.Add(1)
		time.Sleep(10 * time.Millisecond) // the upstream's latency, not a wait for a condition
		_, _ = io.WriteString(w, "ok\n")
	}))
	defer srv.Close()
	dir := b.TempDir()
	bins := map[string]string{"current": buildPacer(b, dir)}
	order := []string{"current"}
	if base := os.Getenv("PACER_BENCH_BASE_BIN"); base != "" {
		bins["base"] = base
		order = []string{"base", "current"}
	}
	for _, bin := range bins {
		syncFile(b, bin)
	}
	res := map[string][]*healthRun{}
	for r := range rounds {
		for i := range order { // alternate which binary goes first
			name := order[(i+r)%len(order)]
			d := filepath.Join(dir, fmt.Sprintf("%s-%d", name, r))
			if err := os.Mkdir(d, 0o755); err != nil {
				b.Fatal(err)
			}
			addr := freeAddr(b)
			cfg := writeHealthConfig(b, d, shape, srv.URL, addr)
			h := healthRound(b, bins[name], cfg, addr, window, &polls)
			res[name] = append(res[name], h)
			b.Logf("round %d %s: %.3f CPU-s/1k polls (%d polls), RSS %s end %.1f MiB; smaps %v; go %v",
				r+1, name, h.cpuPer1k, h.polls, fmtRSS(h.rss), h.endRSS, h.smaps, h.metrics)
		}
	}
	reportHealth(b, res, window)
}

// healthRound starts bin on cfg, waits for /readyz, and measures it until
// window after its start.
func healthRound(b *testing.B, bin, cfg, addr string, window time.Duration, polls *atomic.Int64) *healthRun {
	t0 := time.Now()
	d := startDaemon(b, bin, cfg, addr, 0, 0)
	defer d.stop(b)
	pid := strconv.Itoa(d.cmd.Process.Pid)
	cpu0, p0 := procCPU(b, pid), polls.Load()
	h := &healthRun{rss: map[int]float64{}}
	tick := time.NewTicker(30 * time.Second)
	defer tick.Stop()
	end := time.NewTimer(time.Until(t0.Add(window)))
	defer end.Stop()
	for done := false; !done; {
		select {
		case <-tick.C:
			h.rss[int(time.Since(t0).Round(time.Second).Seconds())] = float64(StatusKiB(pid, "VmRSS")) / 1024
		case <-end.C:
			done = true
		}
	}
	h.polls = polls.Load() - p0
	h.cpuPer1k = (procCPU(b, pid) - cpu0).Seconds() / float64(h.polls) * 1000
	h.endRSS = float64(StatusKiB(pid, "VmRSS")) / 1024
	h.smaps = smapsRollup(pid)
	h.metrics = goMetrics(addr)
	if out := os.Getenv("PACER_BENCH_DUMP_DIR"); out != "" { // where the RSS goes, mapping by mapping
		raw, _ := os.ReadFile("/proc/" + pid + "/smaps")
		_ = os.WriteFile(filepath.Join(out, filepath.Base(filepath.Dir(cfg))+".smaps"), raw, 0o644)
	}
	return h
}

// syncFile writes path's dirty pages to disk: an installed binary is clean
// in the page cache, one just linked is not, and the kernel keeps a
// dirty one resident (see cli's trimTextRSS).
func syncFile(b *testing.B, path string) {
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		b.Fatal(err)
	}
}

// writeHealthConfig writes a config as a user writes it: the store, the
// admin API's address, the schedule in the defaults, and the sources;
// everything else (concurrency 16, logging) at its default.
func writeHealthConfig(b *testing.B, dir string, shape healthShape, url, admin string) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "store: pacer.db\nadmin: {listen: %q}\n", admin)
	fmt.Fprintf(&sb, "defaults: {schedule: %q, timeout: 5s}\nsources:\n", shape.schedule)
	for i := range shape.n {
		fmt.Fprintf(&sb, "  - {name: ep-%05d, type: http, url: \"%s/health/%d\"}\n", i, url, i)
	}
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, []byte(sb.String()), 0o600); err != nil {
		b.Fatal(err)
	}
	return path
}

// procCPU is process pid's utime+stime from /proc/PID/stat (clock ticks
// of 10 ms, Linux's USER_HZ).
func procCPU(b *testing.B, pid string) time.Duration {
	raw, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		b.Fatal(err)
	}
	s := string(raw)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		b.Fatalf("/proc/%s/stat: %q", pid, s)
	}
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// smapsRollup returns the resident parts of /proc/PID/smaps_rollup (KiB):
// anonymous (heap, stacks, C heap) against file-backed (the binary's text).
func smapsRollup(pid string) map[string]int64 {
	out := map[string]int64{}
	f, err := os.Open("/proc/" + pid + "/smaps_rollup")
	if err != nil {
		return out
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		switch k {
		case "Rss", "Anonymous", "Pss_Anon", "Pss_File", "Pss_Shmem":
			if n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64); ok && err == nil {
				out[k] = n
			}
		}
	}
	return out
}

// goMetrics reads the Go runtime's memory figures (MiB) from the daemon's
// /metrics: where the anonymous memory goes.
func goMetrics(addr string) map[string]float64 {
	out := map[string]float64{}
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return out
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		switch k {
		case "go_memstats_heap_inuse_bytes", "go_memstats_heap_idle_bytes", "go_memstats_heap_released_bytes",
			"go_memstats_stack_inuse_bytes", "go_memstats_sys_bytes", "go_memstats_other_sys_bytes",
			"go_memstats_mspan_inuse_bytes", "go_memstats_gc_sys_bytes", "go_goroutines", "go_threads":
			if f, err := strconv.ParseFloat(v, 64); ok && err == nil {
				if strings.HasSuffix(k, "_bytes") {
					f /= 1 << 20
				}
				out[strings.TrimPrefix(strings.TrimPrefix(k, "go_memstats_"), "go_")] = f
			}
		}
	}
	return out
}

func fmtRSS(m map[int]float64) string {
	var sb strings.Builder
	for s := 0; s <= 3600; s++ {
		if v, ok := m[s]; ok {
			fmt.Fprintf(&sb, "%ds=%.1f ", s, v)
		}
	}
	return sb.String()
}

// rssNear is the sample taken nearest to second s (0 if none).
func rssNear(m map[int]float64, s int) float64 {
	best, bd := 0.0, 1<<30
	for k, v := range m {
		if d := max(k-s, s-k); d < bd && d <= 10 {
			best, bd = v, d
		}
	}
	return best
}

func reportHealth(b *testing.B, res map[string][]*healthRun, window time.Duration) {
	med := func(name string, f func(*healthRun) float64) float64 {
		var xs []float64
		for _, h := range res[name] {
			xs = append(xs, f(h))
		}
		return Median(xs)
	}
	cpu := func(h *healthRun) float64 { return h.cpuPer1k }
	r30 := func(h *healthRun) float64 { return rssNear(h.rss, 30) }
	r150 := func(h *healthRun) float64 { return rssNear(h.rss, 150) }
	end := func(h *healthRun) float64 { return h.endRSS }
	creep := func(h *healthRun) float64 { return h.endRSS - rssNear(h.rss, 30) }
	for _, name := range []string{"current", "base"} {
		if len(res[name]) == 0 {
			continue
		}
		sfx := map[string]string{"current": "", "base": "base-"}[name]
		b.ReportMetric(med(name, cpu), sfx+"CPU-s/1kpolls")
		b.ReportMetric(med(name, r30), sfx+"RSS30s-MiB")
		if window >= 150*time.Second {
			b.ReportMetric(med(name, r150), sfx+"RSS150s-MiB")
		}
		b.ReportMetric(med(name, end), sfx+"RSSend-MiB")
		b.ReportMetric(med(name, creep), sfx+"creep-MiB")
	}
	if len(res["base"]) == len(res["current"]) && len(res["base"]) > 0 {
		var cr, rr []float64
		for i := range res["base"] {
			cr = append(cr, res["current"][i].cpuPer1k/res["base"][i].cpuPer1k)
			rr = append(rr, res["current"][i].endRSS/res["base"][i].endRSS)
		}
		b.ReportMetric(Median(cr), "CPU/base")
		b.ReportMetric(Median(rr), "RSSend/base")
	}
}
