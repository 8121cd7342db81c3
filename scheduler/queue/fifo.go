package queue

import (
	"context"
	"sync"
)

// FIFO is a first-in first-out queue of jobs with its own lock, which a
// producer pushes to and one or more consumers pop from. It needs no bound
// of its own: a source is in at most one queue at a time (one job per
// source, Slot.Busy), so its length never exceeds the number of sources.
type FIFO[T any] struct {
	mu     sync.Mutex
	items  []T
	head   int
	signal chan struct{} // capacity 1: "there may be items"
}

// NewFIFO returns an empty FIFO.
func NewFIFO[T any]() *FIFO[T] { return &FIFO[T]{signal: make(chan struct{}, 1)} }

// newQuietFIFO returns an empty FIFO that only TryPop takes from (a
// group's, whose admitter runs while it is not empty): it has no signal
// to wait on (notify skips a nil one), 100 bytes less per group.
func newQuietFIFO[T any]() *FIFO[T] { return &FIFO[T]{} }

// Push appends t.
func (q *FIFO[T]) Push(t T) {
	q.mu.Lock()
	q.items = append(q.items, t)
	q.mu.Unlock()
	q.notify()
}

func (q *FIFO[T]) notify() {
	select {
	case q.signal <- struct{}{}:
	default:
	}
}

// TryPop removes and returns the first item; ok is false when it is empty.
func (q *FIFO[T]) TryPop() (t T, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.head == len(q.items) {
		return t, false
	}
	var zero T
	t = q.items[q.head]
	q.items[q.head] = zero
	q.head++
	if q.head == len(q.items) {
		q.items, q.head = q.items[:0], 0
	} else if q.head > 1024 && q.head*2 > len(q.items) {
		q.items = append(q.items[:0], q.items[q.head:]...)
		q.head = 0
	}
	if q.head < len(q.items) {
		q.notify()
	}
	return t, true
}

// Pop blocks until an item is available or ctx is done (ok false).
func (q *FIFO[T]) Pop(ctx context.Context) (t T, ok bool) {
	for {
		if t, ok := q.TryPop(); ok {
			return t, true
		}
		select {
		case <-q.signal:
		case <-ctx.Done():
			return t, false
		}
	}
}

// Each calls fn with each item and the number of items ahead of it, in
// order, under the FIFO's lock (fn must not call back into q).
func (q *FIFO[T]) Each(fn func(ahead int, t T)) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for i, t := range q.items[q.head:] {
		fn(i, t)
	}
}

// Len is the number of items queued.
func (q *FIFO[T]) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.items) - q.head
}
