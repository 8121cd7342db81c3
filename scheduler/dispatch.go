package scheduler

import (
	"context"
	"github.com/pacer-dev/pacer/internal/clock"
	"time"

	"github.com/pacer-dev/pacer/breaker"
	"github.com/pacer-dev/pacer/scheduler/policy"
	"github.com/pacer-dev/pacer/scheduler/queue"
)

// loop dispatches due sources until ctx is done.
func (w *workers) loop(ctx context.Context) {
	t := w.clock.NewTimer(time.Second)
	defer t.Stop()
	for {
		if w.loopHook != nil {
			w.loopHook()
		}
		w.mu.Lock()
		now := w.now()
		nowNs := policy.NanoKey(now)
		w.dispatchDue(now, nowNs)
		if len(w.flapping) > 0 && !now.Before(w.flapSweepAt) {
			w.sweepFlaps(now, false)
			w.flapSweepAt = now.Add(time.Second)
		}
		w.sweepMaintenance(now)
		// Wake at least once a second so that the watchdog sees progress.
		wait := time.Second
		if _, at, ok := w.q.Due.Top(); ok && !w.stopped {
			// Sources due within minWake are dispatched together (cron
			// schedules and backoff put due times anywhere, off the
			// grid of "@every" phases). Once shutdown has begun nothing
			// is dispatched, so the due ones do not shorten the wait.
			wait = min(wait, max(untilKey(at, nowNs), minWake))
		}
		w.unlock()
		w.life.loopBeat.Store(int64(w.clk.sinceOrigin()))
		t.Reset(wait) // since Go 1.23 a Reset timer never delivers a stale tick
		select {
		case <-ctx.Done():
			return
		case <-w.q.Wake():
		case <-t.C():
		}
	}
}

// dispatchDue dispatches every source due at now (nowNs its heap key),
// but those whose last state is not committed (rule 3.8: looked at again
// shortly), whose shard is being given up, that a maintenance window holds
// or that their host or a dependency blocks. Once shutdown has begun
// nothing more is dispatched: the workers take no new job, and a dispatch
// would log a probe that never runs. mu held.
func (w *workers) dispatchDue(now time.Time, nowNs int64) {
	for !w.stopped {
		e, at, ok := w.q.Due.Top()
		if !ok || at > nowNs {
			return
		}
		if w.flush.Pending(e.sl, e.savedSeq) {
			// Look again shortly rather than hold a permit while waiting.
			w.q.Due.Schedule(&e.slot, policy.NanoKey(now.Add(commitRecheck)))
			continue
		}
		if !w.shards.MayStart(e.shard) {
			// Its claim is ending: the shard goes dormant now rather
			// than at the next look at the member's shards.
			w.loseShard(e.shard)
			w.q.Due.Remove(&e.slot)
			continue
		}
		if w.holdForMaintenance(e, now) {
			continue
		}
		if b := w.up().gate(e, now, false); b.blocking() {
			w.up().setBlock(e, b, now)
			continue
		}
		w.dispatch(e, now, time.Unix(0, at))
	}
}

// dispatch takes e, due at due (its key in the due heap; the zero time for
// a trigger, which is due now), out of the heap and hands its job to the
// queue: through its group, if it has one, to the global queue. mu held.
func (w *workers) dispatch(e *entry, now, due time.Time) {
	if !w.q.Take(&e.slot) {
		return // in flight already: one job per source
	}
	trigger := due.IsZero()
	if trigger {
		due = now
	}
	if policy.SnapshotOf(&e.st).State == breaker.Open && policy.BreakerOf(&e.st, now) == breaker.HalfOpen {
		w.logChange(e, policy.StateOpen, now, "cooldown over; probing")
	}
	w.q.Add(queue.Job[*entry]{Source: e, Name: e.name, Gen: e.gen, Due: due, QueuedAt: now, Trigger: trigger,
		Route: queue.Route[*entry]{queue.KindLimit: e.group, queue.KindHost: w.up().hostRoute(e)}})
}

// admission is the scheduler as the queue's owner (queue.Owner): what a
// group's admitter asks before a job takes a permit, and where a job that
// never started goes back.
type admission struct{ w *workers }

var _ queue.Owner[*entry] = admission{}

// Now is the scheduler's clock.
func (a admission) Now() time.Time { return a.w.clock.Now() }

// Sleep waits d on the scheduler's clock.
func (a admission) Sleep(ctx context.Context, d time.Duration) bool {
	return clock.Sleep(ctx, a.w.clock, d)
}

// Requeue returns a job that never started to its source's schedule.
func (a admission) Requeue(j queue.Job[*entry]) { a.w.requeue(j) }

// Admit sets a job of a shard this member no longer polls aside (setAside),
// else waits for the commit of its source's last state (rule 3.8), both
// before the job takes a token or a place of its group.
func (a admission) Admit(ctx context.Context, j queue.Job[*entry]) bool {
	w := a.w
	w.mu.Lock()
	seq := j.Source.savedSeq
	if w.setAside(j) {
		w.unlock()
		return false
	}
	w.unlock()
	w.flush.WaitAt(ctx, j.Source.sl, seq)
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
func (w *workers) setAside(j queue.Job[*entry]) bool {
	e := j.Source
	if !w.shards.Member() {
		return false
	}
	if j.Trigger || !(w.dormant(e) || !w.shards.MayStart(e.shard)) {
		return false
	}
	w.q.Idle(&e.slot)
	if e.removed {
		w.dropEntry(e)
		return true
	}
	w.reschedule(e, w.clock.Now())
	return true
}

// requeue returns a job that never started to its source's schedule (its
// permits are released by queue.Done, after).
func (w *workers) requeue(j queue.Job[*entry]) {
	w.mu.Lock()
	defer w.unlock()
	e := j.Source
	w.q.Idle(&e.slot)
	if w.stopped {
		return
	}
	if e.removed {
		w.dropEntry(e)
		return
	}
	if j.Trigger && j.Gen == e.gen && !e.st.Paused && e.st.ErrorReason == "" && !w.dormant(e) {
		// A trigger survives a change of group: it goes through the new one.
		// Not a loss of the shard: the worker would refuse it again at once.
		w.dispatch(e, w.now(), time.Time{})
		return
	}
	w.reschedule(e, w.now())
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
