package queue

import (
	"context"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/pacer-dev/pacer/config"
)

// Kind is the kind of a group a job may have to pass before the global
// queue: a `limit` group (contract rule 3.2) and a host group (contract
// section 13). A job passes its groups in the order of the kinds and
// holds one permit of each it passes.
type Kind int

// The kinds of group, in the order a job passes them.
const (
	KindLimit Kind = iota // a named `limits` group of the configuration
	KindHost              // a host group (contract section 13)
	kinds
)

// Route is the groups a job passes, one per kind (nil: none of that kind).
type Route[V any] [kinds]*Group[V]

// Group is a named limit shared by its member sources: a concurrency cap
// (a semaphore of permits whose size may change: a host's learned limit)
// and a start rate (a token bucket). A job waiting for its group holds no
// global permit: the group's admitter hands it on only once it holds the
// group's permit and token.
//
// The admitter runs only while jobs wait (started by the push that finds
// none running, ended by the pop that finds the queue empty), so that an
// idle group costs no goroutine: 2,000 host groups are 2,000 small
// structs, not 2,000 stacks.
type Group[V any] struct {
	name  string
	kind  Kind
	limit config.Limit // as configured (SetLimits keeps a group whose limit is unchanged)
	sem   *semaphore   // nil: no concurrency cap
	lim   *rate.Limiter
	q     *FIFO[Job[V]]

	// The admitter's context is made from parent when it first runs
	// (admitterCtx): most host groups never have a job wait, and a
	// context per group costs ~150 bytes at 2,000 hosts each.
	parent  context.Context
	spawn   Spawn
	mu      sync.Mutex // guards run, ctx, cancel, retired; taken after the owner's lock
	run     bool       // an admitter is running (or about to)
	ctx     context.Context
	cancel  context.CancelFunc
	retired bool // retire was called: an admitter started now finds its context ended
}

func newGroup[V any](name string, kind Kind, l config.Limit) *Group[V] {
	g := &Group[V]{name: name, kind: kind, limit: l, q: newQuietFIFO[Job[V]]()}
	g.sem = newSemaphore(l.Concurrency)
	if l.Rate > 0 {
		g.lim = rate.NewLimiter(rate.Limit(l.Rate), max(l.Burst, 1))
	}
	return g
}

// Name is the group's name (the `limits` key, or the host).
func (g *Group[V]) Name() string { return g.name }

// Limit is the group's limit as last set. Owner's lock.
func (g *Group[V]) Limit() config.Limit { return g.limit }

// Held is the number of its concurrency permits held now.
func (g *Group[V]) Held() int { return g.sem.held() }

// Cap is its concurrency cap now, 0 for none.
func (g *Group[V]) Cap() int { return g.sem.capacity() }

// Waiting is the number of jobs waiting in its queue.
func (g *Group[V]) Waiting() int { return g.q.Len() }

// SetLimit changes the group's cap and rate in place (a host's learned
// limits, contract 13.5): jobs holding permits keep them, a lower cap
// admits no more until enough are given back. A rate of 0 takes the
// bucket away; a cap of 0 lifts the cap. burst >= 1.
func (g *Group[V]) SetLimit(concurrency int, r float64, burst int, now time.Time) {
	g.sem.resize(concurrency)
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case r <= 0:
		g.lim = nil
	case g.lim == nil:
		g.lim = rate.NewLimiter(rate.Limit(r), max(burst, 1))
	default:
		g.lim.SetLimitAt(now, rate.Limit(r))
		g.lim.SetBurstAt(now, max(burst, 1))
	}
}

// limiter is the group's token bucket now, or nil.
func (g *Group[V]) limiter() *rate.Limiter {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.lim
}

// Permit is one place of a group's concurrency cap, held by a job from its
// admission until Queue.Done. The zero Permit holds nothing.
type Permit struct {
	sem *semaphore
}

// Release gives the place back; the zero Permit does nothing.
func (p Permit) Release() {
	if p.sem != nil {
		p.sem.release()
	}
}

// Permits are what a job holds of its route's groups, one per kind.
type Permits [kinds]Permit

// release gives every held permit back. Only Queue.Done calls it.
func (ps *Permits) release() {
	for k := range ps {
		ps[k].Release()
		ps[k] = Permit{}
	}
}

// tryAcquire passes j through g at once when nothing waits for g (no
// admitter runs, so no job is ahead of it), a place is free and a token
// is there now: the common case of a host group, which then costs no
// goroutine and no hand-over. The owner's conditions (Owner.Admit) were
// checked just before by whoever hands j on (the dispatch, or the
// previous group's admitter). It reports false, holding nothing more,
// when j must wait in g's queue.
func (g *Group[V]) tryAcquire(j *Job[V], o Owner[V]) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.run {
		return false
	}
	held, ok := g.sem.tryAcquire()
	if !ok {
		return false
	}
	if g.lim != nil && !g.lim.AllowN(o.Now(), 1) {
		g.sem.release()
		return false
	}
	j.permits[g.kind] = Permit{sem: g.sem}
	if g.kind == KindHost {
		j.HostWaited, j.HostInflight = false, held
	}
	return true
}

// acquire waits for a place of g's concurrency cap and then for its
// token, in this order (a job that took its token then waited for a
// place would start later than the rate allows), and records the place in
// j, and for a host group whether it had to wait for the place and how
// many places were held with its own. ok is false when ctx ended first;
// whatever j holds then is released by Queue.Done, as for any job.
func (g *Group[V]) acquire(ctx context.Context, j *Job[V], o Owner[V]) (ok bool) {
	held, waited, ok := g.sem.acquire(ctx)
	if !ok {
		return false
	}
	j.permits[g.kind] = Permit{sem: g.sem}
	if g.kind == KindHost {
		j.HostWaited, j.HostInflight = waited, held
	}
	if lim := g.limiter(); lim != nil {
		now := o.Now()
		if d := lim.ReserveN(now, 1).DelayFrom(now); d > 0 {
			return o.Sleep(ctx, d)
		}
	}
	return true
}
