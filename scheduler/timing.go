package scheduler

import (
	"math"
	"math/big"
	"math/bits"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/store"
)

// timing turns a source's schedule into activation times. "@every D"
// schedules are anchored to a per-source phase (from a hash of the name) on the
// Unix epoch, as Prometheus spreads its scrape targets: 10,000 sources on
// "@every 1m" loaded together fire spread over the minute, and a source keeps
// its phase across restarts. Cron schedules that fire at given hours follow
// cronie across daylight-saving changes (wallClock).
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
	if ss, ok := s.(*cron.SpecSchedule); ok && atGivenHours(ss) {
		t.sched = newWallClock(ss)
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

// next returns the first activation strictly after t. It never wraps
// around: an activation too far ahead to be represented saturates (to the
// latest time.Time, see time.Time.Add), so it is never before t.
func (tm timing) next(t time.Time) time.Time {
	if tm.every > 0 {
		return t.Add(tm.every - everyRem(t, tm.every, tm.phase)).UTC()
	}
	if tm.sched == nil {
		return never(t)
	}
	n := tm.sched.Next(t)
	if n.IsZero() || !n.After(t) {
		return never(t)
	}
	return n
}

// everyRem returns (t - epoch - phase) mod d, in [0, d): how far t lies past
// the last activation of "@every d" with that phase. It is exact for every
// t, also where t's UnixNano does not fit an int64 (before 1970 or after
// 2262: "phase + d" from such a t used to wrap around into the past).
func everyRem(t time.Time, d, phase time.Duration) time.Duration {
	// Fast path: t.UnixNano() is exact and in [0, MaxInt64), so n - phase
	// cannot overflow (phase is in [0, d)).
	if s := t.Unix(); s >= 0 && s < math.MaxInt64/int64(time.Second) {
		rem := (t.UnixNano() - int64(phase)) % int64(d)
		if rem < 0 {
			rem += int64(d)
		}
		return time.Duration(rem)
	}
	n := new(big.Int).Mul(big.NewInt(t.Unix()), big.NewInt(int64(time.Second)))
	n.Add(n, big.NewInt(int64(t.Nanosecond())-int64(phase)))
	return time.Duration(n.Mod(n, big.NewInt(int64(d))).Int64()) // Euclidean: in [0, d)
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

// never is "no activation" after t: farFuture, or past t if t is later
// still (a next run is never before now).
func never(t time.Time) time.Time {
	if f := farFuture(); f.After(t) {
		return f
	}
	return t.Add(math.MaxInt64)
}

// latestKey is the latest time the due heap can hold (its keys are
// UnixNano): about 2262-04-11. A due time beyond it is as good as never.
const latestKey = math.MaxInt64

// nanoKey is t's UnixNano, saturated at the ends of the int64 range instead
// of wrapping around (time.Time.UnixNano is undefined there).
func nanoKey(t time.Time) int64 {
	switch s := t.Unix(); {
	case s >= math.MaxInt64/int64(time.Second):
		return latestKey
	case s <= math.MinInt64/int64(time.Second):
		return math.MinInt64
	}
	return t.UnixNano()
}
