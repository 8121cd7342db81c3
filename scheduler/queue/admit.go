package queue

import (
	"context"
	"time"

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
		g.retire()
	}
}

// Host returns the host group of that name, or nil. Owner's lock.
func (q *Queue[V]) Host(name string) *Group[V] { return q.hosts[name] }

// SetHosts keeps one host group per key of limits: an existing one gets
// its limit set in place (a reload, or a learned limit, changes it without
// retiring the jobs that wait for it), a new one is started (its admitter
// through spawn, under ctx, while jobs wait), and the others are retired.
// Owner's lock.
func (q *Queue[V]) SetHosts(ctx context.Context, limits map[string]config.Limit, spawn Spawn) {
	old := q.hosts
	q.hosts = make(map[string]*Group[V], len(limits))
	now := q.owner.Now()
	for name, l := range limits {
		if g, ok := old[name]; ok {
			g.setLimit(l, now)
			q.hosts[name] = g
			delete(old, name)
			continue
		}
		q.hosts[name] = q.startGroup(ctx, name, KindHost, l, spawn)
	}
	for _, g := range old {
		g.retire()
	}
}

// SetHostLimit sets the limit of the host group of that name in place, if
// there is one (a learned limit, contract 13.5). Owner's lock.
func (q *Queue[V]) SetHostLimit(name string, l config.Limit) {
	if g := q.hosts[name]; g != nil {
		g.setLimit(l, q.owner.Now())
	}
}

// setLimit sets g's limit to l if it differs. Owner's lock.
func (g *Group[V]) setLimit(l config.Limit, now time.Time) {
	if g.limit != l {
		g.limit = l
		g.SetLimit(l.Concurrency, l.Rate, l.Burst, now)
	}
}

// startGroup returns a new group whose admitter runs, through spawn and
// under ctx, while jobs wait for it (push).
func (q *Queue[V]) startGroup(ctx context.Context, name string, kind Kind, l config.Limit, spawn Spawn) *Group[V] {
	g := newGroup[V](name, kind, l)
	g.parent, g.spawn = ctx, spawn
	return g
}

// retire ends g: its admitter, running or started later, gives its
// waiting jobs back.
func (g *Group[V]) retire() {
	g.mu.Lock()
	g.retired = true
	cancel := g.cancel
	g.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// admitterCtx is the context of g's admitters, made at the first: ended
// once g is retired or its parent ends. g.mu held.
func (g *Group[V]) admitterCtx() context.Context {
	if g.ctx == nil {
		g.ctx, g.cancel = context.WithCancel(g.parent)
		if g.retired {
			g.cancel()
		}
	}
	return g.ctx
}

// push queues j for g and starts g's admitter if none runs. A group that
// has been retired still takes the job: the admitter it starts finds its
// context ended and gives the job back to its source's schedule.
func (q *Queue[V]) push(g *Group[V], j Job[V]) {
	g.q.Push(j)
	g.mu.Lock()
	start := !g.run
	g.run = true
	var ctx context.Context
	if start {
		ctx = g.admitterCtx()
	}
	g.mu.Unlock()
	if start {
		g.spawn(ctx, func(ctx context.Context) { q.admit(ctx, g) })
	}
}

// next is the admitter's next job, or ok false when it should end: its
// context ended, or no job waits (it then marks itself stopped under the
// group's lock, so that the push that comes next starts another).
func (g *Group[V]) next(ctx context.Context) (j Job[V], ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if ctx.Err() == nil {
		if j, ok = g.q.TryPop(); ok {
			return j, true
		}
	}
	g.run = false
	return j, false
}

// admit moves g's jobs on (to their next group, or the global queue) as
// its concurrency cap and token bucket allow, and ends when none waits.
// When g is retired (reload) or stopped, its waiting jobs go back to their
// sources' schedules.
func (q *Queue[V]) admit(ctx context.Context, g *Group[V]) {
	defer func() {
		if ctx.Err() != nil {
			q.requeueAll(g.q)
		}
	}()
	for {
		j, ok := g.next(ctx)
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
