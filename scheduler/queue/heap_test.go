package queue

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// item is a source as the heap's tests see it.
type item struct{ slot Slot[*item] }

func newItem() *item {
	it := &item{}
	it.slot.Init(it)
	return it
}

// TestDueHeap drives Heap with random schedules, reschedules and removals
// and checks after each step that every entry knows its position, that the
// slice's keys are the entries' due times, and that the heap property
// holds; then that draining it yields the due times in order.
func TestDueHeap(t *testing.T) {
	for _, n := range []int{1, 2, 3, 17, 500} {
		rng := rand.New(rand.NewPCG(7, uint64(n)))
		base := time.Unix(1_800_000_000, 0)
		es := make([]*item, n)
		for i := range es {
			es[i] = newItem()
		}
		var h Heap[*item]
		due := map[*item]int64{} // the time each entry was last scheduled at
		for step := range 20 * n {
			e := es[rng.IntN(n)]
			switch rng.IntN(3) {
			case 0, 1:
				// Few distinct times, so that equal keys are exercised.
				at := base.Add(time.Duration(rng.IntN(50)) * time.Second)
				h.Schedule(&e.slot, at.UnixNano())
				due[e] = at.UnixNano()
			case 2:
				h.Remove(&e.slot)
				if e.slot.idx != -1 || e.slot.Scheduled() {
					t.Fatalf("n=%d step %d: removed entry has idx %d", n, step, e.slot.idx)
				}
			}
			checkHeap(t, h, due)
		}
		in := 0
		for _, e := range es {
			if e.slot.idx >= 0 {
				in++
			}
		}
		if in != len(h) {
			t.Fatalf("n=%d: %d entries think they are in a heap of %d", n, in, len(h))
		}
		var order []int64
		for {
			e, at, ok := h.Top()
			if !ok {
				break
			}
			if at != due[e] {
				t.Fatalf("n=%d: top key %d, entry due %d", n, at, due[e])
			}
			h.Remove(&e.slot)
			order = append(order, at)
		}
		if len(order) != in || !slices.IsSorted(order) {
			t.Fatalf("n=%d: drained %d of %d, sorted %v", n, len(order), in, slices.IsSorted(order))
		}
	}
}

func checkHeap(t *testing.T, h Heap[*item], due map[*item]int64) {
	t.Helper()
	for i, it := range h {
		if it.s.idx != i {
			t.Fatalf("entry at %d has idx %d", i, it.s.idx)
		}
		if it.at != due[it.s.v] {
			t.Fatalf("key at %d is %d, entry due %d", i, it.at, due[it.s.v])
		}
		if i > 0 && h[(i-1)/2].at > it.at {
			t.Fatalf("heap property broken at %d", i)
		}
	}
}
