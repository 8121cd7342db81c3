package scheduler

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// upstream is a loopback server that records peak concurrency, overall and
// per path, and open server-side connections.
type upstream struct {
	*httptest.Server
	hold     func(path string) time.Duration
	mu       sync.Mutex
	inflight int
	peak     int
	perPath  map[string]int
	peakPath int
	arrivals map[string]int
	conns    atomic.Int64
}

func newUpstream(t *testing.T, hold func(path string) time.Duration) *upstream {
	u := &upstream{hold: hold, perPath: map[string]int{}, arrivals: map[string]int{}}
	u.Server = httptest.NewUnstartedServer(http.HandlerFunc(u.serve))
	u.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			u.conns.Add(1)
		case http.StateClosed, http.StateHijacked:
			u.conns.Add(-1)
		}
	}
	u.Start()
	t.Cleanup(u.Close)
	return u
}

func (u *upstream) serve(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	u.mu.Lock()
	u.inflight++
	u.peak = max(u.peak, u.inflight)
	u.perPath[p]++
	u.peakPath = max(u.peakPath, u.perPath[p])
	u.arrivals[p]++
	u.mu.Unlock()
	defer func() {
		u.mu.Lock()
		u.inflight--
		u.perPath[p]--
		u.mu.Unlock()
	}()
	t := time.NewTimer(u.hold(p))
	defer t.Stop()
	select {
	case <-t.C:
	case <-r.Context().Done():
	}
	fmt.Fprintln(w, "ok")
}

func (u *upstream) stats() (peak, peakPath int, arrivals map[string]int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	a := make(map[string]int, len(u.arrivals))
	for k, v := range u.arrivals {
		a[k] = v
	}
	return u.peak, u.peakPath, a
}

func openFDs(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatalf("count descriptors: %v", err)
	}
	return len(ents)
}

// TestBounds runs 1,000 sources against a slow loopback server: the server
// never sees more than `concurrency` requests at once nor two for one
// source, and the process's descriptors stay under concurrency + 32
// (rule 3.1, 3.3). Real time, a few seconds.
func TestBounds(t *testing.T) {
	const n, conc = 1000, 8
	up := newUpstream(t, func(string) time.Duration { return 20 * time.Millisecond })
	var b strings.Builder
	fmt.Fprintf(&b, "concurrency: %d\ndefaults: {schedule: \"@every 1s\", timeout: 5s}\nsources:\n", conc)
	for i := range n {
		fmt.Fprintf(&b, "  - {name: s%d, type: http, url: \"%s/s%d\"}\n", i, up.URL, i)
	}
	dir := t.TempDir()
	cfg := writeConfig(t, dir, b.String())
	base := openFDs(t)
	h := start(t, dir, cfg)

	peakFDs := 0
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		fds := openFDs(t) - int(up.conns.Load()) // the daemon's, not the test server's
		peakFDs = max(peakFDs, fds)
		if inflight := h.metric("pacer_inflight"); inflight > conc {
			t.Errorf("pacer_inflight %v > %d", inflight, conc)
		}
		time.Sleep(20 * time.Millisecond) // sampling interval, not a wait for a condition
	}
	h.stop()
	peak, peakPath, arrivals := up.stats()
	t.Logf("peak in flight %d, peak per source %d, sources polled %d, peak fds %d (baseline %d)", peak, peakPath, len(arrivals), peakFDs, base)
	if peak > conc {
		t.Errorf("upstream saw %d requests at once, cap is %d", peak, conc)
	}
	if peak < conc {
		t.Errorf("upstream saw at most %d at once: the cap of %d was never used", peak, conc)
	}
	if peakPath > 1 {
		t.Errorf("a source had %d polls in flight", peakPath)
	}
	if peakFDs > conc+32 {
		t.Errorf("%d descriptors open, want at most %d", peakFDs, conc+32)
	}
	// 3s at 8 x 20ms: about 1,200 polls; every source was due.
	if len(arrivals) < 500 {
		t.Errorf("only %d of %d sources polled", len(arrivals), n)
	}
	if got := h.metric("pacer_polls_total", "outcome", "success"); got < 500 {
		t.Errorf("pacer_polls_total{success} = %v", got)
	}
}

// TestGroupLimit checks rule 3.2: a group caps its members' polls in flight
// and start rate, and a saturated group does not starve a source outside it.
func TestGroupLimit(t *testing.T) {
	up := newUpstream(t, func(p string) time.Duration {
		if strings.HasPrefix(p, "/g") {
			return 400 * time.Millisecond
		}
		return 0
	})
	var b strings.Builder
	b.WriteString("concurrency: 4\nlimits:\n  slow: {concurrency: 2, rate: 20/s, burst: 2}\ndefaults: {schedule: \"@every 1s\", timeout: 5s}\nsources:\n")
	for i := range 10 {
		fmt.Fprintf(&b, "  - {name: g%d, type: http, url: \"%s/g%d\", limit: slow}\n", i, up.URL, i)
	}
	fmt.Fprintf(&b, "  - {name: free, type: http, url: \"%s/free\"}\n", up.URL)
	dir := t.TempDir()
	h := start(t, dir, writeConfig(t, dir, b.String()))
	h.waitFor("free polled 3 times", 10*time.Second, func() bool {
		_, _, a := up.stats()
		return a["/free"] >= 3
	})
	h.stop()
	up.mu.Lock()
	defer up.mu.Unlock()
	groupPeak := 0
	// The group's peak: the overall peak minus the free source's (at most 1).
	groupPeak = up.peak - 1
	if up.peak > 3 {
		t.Errorf("peak %d in flight: the group (cap 2) plus one free source allow 3", up.peak)
	}
	if groupPeak > 2 {
		t.Errorf("group peak %d > 2", groupPeak)
	}
	if up.arrivals["/free"] < 3 {
		t.Errorf("free source starved: %d polls", up.arrivals["/free"])
	}
}
