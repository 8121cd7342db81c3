package bench

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/config"
)

// BenchmarkLoadHosts is BenchmarkLoad's K=64 case (20*64 sources on
// "@every 100ms", a loopback server holding each request 10 ms) with the
// sources spread over 26 hosts (127.0.0.1 to 127.0.0.26, one listener on
// all of them: one host per ~50 sources), run with host groups off (no
// hosts section) and on (hosts: concurrency 8, a breaker: every poll
// passes its host's group), rounds alternating. on/off is the ratio of
// the medians of the CPU per request (issue 22: <= 1.05).
//
//	go test ./bench -run '^$' -bench BenchmarkLoadHosts -benchtime=1x -timeout 30m -v
func BenchmarkLoadHosts(b *testing.B) {
	const hold = 10 * time.Millisecond
	const k, n, hostsN = 64, 20 * 64, 26
	window := EnvDuration("PACER_BENCH_WINDOW", 5*time.Second)
	rounds := EnvInt("PACER_BENCH_ROUNDS", 3)
	const warm = 1500 * time.Millisecond
	srv := newSlowServer(b, hold)
	l, err := net.Listen("tcp", "0.0.0.0:0") // every 127.0.0.x reaches it
	if err != nil {
		b.Fatal(err)
	}
	go srv.Config.Serve(l) //nolint:errcheck // ends when l closes
	b.Cleanup(func() { l.Close() })
	port := l.Addr().(*net.TCPAddr).Port
	dir := b.TempDir()
	load := func(name, hosts string) *config.Config {
		var sb strings.Builder
		fmt.Fprintf(&sb, "store: %s.db\nadmin: {listen: \"\"}\nconcurrency: %d\nshutdown_timeout: 10s\nlog: {level: warn}\n%s", name, k, hosts)
		sb.WriteString("defaults: {schedule: \"@every 100ms\", timeout: 5s}\nsources:\n")
		for i := range n {
			fmt.Fprintf(&sb, "  - {name: src-%06d, type: http, url: \"http://127.0.0.%d:%d/s/%d\"}\n", i, 1+i%hostsN, port, i)
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
	on := load("on", "hosts: {concurrency: 8, breaker: {failures: 5}}\n")
	var ratios, rpsOn, rpsOff, cpuOn, cpuOff []float64
	for r := range rounds {
		pOff := runPacer(b, fmt.Sprintf("hosts-off-r%d", r+1), off, srv, warm, window)
		pOn := runPacer(b, fmt.Sprintf("hosts-on-r%d", r+1), on, srv, warm, window)
		ratios = append(ratios, pOn.cpuPerReq/pOff.cpuPerReq)
		rpsOn, rpsOff = append(rpsOn, pOn.rps), append(rpsOff, pOff.rps)
		cpuOn, cpuOff = append(cpuOn, pOn.cpuPerReq), append(cpuOff, pOff.cpuPerReq)
		b.Logf("round %d: on %.0f req/s (%.0f µs CPU/req) | off %.0f req/s (%.0f µs CPU/req) | CPU/req on/off %.3f",
			r+1, pOn.rps, pOn.cpuPerReq, pOff.rps, pOff.cpuPerReq, pOn.cpuPerReq/pOff.cpuPerReq)
	}
	b.ReportMetric(Median(ratios), "cpu-on/off")
	b.ReportMetric(Median(rpsOn), "on-req/s")
	b.ReportMetric(Median(rpsOff), "off-req/s")
	b.ReportMetric(Median(cpuOn), "on-cpu-us/req")
	b.ReportMetric(Median(cpuOff), "off-cpu-us/req")
}
