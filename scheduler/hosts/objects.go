package hosts

import (
	"fmt"
	"sort"
	"time"
)

// Host states of the API (13.7).
const (
	StateClosed    = "closed"
	StateOpen      = "open"
	StateHalfOpen  = "half-open"
	StateThrottled = "throttled"
)

// Object is a host as the API shows it (13.7). Inflight is the scheduler's
// (the table does not count polls in flight): it sets it.
type Object struct {
	Host               string     `json:"host"`
	Sources            int        `json:"sources"`
	Inflight           int        `json:"inflight"`
	State              string     `json:"state"`
	Until              *time.Time `json:"until"`
	Concurrency        int        `json:"concurrency"`
	Rate               float64    `json:"rate"`
	LearnedConcurrency *int       `json:"learned_concurrency"`
	LearnedRate        *float64   `json:"learned_rate"`
	LatencyP90Ms       *float64   `json:"latency_p90_ms"`
	BaselineMs         *float64   `json:"baseline_ms"`
	Why                string     `json:"why"`
}

// Objects returns every host's object at now, sorted by host.
func (t *Table) Objects(now time.Time) []Object {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]Object, 0, len(t.hosts))
	for _, h := range t.hosts {
		out = append(out, h.object(now))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Host < out[j].Host })
	return out
}

// Object returns host's object at now, false for an unknown host.
func (t *Table) Object(host string, now time.Time) (Object, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	h := t.hosts[host]
	if h == nil {
		return Object{}, false
	}
	return h.object(now), true
}

// object is h's Object at now.
func (h *host) object(now time.Time) Object {
	o := Object{Host: h.name, Sources: h.sources, Concurrency: h.set.Concurrency, Rate: h.set.Rate}
	o.State, o.Until, o.Why = h.state(now)
	if h.set.Adaptive && h.learn.conc > 0 {
		c := h.learn.concurrency(h.set)
		o.LearnedConcurrency = &c
	}
	if h.set.Adaptive && h.learn.rate > 0 {
		r := h.learn.rate
		o.LearnedRate = &r
	}
	if p, ok := h.lat.p90(); ok {
		o.LatencyP90Ms = &p
	}
	if h.lat.baseline > 0 {
		b := h.lat.baseline / 1000
		o.BaselineMs = &b
	}
	if o.State == StateClosed {
		o.Why += h.limitsWhy(o)
	}
	return o
}

// state is h's displayed state at now, the end of it when known, and a
// sentence saying why.
func (h *host) state(now time.Time) (string, *time.Time, string) {
	g := h.gate(now)
	switch {
	case g.Blocked && h.brk.state == stateOpen && g.Until.Equal(h.brk.until):
		u := h.brk.until
		return StateOpen, &u, fmt.Sprintf("open until %s (%s); then one of its sources probes it",
			clockTime(u, now), h.brk.reason)
	case g.Blocked:
		u := h.throttle.until
		why := "throttled until " + clockTime(u, now)
		if h.throttle.source != "" {
			why += " by the answer to source " + h.throttle.source
		}
		if h.throttle.detail != "" {
			why += " (" + h.throttle.detail + ")"
		}
		return StateThrottled, &u, why
	case h.brk.halfOpen(now) && h.brk.probing(now):
		return StateHalfOpen, nil, "half-open: source " + h.brk.probeSource + " probes it (" + h.brk.reason + ")"
	case h.brk.halfOpen(now):
		return StateHalfOpen, nil, "half-open: the next poll of one of its sources probes it (" + h.brk.reason + ")"
	}
	return StateClosed, nil, "closed"
}

// limitsWhy completes a closed host's sentence with its limits.
func (h *host) limitsWhy(o Object) string {
	s := ""
	if o.LearnedConcurrency != nil {
		s += fmt.Sprintf("; learned concurrency %d of %d", *o.LearnedConcurrency, int(capOf(h.set)))
		if o.LatencyP90Ms != nil && o.BaselineMs != nil {
			s += fmt.Sprintf(" (latency p90 %.0f ms, baseline %.0f ms)", *o.LatencyP90Ms, *o.BaselineMs)
		}
	}
	if o.LearnedRate != nil {
		s += fmt.Sprintf("; learned rate %.3g/s after throttling answers", *o.LearnedRate)
	}
	if s == "" && h.set.Concurrency == 0 && h.set.Rate == 0 {
		s = "; no limits"
	}
	return s
}
