package scheduler

import (
	"context"
	"sync"
	"time"

	"github.com/pacer-dev/pacer/scheduler/policy"
)

// dueHeap orders idle sources by the time they are next due: a binary
// min-heap whose slice holds each source's due time (policy.NanoKey) next to its
// entry, so that the comparisons of a sift read the slice only and chase no
// pointer (at 100,000 sources each entry touched is a cache miss). entry.idx
// is the source's position, -1 when it is not in the heap. schedule and
// remove are O(log n); the loop only ever looks at the top.
type dueHeap []dueItem

type dueItem struct {
	at int64 // policy.NanoKey of the time the entry is due (the entry keeps no copy)
	e  *entry
}

// top returns the entry due first and its due time; ok is false when the
// heap is empty.
func (h dueHeap) top() (e *entry, at int64, ok bool) {
	if len(h) == 0 {
		return nil, 0, false
	}
	return h[0].e, h[0].at, true
}

// schedule puts e in the heap at t, or moves it there.
func (h *dueHeap) schedule(e *entry, t time.Time) {
	at := policy.NanoKey(t) // saturates: a due time past 2262 never wraps into the past
	if i := e.idx; i >= 0 {
		(*h)[i].at = at
		h.fix(i)
		return
	}
	e.idx = len(*h)
	*h = append(*h, dueItem{at: at, e: e})
	h.up(e.idx)
}

// remove takes e out of the heap if it is there.
func (h *dueHeap) remove(e *entry) {
	i := e.idx
	if i < 0 {
		return
	}
	old := *h
	last := len(old) - 1
	if i != last {
		old[i] = old[last]
		old[i].e.idx = i
	}
	old[last] = dueItem{}
	*h = old[:last]
	e.idx = -1
	if i != last {
		h.fix(i)
	}
}

// fix restores the heap after the key at i changed.
func (h dueHeap) fix(i int) {
	if !h.down(i) {
		h.up(i)
	}
}

func (h dueHeap) up(i int) {
	it := h[i]
	for i > 0 {
		p := (i - 1) / 2
		if h[p].at <= it.at {
			break
		}
		h[i] = h[p]
		h[i].e.idx = i
		i = p
	}
	h[i] = it
	it.e.idx = i
}

// down sifts h[i] down and reports whether it moved.
func (h dueHeap) down(i int) bool {
	it := h[i]
	i0, n := i, len(h)
	for {
		c := 2*i + 1
		if c >= n || c < 0 {
			break
		}
		if r := c + 1; r < n && h[r].at < h[c].at {
			c = r
		}
		if it.at <= h[c].at {
			break
		}
		h[i] = h[c]
		h[i].e.idx = i
		i = c
	}
	h[i] = it
	it.e.idx = i
	return i > i0
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

	// From its claim to its finish, under Scheduler.mu: when it was
	// claimed, its place in Scheduler.claimed, and whether a shutdown
	// recorded it as interrupted without waiting for its end.
	claimedAt  time.Time
	prev, next *job
	abandoned  bool
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
