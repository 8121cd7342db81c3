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
	timeouts := newPollTimeouts(pollCtx)
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
		s.run(pollCtx, timeouts, j)
	}
}

// run performs one poll, under a timeout of timeouts, and applies its
// outcome.
func (s *Scheduler) run(pollCtx context.Context, timeouts *pollTimeouts, j *job) {
	s.m.semaphoreWait.Observe(s.clock.Now().Sub(j.readyAt).Seconds())
	p, poller, seq, ok := s.claim(j)
	if !ok {
		// It changed while it waited for permits: it goes back to its
		// schedule (through its new group, if that changed).
		s.releaseGroup(j)
		s.requeue(j)
		return
	}
	// Rule 3.8: the previous poll's state is committed before this one.
	s.flush.WaitAt(pollCtx, j.e.sl, seq)
	if j.trigger && p.brk != nil {
		p.brk.ForceProbe()
	}
	p = s.poll(timeouts, j, poller, p)
	s.releaseGroup(j)
	s.finish(j, p)
}

// claim returns what a worker needs of j's source (its settings, breaker
// and redactor in p, its poller, the sequence number of its last state), or
// ok false if the source changed (generation, group), went away, or was
// paused or put in error while j waited.
func (s *Scheduler) claim(j *job) (p pollResult, poller sources.Poller, seq uint64, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := j.e
	if e.gen != j.gen || e.removed || e.st.Paused || silent(&e.st, e.src) || e.group != j.group {
		return pollResult{}, nil, 0, false
	}
	if !s.shards.MayStart(e.shard) {
		// The last check before a poll starts (rule 8.3): its shard is
		// being given back, or its claim cannot be proven.
		s.loseShard(e.shard)
		return pollResult{}, nil, 0, false
	}
	s.linkClaimed(j)
	return pollResult{src: e.src, brk: e.brk, redact: s.redact, prior: priorOf(&e.st), last: e.st.Digest}, e.poller, e.savedSeq, true
}

// pollResult is what one poll produced, before it is applied.
type pollResult struct {
	src        *config.Source     // the configuration the poll ran with
	redact     *config.Redactor   // the redactor of that configuration
	brk        *breaker.Breaker   // the source's breaker after the call (nil: none)
	prior      sources.Validators // of the last delivered result, sent by a conditional GET
	last       string             // the digest of the last delivered result
	res        sources.Result
	rejected   bool // refused by the breaker: the poller was not called
	start, end time.Time
	skew       int64 // of the wall clock when end was read, or noSkew (steps.go)

	// undelivered: the result was fetched but its delivery failed (the
	// poll failed); the next GET must be unconditional (contract 9.4).
	undelivered bool
}

// poll calls the source p.src through its breaker p.brk under the source's
// timeout, with the in-flight, lag and duration metrics around it, and
// returns p with what the poll produced.
func (s *Scheduler) poll(timeouts *pollTimeouts, j *job, poller sources.Poller, p pollResult) pollResult {
	start := s.clock.Now()
	if !j.trigger {
		s.m.lag.Observe(max(start.Sub(j.due), 0).Seconds())
	}
	s.m.inflight.Inc()
	s.inflightN.Add(1)
	ctx := timeouts.start(p.src.Timeout)
	var dl *delivery
	if p.src.Deliver != nil {
		dl = &delivery{s: s, ctx: ctx, src: p.src, redact: p.redact, last: p.last, start: start}
	}
	res, brk, err := call(ctx, p.src, poller, p.prior, p.brk, dl, s.clock.Now)
	timeouts.stop()
	p.undelivered = dl != nil && dl.failed
	end, skew, ok := s.readClocks()
	p.skew = skew
	if !ok {
		p.skew = noSkew
	}
	s.m.inflight.Dec()
	s.inflightN.Add(-1)
	p.brk, p.res, p.rejected, p.start, p.end = brk, res, errors.Is(err, breaker.ErrOpen), start, end
	if !p.rejected {
		s.m.duration.Observe(end.Sub(start).Seconds())
	}
	return p
}

// call runs one poll through brk. Throttling, cancellation and local
// resource errors (sources.ErrLocal) are neither success nor failure for
// the breaker (rule 3.5; a shortage of the daemon's descriptors is not the
// source's fault). A healthy source has no breaker (brk nil): its first
// failure gives it one, which counts that failure (and may open at once).
// It returns the breaker after the call. A poller that can send a
// conditional request (sources.ConditionalPoller) is given prior. With
// dl set (a source with deliver), a successful result is handed to it
// inside the breaker's call: its error is the poll's (contract 9.4). The
// result's Body is closed before call returns, in every case.
func call(ctx context.Context, src *config.Source, poller sources.Poller, prior sources.Validators, brk *breaker.Breaker,
	dl *delivery, now func() time.Time) (sources.Result, *breaker.Breaker, error) {
	var res sources.Result
	cp, conditional := poller.(sources.ConditionalPoller)
	fn := func() error {
		if conditional {
			res = cp.PollSince(ctx, prior)
		} else {
			res = poller.Poll(ctx)
		}
		if res.Body != nil {
			if res.Err == nil && dl != nil {
				res.Err = dl.deliver(res)
				// A delivery short of pacer's own resources is local
				// (rule 3.14), not the source's.
				res.Local = errors.Is(res.Err, sources.ErrLocal)
			}
			res.Body.Close()
			res.Body = nil
		} else if dl != nil && errors.Is(res.Err, sources.ErrSpool) {
			dl.spoolFailed() // fetched, but not kept for delivery
		}
		switch {
		case res.Err == nil:
			return nil
		case res.Throttled, res.Local, errors.Is(res.Err, context.Canceled):
			return breaker.Exclude(res.Err)
		}
		return res.Err
	}
	if brk != nil {
		err := brk.Do(fn)
		return res, brk, err
	}
	err := fn()
	if err != nil && err == res.Err {
		brk = newBreaker(src, store.SourceState{}).WithClock(now)
		err = brk.Do(func() error { return res.Err })
	}
	return res, brk, err
}

// finish applies a poll's outcome to its source's state, persists it and
// schedules the next poll, in these steps: classify the result (with the
// times rounded as the store keeps them), count it, build its record, then
// under mu the generation check, the state (outcome, breaker, a reset made
// meanwhile), the commit and the next poll.
func (s *Scheduler) finish(j *job, p pollResult) {
	o := outcomeOf(p, s.polling.ctx.Err() != nil, p.redact.Redact, rand.Float64())
	rec := recordOf(j.e.name, &p, &o)

	s.mu.Lock()
	defer s.mu.Unlock()
	if j.abandoned {
		return // a shutdown recorded it as interrupted (abandonPolls)
	}
	s.unlinkClaimed(j)
	stepped := s.stepPoll(&o, p.skew)
	s.m.poll(o.kind).Inc()
	e := j.e
	e.busy = false
	s.countSkipped(j, o.end)
	if o.kind == store.OutcomeSuccess {
		// Compared with the state before this poll, as applyOutcome does.
		changed := changedResult(&e.st, o.result)
		s.m.result(changed).Inc()
		rec.Changed = changed // a success always has a record
	}
	var evs []store.Event
	if j.gen == e.gen {
		evs = s.applyPoll(e, p.brk, o)
		if stepped && e.brk != nil {
			e.brk = s.restoreBreaker(e.src, e.st) // its cooldown read before the step
		}
		if p.undelivered {
			forgetValidators(&e.st)
		}
	}
	// On a generation change (the configuration changed during the poll)
	// the new settings start from a clean state: only the record is kept.
	s.save(e, rec, evs...)
	if e.removed {
		s.dropEntry(e)
		return
	}
	s.reschedule(e, o.end)
}

// outcomeOf classifies a poll's result. cut reports that shutdown is
// cutting off the polls in flight; jitter is the poll's position in the
// backoff's jitter band. Times, the breaker's included, are truncated to the
// microsecond, as the store keeps them: a record read before its commit
// then shows the same start as after it.
func outcomeOf(p pollResult, cut bool, redact func(string) string, jitter float64) outcome {
	o := outcome{
		start: p.start.Truncate(time.Microsecond), end: p.end.Truncate(time.Microsecond),
		brk: breaker.Snapshot{State: breaker.Closed}, jitter: jitter, retryAfter: p.res.RetryAfter,
	}
	if p.brk != nil {
		o.brk = p.brk.Snapshot()
		o.brk.Until = o.brk.Until.Truncate(time.Microsecond)
	}
	res := p.res
	switch {
	case p.rejected:
		o.kind = kindRejected
	case res.Err != nil && errors.Is(res.Err, context.Canceled) && cut:
		o.kind = store.OutcomeInterrupted
	case res.Throttled:
		o.kind = store.OutcomeThrottled
	case res.Err != nil && (res.Local || errors.Is(res.Err, sources.ErrLocal)):
		o.kind = kindLocal
	case res.Err != nil:
		o.kind = store.OutcomeFailure
	default:
		o.kind = store.OutcomeSuccess
	}
	if res.Err != nil {
		o.err = redact(res.Err.Error())
	}
	if o.kind == store.OutcomeSuccess {
		o.result = resultOf(res)
	}
	return o
}

// recordOf is the history record of a poll of the named source; a poll
// rejected by its breaker, or cut short by a local error, has none (the
// source was not called, or not to any effect that is its own). The record
// and its status and exit codes are one allocation (the codes are pointers
// in the record: taking the address of p's own would move all of p to the
// heap, some 300 bytes per poll).
func recordOf(name string, p *pollResult, o *outcome) *store.PollRecord {
	if o.kind == kindRejected || o.kind == kindLocal {
		return nil
	}
	r := &struct {
		rec          store.PollRecord
		status, exit int
	}{status: p.res.StatusCode, exit: p.res.ExitCode}
	r.rec = store.PollRecord{
		Source:     name,
		StartedAt:  o.start.UTC(),
		DurationMs: p.end.Sub(p.start).Milliseconds(),
		Outcome:    o.kind,
		Error:      o.err,
		Bytes:      p.res.Bytes,
		Digest:     o.result.digest,
	}
	if p.res.StatusCode > 0 {
		r.rec.StatusCode = &r.status
	}
	// p.src is the configuration the poll ran with: the entry's may have
	// changed under mu (reload) since.
	if p.res.ExitCode >= 0 && p.src.Type == "exec" {
		r.rec.ExitCode = &r.exit
	}
	return &r.rec
}

// applyPoll applies o to e's state, keeps the breaker brk the poll ended
// with (none once healthy again: a fresh one is equivalent), then applies
// an operator's reset made during the poll, and logs a change of state. It
// returns the notification events of the change, to be saved with the
// state. mu held.
func (s *Scheduler) applyPoll(e *entry, brk *breaker.Breaker, o outcome) (evs []store.Event) {
	prev := StateOf(&e.st, o.start)
	if n := s.cfg.Notify; n != nil {
		// Only with notify set: no copy and no event on the poll path else.
		before := e.st
		defer func() { evs = pollEvents(n, e.name, &before, &e.st, o.kind, o.err, o.start, o.end) }()
	}
	if o.kind == kindLocal {
		e.localErrs++
		o.local = e.localErrs
		s.localLog.note(s.log, o.end, e.name, o.err)
	} else {
		e.localErrs = 0
	}
	incident := inIncident(&e.st)
	e.st = applyOutcome(e.st, e.src, e.timing, o)
	e.brk = brk
	if o.brk.State == breaker.Closed && e.st.ConsecutiveFailures == 0 {
		e.brk = nil
	}
	e.st.UpdatedAt = o.end.UTC()
	if e.resetPending {
		// An operator's change: always logged.
		e.resetPending = false
		e.st = resetState(e.st, e.timing, o.end)
		// The incident is the one before the poll: a success closed it
		// (recovered), and one this poll opened made no event, the reset
		// having cleared it first.
		e.st.IncidentOpen = incident && o.kind != store.OutcomeSuccess
		e.brk = nil
		s.flushFlap(e, o.end, prev)
		s.logChange(e, prev, o.end, "reset")
		return nil // the deferred pollEvents sets evs
	}
	s.logPollChange(e, prev, o.end, o.err)
	return nil
}

// countSkipped counts the ticks of j's source that passed between its
// dispatch and end, while it was busy. mu held.
func (s *Scheduler) countSkipped(j *job, end time.Time) {
	if skipped := j.e.timing.ticksBetween(j.queuedAt, end, 1000); skipped > 0 {
		s.m.poll(countSkipped).Add(float64(skipped))
	}
}
