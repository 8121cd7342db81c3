package dashboard

import (
	"cmp"
	"fmt"
	"html/template"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/pacer-dev/pacer/dashboard/svgchart"
	srcview "github.com/pacer-dev/pacer/scheduler/view"
)

// The success share per host (contract 15.4) is an aggregate over every
// source: its counters (polls, failures, throttled) summed by the host of
// its URL. A page never computes it: hostShareCache keeps the last one and
// computes it again, once at a time, when it is older than hostShareAge
// (in the background on a large daemon, while the pages show the last
// one), so that the overview stays within 200 ms at 100,000 sources.

// Defaults of the host shares' cache.
const (
	hostShareAge = time.Minute
	hostShareTop = 15 // hosts shown: the lowest shares
)

// hostShare is one host's polls summed over its sources.
type hostShare struct {
	host    string
	sources int
	ok      int64 // successful polls
	polls   int64
}

// hostShares is one computation of the shares.
type hostShares struct {
	hosts   []hostShare // the lowest shares first, at most hostShareTop
	total   int         // hosts with an http source
	sources int         // http sources counted
	built   time.Time
	chart   template.HTML
}

// hostShareCache hands out the last host shares (see above).
type hostShareCache struct {
	c        Controller
	from     int           // sources from which the computation runs in the background
	maxAge   time.Duration // how old the shares may be before they are computed again
	mu       sync.Mutex
	cur      *hostShares
	building bool
}

func newHostShareCache(c Controller) *hostShareCache {
	return &hostShareCache{c: c, from: shareFrom, maxAge: hostShareAge}
}

// get returns the current shares, or nil while the first are computed on
// a large daemon. A daemon of fewer than from sources (n: the table's
// count) computes them in the request when they are stale; a large one
// starts one background computation and serves the last shares meanwhile.
func (h *hostShareCache) get(n int) *hostShares {
	h.mu.Lock()
	cur := h.cur
	if cur != nil && time.Since(cur.built) < h.maxAge {
		h.mu.Unlock()
		return cur
	}
	if n < h.from {
		h.mu.Unlock()
		return h.compute()
	}
	if !h.building {
		h.building = true
		go h.compute() // one at a time: building is cleared by compute
	}
	h.mu.Unlock()
	return cur
}

// compute sums every source's counters by host and publishes the result.
func (h *hostShareCache) compute() *hostShares {
	by := map[string]*hostShare{}
	_ = h.c.ExplainAll(func(xs []srcview.Explained) error { // fn never fails
		for i := range xs {
			if xs[i].Host == nil {
				continue // an exec source: no host
			}
			key := *xs[i].Host
			hs := by[key]
			if hs == nil {
				hs = &hostShare{host: key}
				by[key] = hs
			}
			hs.sources++
			hs.polls += xs[i].PollsTotal
			hs.ok += max(xs[i].PollsTotal-xs[i].FailuresTotal-xs[i].ThrottledTotal, 0)
		}
		return nil
	})
	s := &hostShares{total: len(by), built: time.Now()}
	all := make([]hostShare, 0, len(by))
	for _, hs := range by {
		all = append(all, *hs)
		s.sources += hs.sources
	}
	slices.SortFunc(all, lowerShareFirst)
	s.hosts = all[:min(len(all), hostShareTop)]
	s.chart = hostShareChart(s)
	h.mu.Lock()
	h.cur, h.building = s, false
	h.mu.Unlock()
	return s
}

// lowerShareFirst orders hosts by success share, the lowest first (the
// hosts on call looks at), hosts never polled last, then by polls (the
// most first) and name.
func lowerShareFirst(a, b hostShare) int {
	if (a.polls == 0) != (b.polls == 0) {
		if a.polls == 0 {
			return 1
		}
		return -1
	}
	if a.polls > 0 {
		// a.ok/a.polls vs b.ok/b.polls without division
		if c := cmp.Compare(float64(a.ok)*float64(b.polls), float64(b.ok)*float64(a.polls)); c != 0 {
			return c
		}
	}
	if c := cmp.Compare(b.polls, a.polls); c != 0 {
		return c
	}
	return strings.Compare(a.host, b.host)
}

// hostShareChart draws the shares of s.
func hostShareChart(s *hostShares) template.HTML {
	rows := make([]svgchart.Share, len(s.hosts))
	for i, hs := range s.hosts {
		rows[i] = svgchart.Share{Label: hs.host, Part: hs.ok, Whole: hs.polls, Unit: "polls"}
	}
	title := "Success share per host"
	if s.total > len(s.hosts) {
		title = fmt.Sprintf("Success share per host: the %d lowest of %d hosts", len(s.hosts), s.total)
	}
	return svgchart.ShareChart{ID: "chart-hosts", Title: title, XLabel: "share of the polls of the host's sources that succeeded (every poll counted)",
		Width: 1100, Rows: rows, Empty: "no http source"}.SVG()
}

// hostNote says what the host chart covers.
func hostNote(s *hostShares) string {
	if s == nil {
		return "the shares per host are being computed; they show on the next load of the page"
	}
	return fmt.Sprintf("%s http sources on %s hosts, computed %s UTC (at most every %d s)",
		svgchart.Thousands(int64(s.sources)), svgchart.Thousands(int64(s.total)), s.built.UTC().Format("15:04:05"), int(hostShareAge/time.Second))
}
