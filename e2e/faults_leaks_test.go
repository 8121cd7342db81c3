//go:build faults

package e2e

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/bench"
)

// No leaks under faults: a daemon polls sources that fail, hang, throttle,
// reset mid-body, trickle their body, redirect forever, close before the
// headers, send endless bodies, flip between those at run time, exit non-zero
// and outlive their timeout (exec, with a grandchild) until 10,000 polls
// have been made. Once every source is paused (and again once they are all
// removed by a reload), its descriptors, goroutines and child processes
// come back to their baseline.
func TestFaultLeaks(t *testing.T) {
	testStart := time.Now()
	const (
		conc      = 16
		wantPolls = 10000
	)
	fu := newFaultUpstream(t)
	in := newInst(t)
	mark := fmt.Sprintf("PACER_LEAK_MARK_%d", time.Now().UnixNano())

	empty := fmt.Sprintf("concurrency: %d\nshutdown_timeout: 5s\nsources: []\n", conc)
	var b strings.Builder
	fmt.Fprintf(&b, `concurrency: %d
shutdown_timeout: 5s
defaults:
  schedule: "@every 100ms"
  timeout: 1s
  backoff: {initial: 100ms, max: 100ms, multiplier: 1, jitter: 0}
  breaker: {failures: 0}
  error_after: 0
sources:
`, conc)
	var names []string
	var flips []string
	add := func(prefix string, n int, line func(name string) string) {
		for i := 0; i < n; i++ {
			name := fmt.Sprintf("%s-%02d", prefix, i)
			names = append(names, name)
			b.WriteString("  - {name: " + name + ", " + line(name) + "}\n")
		}
	}
	httpSrc := func(path, extra string) func(string) string {
		return func(name string) string {
			return fmt.Sprintf("type: http, url: %q%s", fu.URL(strings.ReplaceAll(path, "NAME", name)), extra)
		}
	}
	add("fail", 10, httpSrc("/fail/NAME", ""))
	add("hang", 6, httpSrc("/hang/NAME", ", timeout: 200ms"))
	add("thr", 4, httpSrc("/throttle/NAME?ra=1", ""))
	add("unavail", 2, httpSrc("/unavail/NAME?in=1s", ""))
	add("reset", 8, httpSrc("/reset/NAME", ""))
	add("slow", 4, httpSrc("/slow/NAME?n=10&every=20ms", ""))
	add("slowcut", 2, httpSrc("/slow/NAME?n=50&every=20ms", ", timeout: 300ms"))
	add("loop", 4, httpSrc("/loop/NAME", ""))
	add("close", 6, httpSrc("/close/NAME", ""))
	add("big", 3, httpSrc("/big/NAME", ", max_body: 64KiB"))
	add("flip", 4, func(name string) string {
		flips = append(flips, "/flip/"+name)
		return httpSrc("/flip/NAME", ", timeout: 300ms")(name)
	})
	add("xfalse", 2, func(string) string {
		return fmt.Sprintf(`type: exec, command: ["false"], env: {%s: "1"}`, mark)
	})
	add("xhang", 2, func(string) string {
		return fmt.Sprintf(`type: exec, command: ["sh", "-c", "sleep 30 & exec sleep 30"], timeout: 200ms, env: {%s: "1"}`, mark)
	})
	faulty := b.String()

	in.writeConfig(empty)
	d := faultSpawn(in)
	d.waitReady(20 * time.Second)
	pid := d.pid()

	// Baseline, after start-up, with no source loaded.
	mc := &http.Client{Timeout: 10 * time.Second}
	measure := func() (fds, goroutines int, err error) {
		faultDropIdleConns()
		mc.CloseIdleConnections()
		// Count once the daemon has closed its end of the test's own
		// admin connections.
		deadline := time.Now().Add(2 * time.Second)
		for time.Now().Before(deadline) && faultInboundConns(pid) > 0 {
			time.Sleep(5 * time.Millisecond)
		}
		fds = bench.OpenFDs(strconv.Itoa(pid))
		resp, err := mc.Get("http://" + in.addr + "/metrics")
		if err != nil {
			return fds, 0, err
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return fds, 0, err
		}
		mc.CloseIdleConnections()
		m, err := parseMetrics(string(body))
		if err != nil {
			return fds, 0, err
		}
		g, ok := m.value("go_goroutines")
		if !ok {
			return fds, 0, fmt.Errorf("no go_goroutines in /metrics")
		}
		return fds, int(g), nil
	}
	sleepUntil(time.Now().Add(time.Second)) // let the start-up settle
	baseFDs, baseG := 1<<30, 1<<30
	for i := 0; i < 5; i++ {
		f, g, err := measure()
		if err != nil {
			t.Fatalf("baseline: %v", err)
		}
		baseFDs, baseG = min(baseFDs, f), min(baseG, g)
		sleepUntil(time.Now().Add(200 * time.Millisecond))
	}
	baseKinds := faultFDKinds(pid)
	t.Logf("baseline (no sources): %d descriptors (%s), %d goroutines", baseFDs, baseKinds, baseG)

	// Load the faulty sources.
	in.writeConfig(faulty)
	loadAt := time.Now()
	d.signal(syscall.SIGHUP)
	eventually(t, 10*time.Second, "the faulty sources loaded by the reload", func() error {
		if n := len(d.sources()); n != len(names) {
			return errf("%d sources", n)
		}
		return nil
	})
	fds := faultSampleFDs(pid, 20*time.Millisecond)

	// Flip the flip endpoints through every fault while the polls run.
	stopFlip := make(chan struct{})
	flipDone := make(chan struct{})
	go func() {
		defer close(flipDone)
		seq := []faultMode{fmReset, fmHang, fmFail, fmClose, fmSlow, fmLoop, fmThrottle, fmBig, fmOK}
		for i := 0; ; i++ {
			for j, p := range flips {
				fu.Flip(p, seq[(i+j)%len(seq)])
			}
			select {
			case <-stopFlip:
				return
			case <-time.After(700 * time.Millisecond):
			}
		}
	}()

	polls := func() (total float64, by map[string]float64) {
		by = map[string]float64{}
		var m metricSet
		fds.hold(func() { m = d.metrics() })
		for _, oc := range []string{"success", "failure", "throttled", "interrupted", "rejected", "skipped"} {
			v, _ := m.value("pacer_polls_total", "outcome", oc)
			by[oc] = v
		}
		return by["success"] + by["failure"] + by["throttled"] + by["interrupted"], by
	}
	var reached time.Time
	eventually(t, 150*time.Second, fmt.Sprintf("%d polls", wantPolls), func() error {
		if n, _ := polls(); n < wantPolls {
			return errf("%.0f polls so far", n)
		}
		reached = time.Now()
		return nil
	})
	close(stopFlip)
	<-flipDone
	nPolls, byOutcome := polls()
	t.Logf("%.0f polls in %s after the reload (%v); %d upstream requests",
		nPolls, reached.Sub(loadAt).Round(time.Millisecond), byOutcome, fu.Total())

	// Pause every source through the API.
	pauseAll := func() {
		var wg sync.WaitGroup
		errs := make(chan string, len(names))
		work := make(chan string)
		for w := 0; w < 6; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for n := range work {
					req, _ := http.NewRequest(http.MethodPost, "http://"+in.addr+"/api/sources/"+n+"/pause",
						strings.NewReader(`{"reason": "leak check"}`))
					req.Header.Set("Content-Type", "application/json")
					resp, err := mc.Do(req)
					if err != nil {
						errs <- n + ": " + err.Error()
						continue
					}
					body, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						errs <- fmt.Sprintf("%s: %d %s", n, resp.StatusCode, body)
					}
				}
			}()
		}
		for _, n := range names {
			work <- n
		}
		close(work)
		wg.Wait()
		close(errs)
		for e := range errs {
			t.Errorf("pause %s", e)
		}
	}
	fds.hold(pauseAll)
	pausedAt := time.Now()
	eventually(t, 10*time.Second, "every source paused and no poll in flight", func() error {
		var inflight float64
		var all map[string]sourceObj
		fds.hold(func() {
			inflight = d.metric("pacer_inflight")
			all = d.sources()
		})
		for _, n := range names {
			if o := all[n]; o.State != "paused" {
				return errf("%s: %s", n, o)
			}
		}
		if inflight != 0 {
			return errf("pacer_inflight %v", inflight)
		}
		return nil
	})
	peak, peakAt, peakKinds, samples := fds.Stop()
	t.Logf("during the run: peak %d descriptors (%s after the reload, %d samples; %s)", peak,
		peakAt.Sub(loadAt).Round(time.Millisecond), samples, peakKinds)

	// Stage 1: quiet, with the connection pool to the upstream allowed
	// (at most `concurrency` idle connections, two goroutines each).
	var f1, g1 int
	var s1 time.Duration
	softly(t, 10*time.Second, "descriptors and goroutines back near the baseline (idle pool allowed)", func() error {
		f, g, err := measure()
		if err != nil {
			return err
		}
		f1, g1, s1 = f, g, time.Since(pausedAt)
		if f > baseFDs+conc+4 || g > baseG+2*conc+8 {
			return errf("%d descriptors (baseline %d, allowed +%d), %d goroutines (baseline %d, allowed +%d); descriptors: %s",
				f, baseFDs, conc+4, g, baseG, 2*conc+8, faultFDKinds(pid))
		}
		return nil
	})
	t.Logf("all paused: %d descriptors, %d goroutines after %s (%s)", f1, g1, s1.Round(time.Millisecond), faultFDKinds(pid))

	// Stage 2: the upstream drops its idle connections; what remains is
	// what the daemon holds on its own.
	fu.CloseClientConnections()
	strict := func(what string) (int, int, time.Duration) {
		var f2, g2 int
		start := time.Now()
		softly(t, 10*time.Second, what, func() error {
			f, g, err := measure()
			if err != nil {
				return err
			}
			f2, g2 = f, g
			if f > baseFDs+4 || g > baseG+8 {
				return errf("%d descriptors (baseline %d, allowed +4), %d goroutines (baseline %d, allowed +8); descriptors now: %s; at the baseline: %s",
					f, baseFDs, g, baseG, faultFDKinds(pid), baseKinds)
			}
			return nil
		})
		return f2, g2, time.Since(start)
	}
	f2, g2, s2 := strict("descriptors and goroutines back to the baseline once the upstream closed its idle connections")
	children := func() error {
		if kids := faultChildrenOf(pid); len(kids) > 0 {
			return errf("the daemon still has child processes: %v", kids)
		}
		if ps := faultProcsWithEnv(mark); len(ps) > 0 {
			return errf("processes started by exec sources are still running (timeouts kill the whole process group): %v", ps)
		}
		return nil
	}
	softly(t, 5*time.Second, "no child process left", children)

	// Stage 3: remove every source by a reload; nothing more may remain.
	in.writeConfig(empty)
	d.signal(syscall.SIGHUP)
	eventually(t, 10*time.Second, "the reload to no source", func() error {
		if n := len(d.sources()); n != 0 {
			return errf("%d sources", n)
		}
		return nil
	})
	f3, g3, s3 := strict("descriptors and goroutines at the baseline after a reload to no source")
	softly(t, 5*time.Second, "no child process left after the reload", children)
	if ls := faultGrep(d.logs(), 5, "too many open files", "panic", "goroutine "); len(ls) > 0 {
		t.Errorf("daemon log: %q", ls)
	}
	d.stop(20 * time.Second)

	t.Logf("TestFaultLeaks figures: %.0f polls (%v) in %s; descriptors baseline %d, peak %d, all paused %d (pool allowed), after upstream closed idle %d, after reload to none %d; goroutines baseline %d, all paused %d, after upstream closed idle %d, after reload to none %d; settle %s/%s/%s; wall %s",
		nPolls, byOutcome, reached.Sub(loadAt).Round(time.Millisecond), baseFDs, peak, f1, f2, f3, baseG, g1, g2, g3,
		s1.Round(time.Millisecond), s2.Round(time.Millisecond), s3.Round(time.Millisecond), time.Since(testStart).Round(time.Second))
}

// faultChildrenOf lists the processes whose parent is pid ("pid comm state").
func faultChildrenOf(pid int) []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(data)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 2 {
			continue
		}
		if pp, _ := strconv.Atoi(f[1]); pp == pid {
			comm := s[strings.IndexByte(s, '(')+1 : i]
			out = append(out, fmt.Sprintf("%d %s %s", p, comm, f[0]))
		}
	}
	return out
}

// faultProcsWithEnv lists the live processes whose environment has key set.
func faultProcsWithEnv(key string) []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil || p == os.Getpid() {
			continue
		}
		data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil || !strings.Contains(string(data), key+"=") {
			continue
		}
		if procDead(p) {
			continue
		}
		comm, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		out = append(out, fmt.Sprintf("%d %s", p, strings.TrimSpace(string(comm))))
	}
	return out
}
