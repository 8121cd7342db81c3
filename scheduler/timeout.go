package scheduler

import (
	"context"
	"sync/atomic"
	"time"
)

// pollTimeouts gives one worker's polls their timeouts without a
// context.WithTimeout per poll. That costs a timer, a timerCtx, its Done
// channel and the map in which net/http's own contexts of the request
// register, 6 allocations and ~600 B a poll, against none for a client whose
// requests carry context.Background (the bare client of BenchmarkLoad).
// Here the worker keeps one cancelable context and one timer of the
// scheduler's Clock; a watcher goroutine (one per worker, not per poll)
// cancels the context with context.DeadlineExceeded as its cause when the
// timer fires. Each poll sees it through a deadlineCtx that reports the
// poll's deadline, read on the same Clock, and, once the timer has fired,
// DeadlineExceeded as its Err, as a context.WithTimeout does. A context
// whose timer fired, or whose parent is done, is replaced before the next
// poll. A pollTimeouts belongs to one worker goroutine, which closes it.
//
// The timer is a channel timer with the semantics of time.Timer since Go
// 1.23: a Stop that returns false means the watcher received the tick, so
// stop waits for the watcher's cancellation of that poll's context before
// it makes the next one, and a tick is never taken for another poll's.
type pollTimeouts struct {
	clock  Clock
	parent context.Context
	ctx    context.Context                         // the current context: canceled by timer or parent
	cancel atomic.Pointer[context.CancelCauseFunc] // ctx's: the watcher reads it, renew writes it
	timer  Timer                                   // cancels ctx through the watcher; stopped between polls
	fired  chan struct{}                           // the watcher canceled ctx after a tick
	quit   chan struct{}                           // closed by close: the watcher returns
}

// newPollTimeouts returns the timeouts of a worker's polls, derived from
// parent, on clock, and starts its watcher; close ends it.
func newPollTimeouts(parent context.Context, clock Clock) *pollTimeouts {
	t := &pollTimeouts{clock: clock, parent: parent, fired: make(chan struct{}), quit: make(chan struct{})}
	t.timer = clock.NewTimer(time.Hour)
	t.timer.Stop()
	t.renew()
	go t.watch()
	return t
}

// watch cancels the current context, with DeadlineExceeded as its cause,
// each time the timer fires, and tells stop so, until close.
func (t *pollTimeouts) watch() {
	for {
		select {
		case <-t.timer.C():
			(*t.cancel.Load())(context.DeadlineExceeded)
			t.fired <- struct{}{}
		case <-t.quit:
			return
		}
	}
}

// renew makes a new context; the timer is stopped.
func (t *pollTimeouts) renew() {
	ctx, cancel := context.WithCancelCause(t.parent)
	t.ctx = ctx
	t.cancel.Store(&cancel)
}

// start returns the context of a poll with timeout d from now; stop ends
// it, once the poll has returned (the context must not be used after).
func (t *pollTimeouts) start(d time.Duration) context.Context {
	if t.ctx.Err() != nil {
		t.renew() // the parent is done: the new one is too, at once
	}
	deadline := t.clock.Now().Add(d)
	t.timer.Reset(d)
	return &deadlineCtx{Context: t.ctx, deadline: deadline}
}

// stop ends a poll: its timer is stopped, or, had it fired, the context
// the watcher canceled is replaced.
func (t *pollTimeouts) stop() {
	if !t.timer.Stop() {
		<-t.fired
		t.renew()
	}
}

// close ends the watcher, after the worker's last poll.
func (t *pollTimeouts) close() {
	t.timer.Stop()
	close(t.quit)
	(*t.cancel.Load())(context.Canceled)
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
