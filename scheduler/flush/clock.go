package flush

import (
	"context"
	"time"
)

// Clock is the flusher's source of time: the submission time of a change
// (Now) and the delays before a commit and between retries (NewTimer). The
// scheduler passes its own clock (tests run it in a testing/synctest
// bubble, or substitute their own).
type Clock interface {
	Now() time.Time
	NewTimer(d time.Duration) Timer
}

// Timer is the part of *time.Timer the flusher uses.
type Timer interface {
	C() <-chan time.Time
	Stop() bool
}

// realClock is the wall clock, the Clock of Options that name none.
type realClock struct{}

func (realClock) Now() time.Time                 { return time.Now() }
func (realClock) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time { return r.t.C }
func (r realTimer) Stop() bool          { return r.t.Stop() }

var _ Clock = realClock{}

// pauseOn waits d on c, or until ctx is done; it reports whether d passed.
func pauseOn(ctx context.Context, c Clock, d time.Duration) bool {
	t := c.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return true
	case <-ctx.Done():
		return false
	}
}
