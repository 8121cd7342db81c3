// Package policy holds the per-source rules of pacer's scheduler as pure
// functions of (state, outcome, now): the state shown, the outcome of a
// poll applied to the stored state (backoff, breaker, Retry-After, error
// state), the next run composed of "not before" times (MaxOf), operator
// actions, the schedule's ticks (Timing), the moves of a step of the wall
// clock, delivered results and notification events. Nothing here reads a
// clock, takes a lock or touches the store: the scheduler applies these
// rules under its own lock, and the tests call them directly.
package policy

import (
	"math"
	"math/big"
	"math/bits"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/domain"
)

// Timing turns a source's schedule into activation times. "@every D"
// schedules are anchored to a per-source phase (from a hash of the name) on the
// Unix epoch, as Prometheus spreads its scrape targets: 10,000 sources on
// "@every 1m" loaded together fire spread over the minute, and a source keeps
// its phase across restarts. Cron schedules that fire at given hours follow
// cronie across daylight-saving changes (wallClock).
type Timing struct {
	Sched config.Schedule // nil: never
	Every time.Duration   // "@every": its period, else 0
	Phase time.Duration   // "@every": the offset of its ticks, in [0, Every)
}

// NewTiming returns the timing of the source name on schedule s: "@every"
// with its phase (phaseOf), a cron schedule at given hours on the wall
// clock (wallClock).
func NewTiming(name string, s config.Schedule) Timing {
	t := Timing{Sched: s}
	if e, ok := s.(config.Every); ok && e.D > 0 {
		t.Every = e.D
		t.Phase = phaseOf(name, e.D)
	}
	if ss, ok := s.(*cron.SpecSchedule); ok && atGivenHours(ss) {
		t.Sched = newWallClock(ss)
	}
	return t
}

// phaseOf returns a stable offset in [0, d) derived from name: the name's
// hash (domain.NameHash) scaled to d, so that phases follow the order of the
// hashes whatever the period. The store keeps its rows in that order too:
// the sources that one commit writes, polled within the same few
// milliseconds, are neighbours in its tables.
//
// Phases are rounded down to a grid of phaseGrid(d): the sources due in one
// slot of the grid are dispatched by one wake-up of the scheduling loop,
// instead of one wake-up each (with 100,000 sources on "@every 1m", 100
// wake-ups a second instead of one every 0.6 ms).
func phaseOf(name string, d time.Duration) time.Duration {
	hi, _ := bits.Mul64(domain.NameHash(name), uint64(d))
	g := uint64(phaseGrid(d))
	return time.Duration(hi / g * g)
}

// phaseGrid is the granularity of the phases of "@every d": 10 ms, or d/100
// for periods under a second, so that every period has at least 100 slots.
func phaseGrid(d time.Duration) time.Duration {
	return max(min(10*time.Millisecond, d/100), 1)
}

// Next returns the first activation strictly after t: the schedule's "not
// before" time in the next-run rule (NextRun). It never wraps
// around: an activation too far ahead to be represented saturates (to the
// latest time.Time, see time.Time.Add), so it is never before t.
func (tm Timing) Next(t time.Time) time.Time {
	if tm.Every > 0 {
		return t.Add(tm.Every - everyRem(t, tm.Every, tm.Phase)).UTC()
	}
	if tm.Sched == nil {
		return never(t)
	}
	n := tm.Sched.Next(t)
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

// LastTick is the latest activation in (from, to], false when there is
// none: the tick a member taking a source over may have missed (a cron
// schedule is followed from from, at most 1,000 activations: past those
// the one reached is returned, as overdue as the last).
func (tm Timing) LastTick(from, to time.Time) (time.Time, bool) {
	if !to.After(from) {
		return time.Time{}, false
	}
	if tm.Every > 0 {
		last := tm.Next(to.Add(-tm.Every)) // the one activation in (to-Every, to]
		return last, !last.After(to) && last.After(from)
	}
	var last time.Time
	found := false
	for t, n := tm.Next(from), 0; !t.After(to) && n < 1000; t, n = tm.Next(t), n+1 {
		last, found = t, true
	}
	return last, found
}

// TicksBetween counts activations in (from, to], at most limit.
func (tm Timing) TicksBetween(from, to time.Time, limit int) int {
	n := 0
	for t := tm.Next(from); !t.After(to) && n < limit; t = tm.Next(t) {
		n++
	}
	return n
}

// FarFuture stands for "never" when a cron schedule has no next activation.
func FarFuture() time.Time { return time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC) }

// never is "no activation" after t: FarFuture, or past t if t is later
// still (a next run is never before now).
func never(t time.Time) time.Time {
	if f := FarFuture(); f.After(t) {
		return f
	}
	return t.Add(math.MaxInt64)
}

// LatestKey is the latest time the due heap can hold (its keys are
// UnixNano): about 2262-04-11. A due time beyond it is as good as never.
const LatestKey = math.MaxInt64

// NanoKey is t's UnixNano, saturated at the ends of the int64 range instead
// of wrapping around (time.Time.UnixNano is undefined there).
func NanoKey(t time.Time) int64 {
	switch s := t.Unix(); {
	case s >= math.MaxInt64/int64(time.Second):
		return LatestKey
	case s <= math.MinInt64/int64(time.Second):
		return math.MinInt64
	}
	return t.UnixNano()
}
