// Package queue is the scheduler's queue room: the due heap of idle
// sources, the one-in-flight-per-source rule, the groups a job waits for
// (the `limit` groups of contract rule 3.2, the host groups of section 13)
// and the global queue its workers drain, and the permits, handed out as
// values a job carries and given back in one place (Queue.Done).
//
// The shape is client-go's workqueue: a source is dispatched (Take) only
// when idle and is idle again only once its poll is over (Idle), so that
// it is in at most one queue at a time; a worker takes jobs with Get and
// gives back what they hold with Done.
//
// Locks. The heap, the in-flight marks, the claimed list, the groups map
// and the workers are guarded by the owner's lock (the scheduler's mu):
// the due times are a function of the source state that lock guards, and
// a second lock per reschedule would buy nothing. Each FIFO has its own
// lock, taken after the owner's (the owner pushes jobs with its lock
// held) and never the other way round; a group's admitter and the workers
// hold no lock while they wait for a job, a permit or a token.
package queue

import (
	"context"
	"time"
)

// Job is one poll on its way to a worker, passed by value: the source's
// handle, name and generation at dispatch, its timing, its route and the
// permits it holds. Nothing in it is shared with another goroutine.
type Job[V any] struct {
	Source   V         // the owner's record: read only under the owner's lock
	Name     string    // the source's name
	Gen      uint64    // the source's generation at dispatch (a reload bumps it)
	Due      time.Time // the time it was due (for the schedule lag)
	QueuedAt time.Time // when it was dispatched (for the skipped ticks)
	ReadyAt  time.Time // when it entered the global queue (semaphore wait)
	Trigger  bool      // an operator's trigger, not a tick
	Route    Route[V]  // the groups it passes before the global queue
	Claim    uint64    // its claim's token once a worker claimed it (Queue.Claim)
	// HostWaited says that it waited for its host group's concurrency cap
	// (a signal of the learned limit, contract 13.5), and HostInflight is
	// how many of the host's places were held with its own.
	HostWaited   bool
	HostInflight int

	permits Permits
	stage   Kind // the next kind of group of its route to pass
}

// Owner is what the queue asks of the scheduler that owns it.
type Owner[V any] interface {
	// Admit is asked, without locks, before a job takes a permit of a
	// group: it waits for what must precede its start, or returns false
	// when it has taken the job back (the job holds no permit then).
	Admit(ctx context.Context, j Job[V]) bool
	// Requeue returns a job that never started to its source's schedule.
	// Done releases its permits after it.
	Requeue(j Job[V])
	// Now is the owner's clock; Sleep waits d on it, false if ctx ended.
	Now() time.Time
	Sleep(ctx context.Context, d time.Duration) bool
}

// Spawn starts fn in a goroutine the owner waits for at shutdown.
type Spawn func(ctx context.Context, fn func(ctx context.Context))

// Queue is the room: the due heap, the in-flight marks (in the slots), the
// groups and their admitters, the global queue, the claimed polls and the
// workers. Make one with New.
type Queue[V comparable] struct {
	Due     Heap[V] // the idle sources by due time; owner's lock
	owner   Owner[V]
	ready   *FIFO[Job[V]]
	wake    chan struct{}
	groups  map[string]*Group[V] // the `limit` groups by name; owner's lock
	hosts   map[string]*Group[V] // the host groups by host; owner's lock
	claimed []claim[V]           // the claimed polls (claimed.go); owner's lock
	claims  uint64               // the last claim token; owner's lock
	workers []context.CancelFunc // one per worker goroutine; owner's lock
}

// New returns an empty queue of owner o.
func New[V comparable](o Owner[V]) *Queue[V] {
	return &Queue[V]{owner: o, ready: NewFIFO[Job[V]](), wake: make(chan struct{}, 1),
		groups: map[string]*Group[V]{}, hosts: map[string]*Group[V]{}}
}

// Wake is signalled (capacity 1) when a source became due first.
func (q *Queue[V]) Wake() <-chan struct{} { return q.wake }

// Poke signals Wake.
func (q *Queue[V]) Poke() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// Schedule puts an idle source in the due heap at the key at, and pokes
// the loop if it is now due first. A busy source is left out.
func (q *Queue[V]) Schedule(s *Slot[V], at int64) {
	if q.Due.Schedule(s, at) {
		q.Poke()
	}
}

// Take marks s in flight and takes it out of the heap: from now on it is
// in no heap until Idle. It reports false, and does nothing, if s was
// already in flight (the one-in-flight rule). Owner's lock.
func (q *Queue[V]) Take(s *Slot[V]) bool {
	if s.busy {
		return false
	}
	q.Due.Remove(s)
	s.busy = true
	return true
}

// Idle marks s no longer in flight; the owner schedules it again.
// Owner's lock.
func (q *Queue[V]) Idle(s *Slot[V]) { s.busy = false }

// Add hands a job of a source just taken (Take) to the first group of its
// route, or to the global queue.
func (q *Queue[V]) Add(j Job[V]) {
	j.stage = 0
	q.forward(j, j.QueuedAt)
}

// forward hands j to the next group of its route, or to the global queue,
// which it enters at now (its ReadyAt: the start of its wait for a worker).
func (q *Queue[V]) forward(j Job[V], now time.Time) {
	for ; j.stage < kinds; j.stage++ {
		if g := j.Route[j.stage]; g != nil {
			if g.tryAcquire(&j, q.owner) {
				continue // passed at once: no wait, no admitter
			}
			j.stage++
			q.push(g, j)
			return
		}
	}
	j.ReadyAt = now
	q.ready.Push(j)
}

// Get blocks until a job has passed its groups or ctx is done (ok false).
// The worker that gets a job calls Done once it is over with it.
func (q *Queue[V]) Get(ctx context.Context) (Job[V], bool) {
	return q.ready.Pop(ctx)
}

// Done gives back every permit j holds: the one place a permit is
// released. A worker defers it as soon as it has the job; an admitter
// defers it for a job it returns unstarted.
func (q *Queue[V]) Done(j Job[V]) {
	j.permits.release()
}

// Where calls fn with each job of the global queue (named global) and of
// the given groups whose source is in want, with the number of jobs ahead
// of it in its queue. Owner's lock (then each FIFO's).
func (q *Queue[V]) Where(want map[V]bool, groups map[*Group[V]]bool, global string, fn func(v V, queue string, ahead int)) {
	each := func(name string, f *FIFO[Job[V]]) {
		f.Each(func(ahead int, j Job[V]) {
			if want[j.Source] {
				fn(j.Source, name, ahead)
			}
		})
	}
	each(global, q.ready)
	for g := range groups {
		each(g.name, g.q)
	}
}

// Resize runs exactly n workers, each started by start (which returns its
// cancel). Owner's lock.
func (q *Queue[V]) Resize(n int, start func() context.CancelFunc) {
	for len(q.workers) > n {
		last := len(q.workers) - 1
		q.workers[last]()
		q.workers = q.workers[:last]
	}
	for len(q.workers) < n {
		q.workers = append(q.workers, start())
	}
}
