// Package clock is the one notion of time every waiting part of pacer is
// given: the scheduler, its flusher, the cluster member's round loop, the
// notifier and the stages a shutdown stops. The daemon passes one Clock to
// all of them (the wall clock, or a cluster member's database clock);
// tests pass a fake or run the real one in a testing/synctest bubble.
package clock

import (
	"context"
	"time"
)

// Clock reads the time and makes timers on it.
type Clock interface {
	Now() time.Time
	NewTimer(d time.Duration) Timer
}

// Timer is the part of *time.Timer a Clock's timers offer. It is an alias
// of an unnamed interface, so that a package may name it again without a
// conversion.
type Timer = interface {
	C() <-chan time.Time
	Stop() bool
	Reset(d time.Duration) bool
}

// Real is the wall clock: time.Now and time.NewTimer.
type Real struct{}

var _ Clock = Real{}

// Now returns time.Now().
func (Real) Now() time.Time { return time.Now() }

// NewTimer returns a time.Timer.
func (Real) NewTimer(d time.Duration) Timer { return wallTimer{time.NewTimer(d)} }

// wallTimer is a *time.Timer with its channel behind a method.
type wallTimer struct{ *time.Timer }

func (w wallTimer) C() <-chan time.Time { return w.Timer.C }

// Sleep waits d on c, or until ctx is done; it reports whether d passed.
func Sleep(ctx context.Context, c Clock, d time.Duration) bool {
	t := c.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return true
	case <-ctx.Done():
		return false
	}
}
