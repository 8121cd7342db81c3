package cluster

import "time"

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
