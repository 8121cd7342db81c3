package scheduler

import (
	"github.com/pacer-dev/pacer/internal/clock"
	"time"
)

// Clock is the scheduler's source of time. Tests run the real clock inside
// a testing/synctest bubble, where time is fake and advances instantly, or
// substitute their own.
//
// Now reads the wall clock, which NTP or an operator may step: the times
// the scheduler stores and shows are wall times, and cron schedules follow
// it. The timers run on the monotonic clock, which no step moves:
// "@every" periods, backoffs and cooldowns are durations on it (steps.go).
// The scheduler measures the steps of RealClock (and of the clocks that
// embed it) against the system's monotonic clock, and those of a clock that
// implements Monotonic against its own; it leaves those of any other clock
// to it (a cluster member's DatabaseClock corrects them at every round).
type Clock = clock.Clock

// Monotonic is a Clock with a monotonic clock of its own (a test's clock,
// whose wall clock steps while its timers do not). Only the difference of
// two readings means anything.
type Monotonic interface {
	Monotonic() time.Duration
}

// Timer is the part of *time.Timer the scheduler uses (clock.Timer: the
// one clock of the scheduler, the flusher, the cluster and the notifier).
type Timer = clock.Timer

// RealClock is the wall clock (clock.Real); the scheduler measures its
// steps against the system's monotonic clock (steps.go).
type RealClock struct{ clock.Real }

// DatabaseClock is base moved by offset(), read at every Now: a member of
// a cluster runs on the database's clock (offset: cluster.Member's
// ClockOffset), so that the due times and "@every" phases it hands over
// through the store mean the same to every member whatever its own clock
// says (rule 8.1). Timers are base's: a duration is the same on both.
func DatabaseClock(base Clock, offset func() time.Duration) Clock {
	return offsetClock{base: base, offset: offset}
}

type offsetClock struct {
	base   Clock
	offset func() time.Duration
}

func (c offsetClock) Now() time.Time                 { return c.base.Now().Add(c.offset()) }
func (c offsetClock) NewTimer(d time.Duration) Timer { return c.base.NewTimer(d) }

// SteadyClock is base's wall clock as read when it is made, advanced by
// the system's monotonic clock since: no step of base's wall clock moves
// it. A cluster member measures its offset from the database's clock
// against it (cluster.Options.Now) and its scheduler runs on it moved by
// that offset (DatabaseClock), so that a step of the member's own clock
// (NTP, date -s) never reaches the database's time the scheduler reads.
// On base itself, the scheduler read the step from it until the next
// round measured the offset again: a poll that ended meanwhile had its
// next poll set a step of +1 h later, and was silent for the hour.
func SteadyClock(base Clock) Clock {
	return steadyClock{base: base, wall: base.Now(), mono: time.Now()}
}

type steadyClock struct {
	base Clock
	wall time.Time // base's wall clock when made
	mono time.Time // the system's monotonic clock then
}

func (c steadyClock) Now() time.Time                 { return c.wall.Add(time.Since(c.mono)) }
func (c steadyClock) NewTimer(d time.Duration) Timer { return c.base.NewTimer(d) }
