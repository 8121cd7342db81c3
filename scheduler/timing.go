package scheduler

import (
	"math/bits"
	"time"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/store"
)

// timing turns a source's schedule into activation times. "@every D"
// schedules are anchored to a per-source phase (from a hash of the name) on the
// Unix epoch, as Prometheus spreads its scrape targets: 10,000 sources on
// "@every 1m" loaded together fire spread over the minute, and a source keeps
// its phase across restarts.
type timing struct {
	sched config.Schedule
	every time.Duration
	phase time.Duration // in [0, every)
}

func newTiming(name string, s config.Schedule) timing {
	t := timing{sched: s}
	if e, ok := s.(config.Every); ok && e.D > 0 {
		t.every = e.D
		t.phase = phaseOf(name, e.D)
	}
	return t
}

// phaseOf returns a stable offset in [0, d) derived from name: the name's
// hash (store.NameHash) scaled to d, so that phases follow the order of the
// hashes whatever the period. The store keeps its rows in that order too:
// the sources that one commit writes, polled within the same few
// milliseconds, are neighbours in its tables.
//
// Phases are rounded down to a grid of phaseGrid(d): the sources due in one
// slot of the grid are dispatched by one wake-up of the scheduling loop,
// instead of one wake-up each (with 100,000 sources on "@every 1m", 100
// wake-ups a second instead of one every 0.6 ms).
func phaseOf(name string, d time.Duration) time.Duration {
	hi, _ := bits.Mul64(store.NameHash(name), uint64(d))
	g := uint64(phaseGrid(d))
	return time.Duration(hi / g * g)
}

// phaseGrid is the granularity of the phases of "@every d": 10 ms, or d/100
// for periods under a second, so that every period has at least 100 slots.
func phaseGrid(d time.Duration) time.Duration {
	return max(min(10*time.Millisecond, d/100), 1)
}

// next returns the first activation strictly after t.
func (tm timing) next(t time.Time) time.Time {
	if tm.every > 0 {
		d := int64(tm.every)
		n := t.UnixNano() - int64(tm.phase)
		rem := n % d
		if rem < 0 {
			rem += d
		}
		return time.Unix(0, t.UnixNano()-rem+d).UTC()
	}
	if tm.sched == nil {
		return farFuture()
	}
	n := tm.sched.Next(t)
	if n.IsZero() {
		return farFuture()
	}
	return n
}

// ticksBetween counts activations in (from, to], at most limit.
func (tm timing) ticksBetween(from, to time.Time, limit int) int {
	n := 0
	for t := tm.next(from); !t.After(to) && n < limit; t = tm.next(t) {
		n++
	}
	return n
}

// farFuture stands for "never" when a cron schedule has no next activation.
func farFuture() time.Time { return time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC) }
