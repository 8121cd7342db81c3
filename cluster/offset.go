package cluster

import (
	"context"
	"time"
)

// offsetWindow is how many measures of the clock offset offsetFilter keeps.
const offsetWindow = 8

// offsetSample is one measure of the database's clock minus the member's:
// the true offset lies within rtt/2 of off while both clocks run steadily
// (the database read its clock somewhere inside the round trip).
type offsetSample struct {
	rtt, off time.Duration
}

// offsetFilter picks the offset a member schedules by from its recent
// measures, as NTP does: the measure of the shortest round trip, whose
// error is the smallest. A round trip stretched by a loaded machine (a
// reply that waited a second for the CPU) would otherwise move the
// scheduler's clock by half of it, and two members whose clocks then
// disagree by that much poll a tick twice across a hand-over. A measure
// whose interval does not meet the best one's is a step of one of the
// clocks (NTP, an operator): the window restarts from it. Not safe for
// concurrent use: the Member's lock guards it.
type offsetFilter struct {
	win  [offsetWindow]offsetSample
	n    int // samples in win
	next int // where the next one goes
	cur  time.Duration
	set  bool
}

// add takes a measure and returns the offset to schedule by, which moves
// only by offsetStep or more (the error of the best measure would move it
// by milliseconds at every round otherwise).
func (f *offsetFilter) add(rtt, off time.Duration) time.Duration {
	s := offsetSample{rtt: max(rtt, 0), off: off}
	if f.n > 0 && !meets(s, f.best()) {
		f.n, f.next = 0, 0
	}
	f.win[f.next] = s
	f.next = (f.next + 1) % offsetWindow
	f.n = min(f.n+1, offsetWindow)
	b := f.best()
	if d := b.off - f.cur; !f.set || d >= offsetStep || d <= -offsetStep {
		f.cur, f.set = b.off, true
	}
	return f.cur
}

// best is the kept measure of the shortest round trip (n > 0).
func (f *offsetFilter) best() offsetSample {
	b := f.win[0]
	for _, s := range f.win[1:f.n] {
		if s.rtt < b.rtt {
			b = s
		}
	}
	return b
}

// meets says whether the intervals in which a's and b's true offsets lie
// meet (with a little slack for the clocks' reading), i.e. whether both
// can be measures of one steady offset.
func meets(a, b offsetSample) bool {
	d := a.off - b.off
	if d < 0 {
		d = -d
	}
	return d <= (a.rtt+b.rtt)/2+10*time.Millisecond
}

// offsetStep is the least change of the measured clock offset that moves
// the one the member schedules by: the measure's own error (half a round
// trip) would otherwise move the scheduler's clock back and forth by
// milliseconds at every round.
const offsetStep = 50 * time.Millisecond

// clockWarnAbove is the offset from the database's clock above which a
// member logs a warning (rule 8.1): it schedules on the database's clock
// anyway, but its logs' times and its operator's view are off by that much.
const clockWarnAbove = time.Second

// MeasureOffset measures the database's clock minus the member's (from
// the middle of the call), keeps as ClockOffset the measure of the shortest
// recent round trip when it moved by offsetStep or more (offsetFilter), and
// warns, at most once a minute unless it moves by
// another second, while it exceeds clockWarnAbove. Every round calls it;
// the daemon calls it once before its scheduler starts, so that the
// scheduler's clock does not jump at the first round.
func (m *Member) MeasureOffset(ctx context.Context) (time.Duration, error) {
	t0 := m.opt.Clock.Now()
	db, err := m.st.DatabaseNow(ctx)
	if err != nil {
		return 0, err
	}
	t1 := m.opt.Clock.Now()
	measured := db.Sub(t0.Add(t1.Sub(t0) / 2))
	m.mu.Lock()
	m.offset = m.offsets.add(t1.Sub(t0), measured)
	off := m.offset
	far := off > clockWarnAbove || off < -clockWarnAbove
	moved := off-m.offsetWarned > clockWarnAbove || m.offsetWarned-off > clockWarnAbove
	warn := far && (m.offsetWarnedAt.IsZero() || moved || t1.Sub(m.offsetWarnedAt) >= time.Minute)
	if warn {
		m.offsetWarned, m.offsetWarnedAt = off, t1
	}
	m.mu.Unlock()
	if warn {
		m.opt.Logger.Warn("cluster: this member's clock is off from the database's; it schedules on the database's clock",
			"member", m.opt.Name, "clock_offset_ms", off.Milliseconds())
	}
	return off, nil
}

// ClockOffset is the database's clock minus the member's, as last
// measured (0 before the first round): the member's scheduler runs on its
// clock plus this (scheduler.DatabaseClock), so that the due times and
// phases members hand over through the store agree whatever their own
// clocks say (rule 8.1).
func (m *Member) ClockOffset() time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.offset
}
