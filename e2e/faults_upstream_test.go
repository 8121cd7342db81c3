//go:build faults

package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/bench"
)

// faultMode is how the fault-injecting upstream answers a request. A path's
// mode is its first segment ("/hang/h-001" hangs) unless a test flipped it
// with faultUpstream.Flip.
type faultMode string

const (
	fmOK       faultMode = "ok"       // 200, a short body, at once
	fmHang     faultMode = "hang"     // never answers (until the client goes away)
	fmSlow     faultMode = "slow"     // 200, body written one byte at a time (?n=20&every=20ms)
	fmFail     faultMode = "fail"     // 500
	fmThrottle faultMode = "throttle" // 429 (or ?code=503) with Retry-After in seconds (?ra=1)
	fmUnavail  faultMode = "unavail"  // 503 (or ?code=429) with Retry-After as an HTTP date (?in=2s ahead)
	fmReset    faultMode = "reset"    // headers and part of the body, then a TCP reset
	fmBig      faultMode = "big"      // 200 with an endless body (capped at 1 GiB)
	fmLoop     faultMode = "loop"     // 302 to itself, forever
	fmClose    faultMode = "close"    // the connection is closed before any header
	fmFlip     faultMode = "flip"     // like ok until the test flips it
)

var faultModesKnown = map[faultMode]bool{
	fmOK: true, fmHang: true, fmSlow: true, fmFail: true, fmThrottle: true, fmUnavail: true,
	fmReset: true, fmBig: true, fmLoop: true, fmClose: true, fmFlip: true,
}

// faultArrival is one request as the fault upstream saw it.
type faultArrival struct {
	At   time.Time // when the handler got the request
	Done time.Time // when the handler finished with it (zero while in flight)
	Mode faultMode
	// Aborted: the client went away (or the connection broke) before the
	// answer was complete; for reset and close, the answer was the fault.
	Aborted bool
	// From is the client's end of the connection (its address and port):
	// which process sent the request, whenever the handler got to it.
	From string
}

type faultPath struct {
	arrivals  []faultArrival
	cur, peak int
}

// faultUpstream is an HTTP upstream that misbehaves on purpose. It records
// every arrival per path with its time and the time its handler finished,
// and the peak number of requests in flight, overall and per path.
type faultUpstream struct {
	t     testing.TB
	srv   *httptest.Server
	mu    sync.Mutex
	paths map[string]*faultPath
	modes map[string]faultMode // flipped paths
	cur   int
	peak  int
	total int
	done  chan struct{}
}

func newFaultUpstream(t testing.TB) *faultUpstream {
	fu := &faultUpstream{t: t, paths: map[string]*faultPath{}, modes: map[string]faultMode{}, done: make(chan struct{})}
	fu.srv = httptest.NewUnstartedServer(http.HandlerFunc(fu.serve))
	// Resets, hijacks and clients that give up make net/http complain;
	// that is the point here.
	fu.srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	fu.srv.Start()
	t.Cleanup(func() {
		close(fu.done)
		fu.srv.CloseClientConnections()
		fu.srv.Close()
	})
	return fu
}

// URL is the absolute URL of path (which may carry a query) on the upstream.
func (fu *faultUpstream) URL(path string) string { return fu.srv.URL + path }

// Flip makes path answer in mode m from now on (requests in flight keep
// theirs).
func (fu *faultUpstream) Flip(path string, m faultMode) {
	if !faultModesKnown[m] {
		panic("unknown fault mode " + string(m))
	}
	fu.mu.Lock()
	defer fu.mu.Unlock()
	fu.modes[path] = m
}

// CloseClientConnections closes every connection the upstream has open
// (idle keep-alive ones included).
func (fu *faultUpstream) CloseClientConnections() { fu.srv.CloseClientConnections() }

func (fu *faultUpstream) modeOf(path string) faultMode {
	if m, ok := fu.modes[path]; ok {
		return m
	}
	m := faultMode(tagOf(path))
	if m == fmFlip || !faultModesKnown[m] {
		return fmOK
	}
	return m
}

// begin records an arrival on path and returns its mode and index. mu not held.
func (fu *faultUpstream) begin(path, from string, at time.Time) (faultMode, *faultPath, int) {
	fu.mu.Lock()
	defer fu.mu.Unlock()
	fp := fu.paths[path]
	if fp == nil {
		fp = &faultPath{}
		fu.paths[path] = fp
	}
	m := fu.modeOf(path)
	fp.arrivals = append(fp.arrivals, faultArrival{At: at, Mode: m, From: from})
	fp.cur++
	fp.peak = max(fp.peak, fp.cur)
	fu.cur++
	fu.peak = max(fu.peak, fu.cur)
	fu.total++
	return m, fp, len(fp.arrivals) - 1
}

func (fu *faultUpstream) end(fp *faultPath, i int, aborted bool) {
	now := time.Now()
	fu.mu.Lock()
	defer fu.mu.Unlock()
	fp.arrivals[i].Done = now
	fp.arrivals[i].Aborted = aborted
	fp.cur--
	fu.cur--
}

func faultQueryDuration(r *http.Request, key string, def time.Duration) time.Duration {
	if v := r.URL.Query().Get(key); v != "" {
		if d, err := time.ParseDuration(v); err == nil {
			return d
		}
	}
	return def
}

func faultQueryInt(r *http.Request, key string, def int) int {
	if v := r.URL.Query().Get(key); v != "" {
		if n, err := strconv.Atoi(v); err == nil {
			return n
		}
	}
	return def
}

func (fu *faultUpstream) serve(w http.ResponseWriter, r *http.Request) {
	m, fp, i := fu.begin(r.URL.Path, r.RemoteAddr, time.Now())
	aborted := false
	defer func() { fu.end(fp, i, aborted) }()
	ctx := r.Context()

	switch m {
	case fmOK:
		w.Header().Set("Content-Length", "2")
		_, _ = io.WriteString(w, "ok")
	case fmHang:
		select {
		case <-ctx.Done():
		case <-fu.done:
		}
		aborted = true
	case fmSlow:
		n := faultQueryInt(r, "n", 20)
		every := faultQueryDuration(r, "every", 20*time.Millisecond)
		w.Header().Set("Content-Length", strconv.Itoa(n))
		w.WriteHeader(http.StatusOK)
		fl, _ := w.(http.Flusher)
		for k := 0; k < n; k++ {
			if k > 0 {
				tm := time.NewTimer(every)
				select {
				case <-tm.C:
				case <-ctx.Done():
					tm.Stop()
					aborted = true
					return
				case <-fu.done:
					tm.Stop()
					aborted = true
					return
				}
			}
			if _, err := w.Write([]byte{'s'}); err != nil {
				aborted = true
				return
			}
			if fl != nil {
				fl.Flush()
			}
		}
	case fmFail:
		http.Error(w, "injected failure", http.StatusInternalServerError)
	case fmThrottle:
		w.Header().Set("Retry-After", strconv.Itoa(faultQueryInt(r, "ra", 1)))
		http.Error(w, "slow down", faultQueryInt(r, "code", http.StatusTooManyRequests))
	case fmUnavail:
		in := faultQueryDuration(r, "in", 2*time.Second)
		w.Header().Set("Retry-After", time.Now().Add(in).UTC().Format(http.TimeFormat))
		http.Error(w, "come back later", faultQueryInt(r, "code", http.StatusServiceUnavailable))
	case fmReset:
		conn, bw, err := faultHijack(w)
		if err != nil {
			aborted = true
			return
		}
		_, _ = bw.WriteString("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 1048576\r\n\r\n")
		_, _ = bw.Write(bytes.Repeat([]byte{'r'}, 4096))
		_ = bw.Flush()
		if tc, ok := conn.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // close sends RST, not FIN
		}
		_ = conn.Close()
		aborted = true
	case fmBig:
		w.Header().Set("Content-Type", "application/octet-stream")
		w.WriteHeader(http.StatusOK)
		chunk := bytes.Repeat([]byte{'b'}, 32<<10)
		for sent := 0; sent < 1<<30; sent += len(chunk) {
			if ctx.Err() != nil {
				aborted = true
				return
			}
			if _, err := w.Write(chunk); err != nil {
				aborted = true
				return
			}
		}
	case fmLoop:
		http.Redirect(w, r, r.URL.RequestURI(), http.StatusFound)
	case fmClose:
		conn, _, err := faultHijack(w)
		if err == nil {
			_ = conn.Close()
		}
		aborted = true
	}
}

type faultBufWriter interface {
	io.Writer
	WriteString(string) (int, error)
	Flush() error
}

func faultHijack(w http.ResponseWriter) (net.Conn, faultBufWriter, error) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("not hijackable")
	}
	conn, rw, err := hj.Hijack()
	if err != nil {
		return nil, nil, err
	}
	return conn, rw.Writer, nil
}

// Arrivals returns a copy of the arrivals on path.
func (fu *faultUpstream) Arrivals(path string) []faultArrival {
	fu.mu.Lock()
	defer fu.mu.Unlock()
	if fp := fu.paths[path]; fp != nil {
		return append([]faultArrival(nil), fp.arrivals...)
	}
	return nil
}

// Count is the number of arrivals on path.
func (fu *faultUpstream) Count(path string) int {
	fu.mu.Lock()
	defer fu.mu.Unlock()
	if fp := fu.paths[path]; fp != nil {
		return len(fp.arrivals)
	}
	return 0
}

// Total is the number of arrivals on every path.
func (fu *faultUpstream) Total() int {
	fu.mu.Lock()
	defer fu.mu.Unlock()
	return fu.total
}

// PathsSeen is the number of distinct paths under tag ("ok" for /ok/...)
// with at least one arrival.
func (fu *faultUpstream) PathsSeen(tag string) int {
	fu.mu.Lock()
	defer fu.mu.Unlock()
	n := 0
	for p, fp := range fu.paths {
		if tagOf(p) == tag && len(fp.arrivals) > 0 {
			n++
		}
	}
	return n
}

// Peak is the largest number of requests in flight at once.
func (fu *faultUpstream) Peak() int {
	fu.mu.Lock()
	defer fu.mu.Unlock()
	return fu.peak
}

// Inflight is the number of requests in flight now.
func (fu *faultUpstream) Inflight() int {
	fu.mu.Lock()
	defer fu.mu.Unlock()
	return fu.cur
}

// PeakPaths returns the paths that had more than one request in flight at
// once, with their peaks.
func (fu *faultUpstream) PeakPaths() map[string]int {
	fu.mu.Lock()
	defer fu.mu.Unlock()
	out := map[string]int{}
	for p, fp := range fu.paths {
		if fp.peak > 1 {
			out[p] = fp.peak
		}
	}
	return out
}

// ---------------------------------------------------------------------------
// Helpers shared by the fault tests.

// faultSpawn runs "pacer run" for in like inst.spawn, but its clean-up does
// not dump the daemon's whole standard error (the tests start dozens of
// daemons and print the relevant lines themselves).
func faultSpawn(in *inst) *daemon {
	in.t.Helper()
	return in.launch(in.cfgPath, false)
}

// faultCLI runs "pacer ARGS... -config FILE" without failing the test (it
// may run in another goroutine); err is set when the process could not run.
func faultCLI(in *inst, timeout time.Duration, args ...string) (cliResult, error) {
	full := append([]string{args[0], "-config", in.cfgPath}, args[1:]...)
	r, err := execPacer(in.cwd, baseEnv(in.env), timeout, full...)
	if err != nil {
		err = fmt.Errorf("pacer %v: %w", args, err)
	}
	return r, err
}

// faultFDKinds summarises the open descriptors of pid by kind (socket, pipe,
// anon_inode:[eventpoll], file paths...), for failure messages.
func faultFDKinds(pid int) string {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err.Error()
	}
	socks := faultTCPSockets(pid)
	kinds := map[string]int{}
	for _, e := range ents {
		l, err := os.Readlink(dir + "/" + e.Name())
		if err != nil {
			continue
		}
		if strings.HasPrefix(l, "socket:[") {
			if desc, ok := socks[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")]; ok {
				l = desc
			} else {
				l = "socket (not tcp)"
			}
		} else if strings.HasPrefix(l, "pipe:") {
			l = "pipe"
		}
		kinds[l]++
	}
	keys := make([]string, 0, len(kinds))
	for k := range kinds {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s x%d; ", k, kinds[k])
	}
	return b.String()
}

// faultFDSampler reads the descriptor count of a process every 20ms and keeps
// the peak.
type faultFDSampler struct {
	mu      sync.Mutex
	peak    int
	peakAt  time.Time
	peakFDs string
	samples int
	held    bool // not sampling (the test itself is talking to the daemon)
	pid     int
	stop    chan struct{}
	stopped chan struct{}
}

func faultSampleFDs(pid int, every time.Duration) *faultFDSampler {
	s := &faultFDSampler{pid: pid, stop: make(chan struct{}), stopped: make(chan struct{})}
	go func() {
		defer close(s.stopped)
		tk := time.NewTicker(every)
		defer tk.Stop()
		for {
			s.mu.Lock()
			held := s.held
			s.mu.Unlock()
			n := -1
			if !held {
				n = bench.OpenFDs(strconv.Itoa(pid))
			}
			if n >= 0 {
				s.mu.Lock()
				s.samples++
				if n > s.peak {
					s.peak, s.peakAt = n, time.Now()
					s.mu.Unlock()
					kinds := faultFDKinds(pid)
					s.mu.Lock()
					s.peakFDs = kinds
				}
				s.mu.Unlock()
			}
			select {
			case <-s.stop:
				return
			case <-tk.C:
			}
		}
	}()
	return s
}

// hold runs f (a request of the test to the daemon's admin API) without
// sampling: the connection it opens and the files the daemon reads to
// answer it are the test's doing.
func (s *faultFDSampler) hold(f func()) {
	s.mu.Lock()
	s.held = true
	s.mu.Unlock()
	defer func() {
		faultDropIdleConns()
		// Until the daemon has closed its end of those connections.
		deadline := time.Now().Add(2 * time.Second)
		for time.Now().Before(deadline) && faultInboundConns(s.pid) > 0 {
			time.Sleep(5 * time.Millisecond)
		}
		s.mu.Lock()
		s.held = false
		s.mu.Unlock()
	}()
	f()
}

// faultInboundConns counts the descriptors of pid that are connections
// accepted on one of its listening ports (the admin API's clients).
func faultInboundConns(pid int) int {
	socks := faultTCPSockets(pid)
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range ents {
		l, err := os.Readlink(dir + "/" + e.Name())
		if err != nil || !strings.HasPrefix(l, "socket:[") {
			continue
		}
		if d := socks[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")]; strings.Contains(d, " in :") {
			n++
		}
	}
	return n
}

// Stop ends sampling and returns the peak, when it was seen, what the
// descriptors were about then, and the number of samples.
func (s *faultFDSampler) Stop() (peak int, at time.Time, kinds string, samples int) {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	<-s.stopped
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.peak, s.peakAt, s.peakFDs, s.samples
}

// faultGrep returns the lines of text that contain any of words
// (case-insensitive), at most max of them.
func faultGrep(text string, maxLines int, words ...string) []string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		ll := strings.ToLower(l)
		for _, w := range words {
			if strings.Contains(ll, strings.ToLower(w)) {
				out = append(out, l)
				break
			}
		}
		if len(out) >= maxLines {
			break
		}
	}
	return out
}

// faultStallMonitor measures how late this process wakes up from 10ms
// sleeps and how long a small write and fsync next to the store take. On a
// loaded machine everything on it (the daemon too) is delayed about as
// much; timing bounds add what it saw, so that they stay strict on a quiet
// machine and do not fail on a starved one.
type faultStallMonitor struct {
	mu      sync.Mutex
	samples []faultStallSample
	stop    chan struct{}
	stopped chan struct{}
}

type faultStallSample struct {
	at   time.Time     // end of the sleep
	late time.Duration // how much longer than asked it took
}

func faultStartStallMonitor(t testing.TB, dir string) *faultStallMonitor {
	m := &faultStallMonitor{stop: make(chan struct{}), stopped: make(chan struct{})}
	ioDone := make(chan struct{})
	// The disk: a 4 KiB write and fsync next to the store every 50ms; any
	// latency beyond 5ms is congestion that delays the daemon's commits
	// (SQLite checkpoints fsync) as well.
	go func() {
		defer close(ioDone)
		f, err := os.CreateTemp(dir, ".stall-probe-")
		if err != nil {
			return
		}
		defer os.Remove(f.Name())
		defer f.Close()
		buf := bytes.Repeat([]byte{'p'}, 4096)
		for {
			select {
			case <-m.stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			t0 := time.Now()
			_, _ = f.WriteAt(buf, 0)
			_ = f.Sync()
			now := time.Now()
			if late := now.Sub(t0) - 5*time.Millisecond; late > 0 {
				m.mu.Lock()
				m.samples = append(m.samples, faultStallSample{at: now, late: late})
				m.mu.Unlock()
			}
		}
	}()
	go func() {
		defer close(m.stopped)
		const tick = 10 * time.Millisecond
		for {
			t0 := time.Now()
			select {
			case <-m.stop:
				return
			case <-time.After(tick):
			}
			now := time.Now()
			if late := now.Sub(t0) - tick; late > time.Millisecond {
				m.mu.Lock()
				m.samples = append(m.samples, faultStallSample{at: now, late: late})
				m.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() {
		close(m.stop)
		<-m.stopped
		<-ioDone
	})
	return m
}

// lateBetween is the total lateness of the probes that ended in (a, b].
func (m *faultStallMonitor) lateBetween(a, b time.Time) time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	var sum time.Duration
	for _, s := range m.samples {
		if s.at.After(a) && !s.at.After(b) {
			sum += s.late
		}
	}
	return sum
}

// worst is the largest single lateness seen.
func (m *faultStallMonitor) worst() time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	var w time.Duration
	for _, s := range m.samples {
		w = max(w, s.late)
	}
	return w
}

// faultTCPSockets maps the inode of every TCP socket in pid's network namespace
// to a short description: "tcp listen :PORT", "tcp STATE in :PORT" for a
// connection accepted on a listening port, "tcp STATE -> :PORT" for an
// outgoing one (by remote port; local ports are ephemeral).
func faultTCPSockets(pid int) map[string]string {
	states := map[string]string{"01": "established", "02": "syn-sent", "03": "syn-recv", "04": "fin-wait1",
		"05": "fin-wait2", "06": "time-wait", "07": "close", "08": "close-wait", "09": "last-ack", "0A": "listen", "0B": "closing"}
	port := func(hexAddr string) string {
		if i := strings.LastIndexByte(hexAddr, ':'); i >= 0 {
			if n, err := strconv.ParseUint(hexAddr[i+1:], 16, 16); err == nil {
				return strconv.FormatUint(n, 10)
			}
		}
		return "?"
	}
	type sock struct{ inode, st, local, remote string }
	var all []sock
	listening := map[string]bool{}
	for _, f := range []string{"tcp", "tcp6"} {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, f))
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(data), "\n")[1:] {
			fs := strings.Fields(l)
			if len(fs) < 10 {
				continue
			}
			st := states[fs[3]]
			if st == "" {
				st = fs[3]
			}
			sk := sock{inode: fs[9], st: st, local: port(fs[1]), remote: port(fs[2])}
			if st == "listen" {
				listening[sk.local] = true
			}
			all = append(all, sk)
		}
	}
	out := map[string]string{}
	for _, sk := range all {
		switch {
		case sk.st == "listen":
			out[sk.inode] = "tcp listen :" + sk.local
		case listening[sk.local]:
			out[sk.inode] = "tcp " + sk.st + " in :" + sk.local
		default:
			out[sk.inode] = "tcp " + sk.st + " -> :" + sk.remote
		}
	}
	return out
}

// faultDropIdleConns closes the idle keep-alive connections of the test's
// HTTP clients (waitReady and the admin helpers use the default transport).
func faultDropIdleConns() {
	if tr, ok := http.DefaultTransport.(*http.Transport); ok {
		tr.CloseIdleConnections()
	}
	apiClient.CloseIdleConnections()
}

// faultFileHolders lists the processes that have path open ("pid comm,
// parent ppid, state S").
func faultFileHolders(path string) []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		dir := fmt.Sprintf("/proc/%d/fd", pid)
		fds, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			if l, err := os.Readlink(dir + "/" + fd.Name()); err == nil && l == path {
				comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
				stat, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
				st, ppid := "?", "?"
				if s := string(stat); strings.LastIndexByte(s, ')') > 0 {
					if f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:]); len(f) > 1 {
						st, ppid = f[0], f[1]
					}
				}
				out = append(out, fmt.Sprintf("pid %d %s, parent %s, state %s", pid, strings.TrimSpace(string(comm)), ppid, st))
				break
			}
		}
	}
	return out
}

// faultWaitReady is daemon.waitReady returning an error instead of failing
// the test (the caller adds what it knows).
func faultWaitReady(d *daemon, timeout time.Duration) error {
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(timeout)
	for {
		if d.exited() {
			return fmt.Errorf("pacer run exited with %v before it was ready; stderr:\n%s", d.state, d.logs())
		}
		resp, err := client.Get("http://" + d.in.addr + "/readyz")
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				client.CloseIdleConnections()
				return nil
			}
			err = fmt.Errorf("/readyz: %s", resp.Status)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready within %s (last: %v); stderr:\n%s", timeout, err, d.logs())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// faultProbeLock tries, every 2ms from now until deadline, to take an
// exclusive flock on path without waiting (as "pacer run" does), releasing
// it at once. It returns the last time the lock was found held (zero if
// never) and the processes that had the file open then.
func faultProbeLock(path string, deadline time.Time) (lastHeld time.Time, holders []string, err error) {
	for {
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			return lastHeld, holders, err
		}
		ferr := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		now := time.Now()
		if ferr == nil {
			_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
			f.Close()
			return lastHeld, holders, nil
		}
		f.Close()
		if !errors.Is(ferr, syscall.EWOULDBLOCK) {
			return lastHeld, holders, ferr
		}
		lastHeld = now
		if hs := faultFileHolders(path); len(hs) > 0 {
			holders = hs
		}
		if now.After(deadline) {
			return lastHeld, holders, nil
		}
		time.Sleep(2 * time.Millisecond)
	}
}
