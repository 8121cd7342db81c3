package bench

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/scheduler"
	"github.com/pacer-dev/pacer/store"
)

// buildPacer builds the daemon binary into dir.
func buildPacer(b *testing.B, dir string) string {
	b.Helper()
	bin := filepath.Join(dir, "pacer")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/pacer-dev/pacer")
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func freeAddr(b *testing.B) string {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// daemonRun is one started daemon.
type daemonRun struct {
	cmd   *exec.Cmd
	ready time.Duration // process start to the first 200 of /readyz
	fds   int           // its open descriptors, sampled after ready (peak)
	hwm   int64         // its VmHWM at the end, KiB
	rss   int64         // its VmRSS at rssAt after ready (0: not asked), KiB
}

// startDaemon starts bin on config and waits for /readyz to answer 200;
// after ready it samples the daemon's descriptors for sample, and with
// rssAt > 0 reads its VmRSS that long after ready (the steady figure of
// issue 15's memory target: the start-up's garbage has had time to go).
func startDaemon(b *testing.B, bin, config, addr string, sample, rssAt time.Duration) *daemonRun {
	b.Helper()
	client := &http.Client{Timeout: 30 * time.Second}
	cmd := exec.Command(bin, "run", "-config", config)
	logf, err := os.Create(config + ".log")
	if err != nil {
		b.Fatal(err)
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	d := &daemonRun{cmd: cmd}
	for {
		resp, err := client.Get("http://" + addr + "/readyz")
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				d.ready = time.Since(t0)
				break
			}
		}
		if time.Since(t0) > 3*time.Minute {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			b.Fatalf("daemon not ready after 3 minutes (see %s.log)", config)
		}
		time.Sleep(2 * time.Millisecond)
	}
	readyAt := time.Now()
	pid := strconv.Itoa(cmd.Process.Pid)
	for end := readyAt.Add(sample); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		d.fds = max(d.fds, OpenFDs(pid))
	}
	if rssAt > 0 {
		time.Sleep(time.Until(readyAt.Add(rssAt))) // a fixed point in time, not a condition
		d.rss = StatusKiB(pid, "VmRSS")
	}
	d.hwm = StatusKiB(pid, "VmHWM")
	return d
}

func (d *daemonRun) stop(b *testing.B) {
	b.Helper()
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	if err := d.cmd.Wait(); err != nil {
		b.Errorf("daemon exit: %v", err)
	}
}

// BenchmarkStartup builds the binary, generates a config of 100,000 http
// sources ("@every 1m", against a loopback server of this process), runs
// the daemon once to populate its store, then measures process start to
// the first 200 of /readyz (target <= 2 s) over PACER_BENCH_ROUNDS runs
// (default 3; the figure is the median). The baseline, in the same run and
// alternating with it, is the same binary on a config of one source. It
// also reports the daemon's own open descriptors (sampled for 3 s after
// ready, while the sources start polling; target <= concurrency + 16 for
// any number of sources), its peak RSS (VmHWM) and its RSS 10 s after ready
// (issue 15: <= 2 KiB per source, VmHWM <= 2x it).
//
//	go test ./bench -run '^$' -bench BenchmarkStartup -benchtime=1x -timeout 30m
func BenchmarkStartup(b *testing.B) {
	const n, conc = 100_000, 64
	rounds := EnvInt("PACER_BENCH_ROUNDS", 3)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok\n")
	}))
	defer srv.Close()
	dir := b.TempDir()
	bin := buildPacer(b, dir)

	bigDir, smallDir := filepath.Join(dir, "big"), filepath.Join(dir, "small")
	for _, d := range []string{bigDir, smallDir} {
		if err := os.Mkdir(d, 0o755); err != nil {
			b.Fatal(err)
		}
	}
	bigAddr, smallAddr := freeAddr(b), freeAddr(b)
	bigCfg := writeConfig(b, bigDir, n, conc, "@every 1m", srv.URL, bigAddr)
	smallCfg := writeConfig(b, smallDir, 1, conc, "@every 1m", srv.URL, smallAddr)
	fi, _ := os.Stat(bigCfg)
	b.Logf("config: %d sources, %.1f MiB", n, float64(fi.Size())/(1<<20))

	// Populate the stores: first start, then a graceful stop commits every
	// source's first state.
	for _, c := range []struct{ cfg, addr string }{{bigCfg, bigAddr}, {smallCfg, smallAddr}} {
		d := startDaemon(b, bin, c.cfg, c.addr, 0, 0)
		b.Logf("first start (empty store) of %s: ready in %v", filepath.Base(filepath.Dir(c.cfg)), d.ready.Round(time.Millisecond))
		time.Sleep(time.Second)
		d.stop(b)
	}
	if fi, err := os.Stat(filepath.Join(bigDir, "pacer.db")); err == nil {
		b.Logf("store: %.1f MiB", float64(fi.Size())/(1<<20))
	}

	var big, small, ratio, fds, hwm, rss, perSource, hwmRatio []float64
	for r := range rounds {
		s := startDaemon(b, bin, smallCfg, smallAddr, 0, 0)
		s.stop(b)
		d := startDaemon(b, bin, bigCfg, bigAddr, 3*time.Second, 10*time.Second)
		d.stop(b)
		big, small = append(big, d.ready.Seconds()), append(small, s.ready.Seconds())
		ratio = append(ratio, d.ready.Seconds()/s.ready.Seconds())
		fds, hwm = append(fds, float64(d.fds)), append(hwm, float64(d.hwm)/1024)
		rss, perSource = append(rss, float64(d.rss)/1024), append(perSource, float64(d.rss)*1024/n)
		hwmRatio = append(hwmRatio, float64(d.hwm)/float64(d.rss))
		b.Logf("round %d: 100k sources ready in %v (descriptors %d, HWM %.0f MiB, RSS 10 s after ready %.0f MiB = %.0f B/source); 1 source ready in %v",
			r+1, d.ready.Round(time.Millisecond), d.fds, float64(d.hwm)/1024, float64(d.rss)/1024, float64(d.rss)*1024/n, s.ready.Round(time.Millisecond))
	}
	b.ReportMetric(Median(big), "ready-s")
	b.ReportMetric(Median(small), "baseline-ready-s")
	b.ReportMetric(Median(ratio), "ready/baseline")
	b.ReportMetric(Median(fds), "daemon-peak-fds")
	b.ReportMetric(Median(hwm), "daemon-HWM-MiB")
	b.ReportMetric(Median(rss), "daemon-RSS10s-MiB")
	b.ReportMetric(Median(perSource), "RSS10s-B/source")
	b.ReportMetric(Median(hwmRatio), "HWM/RSS10s")
}

// BenchmarkStartupStages times, in this process, the stages of the
// daemon's start with 100,000 sources in config and store (the path of
// cli.run up to READY: config.Load, store.AcquireLock, store.Open,
// scheduler.New, scheduler.Start, the first Ready check), to show where
// BenchmarkStartup's time goes. The store is populated by a first start.
// Medians of PACER_BENCH_ROUNDS (default 3); PACER_BENCH_PROFILE_DIR, when
// set, receives a CPU profile of the last round (startup.pprof).
//
//	go test ./bench -run '^$' -bench BenchmarkStartupStages -benchtime=1x
func BenchmarkStartupStages(b *testing.B) {
	const n, conc = 100_000, 64
	rounds := EnvInt("PACER_BENCH_ROUNDS", 3)
	dir := b.TempDir()
	// Sources point at a closed port: nothing polls within a start anyway
	// ("@every 1m" phases put the first polls up to a minute later, and
	// each round shuts down within a second).
	path := writeConfig(b, dir, n, conc, "@every 1m", "http://127.0.0.1:1", "")
	stages := map[string][]float64{}
	order := []string{"config.Load", "store.AcquireLock", "store.Open", "scheduler.New", "scheduler.Start", "Ready", "total"}
	for r := -1; r < rounds; r++ { // round -1 populates the store
		var stopProf func()
		if r == rounds-1 {
			stopProf = profile(b, "startup")
		}
		t0 := time.Now()
		last := t0
		mark := func(name string) {
			if r >= 0 {
				stages[name] = append(stages[name], time.Since(last).Seconds())
			}
			last = time.Now()
		}
		cfg, err := config.Load(path, os.LookupEnv)
		if err != nil {
			b.Fatal(err)
		}
		mark("config.Load")
		lock, err := store.AcquireLock(cfg.Store)
		if err != nil {
			b.Fatal(err)
		}
		mark("store.AcquireLock")
		st, err := store.Open(cfg.Store, store.Options{})
		if err != nil {
			b.Fatal(err)
		}
		mark("store.Open")
		s, err := scheduler.New(cfg, scheduler.Options{Store: st, Registry: prometheus.NewRegistry(), Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			b.Fatal(err)
		}
		mark("scheduler.New")
		if err := s.Start(context.Background()); err != nil {
			b.Fatal(err)
		}
		mark("scheduler.Start")
		if err := s.Ready(context.Background()); err != nil {
			b.Fatal(err)
		}
		mark("Ready")
		if r >= 0 {
			stages["total"] = append(stages["total"], time.Since(t0).Seconds())
		}
		if stopProf != nil {
			stopProf()
		}
		if err := s.Shutdown(10 * time.Second); err != nil {
			b.Error(err)
		}
		_ = st.Close()
		_ = lock.Release()
	}
	for _, name := range order {
		b.ReportMetric(Median(stages[name]), name+"-s")
	}
}
