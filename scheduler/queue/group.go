package queue

import (
	"context"

	"golang.org/x/time/rate"

	"github.com/pacer-dev/pacer/config"
)

// Kind is the kind of a group a job may have to pass before the global
// queue: a `limit` group (contract rule 3.2), and, to come, the host group
// of contract section 13. A job passes its groups in the order of the
// kinds and holds one permit of each it passes.
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
// (a semaphore of permits) and a start rate (a token bucket). A job waiting
// for its group holds no global permit: the group's admitter hands it on
// only once it holds the group's permit and token.
type Group[V any] struct {
	name   string
	kind   Kind
	limit  config.Limit
	sem    chan struct{} // nil: no concurrency cap
	lim    *rate.Limiter // nil: no rate
	q      *FIFO[Job[V]]
	cancel context.CancelFunc
}

func newGroup[V any](name string, kind Kind, l config.Limit) *Group[V] {
	g := &Group[V]{name: name, kind: kind, limit: l, q: NewFIFO[Job[V]]()}
	if l.Concurrency > 0 {
		g.sem = make(chan struct{}, l.Concurrency)
	}
	if l.Rate > 0 {
		g.lim = rate.NewLimiter(rate.Limit(l.Rate), max(l.Burst, 1))
	}
	return g
}

// Name is the group's name (the `limits` key, or the host).
func (g *Group[V]) Name() string { return g.name }

// Held is the number of its concurrency permits held now (0 without a cap).
func (g *Group[V]) Held() int { return len(g.sem) }

// Permit is one place of a group's concurrency cap, held by a job from its
// admission until Queue.Done. The zero Permit holds nothing.
type Permit struct {
	sem chan struct{}
}

// Release gives the place back; the zero Permit does nothing.
func (p Permit) Release() {
	if p.sem != nil {
		<-p.sem
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

// acquire waits for a place of g's concurrency cap and then for its
// token, in this order (a job that took its token then waited for a
// place would start later than the rate allows), and records the place in
// j. ok is false when ctx ended first; whatever j holds then is released
// by Queue.Done, as for any job.
func (g *Group[V]) acquire(ctx context.Context, j *Job[V], o Owner[V]) (ok bool) {
	if g.sem != nil {
		select {
		case g.sem <- struct{}{}:
			j.permits[g.kind] = Permit{sem: g.sem}
		case <-ctx.Done():
			return false
		}
	}
	if g.lim != nil {
		now := o.Now()
		if d := g.lim.ReserveN(now, 1).DelayFrom(now); d > 0 {
			return o.Sleep(ctx, d)
		}
	}
	return true
}
