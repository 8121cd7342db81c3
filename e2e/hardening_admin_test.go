package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Issue 10 item 1 (admin part), rule 7.3: clients of the admin port cannot
// use up the daemon's descriptors. Under RLIMIT_NOFILE 256 the test opens
// 400 keep-alive connections to the admin listener (each makes one GET
// /healthz and is then held idle): polls keep succeeding (no "too many open
// files" in status, history or the log), /healthz answers while they are
// held and after they are closed, and the daemon's open descriptors stay
// within its admin cap (32) plus what polls need.
func TestAdminConnectionsCannotExhaustDescriptors(t *testing.T) {
	t.Parallel()
	const (
		nofile   = 256
		nConns   = 400
		adminCap = 32 // cli.adminConns: half the descriptor headroom
	)
	up := newUpstream(t)
	in := newInst(t)
	in.wrap = nofileWrapper(nofile)
	var b strings.Builder
	b.WriteString("concurrency: 4\ndefaults:\n  schedule: \"@every 1s\"\n  timeout: 2s\n  error_after: 3\nsources:\n")
	names := []string{}
	for i := 0; i < 3; i++ {
		fmt.Fprintf(&b, "  - {name: h%d, type: http, url: %q}\n", i, up.URL(fmt.Sprintf("/ok/h%d", i)))
		fmt.Fprintf(&b, "  - {name: x%d, type: exec, command: [\"true\"]}\n", i)
		names = append(names, fmt.Sprintf("h%d", i), fmt.Sprintf("x%d", i))
	}
	in.writeConfig(b.String())
	d := in.start()
	if soft, hard := procNofile(t, d.pid()); soft != nofile || hard != nofile {
		t.Fatalf("the daemon runs with RLIMIT_NOFILE %d:%d, want %d:%d (wrapper %v)", soft, hard, nofile, nofile, in.wrap)
	}
	eventually(t, 20*time.Second, "every source polled once", func() error {
		for _, n := range names {
			if o := d.source(n); o.PollsTotal < 1 {
				return errf("%s: %s", n, o)
			}
		}
		return nil
	})

	// The daemon's descriptors before the attack (polls running).
	fds := sampleFDs(d.pid(), 10*time.Millisecond)
	sleepUntil(time.Now().Add(time.Second))
	basePeak := fds.peakSoFar()
	totals := map[string]int64{}
	for n, o := range d.sources() {
		totals[n] = o.PollsTotal
	}

	conns, served := holdKeepAlives(t, in.addr, nConns)
	attackEnd := time.Now()
	t.Logf("%d keep-alive connections opened, %d of them answered", len(conns), served)
	if served < nConns {
		t.Errorf("only %d of %d admin clients (one at a time) got an answer to GET /healthz", served, nConns)
	}
	// Held idle for 3 s (three rounds of @every 1s): the admin API answers
	// a new client meanwhile.
	if code, body := d.do(http.MethodGet, "/healthz", "", ""); code != http.StatusOK {
		t.Errorf("/healthz with %d idle connections held: %d %s", len(conns), code, body)
	}
	sleepUntil(attackEnd.Add(3 * time.Second))
	peak, peakAt := fds.stop()

	// Every source was polled during the hold, and none failed for lack of
	// descriptors.
	for n, o := range d.sources() {
		if o.PollsTotal < totals[n]+2 {
			t.Errorf("%s: polls_total %d before the hold, %d after 3s of it (@every 1s)", n, totals[n], o.PollsTotal)
		}
		if o.State != "ok" || o.FailuresTotal > 0 || emfile(o.LastError) {
			t.Errorf("%s after the hold: %s", n, o)
		}
		for _, r := range d.history(n, 100) {
			if r.Outcome != "success" || emfile(r.Error) {
				t.Errorf("%s: a poll at %s: %s %q", n, r.StartedAt.Format("15:04:05.000"), r.Outcome, r.Error)
			}
		}
	}
	if ls := grepLines(d.logs(), "too many open files"); len(ls) > 0 {
		t.Errorf("%d log lines report descriptor exhaustion, e.g. %s", len(ls), ls[0])
	}
	for _, c := range conns {
		_ = c.Close()
	}
	eventually(t, 10*time.Second, "/healthz once the connections are closed", func() error {
		resp, err := (&http.Client{Timeout: time.Second}).Get("http://" + in.addr + "/healthz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return errf("status %d", resp.StatusCode)
		}
		return nil
	})
	// Descriptors: the admin cap (+1 being accepted) over what the daemon
	// used before, and the descriptors of 4 polls in flight (4 each, rule
	// 7.3) in case none was running while basePeak was measured.
	bound := basePeak + adminCap + 1 + 4*4
	t.Logf("admin connection figures: RLIMIT_NOFILE %d, %d keep-alives held; daemon fds: %d before, peak %d during the hold (at %s), bound %d",
		nofile, len(conns), basePeak, peak, peakAt.Format("15:04:05.000"), bound)
	if peak > bound {
		t.Errorf("the daemon held %d descriptors with %d idle admin clients; before them %d, bound %d", peak, len(conns), basePeak, bound)
	}
	d.stop(15 * time.Second)
}

// nofileWrapper runs the daemon with soft and hard RLIMIT_NOFILE n (the
// wrapper execs it: same pid).
func nofileWrapper(n int) []string {
	if p, err := exec.LookPath("prlimit"); err == nil {
		return []string{p, fmt.Sprintf("--nofile=%d:%d", n, n), "--"}
	}
	return []string{"sh", "-c", fmt.Sprintf(`ulimit -Sn %d && ulimit -Hn %d && exec "$0" "$@"`, n, n)}
}

// procNofile reads the soft and hard RLIMIT_NOFILE of pid (0, 0 if
// unreadable).
func procNofile(t testing.TB, pid int) (soft, hard int) {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
	if err != nil {
		t.Fatalf("read /proc/%d/limits: %v", pid, err)
	}
	for _, l := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(l, "Max open files"); ok {
			if _, err := fmt.Sscan(rest, &soft, &hard); err == nil {
				return soft, hard
			}
		}
	}
	return 0, 0
}

// holdKeepAlives opens n connections to addr one after the other; on each
// it sends GET /healthz (keep-alive) and waits up to 2 s for the answer,
// then leaves the connection open. It stops early after 5 clients in a row
// got no answer (the daemon is not serving). It returns the connections
// (for the caller to close) and how many got a 200.
func holdKeepAlives(t *testing.T, addr string, n int) ([]net.Conn, int) {
	t.Helper()
	conns := make([]net.Conn, 0, n)
	t.Cleanup(func() {
		for _, c := range conns {
			_ = c.Close()
		}
	})
	served, missed := 0, 0
	for i := 0; i < n && missed < 5; i++ {
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			t.Logf("connection %d: %v", i, err)
			missed++
			continue
		}
		conns = append(conns, c)
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		_, err = io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: "+addr+"\r\n\r\n")
		var resp *http.Response
		if err == nil {
			resp, err = http.ReadResponse(bufio.NewReader(c), nil)
		}
		if err != nil {
			missed++
			continue
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			served++
			missed = 0
		}
		_ = c.SetDeadline(time.Time{})
	}
	return conns, served
}

func emfile(s string) bool {
	l := strings.ToLower(s)
	return strings.Contains(l, "too many open files") || strings.Contains(l, "emfile")
}

// grepLines returns the lines of text that contain sub (any case).
func grepLines(text, sub string) []string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(strings.ToLower(l), sub) {
			out = append(out, l)
		}
	}
	return out
}

// fdSampler counts a process's open descriptors (/proc/PID/fd) every
// interval and keeps the peak.
type fdSampler struct {
	mu     sync.Mutex
	peak   int
	peakAt time.Time
	quit   chan struct{}
	done   chan struct{}
	n      atomic.Int64
}

func sampleFDs(pid int, every time.Duration) *fdSampler {
	s := &fdSampler{quit: make(chan struct{}), done: make(chan struct{})}
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	go func() {
		defer close(s.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			if ents, err := os.ReadDir(dir); err == nil {
				s.n.Add(1)
				s.mu.Lock()
				if len(ents) > s.peak {
					s.peak, s.peakAt = len(ents), time.Now()
				}
				s.mu.Unlock()
			}
			select {
			case <-s.quit:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

func (s *fdSampler) peakSoFar() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.peak
	s.peak = 0 // the next peak is measured from here
	return p
}

func (s *fdSampler) stop() (int, time.Time) {
	close(s.quit)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.peak, s.peakAt
}
