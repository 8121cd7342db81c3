package scheduler

import (
	"context"
	"time"
)

// Clock is the scheduler's source of time: two clocks, as the system has
// them. Now reads the wall clock, which NTP or an operator may step
// backward or forward; the times the scheduler stores and shows are wall
// times, and cron schedules follow it. Monotonic and the timers run on the
// monotonic clock, which no step moves: "@every" periods, backoffs and
// cooldowns are durations on it (steps.go). Tests run the real clock
// inside a testing/synctest bubble, where time is fake and advances
// instantly, or substitute their own (a wall clock that steps).
type Clock interface {
	Now() time.Time
	// Monotonic reads the monotonic clock: only the difference of two
	// readings means anything.
	Monotonic() time.Duration
	NewTimer(d time.Duration) Timer
}

// Timer is the part of *time.Timer the scheduler uses.
type Timer interface {
	C() <-chan time.Time
	Stop() bool
	Reset(d time.Duration) bool
}

// RealClock is the system's clocks. Its Monotonic readings count from
// origin, a time.Now() reading (which carries the monotonic clock): use
// NewRealClock. The zero value reads the wall clock for both (no step is
// then ever seen).
type RealClock struct{ origin time.Time }

// NewRealClock returns the system's clocks.
func NewRealClock() RealClock { return RealClock{origin: time.Now()} }

// Now returns time.Now().
func (RealClock) Now() time.Time { return time.Now() }

// Monotonic returns the monotonic time since c's origin.
func (c RealClock) Monotonic() time.Duration {
	if c.origin.IsZero() {
		return time.Duration(time.Now().UnixNano())
	}
	return time.Since(c.origin)
}

// NewTimer returns a time.Timer.
func (RealClock) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time { return r.t.C }
func (r realTimer) Stop() bool          { return r.t.Stop() }

func (r realTimer) Reset(d time.Duration) bool { return r.t.Reset(d) }

// sleep waits d on c, or until ctx is done; it reports whether d passed.
func sleep(ctx context.Context, c Clock, d time.Duration) bool {
	t := c.NewTimer(d)
	select {
	case <-t.C():
		return true
	case <-ctx.Done():
		t.Stop()
		return false
	}
}
