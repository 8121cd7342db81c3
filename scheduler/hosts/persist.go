package hosts

import (
	"fmt"
	"time"
)

// Persisted is what the store keeps of one host: its learned limits and
// baseline, its throttling and its breaker, each with the time it last
// changed so that Restore keeps the newer of the stored and the local
// state (a cluster's members share them through the store), and the
// fingerprint of the Settings they were learned under (a changed setting
// forgets them on Restore).
type Persisted struct {
	Host        string
	SettingsKey string // SettingsKey of the settings they were learned under

	LearnedConcurrency float64       // 0 = nothing learned
	LearnedRate        float64       // starts per second; 0 = none
	Baseline           time.Duration // 0 = unknown
	LearnedAt          time.Time     // when a learned value last changed

	ThrottledUntil time.Time // zero = not throttled
	ThrottledBy    string    // the source whose answer throttled it
	ThrottleDetail string    // what said so ("429 Too Many Requests")

	Open        bool      // the breaker is open (half-open once OpenUntil is past)
	OpenUntil   time.Time // the end of its cooldown
	OpenReason  string    // "connection refused from 3 sources"
	LastProbe   string    // the previous probe's source (rotation)
	ProbeSource string    // the source probing now ("" = none)
	ProbeUntil  time.Time // the probe's lease (a lost probe frees the host after it)
	BreakerAt   time.Time // when the breaker last changed
}

// SettingsKey is a fingerprint of s: equal for equal settings, different
// when anything differs, so a stored Persisted learned under other
// settings is recognised and forgotten.
func SettingsKey(s Settings) string {
	b := s.Breaker
	return fmt.Sprintf("c=%d r=%g b=%d brk=%d/%d/%s/%s a=%t", s.Concurrency, s.Rate, s.Burst,
		b.Sources, b.Failures, b.Window, b.Cooldown, s.Adaptive)
}

// Snapshot returns the hosts whose persisted part changed since the last
// Snapshot (learned limits, throttling, breaker), sorted by nothing in
// particular; nil, without work, when nothing changed.
func (t *Table) Snapshot() []Persisted {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.dirty) == 0 {
		return nil
	}
	out := make([]Persisted, 0, len(t.dirty))
	for _, h := range t.dirty {
		if !h.dirty || t.hosts[h.name] != h { // dropped by Configure meanwhile
			continue
		}
		h.dirty = false
		out = append(out, h.persisted())
	}
	t.dirty = t.dirty[:0]
	return out
}

// persisted is h's Persisted.
func (h *host) persisted() Persisted {
	return Persisted{
		Host: h.name, SettingsKey: h.key,
		LearnedConcurrency: h.learn.conc, LearnedRate: h.learn.rate,
		Baseline: time.Duration(h.lat.baseline) * time.Microsecond, LearnedAt: h.learn.stamp,
		ThrottledUntil: h.throttle.until, ThrottledBy: h.throttle.source, ThrottleDetail: h.throttle.detail,
		Open: h.brk.state == stateOpen, OpenUntil: h.brk.until, OpenReason: h.brk.reason,
		LastProbe: h.brk.lastProbe, ProbeSource: h.brk.probeSource, ProbeUntil: h.brk.probeUntil,
		BreakerAt: h.brk.stamp,
	}
}

// Restore adopts stored state (on start, and every lease round on a
// cluster): for each part, the stored one when it is newer than the local
// one; learned limits only when they were learned under the host's current
// settings. Hosts the table does not know are ignored. Restoring marks
// nothing for the next Snapshot.
func (t *Table) Restore(ps []Persisted, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, p := range ps {
		h := t.hosts[p.Host]
		if h == nil {
			continue
		}
		if p.SettingsKey == h.key && h.set.Adaptive && p.LearnedAt.After(h.learn.stamp) {
			h.learn.conc = min(max(p.LearnedConcurrency, 0), capOf(h.set))
			h.learn.rate = max(p.LearnedRate, 0)
			if h.set.Rate > 0 {
				h.learn.rate = min(h.learn.rate, h.set.Rate)
			}
			h.learn.stamp, h.learn.lastGrow = p.LearnedAt, now
			h.learn.roundLeft = 0
		}
		if p.SettingsKey == h.key && p.Baseline > 0 && (h.lat.baseline == 0 || p.LearnedAt.After(h.learn.stamp)) {
			h.lat.baseline = float64(p.Baseline.Microseconds())
		}
		if p.ThrottledUntil.After(h.throttle.until) {
			h.throttle = throttle{until: p.ThrottledUntil, source: p.ThrottledBy, detail: p.ThrottleDetail}
		}
		if p.BreakerAt.After(h.brk.stamp) && h.set.Breaker.Failures > 0 {
			h.brk = breaker{lastProbe: p.LastProbe, stamp: p.BreakerAt}
			if p.Open {
				h.brk.state, h.brk.until, h.brk.reason = stateOpen, p.OpenUntil, p.OpenReason
				h.brk.probeSource, h.brk.probeUntil = p.ProbeSource, p.ProbeUntil
			}
		}
	}
}

// Unsaved marks the hosts of ps for the next Snapshot again: their write
// failed, and the next one must carry them.
func (t *Table) Unsaved(ps []Persisted) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, p := range ps {
		if h := t.hosts[p.Host]; h != nil {
			t.markDirty(h)
		}
	}
}
