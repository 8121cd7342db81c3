package e2e

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// behavior is how the fake upstream answers on one path. The zero value
// answers 200 with an empty body at once.
type behavior struct {
	Status       int           // 0 = 200
	RetryAfter   string        // Retry-After header value, if not ""
	RetryAfterIn time.Duration // if > 0: Retry-After as an HTTP date this far ahead
	Hold         time.Duration // wait this long before answering
	Hang         bool          // wait until Release (or the client goes away)
	Body         int           // body size in bytes
}

// arrival is one request as the upstream saw it.
type arrival struct {
	At     time.Time
	Method string
	Header http.Header
	Query  url.Values
	Raw    string // the request URI
	Body   string // the request body (first 64 KiB)
	// End is when the answer was written (zero while in flight or when the
	// client went away first).
	End time.Time
}

type gauge struct{ cur, peak int }

func (g *gauge) inc() {
	g.cur++
	if g.cur > g.peak {
		g.peak = g.cur
	}
}

func (g *gauge) dec() { g.cur-- }

// connCount is a server's count of the connections its clients hold
// open, and their peak, for a server's ConnState hook (track). The peak
// can only grow when a connection is accepted: then it counts the tracked
// connections that the kernel still has established. The server's own
// view (a connection open until its goroutine reads the EOF) lags behind
// the clients' closes by as long as the test process waits for a CPU:
// beside a CPU hog it once counted 115 where the daemon held 96 sockets.
// A socket whose peer has closed is in CLOSE_WAIT from the moment the
// close reaches it, on loopback at once.
type connCount struct {
	mu   sync.Mutex
	open map[net.Conn]bool
	peak int
}

func (c *connCount) track(conn net.Conn, st http.ConnState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch st {
	case http.StateNew:
		if c.open == nil {
			c.open = map[net.Conn]bool{}
		}
		c.open[conn] = true
		c.peak = max(c.peak, c.established())
	case http.StateClosed, http.StateHijacked:
		delete(c.open, conn)
	}
}

// established counts the tracked connections that are established.
func (c *connCount) established() int {
	n := 0
	for conn := range c.open {
		if established(conn) {
			n++
		}
	}
	return n
}

// peakOpen is the peak of the counts so far.
func (c *connCount) peakOpen() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.peak
}

// resetPeak forgets the peak: it is the count now.
func (c *connCount) resetPeak() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.peak = c.established()
}

// established reports whether the kernel has conn's TCP connection
// established: its peer has not closed it (or it is not TCP, or its state
// cannot be read, which counts it as open).
func established(conn net.Conn) bool {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return true
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return true
	}
	state := uint8(unix.BPF_TCP_ESTABLISHED)
	_ = raw.Control(func(fd uintptr) {
		if info, err := unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO); err == nil {
			state = info.State
		}
	})
	return state == unix.BPF_TCP_ESTABLISHED
}

type pathStat struct {
	beh       behavior
	release   chan struct{}
	arrivals  []arrival
	g         gauge
	completed int // answered
	cancelled int // the client went away first
}

// upstream is a fake HTTP upstream whose behaviour per path can be changed at
// run time. It records every arrival with its time and the peak number of
// requests in flight: overall, per path and per tag (the first path segment,
// "/g/m1" has tag "g").
type upstream struct {
	t     testing.TB
	srv   *httptest.Server
	mu    sync.Mutex
	paths map[string]*pathStat
	tags  map[string]*gauge
	all   gauge
	conns connCount // TCP connections the clients hold open
	done  chan struct{}
}

func newUpstream(t testing.TB) *upstream {
	u := &upstream{t: t, paths: map[string]*pathStat{}, tags: map[string]*gauge{}, done: make(chan struct{})}
	u.srv = httptest.NewUnstartedServer(http.HandlerFunc(u.serve))
	u.srv.Config.ConnState = u.conns.track
	u.srv.Start()
	t.Cleanup(func() {
		close(u.done)
		u.srv.Close()
	})
	return u
}

// URL is the absolute URL of path on the upstream.
func (u *upstream) URL(path string) string { return u.srv.URL + path }

func tagOf(path string) string {
	p := strings.TrimPrefix(path, "/")
	if i := strings.IndexByte(p, '/'); i >= 0 {
		return p[:i]
	}
	return p
}

// stat returns the record of path. mu held.
func (u *upstream) stat(path string) *pathStat {
	ps := u.paths[path]
	if ps == nil {
		ps = &pathStat{release: make(chan struct{})}
		u.paths[path] = ps
	}
	return ps
}

func (u *upstream) tag(path string) *gauge {
	g := u.tags[tagOf(path)]
	if g == nil {
		g = &gauge{}
		u.tags[tagOf(path)] = g
	}
	return g
}

// Set changes how path answers from now on (requests in flight keep theirs).
func (u *upstream) Set(path string, b behavior) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.stat(path).beh = b
}

// Release lets every request hanging on path answer.
func (u *upstream) Release(path string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	ps := u.stat(path)
	close(ps.release)
	ps.release = make(chan struct{})
}

func (u *upstream) serve(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	path := r.URL.Path
	body, _ := io.ReadAll(io.LimitReader(r.Body, 64<<10))
	u.mu.Lock()
	ps := u.stat(path)
	b := ps.beh
	rel := ps.release
	ps.arrivals = append(ps.arrivals, arrival{At: now, Method: r.Method, Header: r.Header.Clone(), Query: r.URL.Query(), Raw: r.RequestURI, Body: string(body)})
	idx := len(ps.arrivals) - 1
	ps.g.inc()
	tg := u.tag(path)
	tg.inc()
	u.all.inc()
	u.mu.Unlock()

	cancelled := false
	if b.Hold > 0 {
		t := time.NewTimer(b.Hold)
		select {
		case <-t.C:
		case <-r.Context().Done():
			cancelled = true
		case <-u.done:
		}
		t.Stop()
	}
	if b.Hang && !cancelled {
		select {
		case <-rel:
		case <-r.Context().Done():
			cancelled = true
		case <-u.done:
		}
	}
	if !cancelled {
		if b.RetryAfter != "" {
			w.Header().Set("Retry-After", b.RetryAfter)
		}
		if b.RetryAfterIn > 0 {
			w.Header().Set("Retry-After", time.Now().Add(b.RetryAfterIn).UTC().Format(http.TimeFormat))
		}
		code := b.Status
		if code == 0 {
			code = http.StatusOK
		}
		if b.Body > 0 {
			w.Header().Set("Content-Length", fmt.Sprint(b.Body))
		}
		w.WriteHeader(code)
		if b.Body > 0 {
			_, _ = w.Write([]byte(strings.Repeat("x", b.Body)))
		}
	}

	u.mu.Lock()
	ps.g.dec()
	tg.dec()
	u.all.dec()
	if cancelled {
		ps.cancelled++
	} else {
		ps.completed++
		ps.arrivals[idx].End = time.Now()
	}
	u.mu.Unlock()
}

// Arrivals returns a copy of the arrivals on path.
func (u *upstream) Arrivals(path string) []arrival {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]arrival(nil), u.stat(path).arrivals...)
}

// Times returns the arrival times on path.
func (u *upstream) Times(path string) []time.Time {
	var ts []time.Time
	for _, a := range u.Arrivals(path) {
		ts = append(ts, a.At)
	}
	return ts
}

// Count is the number of arrivals on path.
func (u *upstream) Count(path string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.stat(path).arrivals)
}

// CountSince is the number of arrivals on path at or after t.
func (u *upstream) CountSince(path string, t time.Time) int {
	n := 0
	for _, a := range u.Arrivals(path) {
		if !a.At.Before(t) {
			n++
		}
	}
	return n
}

// Last is the time of the last arrival on path (zero if none).
func (u *upstream) Last(path string) time.Time {
	u.mu.Lock()
	defer u.mu.Unlock()
	as := u.stat(path).arrivals
	if len(as) == 0 {
		return time.Time{}
	}
	return as[len(as)-1].At
}

func (u *upstream) Peak() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.all.peak
}

// PeakAnswered is the largest number of requests in flight at once since
// from, over every path, counting only requests that got their answer (from
// arrival to the answer written). A request whose client went away (a poll's
// timeout) is left out: its handler runs on until the server notices the
// closed connection, which a loaded machine delays, while the poll that sent
// it has ended and its permit may serve another; cancelled is how many were
// left out. An answered request's interval lies inside its poll's, so this
// peak never exceeds the polls in flight.
func (u *upstream) PeakAnswered(from time.Time) (peak, cancelled int) {
	u.mu.Lock()
	type ev struct {
		at    time.Time
		delta int
	}
	var evs []ev
	for _, ps := range u.paths {
		for _, a := range ps.arrivals {
			switch {
			case a.At.Before(from):
			case a.End.IsZero():
				cancelled++
			default:
				evs = append(evs, ev{a.At, 1}, ev{a.End, -1})
			}
		}
	}
	u.mu.Unlock()
	sort.Slice(evs, func(i, j int) bool {
		if !evs[i].at.Equal(evs[j].at) {
			return evs[i].at.Before(evs[j].at)
		}
		return evs[i].delta < evs[j].delta // an end before a start at the same instant
	})
	cur := 0
	for _, e := range evs {
		cur += e.delta
		peak = max(peak, cur)
	}
	return peak, cancelled
}

// ResetPeaks forgets the peaks seen so far (the current counts stay).
func (u *upstream) ResetPeaks() {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.all.peak = u.all.cur
	u.conns.resetPeak()
	for _, g := range u.tags {
		g.peak = g.cur
	}
	for _, ps := range u.paths {
		ps.g.peak = ps.g.cur
	}
}

// PeakConns is the largest number of TCP connections the clients held
// open at once (connCount).
func (u *upstream) PeakConns() int {
	return u.conns.peakOpen()
}

func (u *upstream) PeakPath(path string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.stat(path).g.peak
}

func (u *upstream) PeakTag(tag string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	if g := u.tags[tag]; g != nil {
		return g.peak
	}
	return 0
}

func (u *upstream) InflightTag(tag string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	if g := u.tags[tag]; g != nil {
		return g.cur
	}
	return 0
}

func (u *upstream) Inflight(path string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.stat(path).g.cur
}

func (u *upstream) Completed(path string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.stat(path).completed
}

func (u *upstream) Cancelled(path string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.stat(path).cancelled
}

// waitArrivals waits until path has seen at least n requests.
func (u *upstream) waitArrivals(t testing.TB, path string, n int, timeout time.Duration) {
	t.Helper()
	eventually(t, timeout, fmt.Sprintf("%d requests on %s", n, path), func() error {
		if c := u.Count(path); c < n {
			return fmt.Errorf("%d so far", c)
		}
		return nil
	})
}

// noArrivals fails the test as soon as path sees a request after since,
// checking for d.
func (u *upstream) noArrivals(t testing.TB, path string, since time.Time, d time.Duration, why string) {
	t.Helper()
	// Only arrivals before the end of the window count: on a loaded machine
	// the last check may run after it, when a request is due.
	until := time.Now().Add(d)
	never(t, d, why, func() error {
		n := 0
		var last time.Time
		for _, a := range u.Arrivals(path) {
			if !a.At.Before(since) && a.At.Before(until) {
				n, last = n+1, a.At
			}
		}
		if n > 0 {
			return fmt.Errorf("%d request(s) on %s between %s and %s (last at %s)", n, path,
				since.Format("15:04:05.000"), until.Format("15:04:05.000"), last.Format("15:04:05.000"))
		}
		return nil
	})
}
