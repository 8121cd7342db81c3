package bench

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/config"
)

// tickerClient is the steady-rate baseline: one ticker every
// interval/n hands the next of n URLs (url/s/0 .. url/s/n-1, round robin)
// to k workers over a channel of capacity k, each worker requesting it
// through one Transport allowing k connections (all kept idle). A tick
// whose request finds every worker busy and the channel full waits: the
// client is bounded, like pacer's permits.
func tickerClient(k, n int, interval time.Duration, url string, stop <-chan struct{}) (wait func()) {
	tr := &http.Transport{MaxConnsPerHost: k, MaxIdleConnsPerHost: k, MaxIdleConns: k}
	client := &http.Client{Transport: tr}
	urls := make(chan string, k)
	var wg sync.WaitGroup
	for range k {
		wg.Go(func() {
			for u := range urls {
				resp, err := client.Get(u)
				if err != nil {
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
			}
		})
	}
	wg.Go(func() {
		defer close(urls)
		t := time.NewTicker(interval / time.Duration(n))
		defer t.Stop()
		for i := 0; ; i = (i + 1) % n {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			select {
			case <-stop:
				return
			case urls <- fmt.Sprintf("%s/s/%d", url, i):
			}
		}
	})
	return func() {
		wg.Wait()
		tr.CloseIdleConnections()
	}
}

// BenchmarkLoadSteady is issue 15's steady case: 2,000 http sources on
// "@every 10s" (200 polls/s, 1 KiB answers held 10 ms by the loopback
// server, concurrency 64), pacer's daemon code path (as BenchmarkLoad:
// real pollers, real SQLite store, digests on) against a ticker-driven
// bounded client making the same 200 requests a second (tickerClient).
// The figure is the CPU of the process (server included, on both sides)
// per 1,000 requests served; the target is pacer <= the ticker client
// (pacer/ticker <= 1). Each pacer round starts on a new store, so that no
// restart's catch-up falls in the window. Rounds alternate the two; the
// figures are medians. The descriptors are not sampled (see
// slowServer.noFDs).
//
//	go test ./bench -run '^$' -bench BenchmarkLoadSteady -benchtime=1x -timeout 30m
//
// PACER_BENCH_WINDOW (default 10s: one interval) and PACER_BENCH_ROUNDS
// (default 3).
func BenchmarkLoadSteady(b *testing.B) {
	const hold, n, k, interval = 10 * time.Millisecond, 2000, 64, 10 * time.Second
	window := EnvDuration("PACER_BENCH_WINDOW", interval)
	rounds := EnvInt("PACER_BENCH_ROUNDS", 3)
	const warm = 2 * time.Second
	srv := newBodyServer(b, hold, loadBody)
	srv.noFDs = true // set before any request: only this goroutine reads it
	dir := b.TempDir()
	cfg, err := config.Load(writeConfig(b, dir, n, k, fmt.Sprintf("@every %s", interval), srv.URL, ""), os.LookupEnv)
	if err != nil {
		b.Fatal(err)
	}
	demand := float64(n) / interval.Seconds()
	var ratios, cpuT, cpuP, rpsT, rpsP, allocsT, allocsP []float64
	for r := range rounds {
		stop := make(chan struct{})
		base := srv.fds()
		wait := tickerClient(k, n, interval, srv.URL, stop)
		time.Sleep(warm)
		tp := srv.measure(base, 0, window)
		close(stop)
		wait()
		for _, suffix := range []string{"", "-wal", "-shm"} {
			if err := os.Remove(cfg.Store + suffix); err != nil && !os.IsNotExist(err) {
				b.Fatal(err)
			}
		}
		pp := runPacer(b, fmt.Sprintf("steady-r%d", r+1), cfg, srv, warm, window)
		// CPU-seconds per 1,000 requests: µs per request / 1,000.
		ratios = append(ratios, pp.cpuPerReq/tp.cpuPerReq)
		cpuT, cpuP = append(cpuT, tp.cpuPerReq/1e3), append(cpuP, pp.cpuPerReq/1e3)
		rpsT, rpsP = append(rpsT, tp.rps), append(rpsP, pp.rps)
		allocsT, allocsP = append(allocsT, tp.allocsReq), append(allocsP, pp.allocsReq)
		b.Logf("round %d: ticker %.0f req/s, %.3f CPU-s per 1,000, %.1f allocs/req | pacer %.0f req/s, %.3f CPU-s per 1,000, %.1f allocs/req (lag p99 %.1f ms) | pacer/ticker CPU %.2f",
			r+1, tp.rps, tp.cpuPerReq/1e3, tp.allocsReq, pp.rps, pp.cpuPerReq/1e3, pp.allocsReq, pp.lagP99, pp.cpuPerReq/tp.cpuPerReq)
	}
	b.ReportMetric(Median(ratios), "cpu-pacer/ticker")
	b.ReportMetric(Median(cpuP), "pacer-cpu-s/1000")
	b.ReportMetric(Median(cpuT), "ticker-cpu-s/1000")
	b.ReportMetric(Median(rpsP)/demand, "pacer/demand")
	b.ReportMetric(Median(rpsT)/demand, "ticker/demand")
	b.ReportMetric(Median(allocsP), "pacer-allocs/req")
	b.ReportMetric(Median(allocsT), "ticker-allocs/req")
}
