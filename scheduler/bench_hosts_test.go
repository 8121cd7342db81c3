package scheduler

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/bench"
	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/scheduler/policy"
	"github.com/pacer-dev/pacer/sources"
)

// BenchmarkSchedulerHosts is BenchmarkSchedulerCPU's 100,000 sources on
// "@every 1m" (a no-op poller) spread over 2,000 hosts, run with host
// groups off (no hosts section) and on (hosts: concurrency 4, adaptive,
// a breaker), rounds alternating; on/off is the ratio of the medians of
// the process's CPU share (issue 22: <= 1.1).
//
//	go test ./scheduler -run '^$' -bench BenchmarkSchedulerHosts -benchtime=1x -timeout 60m -v
func BenchmarkSchedulerHosts(b *testing.B) {
	const n, hostsN = 100_000, 2_000
	window, rounds := benchWindow(), benchRounds()
	dir := b.TempDir()
	load := func(name, hostsSection string) *config.Config {
		var sb strings.Builder
		fmt.Fprintf(&sb, "store: %s.db\nadmin: {listen: \"\"}\nconcurrency: 64\nlog: {level: warn}\n%s", name, hostsSection)
		sb.WriteString("defaults: {schedule: \"@every 1m\", timeout: 5s}\nsources:\n")
		for i := range n {
			fmt.Fprintf(&sb, "  - {name: src-%06d, type: http, url: \"http://h%04d.example/s/%d\"}\n", i, i%hostsN, i)
		}
		path := filepath.Join(dir, name+".yaml")
		if err := os.WriteFile(path, []byte(sb.String()), 0o600); err != nil {
			b.Fatal(err)
		}
		cfg, err := config.Load(path, os.LookupEnv)
		if err != nil {
			b.Fatal(err)
		}
		return cfg
	}
	off := load("off", "")
	on := load("on", "hosts: {concurrency: 4, adaptive: true, breaker: {failures: 5}}\n")
	newPoller := func(src *config.Source) (sources.Poller, error) {
		return noopPoller{tm: policy.NewTiming(src.Name, src.Schedule)}, nil
	}
	measure := func(cfg *config.Config, name string) float64 {
		for _, suffix := range []string{"", "-wal", "-shm"} {
			if err := os.Remove(cfg.Store + suffix); err != nil && !os.IsNotExist(err) {
				b.Fatal(err)
			}
		}
		h := startBench(b, dir, cfg, newPoller)
		h.settle(2 * time.Minute)
		stop := profileWindow(b, name)
		p := cpuShare(window)
		stop()
		h.stop(b)
		return p
	}
	var offs, ons, ratios []float64
	for r := range rounds {
		o := measure(off, fmt.Sprintf("hosts-off-r%d", r+1))
		w := measure(on, fmt.Sprintf("hosts-on-r%d", r+1))
		offs, ons, ratios = append(offs, o), append(ons, w), append(ratios, w/o)
		b.Logf("round %d: hosts off %.3f%% of a core, on %.3f%%: on/off %.3f", r+1, 100*o, 100*w, w/o)
	}
	b.ReportMetric(100*bench.Median(offs), "off-cpu%")
	b.ReportMetric(100*bench.Median(ons), "on-cpu%")
	b.ReportMetric(bench.Median(ratios), "on/off")
}
