package scheduler

import (
	"context"
	"time"

	"github.com/pacer-dev/pacer/breaker"
	"github.com/pacer-dev/pacer/scheduler/policy"
	"github.com/pacer-dev/pacer/scheduler/queue"
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
		nowNs := policy.NanoKey(now)
		// Once shutdown has begun nothing more is dispatched: the workers
		// take no new job, and a dispatch would log a probe that never runs.
		for !s.stopped {
			e, at, ok := s.q.Due.Top()
			if !ok || at > nowNs {
				break
			}
			if s.flush.Pending(e.sl, e.savedSeq) {
				// Rule 3.8: its last state is not committed yet. Look again
				// shortly rather than hold a permit while waiting.
				s.q.Due.Schedule(&e.slot, policy.NanoKey(now.Add(commitRecheck)))
				continue
			}
			if !s.shards.MayStart(e.shard) {
				// Its claim is ending: the shard goes dormant now rather
				// than at the next look at the member's shards.
				s.loseShard(e.shard)
				s.q.Due.Remove(&e.slot)
				continue
			}
			s.dispatch(e, now, time.Unix(0, at))
		}
		if len(s.flapping) > 0 && !now.Before(s.flapSweepAt) {
			s.sweepFlaps(now, false)
			s.flapSweepAt = now.Add(time.Second)
		}
		// Wake at least once a second so that the watchdog sees progress.
		wait := time.Second
		if _, at, ok := s.q.Due.Top(); ok && !s.stopped {
			// Sources due within minWake are dispatched together (cron
			// schedules and backoff put due times anywhere, off the
			// grid of "@every" phases). Once shutdown has begun nothing
			// is dispatched, so the due ones do not shorten the wait.
			wait = min(wait, max(untilKey(at, nowNs), minWake))
		}
		s.unlock()
		s.loopBeat.Store(int64(s.sinceOrigin()))
		t.Reset(wait) // since Go 1.23 a Reset timer never delivers a stale tick
		select {
		case <-ctx.Done():
			return
		case <-s.q.Wake():
		case <-t.C():
		}
	}
}

// dispatch takes e, due at due (its key in the due heap; the zero time for
// a trigger, which is due now), out of the heap and hands its job to the
// queue: through its group, if it has one, to the global queue. mu held.
func (s *Scheduler) dispatch(e *entry, now, due time.Time) {
	if !s.q.Take(&e.slot) {
		return // in flight already: one job per source
	}
	trigger := due.IsZero()
	if trigger {
		due = now
	}
	if policy.SnapshotOf(&e.st).State == breaker.Open && policy.BreakerOf(&e.st, now) == breaker.HalfOpen {
		s.logChange(e, policy.StateOpen, now, "cooldown over; probing")
	}
	s.q.Add(queue.Job[*entry]{Source: e, Name: e.name, Gen: e.gen, Due: due, QueuedAt: now, Trigger: trigger,
		Route: queue.Route[*entry]{queue.KindLimit: e.group}})
}

// admission is the scheduler as the queue's owner (queue.Owner): what a
// group's admitter asks before a job takes a permit, and where a job that
// never started goes back.
type admission struct{ s *Scheduler }

var _ queue.Owner[*entry] = admission{}

// Now is the scheduler's clock.
func (a admission) Now() time.Time { return a.s.clock.Now() }

// Sleep waits d on the scheduler's clock.
func (a admission) Sleep(ctx context.Context, d time.Duration) bool { return sleep(ctx, a.s.clock, d) }

// Requeue returns a job that never started to its source's schedule.
func (a admission) Requeue(j queue.Job[*entry]) { a.s.requeue(j) }

// Admit sets a job of a shard this member no longer polls aside (setAside),
// else waits for the commit of its source's last state (rule 3.8), both
// before the job takes a token or a place of its group.
func (a admission) Admit(ctx context.Context, j queue.Job[*entry]) bool {
	s := a.s
	s.mu.Lock()
	seq := j.Source.savedSeq
	if s.setAside(j) {
		s.unlock()
		return false
	}
	s.unlock()
	s.flush.WaitAt(ctx, j.Source.sl, seq)
	return true
}

// setAside returns a job of a shard this member no longer polls to its
// source's (dormant) schedule before it takes a token or a slot of its
// group, and reports whether it did. Without it a group's queue drained at
// its rate, each job taking a token only to be refused at claim, and the
// shard was given back, and the group polled again, only once the whole
// queue had gone through: 12 sources of a 3/s group paused the group's
// polls for 3 s at every hand-over (half its rate over 6 s). A trigger
// keeps its way (claim requeues it). mu held.
func (s *Scheduler) setAside(j queue.Job[*entry]) bool {
	e := j.Source
	if !s.shards.Member() {
		return false
	}
	if j.Trigger || !(s.dormant(e) || !s.shards.MayStart(e.shard)) {
		return false
	}
	s.q.Idle(&e.slot)
	if e.removed {
		s.dropEntry(e)
		return true
	}
	s.reschedule(e, s.clock.Now())
	return true
}

// requeue returns a job that never started to its source's schedule (its
// permits are released by queue.Done, after).
func (s *Scheduler) requeue(j queue.Job[*entry]) {
	s.mu.Lock()
	defer s.unlock()
	e := j.Source
	s.q.Idle(&e.slot)
	if s.stopped {
		return
	}
	if e.removed {
		s.dropEntry(e)
		return
	}
	if j.Trigger && j.Gen == e.gen && !e.st.Paused && e.st.ErrorReason == "" && !s.dormant(e) {
		// A trigger survives a change of group: it goes through the new one.
		// Not a loss of the shard: the worker would refuse it again at once.
		s.dispatch(e, s.now(), time.Time{})
		return
	}
	s.reschedule(e, s.now())
}

// untilKey is the wait from the heap key now to the key at, saturated
// instead of overflowing (at may be policy.LatestKey, "as good as never").
func untilKey(at, now int64) time.Duration {
	if at <= now {
		return 0
	}
	if d := at - now; d > 0 {
		return time.Duration(d)
	}
	return time.Duration(policy.LatestKey)
}
