package hosts

import (
	"math"
	"slices"
	"time"
)

// The constants of the learned limits (13.5); README "Hosts and
// dependencies" quotes them.
const (
	ringSize         = 32               // latency samples kept per host (for the p90 shown)
	startConcurrency = 2                // the learned concurrency before anything moved it
	defaultCap       = 16               // the learned concurrency's bound when concurrency is 0
	lowInflight      = 2                // a sample at most this many in flight measures the baseline
	ewmaAlpha        = 0.2              // weight of a new sample in the smoothed latency
	fallAbove        = 1.5              // smoothed/baseline above this: the limit falls
	growBelow        = 1.25             // smoothed/baseline at most this (and polls waited): it grows
	fallFactor       = 0.9              // the multiplicative fall
	minRate          = 1.0 / 60         // the learned rate's floor (1/m) and least growth step
	rateWindow       = 10 * time.Second // the start rate seen, and the growth period
	halveEvery       = time.Second      // at most one halving per second of throttling answers
)

// latency is a host's recent latencies, in microseconds.
type latency struct {
	ring     [ringSize]uint32
	next, n  uint8
	ewma     float64 // smoothed latency of every answered poll
	baseline float64 // smoothed minimum at low concurrency; 0 = unknown
}

// add records one answered poll's latency d, started with inflight polls
// of its host in flight (itself included; 0 = unknown, taken as low).
//
// The baseline is a smoothed minimum: a sample below it pulls it halfway
// down (at any concurrency: the host showed it can be that fast); a sample
// above it pulls it up by a twentieth, but only at low concurrency, so a
// loaded host's latency never drifts into its baseline (Gradient2's
// pitfall), while a host that became slower for good is re-measured once
// the limit has fallen to low concurrency.
func (l *latency) add(d time.Duration, inflight int) {
	us := float64(min(max(d.Microseconds(), 1), math.MaxUint32))
	l.ring[l.next] = uint32(us)
	l.next = (l.next + 1) % ringSize
	l.n = min(l.n+1, ringSize)
	if l.ewma == 0 {
		l.ewma = us
	} else {
		l.ewma += ewmaAlpha * (us - l.ewma)
	}
	low := inflight <= lowInflight
	switch {
	case l.baseline == 0:
		if low {
			l.baseline = us
		}
	case us < l.baseline:
		l.baseline = (l.baseline + us) / 2
	case low:
		l.baseline += (us - l.baseline) / 20
	}
}

// p90 is the 90th percentile of the kept samples in milliseconds, false
// without any.
func (l *latency) p90() (float64, bool) {
	if l.n == 0 {
		return 0, false
	}
	var buf [ringSize]uint32
	s := buf[:l.n]
	copy(s, l.ring[:l.n])
	slices.Sort(s)
	return float64(s[(len(s)*9+9)/10-1]) / 1000, true
}

// learned is a host's learned concurrency and rate (with Adaptive).
type learned struct {
	conc        float64 // 0 = nothing learned yet
	rate        float64 // starts per second; 0 = none
	roundLeft   int     // finishes left in this round (one decision per round)
	roundWaited bool    // a poll of this round waited for the concurrency limit
	lastThrot   time.Time
	lastHalve   time.Time
	lastGrow    time.Time
	stamp       time.Time // when conc or rate last changed (Restore: newer wins)
}

// forget drops everything learned.
func (l *learned) forget(Settings) { *l = learned{} }

// capOf is the bound of the learned concurrency under s.
func capOf(s Settings) float64 {
	if s.Concurrency > 0 {
		return float64(s.Concurrency)
	}
	return defaultCap
}

// concurrency is the learned concurrency as a limit, between 1 and the cap.
func (l *learned) concurrency(s Settings) int {
	c := l.conc
	if c == 0 {
		c = startConcurrency
	}
	return int(min(max(c, 1), capOf(s)))
}

// finish learns from one finished poll and reports whether a persisted
// value changed.
func (l *learned) finish(s Settings, o Outcome, now time.Time, lat *latency, st *starts) bool {
	changed := false
	if o.Throttled {
		changed = l.throttled(s, now, st)
	}
	if o.ConnFailure || o.Throttled || o.Latency <= 0 {
		return changed
	}
	if l.conc == 0 {
		l.conc = min(startConcurrency, capOf(s))
		l.stamp, changed = now, true
	}
	l.roundWaited = l.roundWaited || o.Waited
	if l.roundLeft--; l.roundLeft > 0 {
		return changed
	}
	waited := l.roundWaited
	l.roundLeft, l.roundWaited = max(1, int(l.conc)), false
	if lat.baseline == 0 {
		return changed
	}
	old := int(l.conc)
	switch ratio := lat.ewma / lat.baseline; {
	case ratio > fallAbove:
		l.conc = max(1, l.conc*fallFactor)
	case ratio <= growBelow && waited:
		l.conc = min(capOf(s), l.conc+1)
	}
	if int(l.conc) != old {
		l.stamp, changed = now, true
	}
	return changed
}

// throttled takes a throttling answer at now: the first one sets the rate
// to the start rate seen over the last 10 s, later ones halve it at most
// once a second.
func (l *learned) throttled(s Settings, now time.Time, st *starts) bool {
	l.lastThrot = now
	switch {
	case l.rate == 0:
		l.rate = max(st.rate(now), minRate)
		if s.Rate > 0 {
			l.rate = min(l.rate, s.Rate)
		}
	case now.Sub(l.lastHalve) >= halveEvery:
		l.rate = max(l.rate/2, minRate)
	default:
		return false
	}
	l.lastHalve, l.stamp = now, now
	return true
}

// grow applies the growth due at now: a tenth (at least 1/m) for each 10 s
// without a throttling answer, never above the configured rate, and only
// while the rate binds (the starts seen over 10 s reach half of it): a
// limit nobody presses on learns nothing, and does not grow without bound.
func (l *learned) grow(s Settings, now time.Time, st *starts) bool {
	if l.rate == 0 {
		return false
	}
	last := l.lastGrow
	if l.lastThrot.After(last) {
		last = l.lastThrot
	}
	steps := now.Sub(last) / rateWindow
	if steps <= 0 {
		return false
	}
	l.lastGrow = last.Add(steps * rateWindow)
	if st.rate(now) < l.rate/2 {
		return false
	}
	old := l.rate
	l.rate += max(l.rate/10, minRate) // one step: the starts seen say nothing about a second one
	if s.Rate > 0 {
		l.rate = min(l.rate, s.Rate)
	}
	if l.rate != old {
		l.stamp = now
		return true
	}
	return false
}

// starts counts a host's admitted starts per second over the last 10 s.
type starts struct {
	sec   int64 // the Unix second of the newest slot
	first int64 // the Unix second of the first start counted (0 = none)
	n     [10]uint16
}

// advance moves the window to now's second.
func (s *starts) advance(now time.Time) {
	sec := now.Unix()
	if sec <= s.sec {
		return
	}
	if sec-s.sec >= int64(len(s.n)) {
		s.n = [10]uint16{}
	} else {
		for i := s.sec + 1; i <= sec; i++ {
			s.n[slot(i)] = 0
		}
	}
	s.sec = sec
}

// slot is the index of second sec.
func slot(sec int64) int { return int((sec%10 + 10) % 10) }

// add counts a start at now (an older time counts in the newest second).
func (s *starts) add(now time.Time) {
	s.advance(now)
	if s.first == 0 {
		s.first = s.sec
	}
	if i := slot(s.sec); s.n[i] < math.MaxUint16 {
		s.n[i]++
	}
}

// rate is the starts per second seen over the 10 s up to now, or over
// the seconds since the first start when that is shorter (a host that has
// just started is not diluted by ten seconds it did not live).
func (s *starts) rate(now time.Time) float64 {
	s.advance(now)
	sum := 0
	for _, n := range s.n {
		sum += int(n)
	}
	span := min(max(s.sec-s.first+1, 1), int64(len(s.n)))
	if s.first == 0 {
		span = int64(len(s.n))
	}
	return float64(sum) / float64(span)
}
