package scheduler

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/pacer-dev/pacer/breaker"
	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/sources"
	"github.com/pacer-dev/pacer/store"
)

// resizeWorkers runs exactly n workers. mu held.
func (s *Scheduler) resizeWorkers(n int) {
	for len(s.workers) > n {
		last := len(s.workers) - 1
		s.workers[last]()
		s.workers = s.workers[:last]
	}
	for len(s.workers) < n {
		ctx, cancel := context.WithCancel(s.working.ctx)
		s.workers = append(s.workers, cancel)
		s.working.spawn(ctx, s.work)
	}
	s.m.limit.Set(float64(n))
	s.transport.resize(n)
}

// work is one worker: a global permit. It takes jobs until ctx is done.
func (s *Scheduler) work(ctx context.Context) {
	// The worker's polls derive from its own child of the polling
	// context, so that a poll's timeout context registers with this
	// worker's context instead of with the polling stage's, which every
	// worker shares (a contended lock and map insertion per poll);
	// cancelling the polling stage still reaches every poll.
	pollCtx, cancel := context.WithCancel(s.polling.ctx)
	defer cancel()
	for ctx.Err() == nil {
		j := s.ready.pop(ctx)
		if j == nil {
			return
		}
		if ctx.Err() != nil {
			s.releaseGroup(j)
			s.requeue(j)
			return
		}
		s.run(pollCtx, j)
	}
}

// run performs one poll and applies its outcome.
func (s *Scheduler) run(pollCtx context.Context, j *job) {
	e := j.e
	start := s.clock.Now()
	s.m.semaphoreWait.Observe(start.Sub(j.readyAt).Seconds())

	s.mu.Lock()
	if e.gen != j.gen || e.removed || e.st.Paused || e.st.ErrorReason != "" || e.group != j.group {
		// It changed while it waited for permits: it goes back to its
		// schedule (through its new group, if that changed).
		s.mu.Unlock()
		s.releaseGroup(j)
		s.requeue(j)
		return
	}
	src, poller, brk, seq := e.src, e.poller, e.brk, e.savedSeq
	s.mu.Unlock()

	// Rule 3.8: the previous poll's state is committed before this one.
	s.flush.waitAt(pollCtx, e.sl, seq)
	if j.trigger && brk != nil {
		brk.ForceProbe()
	}
	start = s.clock.Now()
	if !j.trigger {
		s.m.lag.Observe(max(start.Sub(j.due), 0).Seconds())
	}
	s.m.inflight.Inc()
	s.inflightN.Add(1)
	ctx, cancel := context.WithTimeout(pollCtx, src.Timeout)
	var res sources.Result
	call := func() error {
		res = poller.Poll(ctx)
		switch {
		case res.Err == nil:
			return nil
		case res.Throttled, errors.Is(res.Err, context.Canceled):
			return breaker.Exclude(res.Err)
		}
		return res.Err
	}
	var err error
	if brk != nil {
		err = brk.Do(call)
	} else if err = call(); err != nil && res.Err == err {
		// The first failure of a healthy source: from now on it has a
		// breaker, which counts this failure (and may open at once).
		if brk, err = newBreaker(src, store.SourceState{}); err == nil {
			err = brk.Do(func() error { return res.Err })
		} else {
			s.log.Error("breaker", "source", e.name, "err", err)
		}
	}
	cancel()
	end := s.clock.Now()
	s.m.inflight.Dec()
	s.inflightN.Add(-1)
	s.releaseGroup(j)
	if !errors.Is(err, breaker.ErrOpen) {
		s.m.duration.Observe(end.Sub(start).Seconds())
	}
	s.finish(j, src, brk, res, err, start, end)
}

// finish applies a poll's outcome to its source's state, persists it and
// schedules the next poll.
func (s *Scheduler) finish(j *job, src *config.Source, brk *breaker.Breaker, res sources.Result, err error, start, end time.Time) {
	e := j.e
	// The store keeps times to the microsecond: so do the state and record
	// in memory, or a record read before its commit would show a later
	// start than the same record read after it.
	dur := end.Sub(start)
	start, end = start.Truncate(time.Microsecond), end.Truncate(time.Microsecond)
	o := outcome{start: start, end: end, brk: breaker.Snapshot{State: breaker.Closed}, jitter: rand.Float64(), retryAfter: res.RetryAfter}
	if brk != nil {
		o.brk = brk.Snapshot()
		o.brk.Until = o.brk.Until.Truncate(time.Microsecond)
	}
	switch {
	case errors.Is(err, breaker.ErrOpen):
		s.m.poll(countRejected).Inc()
		s.mu.Lock()
		defer s.mu.Unlock()
		e.busy = false
		s.countSkipped(j, end)
		if j.gen == e.gen && !e.removed {
			next := e.timing.next(end)
			if o.brk.State == breaker.Open {
				next = later(next, o.brk.Until.Add(time.Millisecond))
				e.st.BreakerState, e.st.BreakerUntil = breaker.Open, ptr(o.brk.Until)
			}
			next = ceilMicro(next)
			e.st.NextRunAt = &next
			s.reschedule(e, end)
		}
		return
	case res.Err != nil && errors.Is(res.Err, context.Canceled) && s.polling.ctx.Err() != nil:
		o.kind = store.OutcomeInterrupted
	case res.Throttled:
		o.kind = store.OutcomeThrottled
	case res.Err != nil:
		o.kind = store.OutcomeFailure
	default:
		o.kind = store.OutcomeSuccess
	}
	if res.Err != nil {
		o.err = s.redact.Redact(res.Err.Error())
	}
	s.m.poll(o.kind).Inc()
	rec := store.PollRecord{
		Source:     e.name,
		StartedAt:  start.UTC(),
		DurationMs: dur.Milliseconds(),
		Outcome:    o.kind,
		Error:      o.err,
		Bytes:      res.Bytes,
	}
	if res.StatusCode > 0 {
		rec.StatusCode = &res.StatusCode
	}
	// src is the configuration the poll ran with: e.src may change under
	// mu (reload) and is not read here.
	if src.Type == "exec" && res.ExitCode >= 0 {
		rec.ExitCode = &res.ExitCode
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	e.busy = false
	s.countSkipped(j, end)
	if j.gen != e.gen {
		// The configuration changed during the poll: the new settings
		// start from a clean state; only the record is kept.
		s.save(e, &rec)
		s.reschedule(e, end)
		return
	}
	prev := StateOf(&e.st, start)
	e.st = applyOutcome(e.st, e.src, e.timing, o)
	e.brk = brk
	if o.brk.State == breaker.Closed && e.st.ConsecutiveFailures == 0 {
		e.brk = nil // healthy again: a fresh breaker is equivalent
	}
	reason := o.err
	if e.resetPending {
		e.resetPending = false
		e.st = resetState(e.st, e.timing, end)
		e.brk = nil
		reason = "reset"
	}
	e.st.UpdatedAt = end.UTC()
	s.logChange(e, prev, end, reason)
	s.save(e, &rec)
	if e.removed {
		s.dropEntry(e)
		return
	}
	s.reschedule(e, end)
}

// countSkipped counts the ticks of j's source that passed between its
// dispatch and end, while it was busy. mu held.
func (s *Scheduler) countSkipped(j *job, end time.Time) {
	if skipped := j.e.timing.ticksBetween(j.queuedAt, end, 1000); skipped > 0 {
		s.m.poll(countSkipped).Add(float64(skipped))
	}
}
