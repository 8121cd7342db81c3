package scheduler

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/pacer-dev/pacer/breaker"
	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/domain"
	"github.com/pacer-dev/pacer/scheduler/policy"
	"github.com/pacer-dev/pacer/scheduler/queue"
	"github.com/pacer-dev/pacer/sources"
)

// workers are the polls: the dispatch loop that hands due sources to the
// queue (dispatch.go), the workers that take them from it and poll, and
// the application of each poll's outcome to the table (poll.go).
type workers struct {
	*table
	life      *lifecycle
	inflightN atomic.Int64 // polls in flight
}

// resizeWorkers runs exactly n workers. mu held.
func (w *workers) resizeWorkers(n int) {
	w.q.Resize(n, func() context.CancelFunc {
		ctx, cancel := context.WithCancel(w.life.working.ctx)
		w.life.working.spawn(ctx, w.work)
		return cancel
	})
	w.m.limit.Set(float64(n))
	w.transport.resize(n)
}

// work is one worker: a global permit. It takes jobs until ctx is done.
func (w *workers) work(ctx context.Context) {
	// The worker's polls derive from its own child of the polling
	// context, so that a poll's timeout context registers with this
	// worker's context instead of with the polling stage's, which every
	// worker shares (a contended lock and map insertion per poll);
	// cancelling the polling stage still reaches every poll.
	pollCtx, cancel := context.WithCancel(w.life.polling.ctx)
	defer cancel()
	timeouts := newPollTimeouts(pollCtx, w.clock)
	defer timeouts.close()
	for ctx.Err() == nil {
		j, ok := w.q.Get(ctx)
		if !ok {
			return
		}
		if p, ok := w.start(ctx, pollCtx, timeouts, &j); ok {
			w.finish(j, p)
		}
	}
}

// start performs the poll of j, under a timeout of timeouts, and reports
// ok false when it did not start (the worker is stopping, or j's source
// changed while it waited: it went back to its schedule). Either way j's
// permits are given back as start returns, before its outcome is applied:
// the deferred queue.Done is the one place they are released.
func (w *workers) start(ctx, pollCtx context.Context, timeouts *pollTimeouts, j *queue.Job[*entry]) (pollResult, bool) {
	defer w.q.Done(*j)
	if ctx.Err() != nil {
		w.requeue(*j)
		return pollResult{}, false
	}
	w.m.semaphoreWait.Observe(w.clock.Now().Sub(j.ReadyAt).Seconds())
	p, poller, seq, ok := w.claim(j)
	if !ok {
		// It changed while it waited for permits: it goes back to its
		// schedule (through its new group, if that changed).
		w.requeue(*j)
		return pollResult{}, false
	}
	// Rule 3.8: the previous poll's state is committed before this one.
	w.flush.WaitAt(pollCtx, j.Source.sl, seq)
	if !w.stillMayStart(j) {
		return pollResult{}, false
	}
	if j.Trigger && p.brk != nil {
		w.forceProbe(j.Source, p.brk)
	}
	return w.poll(timeouts, *j, poller, p), true
}

// claim returns what a worker needs of j's source (its settings, breaker
// and redactor in p, its poller, the sequence number of its last state),
// and records j's claim in it, or ok false if the source changed
// (generation, group), went away, or was paused or put in error while j
// waited.
func (w *workers) claim(j *queue.Job[*entry]) (p pollResult, poller sources.Poller, seq uint64, ok bool) {
	w.mu.Lock()
	defer w.unlock()
	e := j.Source
	if e.gen != j.Gen || e.removed || e.st.Paused || policy.Silent(&e.st, e.src) || e.group != j.Route[queue.KindLimit] {
		return pollResult{}, nil, 0, false
	}
	if !w.shards.MayStart(e.shard) {
		// The last check before a poll starts (rule 8.3): its shard is
		// being given back, or its claim cannot be proven.
		w.loseShard(e.shard)
		return pollResult{}, nil, 0, false
	}
	now := w.clock.Now()
	if b := w.up().gate(e, now, true); b.blocking() {
		// Its host closed or a dependency failed while it waited: back to
		// its next tick (a trigger too: it is refused, not retried).
		w.up().noteBlock(e, b, now)
		j.Trigger = false
		return pollResult{}, nil, 0, false
	}
	w.up().clearBlock(e)
	j.Claim = w.q.Claim(&e.slot, j.Gen, now)
	return pollResult{src: e.src, brk: e.brk, redact: w.redact, prior: policy.PriorOf(&e.st), last: e.st.Digest}, e.poller, e.savedSeq, true
}

// stillMayStart asks the member again, after the wait for the previous
// commit (which a loaded database makes last seconds), whether j's poll
// may start (rule 8.3: not once the claim is ending, when another member
// may own the source by the time it runs). If not, the claim is undone, the
// shard made dormant and j goes back as at a failed claim.
func (w *workers) stillMayStart(j *queue.Job[*entry]) bool {
	e := j.Source
	if w.shards.MayStart(e.shard) {
		return true
	}
	w.mu.Lock()
	w.q.Unclaim(&e.slot, j.Claim)
	w.loseShard(e.shard)
	w.unlock()
	w.requeue(*j)
	return false
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
func (w *workers) poll(timeouts *pollTimeouts, j queue.Job[*entry], poller sources.Poller, p pollResult) pollResult {
	start := w.clock.Now()
	if !j.Trigger {
		w.m.lag.Observe(max(start.Sub(j.Due), 0).Seconds())
	}
	w.m.inflight.Inc()
	w.inflightN.Add(1)
	ctx := timeouts.start(p.src.Timeout)
	var dl *delivery
	if p.src.Deliver != nil {
		dl = &delivery{d: w.deps, ctx: ctx, src: p.src, redact: p.redact, last: p.last, start: start}
	}
	res, brk, err := call(ctx, p.src, poller, p.prior, p.brk, dl, w.clock.Now, p.redact.Redact)
	timeouts.stop()
	p.undelivered = dl != nil && dl.failed
	end, skew, ok := w.clk.readClocks()
	p.skew = skew
	if !ok {
		p.skew = noSkew
	}
	w.m.inflight.Dec()
	w.inflightN.Add(-1)
	p.brk, p.res, p.rejected, p.start, p.end = brk, res, errors.Is(err, breaker.ErrOpen), start, end
	if !p.rejected {
		w.m.duration.Observe(end.Sub(start).Seconds())
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
// result's Body is closed before call returns, in every case. A source
// with conditions or select has them run on a success first (checkResult;
// redact masks the secrets of their messages).
func call(ctx context.Context, src *config.Source, poller sources.Poller, prior sources.Validators, brk *breaker.Breaker,
	dl *delivery, now func() time.Time, redact func(string) string) (sources.Result, *breaker.Breaker, error) {
	var res sources.Result
	cp, conditional := poller.(sources.ConditionalPoller)
	fn := func() error {
		var start time.Time
		if src.Checks != nil {
			start = now()
		}
		if conditional {
			res = cp.PollSince(ctx, prior)
		} else {
			res = poller.Poll(ctx)
		}
		if src.Checks != nil && res.Err == nil && !res.NotModified {
			checkResult(ctx, src, &res, start, now, redact)
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
		err := brk.DoAt(now, fn)
		return res, brk, err
	}
	err := fn()
	if err != nil && err == res.Err {
		brk = newBreaker(src, domain.SourceState{})
		err = brk.DoAt(now, func() error { return res.Err })
	}
	return res, brk, err
}

// finish applies a poll's outcome to its source's state, persists it and
// schedules the next poll, in these steps: classify the result (with the
// times rounded as the store keeps them), count it, build its record, then
// under mu the generation check, the state (outcome, breaker, a reset made
// meanwhile), the commit and the next poll.
func (w *workers) finish(j queue.Job[*entry], p pollResult) {
	o := outcomeOf(p, w.life.polling.ctx.Err() != nil, p.redact.Redact, rand.Float64())
	rec := recordOf(j.Name, &p, &o)

	w.mu.Lock()
	defer w.unlock()
	e := j.Source
	if !w.q.Unclaim(&e.slot, j.Claim) {
		return // a shutdown recorded it as interrupted (abandonPolls)
	}
	stepped := w.clk.stepPoll(&o, p.skew)
	w.m.poll(o.Kind).Inc()
	w.q.Idle(&e.slot)
	w.countSkipped(j, o.End)
	if o.Kind == domain.OutcomeSuccess {
		// Compared with the state before this poll, as policy.Apply does.
		changed := policy.Changed(&e.st, o.Result)
		w.m.result(changed).Inc()
		rec.Changed = changed // a success always has a record
	}
	var evs []domain.Event
	if j.Gen == e.gen {
		evs = w.applyPoll(e, p.brk, o)
		if stepped && e.brk != nil {
			e.brk = newBreaker(e.src, e.st) // its cooldown read before the step
		}
		if p.undelivered {
			policy.ForgetValidators(&e.st)
		}
		w.up().respectCache(e, &p, &o)
	}
	if e.src.Host != "" {
		evs = append(evs, w.up().finishHost(j, &p, &o, nextRun(&e.st))...)
	}
	// On a generation change (the configuration changed during the poll)
	// the new settings start from a clean state: only the record is kept.
	w.save(e, rec, evs...)
	if e.removed {
		w.dropEntry(e)
		return
	}
	w.reschedule(e, o.End)
}

// outcomeOf classifies a poll's result. cut reports that shutdown is
// cutting off the polls in flight; jitter is the poll's position in the
// backoff's jitter band. Times, the breaker's included, are truncated to the
// microsecond, as the store keeps them: a record read before its commit
// then shows the same start as after it.
func outcomeOf(p pollResult, cut bool, redact func(string) string, jitter float64) policy.Outcome {
	o := policy.Outcome{
		Start: p.start.Truncate(time.Microsecond), End: p.end.Truncate(time.Microsecond),
		Brk: breaker.Snapshot{State: breaker.Closed}, Jitter: jitter, RetryAfter: p.res.RetryAfter,
	}
	if p.brk != nil {
		o.Brk = p.brk.Snapshot()
		o.Brk.Until = o.Brk.Until.Truncate(time.Microsecond)
	}
	res := p.res
	switch {
	case p.rejected:
		o.Kind = policy.KindRejected
	case res.Err != nil && errors.Is(res.Err, context.Canceled) && cut:
		o.Kind = domain.OutcomeInterrupted
	case res.Throttled:
		o.Kind = domain.OutcomeThrottled
	case res.Err != nil && (res.Local || errors.Is(res.Err, sources.ErrLocal)):
		o.Kind = policy.KindLocal
	case res.Err != nil:
		o.Kind = domain.OutcomeFailure
	default:
		o.Kind = domain.OutcomeSuccess
	}
	if res.Err != nil {
		o.Err = redact(res.Err.Error())
	}
	if o.Kind == domain.OutcomeSuccess {
		o.Result = policy.ResultOf(res)
	}
	return o
}

// recordOf is the history record of a poll of the named source; a poll
// rejected by its breaker, or cut short by a local error, has none (the
// source was not called, or not to any effect that is its own). The record
// and its status and exit codes are one allocation (the codes are pointers
// in the record: taking the address of p's own would move all of p to the
// heap, some 300 bytes per poll).
func recordOf(name string, p *pollResult, o *policy.Outcome) *domain.PollRecord {
	if o.Kind == policy.KindRejected || o.Kind == policy.KindLocal {
		return nil
	}
	r := &struct {
		rec          domain.PollRecord
		status, exit int
	}{status: p.res.StatusCode, exit: p.res.ExitCode}
	r.rec = domain.PollRecord{
		Source:     name,
		StartedAt:  o.Start.UTC(),
		DurationMs: p.end.Sub(p.start).Milliseconds(),
		Outcome:    o.Kind,
		Error:      o.Err,
		Bytes:      p.res.Bytes,
		Digest:     o.Result.Digest,
		Condition:  p.res.Condition,
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
func (w *workers) applyPoll(e *entry, brk *breaker.Breaker, o policy.Outcome) (evs []domain.Event) {
	prev := policy.StateOf(&e.st, o.Start)
	if n := w.cfg.Notify; n != nil {
		// Only with notify set: no copy and no event on the poll path else.
		before := e.st
		defer func() {
			evs = w.silence(e, policy.PollEvents(n, e.name, &before, &e.st, o.Kind, o.Err, o.Start, o.End), o.End)
		}()
	}
	if o.Kind == policy.KindLocal {
		e.localErrs++
		o.Local = e.localErrs
		w.logs.local.note(w.logLocked, o.End, e.name, o.Err)
	} else {
		e.localErrs = 0
	}
	incident := policy.InIncident(&e.st)
	e.st = policy.Apply(e.st, e.src, e.timing, o)
	e.brk = brk
	if o.Brk.State == breaker.Closed && e.st.ConsecutiveFailures == 0 {
		e.brk = nil
	}
	e.st.UpdatedAt = o.End.UTC()
	if e.resetPending {
		// An operator's change: always logged.
		e.resetPending = false
		e.st = policy.Reset(e.st, e.timing, o.End)
		// The incident is the one before the poll: a success closed it
		// (recovered), and one this poll opened made no event, the reset
		// having cleared it first.
		e.st.IncidentOpen = incident && o.Kind != domain.OutcomeSuccess
		e.brk = nil
		w.flushFlap(e, o.End, prev)
		w.logChange(e, prev, o.End, "reset")
		return nil // the deferred policy.PollEvents sets evs
	}
	w.logPollChange(e, prev, o.End, o.Err)
	return nil
}

// countSkipped counts the ticks of j's source that passed between its
// dispatch and end, while it was busy. mu held.
func (w *workers) countSkipped(j queue.Job[*entry], end time.Time) {
	if skipped := j.Source.timing.TicksBetween(j.QueuedAt, end, 1000); skipped > 0 {
		w.m.poll(countSkipped).Add(float64(skipped))
	}
}
