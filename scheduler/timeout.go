package scheduler

import (
	"context"
	"time"
)

// pollTimeouts gives one worker's polls their timeouts without a
// context.WithTimeout per poll. That costs a timer, a timerCtx, its Done
// channel and the map in which net/http's own contexts of the request
// register, 6 allocations and ~600 B a poll, against none for a client whose
// requests carry context.Background (the bare client of BenchmarkLoad).
// Here the worker keeps one cancelable context and one timer that cancels
// it with context.DeadlineExceeded as its cause; each poll sees it through
// a deadlineCtx that reports the poll's deadline, and, once the timer has
// fired, DeadlineExceeded as its Err, as a context.WithTimeout does. A
// context whose timer fired, or whose parent is done, is replaced before
// the next poll. A pollTimeouts belongs to one worker goroutine.
type pollTimeouts struct {
	parent context.Context
	ctx    context.Context // the current context: canceled by timer or parent
	timer  *time.Timer     // cancels ctx with DeadlineExceeded; stopped between polls
}

// newPollTimeouts returns the timeouts of a worker's polls, derived from
// parent.
func newPollTimeouts(parent context.Context) *pollTimeouts {
	t := &pollTimeouts{parent: parent}
	t.renew()
	return t
}

// renew makes a new context and its timer (stopped); the old timer's
// function, if it runs, cancels only the old context.
func (t *pollTimeouts) renew() {
	ctx, cancel := context.WithCancelCause(t.parent)
	t.ctx = ctx
	t.timer = time.AfterFunc(time.Hour, func() { cancel(context.DeadlineExceeded) })
	t.timer.Stop()
}

// start returns the context of a poll with timeout d from now; stop ends
// it, once the poll has returned (the context must not be used after).
func (t *pollTimeouts) start(d time.Duration) context.Context {
	if t.ctx.Err() != nil {
		t.renew() // the parent is done: the new one is too, at once
	}
	deadline := time.Now().Add(d)
	t.timer.Reset(d)
	return &deadlineCtx{Context: t.ctx, deadline: deadline}
}

// stop ends a poll: its timer is stopped, or, had it fired, the context it
// canceled is replaced.
func (t *pollTimeouts) stop() {
	if !t.timer.Stop() {
		t.renew()
	}
}

// deadlineCtx is a poll's view of its worker's context: its Deadline is the
// poll's, and a cancellation caused by the timer reads as
// context.DeadlineExceeded. Done, Value (through which the context package
// and net/http find the underlying *cancelCtx, so that their contexts
// register there without a goroutine) and context.Cause are the
// underlying context's.
type deadlineCtx struct {
	context.Context
	deadline time.Time
}

// Deadline is the poll's deadline.
func (c *deadlineCtx) Deadline() (time.Time, bool) { return c.deadline, true }

// Err is DeadlineExceeded once the poll's timer canceled the context,
// Canceled once its parent was, else nil.
func (c *deadlineCtx) Err() error {
	err := c.Context.Err()
	if err != nil && context.Cause(c.Context) == context.DeadlineExceeded {
		return context.DeadlineExceeded
	}
	return err
}
