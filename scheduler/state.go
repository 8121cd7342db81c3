package scheduler

import (
	"fmt"
	"time"

	"github.com/pacer-dev/pacer/breaker"
	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/store"
)

// Source states, as shown in status (contract section 4).
const (
	StatePending   = "pending"
	StateOK        = "ok"
	StateBackoff   = "backoff"
	StateThrottled = "throttled"
	StateOpen      = "open"
	StateHalfOpen  = "half-open"
	StateError     = "error"
	StatePaused    = "paused"
)

// AllStates lists every state, for metrics that report each one.
var AllStates = [...]string{StatePending, StateOK, StateBackoff, StateThrottled, StateOpen, StateHalfOpen, StateError, StatePaused}

// StateOf derives the displayed state of a source from its stored state at now.
func StateOf(st *store.SourceState, now time.Time) string {
	switch {
	case st.Paused:
		return StatePaused
	case st.ErrorReason != "":
		return StateError
	case st.LastOutcome == store.OutcomeThrottled:
		return StateThrottled
	}
	if b := breakerOf(st, now); b != breaker.Closed {
		return b
	}
	switch {
	case st.ConsecutiveFailures > 0:
		return StateBackoff
	case st.LastRunAt == nil:
		return StatePending
	}
	return StateOK
}

// silent reports whether a source is in error and not re-probed (rule 3.7
// without error_reprobe, contract 10.4): it is not polled at all.
func silent(st *store.SourceState, src *config.Source) bool {
	return st.ErrorReason != "" && src.ErrorReprobe <= 0
}

// breakerOf is the breaker state shown at now: an open breaker whose cooldown
// has passed is half-open (its next call is the probe), by the breaker's own
// rule (breaker.Snapshot.StateAt). An open state stored without its end
// stays open.
func breakerOf(st *store.SourceState, now time.Time) string {
	if st.BreakerState == breaker.Open && st.BreakerUntil == nil {
		return breaker.Open
	}
	return breakerSnapshot(st).StateAt(now)
}

// kindRejected is the outcome of a poll its breaker refused: nothing was
// called, nothing counts and no record is written; the source waits for the
// cooldown. pacer_polls_total counts it under the same name.
const kindRejected = countRejected

// kindLocal is the outcome of a poll that failed for lack of pacer's own
// resources (sources.ErrLocal: EMFILE, ENFILE, ENOMEM, a refused fork): the
// daemon's fault, not the source's. It is not a poll of the source: no
// record (history keeps the outcomes of contract section 5), no count in
// polls_total or failures_total, no change to consecutive_failures, the
// breaker, error_after, last_error or the state shown; only the next run
// moves, to a retry (localRetry). pacer_polls_total counts it as
// "local_error".
const kindLocal = countLocal

// localBackoff is the retry policy of local errors, rule 3.4's formula with
// the daemon's parameters rather than the source's (the shortage is the
// daemon's): 1 s after the first consecutive local error of a source,
// doubling to at most 1 min, +/-20% so that sources hit together retry
// apart, and never later than the source's next schedule tick.
func localBackoff() breaker.Backoff {
	return breaker.Backoff{Initial: time.Second, Max: time.Minute, Multiplier: 2, Jitter: 0.2}
}

// outcome is what a finished poll contributes to a source's state.
type outcome struct {
	kind       string // store.Outcome*, kindRejected or kindLocal
	local      int    // kindLocal: the source's consecutive local errors, this one included
	err        string // redacted error text, "" on success
	retryAfter string // raw Retry-After of a throttled answer
	start, end time.Time
	brk        breaker.Snapshot // the breaker after the call
	jitter     float64          // position in the backoff jitter band, [0, 1)
	result     result           // success: what the poll fetched
}

// applyOutcome returns st updated by one poll (rules 3.4 to 3.8). It is a
// pure function: the scheduler applies it under its lock, the tests call it
// directly.
func applyOutcome(st store.SourceState, src *config.Source, tm timing, o outcome) store.SourceState {
	end := o.end
	var notBefore time.Time // the backoff or the Retry-After
	switch o.kind {
	case store.OutcomeInterrupted:
		// Cut off by shutdown: nothing counts, and the source is due again
		// as soon as a daemon runs it.
		start := o.start
		if st.NextRunAt == nil || st.NextRunAt.After(start) {
			st.NextRunAt = &start
		}
		return st
	case kindRejected:
		setBreaker(&st, o.brk)
		next := nextRun(end, tm, notBefore, o.brk)
		st.NextRunAt = &next
		return st
	case kindLocal:
		setBreaker(&st, o.brk)
		next := localRetry(end, tm, o.local, o.jitter)
		st.NextRunAt = &next
		return st
	}
	st.LastRunAt = ptr(o.start)
	st.LastOutcome = o.kind
	setBreaker(&st, o.brk)
	switch o.kind {
	case store.OutcomeSuccess:
		st.PollsTotal++
		st.ConsecutiveFailures = 0
		st.ConsecutiveThrottles = 0
		st.LastSuccessAt = ptr(end)
		st.ErrorReason = ""     // a re-probe's success (rule 10.4) ends the error state
		st.IncidentOpen = false // its recovered event goes with this poll (pollEvents)
		deliverResult(&st, o.result, changedResult(&st, o.result), end)
	case store.OutcomeThrottled:
		st.PollsTotal++
		st.ThrottledTotal++
		st.ConsecutiveThrottles++
		var ok bool
		if notBefore, ok = breaker.ParseRetryAfter(o.retryAfter, end); !ok {
			notBefore = src.Backoff.NextAttemptAt(end, st.ConsecutiveThrottles, o.jitter)
		}
	case store.OutcomeFailure:
		st.PollsTotal++
		st.FailuresTotal++
		st.ConsecutiveFailures++
		st.ConsecutiveThrottles = 0
		st.LastError, st.LastErrorAt = o.err, ptr(end)
		notBefore = src.Backoff.NextAttemptAt(end, st.ConsecutiveFailures, o.jitter)
		if src.ErrorAfter > 0 && st.ConsecutiveFailures >= src.ErrorAfter {
			st.ErrorReason = fmt.Sprintf("%d consecutive failures; last: %s", st.ConsecutiveFailures, o.err)
			st.NextRunAt = nil
			if src.ErrorReprobe > 0 { // rule 10.4: probed once per error_reprobe
				st.NextRunAt = ptr(ceilMicro(end.Add(src.ErrorReprobe)))
			}
			return st
		}
	}
	next := nextRun(end, tm, notBefore, o.brk)
	st.NextRunAt = &next
	return st
}

// nextRun is the rule "next poll = max(next tick, backoff, breaker
// cooldown, Retry-After)" (rules 3.4 to 3.6), written once, as a pure
// function of now (in the style of x/time/rate's ReserveN(t, n)): the first
// tick of tm after now, no earlier than notBefore, and, while brk is open,
// no earlier than its probe (breaker.ProbeAt: the first instant the breaker
// lets it through).
// The result is rounded up to the microsecond, the store's precision.
//
// notBefore is zero for none, else (applyOutcome):
//   - after the k-th consecutive failure, the backoff
//     now + min(max, initial * multiplier^(k-1)), +/- jitter;
//   - after a throttled poll (a 429, or a 503 with Retry-After), the
//     Retry-After time (seconds or HTTP date, capped at
//     breaker.MaxRetryAfter); without a usable Retry-After, the same
//     backoff counted by consecutive throttles instead of failures: 1 s, 2 s,
//     4 s ... with the defaults, reset by the next success.
//
// No arithmetic here wraps around: durations saturate (breaker.Backoff,
// time.Time.Add) and so do the due heap's keys (nanoKey), so a next run is
// never before now, whatever the period, the count or the cooldown
// (FuzzNextRun). A local error's retry is localRetry, not this rule.
func nextRun(now time.Time, tm timing, notBefore time.Time, brk breaker.Snapshot) time.Time {
	next := later(tm.next(now), notBefore)
	if brk.State == breaker.Open {
		next = later(next, breaker.ProbeAt(brk.Until))
	}
	return ceilMicro(next)
}

// localRetry is when a source is polled again after its k-th consecutive
// local error at now: after localBackoff's delay, but no later than its
// next schedule tick (a retry never postpones a regular poll). It is always
// after now: localBackoff never yields less than 800 ms, and a tick is
// strictly after now. The memory of the backoff is k, kept by the scheduler
// per source and cleared by any other outcome.
func localRetry(now time.Time, tm timing, k int, jitter float64) time.Time {
	retry := localBackoff().NextAttemptAt(now, max(k, 1), jitter)
	if tick := tm.next(now); tick.Before(retry) {
		retry = tick
	}
	return ceilMicro(retry)
}

// setBreaker records the breaker state b in st. It is the one place that
// writes st's breaker fields; breakerSnapshot reads them back.
func setBreaker(st *store.SourceState, b breaker.Snapshot) {
	st.BreakerState, st.BreakerUntil = breaker.Closed, nil
	switch b.State {
	case breaker.Open:
		st.BreakerState, st.BreakerUntil = breaker.Open, ptr(b.Until)
	case breaker.HalfOpen:
		st.BreakerState = breaker.HalfOpen
	}
}

// breakerSnapshot is the breaker state recorded in st ("" is closed).
func breakerSnapshot(st *store.SourceState) breaker.Snapshot {
	b := breaker.Snapshot{State: st.BreakerState}
	if b.State == "" {
		b.State = breaker.Closed
	}
	if st.BreakerUntil != nil {
		b.Until = *st.BreakerUntil
	}
	return b
}

// ceilMicro rounds t up to the microsecond, the precision of the store: a
// backoff with jitter falls anywhere, and the state in memory must be the
// state stored, never earlier than what the rules computed.
func ceilMicro(t time.Time) time.Time {
	if r := t.Truncate(time.Microsecond); r.Before(t) {
		return r.Add(time.Microsecond)
	}
	return t
}

// resetState clears failures, throttling, the breaker and the error state
// (an operator's reset, or a changed configuration). The source is next due
// at its first tick after now; counters and history are kept. A source in
// an incident (error, open or half-open) keeps it marked open, so that its
// next success still sends recovered (contract 10.1).
func resetState(st store.SourceState, tm timing, now time.Time) store.SourceState {
	st.IncidentOpen = inIncident(&st)
	st.ConsecutiveFailures = 0
	st.ConsecutiveThrottles = 0
	st.ErrorReason = ""
	setBreaker(&st, breaker.Snapshot{State: breaker.Closed})
	if st.LastOutcome != store.OutcomeSuccess {
		st.LastOutcome = ""
	}
	if st.Paused {
		st.NextRunAt = nil
	} else {
		st.NextRunAt = ptr(nextRun(now, tm, time.Time{}, breaker.Snapshot{State: breaker.Closed}))
	}
	return st
}

// inIncident reports whether a success of the source in state st closes an
// incident (sends recovered): it is in error, its breaker is not closed
// (open, or half-open once the cooldown passed), or a reset or a changed
// configuration cleared those before a success did.
func inIncident(st *store.SourceState) bool {
	return st.IncidentOpen || st.ErrorReason != "" || breakerSnapshot(st).State != breaker.Closed
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func ptr(t time.Time) *time.Time {
	t = t.UTC()
	return &t
}

// Operator actions on a source.
const (
	ActionReset   = "reset"
	ActionPause   = "pause"
	ActionResume  = "resume"
	ActionTrigger = "trigger"
)

// ApplyAction applies reset, pause or resume to a stored state at now, for
// the CLI when no daemon is running; the daemon applies the same function.
func ApplyAction(action string, src *config.Source, st store.SourceState, reason string, now time.Time) (store.SourceState, error) {
	st.Name = src.Name
	return applyAction(action, st, newTiming(src.Name, src.Schedule), reason, now)
}

func applyAction(action string, st store.SourceState, tm timing, reason string, now time.Time) (store.SourceState, error) {
	switch action {
	case ActionReset:
		st = resetState(st, tm, now)
	case ActionPause:
		if reason == "" {
			reason = "paused by operator"
		}
		st.Paused = true
		st.PausedReason = reason
		st.NextRunAt = nil
	case ActionResume:
		if !st.Paused {
			return st, nil
		}
		st.Paused = false
		st.PausedReason = ""
		if st.ErrorReason != "" {
			return st, nil
		}
		next := nextRun(now, tm, time.Time{}, breakerSnapshot(&st))
		st.NextRunAt = &next
	default:
		return st, fmt.Errorf("unknown action %q", action)
	}
	st.UpdatedAt = now.UTC()
	return st, nil
}
