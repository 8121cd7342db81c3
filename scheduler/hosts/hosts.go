// Package hosts is the host room of contract section 13: the state pacer
// keeps per upstream host (the group of the http sources that call one
// host:port): its throttling (13.2), its breaker over connection-level
// failures (13.3) and its learned concurrency and rate (13.5).
//
// A Table is pure in time: every method takes now, it starts no goroutine
// and reads no clock, so the scheduler drives it from its own clock and
// tests drive it with explicit times. It only answers questions and
// records outcomes; the permits, the queue and the store stay the
// scheduler's.
//
// Lock rule: a Table has its own mutex, taken inside every exported method
// and released before it returns. It may be called while the scheduler
// holds its own lock (the table's lock is taken after the scheduler's,
// never before it) and it never calls out (no callback, no channel, no I/O)
// while holding its lock, so it cannot deadlock with anything.
package hosts

import (
	"sort"
	"sync"
	"time"
)

// Settings are one host's effective settings (hosts: defaults merged with
// its override).
type Settings struct {
	Concurrency int           // 0 = no cap
	Rate        float64       // starts per second, 0 = none
	Burst       int           // the rate's burst
	Breaker     BreakerPolicy // Failures 0 = off
	Adaptive    bool          // learn the concurrency and rate (13.5)
}

// BreakerPolicy is a host breaker's setting (13.3): Failures
// connection-level failures from at least Sources distinct sources within
// Window open the host for Cooldown. Failures 0 turns it off.
type BreakerPolicy struct {
	Sources, Failures int
	Window, Cooldown  time.Duration
}

// Outcome is what the scheduler tells the table about one finished poll of
// a host's source.
type Outcome struct {
	Source         string
	Latency        time.Duration
	Success        bool      // a success of rule 3.4 (counts as "a success from that host")
	ConnFailure    bool      // upstream.ConnectionLevel of its error
	ThrottledUntil time.Time // non-zero: the answer throttles the host until then (429/503+Retry-After, or QuotaUntil)
	Throttled      bool      // the answer was a throttling answer (429 or 503+RA, or quota spent): feeds the AIMD rate
	Waited         bool      // the poll waited for the host's concurrency limit before starting
	Inflight       int       // the host's polls in flight when it started (itself included)
	// Detail is a short text of a failure or a throttling answer
	// ("connection refused", "429 Too Many Requests"), for the reasons;
	// optional, never a secret.
	Detail string
}

// Gate is the table's answer before a poll of a host's source starts.
type Gate struct {
	Blocked bool
	Reason  string    // "host api.x throttled until 10:42:03", "host api.x open until 10:43:00 (connection refused from 3 sources)" ...
	Until   time.Time // when the block ends, if known
	Probe   bool      // this poll is the host breaker's probe (half-open)
}

// Event kinds of the host events.
const (
	EventOpen      = "host_open"
	EventRecovered = "host_recovered"
)

// Event is a host event for the outbox: Kind EventOpen or EventRecovered.
type Event struct {
	Kind, Host string
	Sources    int // the host's source count
	At         time.Time
	Reason     string
}

// Table is the state of every host. Its zero value is not usable: call New.
type Table struct {
	mu    sync.Mutex
	hosts map[string]*host
	dirty []*host // hosts whose persisted part changed since the last Snapshot
}

// New returns an empty table: every host unknown (and so never blocked)
// until Configure names it.
func New() *Table { return &Table{hosts: map[string]*host{}} }

// host is one host's state.
type host struct {
	name     string
	set      Settings
	key      string // SettingsKey(set)
	sources  int
	dirty    bool // in Table.dirty
	throttle throttle
	brk      breaker
	lat      latency
	learn    learned
	starts   starts
}

// throttle is a host's throttling (13.2).
type throttle struct {
	until  time.Time
	source string // the source whose answer throttled it
	detail string
}

// Configure sets every host's settings and source count: hosts absent from
// counts are dropped, hosts absent from settings get the zero Settings (no
// cap, no rate, no breaker). A host whose Settings changed forgets its
// learned limits (13.5); other state (throttling, breaker, latencies) is
// kept.
func (t *Table) Configure(settings map[string]Settings, counts map[string]int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for name, h := range t.hosts {
		if _, ok := counts[name]; !ok {
			delete(t.hosts, name)
			h.dirty = false // its pending snapshot is dropped in Snapshot
		}
	}
	for name, n := range counts {
		s := settings[name]
		h := t.hosts[name]
		if h == nil {
			h = &host{name: name}
			h.configure(s)
			t.hosts[name] = h
		} else if key := SettingsKey(s); key != h.key {
			h.configure(s)
			t.markDirty(h)
		}
		h.sources = n
	}
}

// configure sets h's settings and forgets what it learned under others.
func (h *host) configure(s Settings) {
	h.set, h.key = s, SettingsKey(s)
	h.learn.forget(s)
	h.lat.baseline = 0
	if s.Breaker.Failures == 0 {
		h.brk = breaker{lastProbe: h.brk.lastProbe}
	}
}

// markDirty queues h for the next Snapshot.
func (t *Table) markDirty(h *host) {
	if !h.dirty {
		h.dirty = true
		t.dirty = append(t.dirty, h)
	}
}

// Admit is asked before a poll of source on host starts. It is blocked
// while the host is throttled (until then), while its breaker is open
// (until the cooldown ends) and while it is half-open with the probe in
// flight; after the cooldown it admits exactly one source as the Probe, a
// different source than the previous probe when the host has more than
// one (unless no other source asked for a whole cooldown). An admitted
// poll counts a start (for the start rate seen over 10 s). An unknown host
// is never blocked.
//
// Ask it when the poll really starts (once it holds its permits), and Peek
// while choosing: an admitted probe is in flight until Finish or Abandon
// (or its lease, see probeLease), and its siblings wait for it.
func (t *Table) Admit(host, source string, now time.Time) Gate {
	t.mu.Lock()
	defer t.mu.Unlock()
	h := t.hosts[host]
	if h == nil {
		return Gate{}
	}
	if h.set.Adaptive && h.learn.grow(h.set, now, &h.starts) {
		t.markDirty(h)
	}
	if g := h.gate(now); g.Blocked {
		return g
	}
	g := h.brk.admit(h, source, now)
	if g.Blocked {
		return g
	}
	if g.Probe {
		t.markDirty(h)
	}
	h.starts.add(now)
	return g
}

// Peek is Admit without side effects (for why, the status page and
// trigger's refusal): Probe says the next admitted poll would be the
// probe.
func (t *Table) Peek(host string, now time.Time) Gate {
	t.mu.Lock()
	defer t.mu.Unlock()
	h := t.hosts[host]
	if h == nil {
		return Gate{}
	}
	if g := h.gate(now); g.Blocked {
		return g
	}
	return h.brk.peek(h, now)
}

// gate is the block of h's throttling and open breaker at now, the later
// of the two when both hold.
func (h *host) gate(now time.Time) Gate {
	var g Gate
	if h.brk.state == stateOpen && now.Before(h.brk.until) {
		g = Gate{Blocked: true, Until: h.brk.until, Reason: "host " + h.name + " open until " +
			clockTime(h.brk.until, now) + " (" + h.brk.reason + ")"}
	}
	if now.Before(h.throttle.until) && !h.throttle.until.Before(g.Until) {
		g = Gate{Blocked: true, Until: h.throttle.until, Reason: "host " + h.name + " throttled until " +
			clockTime(h.throttle.until, now)}
	}
	return g
}

// Finish records a finished poll of host and returns the events to send:
// host_open once when the breaker opens from closed (not again when a
// probe fails), host_recovered once when a probe succeeds. A blocked poll
// never reaches Finish; a probe that ended without a verdict (interrupted)
// calls Abandon instead.
func (t *Table) Finish(host string, o Outcome, now time.Time) []Event {
	t.mu.Lock()
	defer t.mu.Unlock()
	h := t.hosts[host]
	if h == nil {
		return nil
	}
	changed := false
	if o.ThrottledUntil.After(h.throttle.until) {
		h.throttle = throttle{until: o.ThrottledUntil, source: o.Source, detail: o.Detail}
		changed = true
	}
	if !o.ConnFailure && !o.Throttled && o.Latency > 0 {
		h.lat.add(o.Latency, o.Inflight)
	}
	if h.set.Adaptive {
		changed = h.learn.finish(h.set, o, now, &h.lat, &h.starts) || changed
	}
	ev, brkChanged := h.brk.finish(h, o, now)
	if changed || brkChanged {
		t.markDirty(h)
	}
	return ev
}

// Abandon ends a probe that finished without a verdict (interrupted): the
// host stays half-open and the next source asking is the probe.
func (t *Table) Abandon(host, source string, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if h := t.hosts[host]; h != nil && h.brk.probeSource != "" && h.brk.probeSource == source {
		h.brk.probeSource, h.brk.probeUntil = "", time.Time{}
		h.brk.lastProbe = "" // it gave no verdict: it may probe again
		h.brk.stamp = now
		t.markDirty(h)
	}
}

// Limits is the host's effective concurrency and rate now: the configured
// ones, or with Adaptive the learned ones (13.5: concurrency between 1 and
// the configured one, 16 when that is 0; rate between 1/60 and the
// configured one, none when 0 and none until the first throttling answer).
// An unknown host has none (0, 0, 0).
func (t *Table) Limits(host string) (concurrency int, rate float64, burst int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	h := t.hosts[host]
	if h == nil {
		return 0, 0, 0
	}
	if !h.set.Adaptive {
		return h.set.Concurrency, h.set.Rate, h.set.Burst
	}
	rate = h.set.Rate
	if h.learn.rate > 0 {
		rate = h.learn.rate
	}
	burst = h.set.Burst
	if rate > 0 && burst < 1 {
		burst = 1
	}
	return h.learn.concurrency(h.set), rate, burst
}

// Reset closes the host's breaker, clears its throttling and forgets its
// learned limits, and returns its object (false for an unknown host).
func (t *Table) Reset(host string, now time.Time) (Object, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	h := t.hosts[host]
	if h == nil {
		return Object{}, false
	}
	h.throttle = throttle{}
	h.brk = breaker{stamp: now}
	h.learn.forget(h.set)
	h.learn.stamp = now
	h.lat.baseline = 0
	t.markDirty(h)
	return h.object(now), true
}

// Hosts returns the names of the configured hosts, sorted.
func (t *Table) Hosts() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]string, 0, len(t.hosts))
	for name := range t.hosts {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// clockTime formats t for a reason: its time of day (UTC), with its date
// when that is not now's.
func clockTime(t, now time.Time) string {
	t, now = t.UTC(), now.UTC()
	if t.Format(time.DateOnly) != now.Format(time.DateOnly) {
		return t.Format("2006-01-02 15:04:05")
	}
	return t.Format(time.TimeOnly)
}
