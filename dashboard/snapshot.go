package dashboard

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/pacer-dev/pacer/scheduler/policy"
	srcview "github.com/pacer-dev/pacer/scheduler/view"
)

// The table of a large daemon is built from a snapshot of its rows shared
// by the requests of the next moment, instead of one copy of every row per
// request (contract 11.2: each page within 200 ms at 100,000 sources while
// they poll). Each copy cost a pass over the scheduler's entries, and 16
// clients sorting 100,000 rows each raised the daemon's memory by 300 MB.

// Defaults of the table's cache (tableCache) and of the page builds' bound
// (gate); tests change them through export_test.go.
const (
	// shareFrom: a snapshot of at least this many rows is shared. Smaller
	// daemons build one per request, as cheap as the page itself, so their
	// table is always exact.
	shareFrom = 5000
	// snapshotAge is how old a shared snapshot may be. The rows shown are
	// read afresh for each page; the snapshot gives the counts, which rows
	// match and their order.
	snapshotAge = time.Second
	// staleAge: a snapshot older than snapshotAge is still served, while
	// its successor is built, up to this age.
	staleAge = 10 * time.Second
	// maxViews bounds the filtered and sorted views kept per snapshot
	// (an index of 4 bytes a row each); a request for another is built
	// for itself and not kept.
	maxViews = 8
	// maxBuilds pages of the table are built at once; maxWaiting more
	// wait for their turn, at most waitTurn each; beyond that the answer
	// is 503 with Retry-After.
	maxBuilds  = 4
	maxWaiting = 32
	waitTurn   = 5 * time.Second
)

// snapshot is the table's rows at one moment, read-only once built.
type snapshot struct {
	rows     []srcview.Row
	counts   map[string]int // per state
	storeErr string         // "" = the store was ready
	built    time.Time      // for its age (time.Now: monotonic)
	shared   bool           // served to other requests: views are kept

	mu    sync.Mutex
	views map[viewKey]*view
}

// viewKey is what a view depends on: the filter, the search and the order.
type viewKey struct {
	state, q, sort string
	desc           bool
}

// view is the rows of a snapshot that pass a filter and a search, in an
// order: indexes into snapshot.rows. ready is closed once idx is set.
type view struct {
	ready chan struct{}
	idx   []int32
}

// tableCache hands out snapshots: a fresh one per request on a small
// daemon. On a large one, the current snapshot while it is younger than
// maxAge; past that, still the current one while it is younger than
// staleAge, a new one being built meanwhile in the background (one at a
// time), so that no page waits for a pass over every source; with none
// or an older one, a new one that the requests arriving meanwhile wait
// for and share.
type tableCache struct {
	c        Controller
	from     int
	maxAge   time.Duration
	staleAge time.Duration

	mu       sync.Mutex
	cur      *snapshot     // the shared snapshot, nil when none
	building chan struct{} // closed when the shared build under way ends
	gen      uint64        // bumped by invalidate
	lastN    int           // rows of the last snapshot built
}

func newTableCache(c Controller) *tableCache {
	return &tableCache{c: c, from: shareFrom, maxAge: snapshotAge, staleAge: staleAge}
}

// get returns a snapshot, or nil when ctx ends while it waits for another
// request's build.
func (t *tableCache) get(ctx context.Context) *snapshot {
	t.mu.Lock()
	if t.lastN < t.from {
		t.mu.Unlock()
		s := t.build(ctx, false)
		t.mu.Lock()
		t.lastN = len(s.rows)
		t.mu.Unlock()
		return s
	}
	for {
		s := t.cur
		if s != nil && time.Since(s.built) < t.maxAge {
			t.mu.Unlock()
			return s
		}
		if s != nil && time.Since(s.built) < t.staleAge {
			if t.building == nil {
				gen, ch := t.begin()
				go t.finish(ctx, gen, ch)
			}
			t.mu.Unlock()
			return s
		}
		if t.building == nil {
			break
		}
		ch := t.building
		t.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil
		}
		t.mu.Lock()
	}
	gen, ch := t.begin()
	t.mu.Unlock()
	return t.finish(ctx, gen, ch)
}

// begin marks a shared build under way. mu held.
func (t *tableCache) begin() (uint64, chan struct{}) {
	t.building = make(chan struct{})
	return t.gen, t.building
}

// finish builds the shared snapshot begun as gen and publishes it, unless
// invalidate came in between.
func (t *tableCache) finish(ctx context.Context, gen uint64, ch chan struct{}) *snapshot {
	s := t.build(ctx, true)
	t.mu.Lock()
	if t.building == ch {
		t.building = nil
	}
	if t.gen == gen {
		t.cur = s
	}
	t.lastN = len(s.rows)
	t.mu.Unlock()
	close(ch)
	return s
}

// invalidate drops the shared snapshot, so that the next page shows a
// change made through the dashboard at once. A build under way is not
// published (its generation is past) but still counts as the one build:
// the requests that follow wait for it to end and then start a fresh one,
// so that actions in a row never run more than one full pass at a time.
func (t *tableCache) invalidate() {
	t.mu.Lock()
	t.gen++
	t.cur = nil
	t.mu.Unlock()
}

// build reads the rows, their counts and the store's readiness. A shared
// build outlives its request (it may run in the background): it is not
// cut off when that client leaves.
func (t *tableCache) build(ctx context.Context, shared bool) *snapshot {
	if shared {
		ctx = context.WithoutCancel(ctx)
	}
	s := &snapshot{rows: t.c.Rows(), counts: make(map[string]int, policy.NumStates), shared: shared}
	for i := range s.rows {
		s.counts[s.rows[i].State]++
	}
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	if err := t.c.Ready(rctx); err != nil {
		s.storeErr = err.Error()
	}
	cancel()
	s.built = time.Now()
	if shared {
		s.views = make(map[viewKey]*view)
	}
	return s
}

// view returns the indexes of the rows that q selects, in its order; nil
// means every row in configuration order. A shared snapshot keeps up to
// maxViews of them, each built once by the first request that asks for it.
func (s *snapshot) view(q listQuery) []int32 {
	k := viewKey{state: q.State, q: strings.ToLower(q.Q), sort: q.Sort, desc: q.Desc}
	if k.state == "" && k.q == "" && k.sort == "" {
		return nil
	}
	if !s.shared {
		return s.pick(k)
	}
	s.mu.Lock()
	if v := s.views[k]; v != nil {
		s.mu.Unlock()
		<-v.ready
		return v.idx
	}
	if len(s.views) >= maxViews {
		s.mu.Unlock()
		return s.pick(k)
	}
	v := &view{ready: make(chan struct{})}
	s.views[k] = v
	s.mu.Unlock()
	v.idx = s.pick(k)
	close(v.ready)
	return v.idx
}

// pick filters, searches and sorts the rows' indexes for k.
func (s *snapshot) pick(k viewKey) []int32 {
	var idx []int32
	if k.state == "" && k.q == "" {
		idx = make([]int32, len(s.rows))
		for i := range idx {
			idx[i] = int32(i)
		}
	} else {
		for i := range s.rows {
			r := &s.rows[i]
			if (k.state == "" || r.State == k.state) && (k.q == "" || strings.Contains(strings.ToLower(r.Name), k.q)) {
				idx = append(idx, int32(i))
			}
		}
	}
	if f := sorter(k.sort); f != nil {
		// Names are unique: ties go by name, ascending, whatever the order.
		slices.SortFunc(idx, func(a, b int32) int {
			ra, rb := &s.rows[a], &s.rows[b]
			c := f(ra, rb)
			if k.desc {
				c = -c
			}
			if c == 0 {
				c = strings.Compare(ra.Name, rb.Name)
			}
			return c
		})
	}
	return idx
}
