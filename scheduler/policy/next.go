package policy

import (
	"time"

	"github.com/pacer-dev/pacer/breaker"
)

// The next run of a source is composed of "not before" times, in the shape
// of client-go workqueue's rate limiters and their MaxOf: each rule (the
// schedule's tick, the backoff, a Retry-After, the breaker's cooldown)
// says the earliest time it allows, and the next run is the latest of
// them (NextRun). A zero time allows anything.

// MaxOf is the latest of the "not before" times ts, the zero time for
// none: the time at which every rule that gave one allows the next run.
func MaxOf(ts ...time.Time) time.Time {
	var m time.Time
	for i, t := range ts {
		if i == 0 || t.After(m) {
			m = t
		}
	}
	return m
}

// CooldownNotBefore is the breaker's "not before" time: while brk is open,
// its probe (breaker.ProbeAt, the first instant the breaker lets it
// through); else none.
func CooldownNotBefore(brk breaker.Snapshot) time.Time {
	if brk.State != breaker.Open {
		return time.Time{}
	}
	return breaker.ProbeAt(brk.Until)
}

// NextRun is the rule "next poll = max(next tick, backoff, breaker
// cooldown, Retry-After)" (rules 3.4 to 3.6), written once, as a pure
// function of now (in the style of x/time/rate's ReserveN(t, n)): the
// MaxOf the first tick of tm after now, notBefore (the backoff or the
// Retry-After) and, while brk is open, its probe (CooldownNotBefore).
// The result is rounded up to the microsecond, the store's precision.
//
// notBefore is zero for none, else (Apply):
//   - after the k-th consecutive failure, the backoff
//     now + min(max, initial * multiplier^(k-1)), +/- jitter;
//   - after a throttled poll (a 429, or a 503 with Retry-After), the
//     Retry-After time (seconds or HTTP date, capped at
//     breaker.MaxRetryAfter); without a usable Retry-After, the same
//     backoff counted by consecutive throttles instead of failures: 1 s, 2 s,
//     4 s ... with the defaults, reset by the next success.
//
// No arithmetic here wraps around: durations saturate (breaker.Backoff,
// time.Time.Add) and so do the due heap's keys (NanoKey), so a next run is
// never before now, whatever the period, the count or the cooldown
// (FuzzNextRun). A local error's retry is LocalRetry, not this rule.
func NextRun(now time.Time, tm Timing, notBefore time.Time, brk breaker.Snapshot) time.Time {
	return CeilMicro(MaxOf(tm.Next(now), notBefore, CooldownNotBefore(brk)))
}

// Tick is the next run of a healthy source: its schedule's first tick
// after now, rounded as NextRun's.
func Tick(now time.Time, tm Timing) time.Time {
	return NextRun(now, tm, time.Time{}, breaker.Snapshot{State: breaker.Closed})
}

// CeilMicro rounds t up to the microsecond, the precision of the store: a
// backoff with jitter falls anywhere, and the state in memory must be the
// state stored, never earlier than what the rules computed.
func CeilMicro(t time.Time) time.Time {
	if r := t.Truncate(time.Microsecond); r.Before(t) {
		return r.Add(time.Microsecond)
	}
	return t
}

// UTCPtr is a pointer to t in UTC, as the state's times are kept.
func UTCPtr(t time.Time) *time.Time {
	t = t.UTC()
	return &t
}
