package hosts

import (
	"strconv"
	"time"
)

// Breaker states as stored; half-open is derived: open with its cooldown
// over.
const (
	stateClosed uint8 = iota
	stateOpen
)

// breaker is a host's breaker over connection-level failures (13.3), the
// states of gobreaker (closed, open, half-open with one probe) kept as
// plain data so that the store can keep them and a cluster share them.
type breaker struct {
	state       uint8
	until       time.Time // open until (then half-open)
	reason      string    // why it opened: "connection refused from 3 sources"
	fails       []failure // recent connection-level failures while closed, oldest first
	probeSource string    // the source probing ("" = none)
	probeUntil  time.Time // the probe's lease: past it, the probe is taken as lost
	lastProbe   string    // the previous probe's source, for rotation
	stamp       time.Time // when state or until last changed (Restore: newer wins)
}

// failure is one connection-level failure while closed.
type failure struct {
	source string
	at     time.Time
}

// probeLease is how long a probe blocks its siblings at most: the
// cooldown, at least 2 minutes (longer than a poll's usual timeout). A
// probe whose verdict never came (its member crashed) is lost after it,
// and another source probes.
func probeLease(p BreakerPolicy) time.Duration { return max(p.Cooldown, 2*time.Minute) }

// probing reports whether a probe is in flight at now.
func (b *breaker) probing(now time.Time) bool {
	return b.probeSource != "" && now.Before(b.probeUntil)
}

// halfOpen reports whether the breaker is open with its cooldown over.
func (b *breaker) halfOpen(now time.Time) bool {
	return b.state == stateOpen && !now.Before(b.until)
}

// admit answers Admit once no throttling or open cooldown blocks: the
// probe, or a block while it is in flight, when half-open.
func (b *breaker) admit(h *host, source string, now time.Time) Gate {
	if g := b.peek(h, now); g.Blocked || !g.Probe {
		return g
	}
	if source == b.lastProbe && h.sources > 1 && now.Before(b.until.Add(h.set.Breaker.Cooldown)) {
		return Gate{Blocked: true, Reason: "host " + h.name + " half-open: another of its sources probes it"}
	}
	b.probeSource, b.lastProbe = source, source
	b.probeUntil, b.stamp = now.Add(probeLease(h.set.Breaker)), now
	return Gate{Probe: true}
}

// peek is admit without its side effects.
func (b *breaker) peek(h *host, now time.Time) Gate {
	if !b.halfOpen(now) {
		return Gate{}
	}
	if b.probing(now) {
		return Gate{Blocked: true, Until: b.probeUntil,
			Reason: "host " + h.name + " half-open: source " + b.probeSource + " probes it"}
	}
	return Gate{Probe: true}
}

// finish records o in the breaker and returns the event it causes and
// whether its persisted part changed.
func (b *breaker) finish(h *host, o Outcome, now time.Time) ([]Event, bool) {
	pol := h.set.Breaker
	if pol.Failures <= 0 {
		return nil, false
	}
	if b.state == stateOpen {
		if b.probeSource == "" || o.Source != b.probeSource {
			return nil, false // in flight when it opened: no verdict
		}
		b.probeSource, b.probeUntil = "", time.Time{}
		b.stamp = now
		if o.ConnFailure { // open again, no new host_open
			b.until = now.Add(pol.Cooldown)
			return nil, true
		}
		// Any answer reaches the host: the probe closes it.
		*b = breaker{lastProbe: b.lastProbe, stamp: now}
		return []Event{{Kind: EventRecovered, Host: h.name, Sources: h.sources, At: now,
			Reason: "source " + o.Source + " reached it"}}, true
	}
	if o.Success {
		b.fails = b.fails[:0]
		return nil, false
	}
	if !o.ConnFailure {
		return nil, false
	}
	n := b.record(pol, o.Source, now)
	if len(b.fails) < pol.Failures || n < pol.Sources {
		return nil, false
	}
	detail := o.Detail
	if detail == "" {
		detail = "connection failures"
	}
	b.reason = detail + " from " + plural(n, "source")
	b.state, b.until, b.fails, b.stamp = stateOpen, now.Add(pol.Cooldown), nil, now
	return []Event{{Kind: EventOpen, Host: h.name, Sources: h.sources, At: now, Reason: b.reason}}, true
}

// record adds a failure of source at now, drops those out of the window
// and beyond what the rule needs, and returns the distinct sources among
// the rest.
func (b *breaker) record(pol BreakerPolicy, source string, now time.Time) int {
	keep := max(pol.Failures, pol.Sources)
	i := 0
	for i < len(b.fails) && (pol.Window > 0 && now.Sub(b.fails[i].at) > pol.Window) {
		i++
	}
	if over := len(b.fails) - i + 1 - keep; over > 0 {
		i += over
	}
	b.fails = append(b.fails[:0], b.fails[i:]...)
	b.fails = append(b.fails, failure{source: source, at: now})
	n := 0
	for j, f := range b.fails {
		seen := false
		for _, g := range b.fails[:j] {
			if g.source == f.source {
				seen = true
				break
			}
		}
		if !seen {
			n++
		}
	}
	return n
}

// plural is "1 source", "3 sources".
func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return strconv.Itoa(n) + " " + word + "s"
}
