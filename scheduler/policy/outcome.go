package policy

import (
	"fmt"
	"time"

	"github.com/pacer-dev/pacer/breaker"
	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/domain"
)

// KindRejected is the outcome of a poll its breaker refused: nothing was
// called, nothing counts and no record is written; the source waits for the
// cooldown. pacer_polls_total counts it under the same name.
const KindRejected = "rejected"

// KindLocal is the outcome of a poll that failed for lack of pacer's own
// resources (sources.ErrLocal: EMFILE, ENFILE, ENOMEM, a refused fork): the
// daemon's fault, not the source's. It is not a poll of the source: no
// record (history keeps the outcomes of contract section 5), no count in
// polls_total or failures_total, no change to consecutive_failures, the
// breaker, error_after, last_error or the state shown; only the next run
// moves, to a retry (LocalRetry). pacer_polls_total counts it as
// "local_error".
const KindLocal = "local_error"

// LocalBackoff is the retry policy of local errors, rule 3.4's formula with
// the daemon's parameters rather than the source's (the shortage is the
// daemon's): 1 s after the first consecutive local error of a source,
// doubling to at most 1 min, +/-20% so that sources hit together retry
// apart, and never later than the source's next schedule tick.
func LocalBackoff() breaker.Backoff {
	return breaker.Backoff{Initial: time.Second, Max: time.Minute, Multiplier: 2, Jitter: 0.2}
}

// Outcome is what a finished poll contributes to a source's state.
type Outcome struct {
	Kind       string // store.Outcome*, KindRejected or KindLocal
	Local      int    // KindLocal: the source's consecutive local errors, this one included
	Err        string // redacted error text, "" on success
	RetryAfter string // raw Retry-After of a throttled answer
	Start, End time.Time
	Brk        breaker.Snapshot // the breaker after the call
	Jitter     float64          // position in the backoff jitter band, [0, 1)
	Result     Result           // success: what the poll fetched
}

// Shift moves o's times by d, a step of the wall clock (a poll's times read
// before a step the scheduler has seen), its breaker's cooldown with them.
func (o *Outcome) Shift(d time.Duration) {
	o.Start, o.End = o.Start.Add(d), o.End.Add(d)
	if !o.Brk.Until.IsZero() {
		o.Brk.Until = o.Brk.Until.Add(d)
	}
}

// Apply returns st updated by one poll (rules 3.4 to 3.8). It is a pure
// function: the scheduler applies it under its lock, the tests call it
// directly.
func Apply(st domain.SourceState, src *config.Source, tm Timing, o Outcome) domain.SourceState {
	switch o.Kind {
	case domain.OutcomeInterrupted:
		// Cut off by shutdown: nothing counts, and the source is due again
		// as soon as a daemon runs it.
		start := o.Start
		if st.NextRunAt == nil || st.NextRunAt.After(start) {
			st.NextRunAt = &start
		}
		return st
	case KindRejected:
		SetBreaker(&st, o.Brk)
		next := NextRun(o.End, tm, time.Time{}, o.Brk)
		st.NextRunAt = &next
		return st
	case KindLocal:
		SetBreaker(&st, o.Brk)
		next := LocalRetry(o.End, tm, o.Local, o.Jitter)
		st.NextRunAt = &next
		return st
	}
	st.LastRunAt = UTCPtr(o.Start)
	st.LastOutcome = o.Kind
	SetBreaker(&st, o.Brk)
	notBefore, inError := count(&st, src, o)
	if inError {
		return st
	}
	next := NextRun(o.End, tm, notBefore, o.Brk)
	st.NextRunAt = &next
	return st
}

// count applies to st the counts of a poll that reached its source
// (success, throttled or failure), and returns the "not before" time of
// its backoff or Retry-After (zero for none); inError is true when the
// failure put the source in error (rule 3.7), its next run set already
// (none, or its re-probe, rule 10.4).
func count(st *domain.SourceState, src *config.Source, o Outcome) (notBefore time.Time, inError bool) {
	end := o.End
	switch o.Kind {
	case domain.OutcomeSuccess:
		st.PollsTotal++
		st.ConsecutiveFailures = 0
		st.ConsecutiveThrottles = 0
		st.LastSuccessAt = UTCPtr(end)
		st.ErrorReason = ""     // a re-probe's success (rule 10.4) ends the error state
		st.IncidentOpen = false // its recovered event goes with this poll (PollEvents)
		deliverResult(st, o.Result, Changed(st, o.Result), end)
	case domain.OutcomeThrottled:
		st.PollsTotal++
		st.ThrottledTotal++
		st.ConsecutiveThrottles++
		var ok bool
		if notBefore, ok = breaker.ParseRetryAfter(o.RetryAfter, end); !ok {
			notBefore = src.Backoff.NextAttemptAt(end, st.ConsecutiveThrottles, o.Jitter)
		}
	case domain.OutcomeFailure:
		st.PollsTotal++
		st.FailuresTotal++
		st.ConsecutiveFailures++
		st.ConsecutiveThrottles = 0
		st.LastError, st.LastErrorAt = o.Err, UTCPtr(end)
		notBefore = src.Backoff.NextAttemptAt(end, st.ConsecutiveFailures, o.Jitter)
		if src.ErrorAfter > 0 && st.ConsecutiveFailures >= src.ErrorAfter {
			st.ErrorReason = fmt.Sprintf("%d consecutive failures; last: %s", st.ConsecutiveFailures, o.Err)
			st.NextRunAt = nil
			if src.ErrorReprobe > 0 { // rule 10.4: probed once per error_reprobe
				st.NextRunAt = UTCPtr(CeilMicro(end.Add(src.ErrorReprobe)))
			}
			return notBefore, true
		}
	}
	return notBefore, false
}

// LocalRetry is when a source is polled again after its k-th consecutive
// local error at now: after LocalBackoff's delay, but no later than its
// next schedule tick (a retry never postpones a regular poll). It is always
// after now: LocalBackoff never yields less than 800 ms, and a tick is
// strictly after now. The memory of the backoff is k, kept by the scheduler
// per source and cleared by any other outcome.
func LocalRetry(now time.Time, tm Timing, k int, jitter float64) time.Time {
	retry := LocalBackoff().NextAttemptAt(now, max(k, 1), jitter)
	if tick := tm.Next(now); tick.Before(retry) {
		retry = tick
	}
	return CeilMicro(retry)
}
