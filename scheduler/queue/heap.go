package queue

// Slot is one source's place in the queue room: its position in the due
// heap, its in-flight mark (the one-in-flight-per-source rule) and its
// link in the list of claimed polls. The owner embeds one in its record of
// each source and calls Init once; every field is guarded by the owner's
// lock (see the package comment).
type Slot[V any] struct {
	v     V
	idx   int   // position in the due heap, -1 when not in it
	claim int32 // position in the claimed polls, -1 when not claimed
	busy  bool  // dispatched: queued, waiting for permits, or polling
}

// Init makes s the slot of v, out of the heap, unclaimed and idle.
func (s *Slot[V]) Init(v V) {
	s.v, s.idx, s.claim = v, -1, -1
}

// Busy reports whether the source is in flight: dispatched and not yet
// back (Queue.Idle). A busy source is never in the due heap.
func (s *Slot[V]) Busy() bool { return s.busy }

// Scheduled reports whether the source is in the due heap.
func (s *Slot[V]) Scheduled() bool { return s.idx >= 0 }

// Heap orders idle sources by the time they are next due: a binary
// min-heap whose slice holds each source's due time (a UnixNano key) next
// to its slot, so that the comparisons of a sift read the slice only and
// chase no pointer (at 100,000 sources each record touched is a cache
// miss). Schedule and Remove are O(log n); the owner only ever looks at the
// top. Guarded by the owner's lock.
type Heap[V any] []heapItem[V]

type heapItem[V any] struct {
	at int64 // the key the source is due at (the slot keeps no copy)
	s  *Slot[V]
}

// Len is the number of sources in the heap.
func (h Heap[V]) Len() int { return len(h) }

// Top returns the source due first and its key; ok is false when the heap
// is empty.
func (h Heap[V]) Top() (v V, at int64, ok bool) {
	if len(h) == 0 {
		return v, 0, false
	}
	return h[0].s.v, h[0].at, true
}

// Schedule puts s in the heap at the key at, or moves it there, and
// reports whether it is now due first. A busy source is not scheduled (it
// is taken out if it is there): it comes back through Idle and Schedule.
func (h *Heap[V]) Schedule(s *Slot[V], at int64) (first bool) {
	if s.busy {
		h.Remove(s)
		return false
	}
	if i := s.idx; i >= 0 {
		(*h)[i].at = at
		h.fix(i)
		return s.idx == 0
	}
	s.idx = len(*h)
	*h = append(*h, heapItem[V]{at: at, s: s})
	h.up(s.idx)
	return s.idx == 0
}

// Remove takes s out of the heap if it is there.
func (h *Heap[V]) Remove(s *Slot[V]) {
	i := s.idx
	if i < 0 {
		return
	}
	old := *h
	last := len(old) - 1
	if i != last {
		old[i] = old[last]
		old[i].s.idx = i
	}
	old[last] = heapItem[V]{}
	*h = old[:last]
	s.idx = -1
	if i != last {
		h.fix(i)
	}
}

// fix restores the heap after the key at i changed.
func (h Heap[V]) fix(i int) {
	if !h.down(i) {
		h.up(i)
	}
}

func (h Heap[V]) up(i int) {
	it := h[i]
	for i > 0 {
		p := (i - 1) / 2
		if h[p].at <= it.at {
			break
		}
		h[i] = h[p]
		h[i].s.idx = i
		i = p
	}
	h[i] = it
	it.s.idx = i
}

// down sifts h[i] down and reports whether it moved.
func (h Heap[V]) down(i int) bool {
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
		h[i].s.idx = i
		i = c
	}
	h[i] = it
	it.s.idx = i
	return i > i0
}
