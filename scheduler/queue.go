package scheduler

import (
	"container/heap"
	"context"
	"sync"
	"time"
)

// dueHeap orders idle sources by the time they are next due. Push, Pop, Fix
// and Remove are O(log n); the loop only ever looks at the top.
type dueHeap []*entry

func (h dueHeap) Len() int           { return len(h) }
func (h dueHeap) Less(i, j int) bool { return h[i].dueAt.Before(h[j].dueAt) }
func (h dueHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx = i
	h[j].idx = j
}
func (h *dueHeap) Push(x any) {
	e := x.(*entry)
	e.idx = len(*h)
	*h = append(*h, e)
}
func (h *dueHeap) Pop() any {
	old := *h
	n := len(old)
	e := old[n-1]
	old[n-1] = nil
	e.idx = -1
	*h = old[:n-1]
	return e
}

// schedule puts e in the heap at t, or moves it there.
func (h *dueHeap) schedule(e *entry, t time.Time) {
	e.dueAt = t
	if e.idx >= 0 {
		heap.Fix(h, e.idx)
		return
	}
	heap.Push(h, e)
}

// remove takes e out of the heap if it is there.
func (h *dueHeap) remove(e *entry) {
	if e.idx >= 0 {
		heap.Remove(h, e.idx)
	}
}

// job is one poll on its way to a worker.
type job struct {
	e        *entry
	gen      uint64    // entry generation at dispatch; a reload bumps it
	due      time.Time // the time it was due (for schedule lag)
	queuedAt time.Time // when it was dispatched (for skipped ticks)
	readyAt  time.Time // when it entered the global queue (semaphore wait)
	trigger  bool
	group    *group // the group it was dispatched through, or nil
}

// fifo is a FIFO of jobs. It needs no bound of its own: a source is in at
// most one queue at a time (a job per source), so its length never exceeds
// the number of sources.
type fifo struct {
	mu     sync.Mutex
	items  []*job
	head   int
	signal chan struct{} // capacity 1: "there may be items"
}

func newFIFO() *fifo { return &fifo{signal: make(chan struct{}, 1)} }

func (q *fifo) push(j *job) {
	q.mu.Lock()
	q.items = append(q.items, j)
	q.mu.Unlock()
	select {
	case q.signal <- struct{}{}:
	default:
	}
}

func (q *fifo) tryPop() *job {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.head == len(q.items) {
		return nil
	}
	j := q.items[q.head]
	q.items[q.head] = nil
	q.head++
	if q.head == len(q.items) {
		q.items, q.head = q.items[:0], 0
	} else if q.head > 1024 && q.head*2 > len(q.items) {
		q.items = append(q.items[:0], q.items[q.head:]...)
		q.head = 0
	}
	more := q.head < len(q.items)
	if more {
		select {
		case q.signal <- struct{}{}:
		default:
		}
	}
	return j
}

// pop blocks until a job is available or ctx is done (then it returns nil).
func (q *fifo) pop(ctx context.Context) *job {
	for {
		if j := q.tryPop(); j != nil {
			return j
		}
		select {
		case <-q.signal:
		case <-ctx.Done():
			return nil
		}
	}
}
