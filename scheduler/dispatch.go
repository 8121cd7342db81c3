package scheduler

import (
	"context"
	"time"

	"golang.org/x/time/rate"

	"github.com/pacer-dev/pacer/breaker"
	"github.com/pacer-dev/pacer/config"
)

// loop dispatches due sources until ctx is done.
func (s *Scheduler) loop(ctx context.Context) {
	t := s.clock.NewTimer(time.Second)
	defer t.Stop()
	for {
		if s.loopHook != nil {
			s.loopHook()
		}
		s.mu.Lock()
		now := s.now()
		nowNs := nanoKey(now)
		// Once shutdown has begun nothing more is dispatched: the workers
		// take no new job, and a dispatch would log a probe that never runs.
		for !s.stopped {
			e, at, ok := s.due.top()
			if !ok || at > nowNs {
				break
			}
			if s.flush.Pending(e.sl, e.savedSeq) {
				// Rule 3.8: its last state is not committed yet. Look again
				// shortly rather than hold a permit while waiting.
				s.due.schedule(e, now.Add(commitRecheck))
				continue
			}
			if !s.shards.MayStart(e.shard) {
				// Its claim is ending: the shard goes dormant now rather
				// than at the next look at the member's shards.
				s.loseShard(e.shard)
				s.due.remove(e)
				continue
			}
			s.due.remove(e)
			s.dispatch(e, now, time.Unix(0, at))
		}
		if len(s.flapping) > 0 && !now.Before(s.flapSweepAt) {
			s.sweepFlaps(now, false)
			s.flapSweepAt = now.Add(time.Second)
		}
		// Wake at least once a second so that the watchdog sees progress.
		wait := time.Second
		if _, at, ok := s.due.top(); ok && !s.stopped {
			// Sources due within minWake are dispatched together (cron
			// schedules and backoff put due times anywhere, off the
			// grid of "@every" phases). Once shutdown has begun nothing
			// is dispatched, so the due ones do not shorten the wait.
			wait = min(wait, max(untilKey(at, nowNs), minWake))
		}
		s.mu.Unlock()
		s.loopBeat.Store(int64(s.sinceOrigin()))
		t.Reset(wait) // since Go 1.23 a Reset timer never delivers a stale tick
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
		case <-t.C():
		}
	}
}

// dispatch hands e, due at due (its key in the due heap; the zero time for
// a trigger, which is due now), to its group's queue or the global queue.
// mu held.
func (s *Scheduler) dispatch(e *entry, now, due time.Time) {
	e.busy = true
	trigger := due.IsZero()
	if trigger {
		due = now
	}
	j := &job{e: e, gen: e.gen, due: due, queuedAt: now, trigger: trigger, group: e.group}
	if breakerSnapshot(&e.st).State == breaker.Open && breakerOf(&e.st, now) == breaker.HalfOpen {
		s.logChange(e, StateOpen, now, "cooldown over; probing")
	}
	if j.group != nil {
		j.group.q.push(j)
		return
	}
	j.readyAt = now
	s.ready.push(j)
}

// startGroup starts the goroutine that admits a group's jobs. mu held.
func (s *Scheduler) startGroup(name string, l config.Limit) *group {
	g := &group{name: name, limit: l, q: newFIFO()}
	if l.Concurrency > 0 {
		g.sem = make(chan struct{}, l.Concurrency)
	}
	if l.Rate > 0 {
		g.lim = rate.NewLimiter(rate.Limit(l.Rate), max(l.Burst, 1))
	}
	ctx, cancel := context.WithCancel(s.dispatching.ctx)
	g.cancel = cancel
	s.dispatching.spawn(ctx, func(ctx context.Context) { s.admit(ctx, g) })
	return g
}

// admit moves a group's jobs to the global queue as its concurrency cap and
// token bucket allow. When the group is retired (reload) its waiting jobs
// go back to their sources' schedules.
func (s *Scheduler) admit(ctx context.Context, g *group) {
	defer s.requeueAll(g.q)
	for {
		j := g.q.pop(ctx)
		if j == nil {
			return
		}
		// Rule 3.8 before the token: a poll that took its token then
		// waited for the commit would start later than its rate allows.
		s.mu.Lock()
		seq := j.e.savedSeq
		if s.setAside(j) {
			s.mu.Unlock()
			continue
		}
		s.mu.Unlock()
		s.flush.WaitAt(ctx, j.e.sl, seq)
		if g.sem != nil {
			select {
			case g.sem <- struct{}{}:
			case <-ctx.Done():
				s.requeue(j)
				return
			}
		}
		if g.lim != nil {
			now := s.clock.Now()
			if d := g.lim.ReserveN(now, 1).DelayFrom(now); d > 0 {
				if !sleep(ctx, s.clock, d) {
					s.releaseGroup(j)
					s.requeue(j)
					return
				}
			}
		}
		j.readyAt = s.clock.Now()
		s.ready.push(j)
	}
}

// setAside returns a job of a shard this member no longer polls to its
// source's (dormant) schedule before it takes a token or a slot of its
// group, and reports whether it did. Without it a group's queue drained at
// its rate, each job taking a token only to be refused at claim, and the
// shard was given back, and the group polled again, only once the whole
// queue had gone through: 12 sources of a 3/s group paused the group's
// polls for 3 s at every hand-over (half its rate over 6 s). A trigger
// keeps its way (claim requeues it). mu held.
func (s *Scheduler) setAside(j *job) bool {
	e := j.e
	if !s.shards.Member() {
		return false
	}
	if j.trigger || !(s.dormant(e) || !s.shards.MayStart(e.shard)) {
		return false
	}
	e.busy = false
	if e.removed {
		s.dropEntry(e)
		return true
	}
	s.reschedule(e, s.clock.Now())
	return true
}

func (s *Scheduler) releaseGroup(j *job) {
	if j.group != nil && j.group.sem != nil {
		<-j.group.sem
	}
}

// requeue returns a job that never started to its source's schedule.
func (s *Scheduler) requeue(j *job) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := j.e
	e.busy = false
	if s.stopped {
		return
	}
	if e.removed {
		s.dropEntry(e)
		return
	}
	if j.trigger && j.gen == e.gen && !e.st.Paused && e.st.ErrorReason == "" && !s.dormant(e) {
		// A trigger survives a change of group: it goes through the new one.
		// Not a loss of the shard: the worker would refuse it again at once.
		s.due.remove(e)
		s.dispatch(e, s.now(), time.Time{})
		return
	}
	s.reschedule(e, s.now())
}

func (s *Scheduler) requeueAll(q *fifo) {
	for j := q.tryPop(); j != nil; j = q.tryPop() {
		s.requeue(j)
	}
}

// untilKey is the wait from the heap key now to the key at, saturated
// instead of overflowing (at may be latestKey, "as good as never").
func untilKey(at, now int64) time.Duration {
	if at <= now {
		return 0
	}
	if d := at - now; d > 0 {
		return time.Duration(d)
	}
	return time.Duration(latestKey)
}
