package dashboard_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/dashboard"
	"github.com/pacer-dev/pacer/scheduler"
	"github.com/pacer-dev/pacer/store"
)

// BenchmarkDashboardPagePolling is the status page of a daemon that polls:
// 100,000 http sources on "@every 1m" (about 1,700 polls a second) against
// a loopback server, concurrency 64, the real scheduler on a real SQLite
// store. The pages are asked once the sources have been polling for 10 s
// (PACER_BENCH_WARMUP), as the daemon was: the dispatcher, the
// workers and the flusher then contend with the page for the scheduler's
// lock and the store's connection. Nothing is asserted about the time.
func BenchmarkDashboardPagePolling(b *testing.B) {
	n := envInt("PACER_BENCH_SOURCES", 100_000)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}))
	defer up.Close()
	var cfg strings.Builder
	cfg.WriteString("store: pacer.db\nconcurrency: 64\nadmin: {listen: \"\"}\nsources:\n")
	for i := range n {
		fmt.Fprintf(&cfg, "  - {name: source-%06d, type: http, url: \"%s/s/%d\", schedule: \"@every 1m\", timeout: 5s}\n", i, up.URL, i)
	}
	sched := startScheduler(b, cfg.String())
	warm := envDuration("PACER_BENCH_WARMUP", 10*time.Second)
	time.Sleep(warm) // not a condition to wait for: the daemon's age when the page is asked
	d, err := dashboard.New(sched, dashboard.Options{})
	if err != nil {
		b.Fatal(err)
	}
	benchPages(b, d, []struct{ name, path string }{
		{"first", "/"},
		{"next", "/?page=2"},
		{"search", "/?q=source-0999"},
		{"sort-next-page-1000", "/?sort=next&order=desc&page=1000"},
		{"live-fragment", "/dash/live?sort=name&page=2"},
	})
}

// startScheduler loads cfgText (relative paths in a temporary directory)
// and starts the real scheduler on a real SQLite store, stopped at the
// end of the benchmark.
func startScheduler(b testing.TB, cfgText string) *scheduler.Scheduler {
	b.Helper()
	dir := b.TempDir()
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, []byte(cfgText), 0o600); err != nil {
		b.Fatal(err)
	}
	cfg, err := config.Load(path, os.LookupEnv)
	if err != nil {
		b.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	st, err := store.Open(cfg.Store, store.Options{Logger: log})
	if err != nil {
		b.Fatal(err)
	}
	sched, err := scheduler.New(cfg, scheduler.Options{Store: st, Logger: log, Registry: prometheus.NewRegistry()})
	if err != nil {
		b.Fatal(err)
	}
	if err := sched.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := sched.Shutdown(10 * time.Second); err != nil {
			b.Error(err)
		}
		if err := st.Close(); err != nil {
			b.Error(err)
		}
	})
	return sched
}

// envInt and envDuration read a benchmark's setting from the environment.
func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

func envDuration(name string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(name)); err == nil && d >= 0 {
		return d
	}
	return def
}
