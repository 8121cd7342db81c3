// Package turns bounds a costly piece of work done per request: at most n
// at once, a bounded number more waiting for a turn, each for a bounded
// time; the others are refused at once, so that the caller can answer 503
// with Retry-After instead of queueing without end (the status page's
// table, the listing of every source).
package turns

import (
	"context"
	"time"
)

// Turns hands out the turns.
type Turns struct {
	slots, queue chan struct{}
	wait         time.Duration
}

// New allows atOnce turns at once (at least 1), waiting more waiting
// for one, each at most wait.
func New(atOnce, waiting int, wait time.Duration) *Turns {
	return &Turns{slots: make(chan struct{}, max(atOnce, 1)), queue: make(chan struct{}, max(waiting, 0)), wait: wait}
}

// Take waits for a turn, at most the wait given to New; false when the
// queue is full, the wait ran out or ctx ended. A true is followed by
// Give.
func (t *Turns) Take(ctx context.Context) bool {
	select {
	case t.slots <- struct{}{}:
		return true
	default:
	}
	select {
	case t.queue <- struct{}{}:
	default:
		return false
	}
	defer func() { <-t.queue }()
	timer := time.NewTimer(t.wait)
	defer timer.Stop()
	select {
	case t.slots <- struct{}{}:
		return true
	case <-timer.C:
	case <-ctx.Done():
	}
	return false
}

// Give ends a turn.
func (t *Turns) Give() { <-t.slots }
