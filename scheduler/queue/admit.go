package queue

import (
	"context"

	"github.com/pacer-dev/pacer/config"
)

// Group returns the `limit` group of that name, or nil. Owner's lock.
func (q *Queue[V]) Group(name string) *Group[V] { return q.groups[name] }

// SetLimits keeps the `limit` groups whose limits are unchanged, starts the
// new ones (their admitters through spawn, under ctx) and retires the
// others: their waiting jobs return to their sources' schedules. Owner's
// lock.
func (q *Queue[V]) SetLimits(ctx context.Context, limits map[string]config.Limit, spawn Spawn) {
	old := q.groups
	q.groups = make(map[string]*Group[V], len(limits))
	for name, l := range limits {
		if g, ok := old[name]; ok && g.limit == l {
			q.groups[name] = g
			delete(old, name)
			continue
		}
		q.groups[name] = q.startGroup(ctx, name, KindLimit, l, spawn)
	}
	for _, g := range old {
		g.cancel()
	}
}

// startGroup starts the admitter of a new group.
func (q *Queue[V]) startGroup(ctx context.Context, name string, kind Kind, l config.Limit, spawn Spawn) *Group[V] {
	g := newGroup[V](name, kind, l)
	ctx, g.cancel = context.WithCancel(ctx)
	spawn(ctx, func(ctx context.Context) { q.admit(ctx, g) })
	return g
}

// admit moves g's jobs on (to their next group, or the global queue) as
// its concurrency cap and token bucket allow. When g is retired (reload)
// or stopped, its waiting jobs go back to their sources' schedules.
func (q *Queue[V]) admit(ctx context.Context, g *Group[V]) {
	defer q.requeueAll(g.q)
	for {
		j, ok := g.q.Pop(ctx)
		if !ok {
			return
		}
		// The owner's conditions (rule 3.8, the ownership of the shard)
		// before the permit and the token: a poll that took its token and
		// then waited for a commit would start later than its rate allows.
		if !q.owner.Admit(ctx, j) {
			continue
		}
		if !g.acquire(ctx, &j, q.owner) {
			q.giveBack(j)
			return
		}
		q.forward(j, q.owner.Now())
	}
}

// giveBack returns a job that never started to its source's schedule and
// then releases what it holds.
func (q *Queue[V]) giveBack(j Job[V]) {
	defer q.Done(j)
	q.owner.Requeue(j)
}

func (q *Queue[V]) requeueAll(f *FIFO[Job[V]]) {
	for j, ok := f.TryPop(); ok; j, ok = f.TryPop() {
		q.giveBack(j)
	}
}
