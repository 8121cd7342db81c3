package bench

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/config"
)

// BenchmarkLoadConditional is BenchmarkLoad's K=64 case (20*64 sources on
// "@every 100ms", a loopback server holding each request 10 ms) against a
// server that sends an ETag and answers a matching If-None-Match with 304,
// run with conditional requests on (every poll after a source's first is
// a 304, unchanged) and off (conditional: false in defaults: every poll is
// a 200 whose body is digested and compared). Digests are computed in
// both. Rounds alternate on and off; the figures are medians, and on/off is
// the ratio of their throughputs (issue 13: >= 0.95).
//
//	go test ./bench -run '^$' -bench BenchmarkLoadConditional -benchtime=1x -timeout 30m
//
// PACER_BENCH_WINDOW (default 5s) and PACER_BENCH_ROUNDS (default 3).
func BenchmarkLoadConditional(b *testing.B) {
	const hold = 10 * time.Millisecond
	const k, n = 64, 20 * 64
	window := EnvDuration("PACER_BENCH_WINDOW", 5*time.Second)
	rounds := EnvInt("PACER_BENCH_ROUNDS", 3)
	const warm = 1500 * time.Millisecond
	srv := newETagServer(b, hold, `"ok-1"`)
	load := func(conditional bool) *config.Config {
		dir := b.TempDir()
		path := writeConfig(b, dir, n, k, "@every 100ms", srv.URL, "")
		if !conditional {
			text, err := os.ReadFile(path)
			if err != nil {
				b.Fatal(err)
			}
			off := strings.Replace(string(text), "timeout: 5s}", "timeout: 5s, conditional: false}", 1)
			if err := os.WriteFile(path, []byte(off), 0o600); err != nil {
				b.Fatal(err)
			}
		}
		cfg, err := config.Load(path, os.LookupEnv)
		if err != nil {
			b.Fatal(err)
		}
		return cfg
	}
	on, off := load(true), load(false)
	var ratios, rpsOn, rpsOff, cpuOn, cpuOff []float64
	for r := range rounds {
		nm0 := srv.notModified.Load()
		pOff := runPacer(b, fmt.Sprintf("cond-off-r%d", r+1), off, srv, warm, window)
		if got := srv.notModified.Load() - nm0; got != 0 {
			b.Fatalf("conditional: false: %d 304s, want none", got)
		}
		nm0 = srv.notModified.Load()
		pOn := runPacer(b, fmt.Sprintf("cond-on-r%d", r+1), on, srv, warm, window)
		if srv.notModified.Load() == nm0 {
			b.Fatal("conditional on: no 304")
		}
		ratios = append(ratios, pOn.rps/pOff.rps)
		rpsOn, rpsOff = append(rpsOn, pOn.rps), append(rpsOff, pOff.rps)
		cpuOn, cpuOff = append(cpuOn, pOn.cpuPerReq), append(cpuOff, pOff.cpuPerReq)
		b.Logf("round %d: on %.0f req/s (%.0f µs CPU/req, lag p99 %.1f ms) | off %.0f req/s (%.0f µs CPU/req, lag p99 %.1f ms) | on/off %.3f",
			r+1, pOn.rps, pOn.cpuPerReq, pOn.lagP99, pOff.rps, pOff.cpuPerReq, pOff.lagP99, pOn.rps/pOff.rps)
	}
	b.ReportMetric(Median(ratios), "on/off")
	b.ReportMetric(Median(rpsOn), "on-req/s")
	b.ReportMetric(Median(rpsOff), "off-req/s")
	b.ReportMetric(Median(cpuOn), "on-cpu-us/req")
	b.ReportMetric(Median(cpuOff), "off-cpu-us/req")
}
