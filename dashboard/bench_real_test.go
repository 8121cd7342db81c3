package dashboard_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/dashboard"
	"github.com/pacer-dev/pacer/scheduler"
	"github.com/pacer-dev/pacer/store"
)

// BenchmarkDashboardPageScheduler is BenchmarkDashboardPage over the real
// scheduler (100,000 exec sources that never poll on their own, a SQLite
// store in a temporary directory): the table's pass over the scheduler's
// entries under its lock and each row's history read from the store are
// in the figure. Nothing is asserted about the time.
func BenchmarkDashboardPageScheduler(b *testing.B) {
	const n = 100_000
	dir := b.TempDir()
	var cfgText strings.Builder
	cfgText.WriteString("store: pacer.db\nadmin: {listen: \"\"}\ndefaults: {schedule: \"0 0 1 1 *\"}\nsources:\n")
	for i := range n {
		fmt.Fprintf(&cfgText, "  - {name: source-%06d, type: exec, command: [\"true\"]}\n", i)
	}
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, []byte(cfgText.String()), 0o600); err != nil {
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
	defer st.Close()
	sched, err := scheduler.New(cfg, scheduler.Options{Store: st, Logger: log, Registry: prometheus.NewRegistry()})
	if err != nil {
		b.Fatal(err)
	}
	if err := sched.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := sched.Shutdown(10 * time.Second); err != nil {
			b.Error(err)
		}
	}()
	d, err := dashboard.New(sched, dashboard.Options{})
	if err != nil {
		b.Fatal(err)
	}
	benchPages(b, d, []struct{ name, path string }{
		{"first", "/"},
		{"search", "/?q=source-0999"},
		{"sort-next-page-1000", "/?sort=next&order=desc&page=1000"},
		{"live-fragment", "/dash/live?sort=name&page=2"},
	})
	b.Run("host-shares", func(b *testing.B) { // the background aggregate, once a minute at most
		for b.Loop() {
			if n := dashboard.ComputeHostShares(d); n != 0 {
				b.Fatalf("%d hosts of exec sources", n)
			}
		}
	})
}
