package policy

import (
	"testing"
	"time"

	"github.com/pacer-dev/pacer/breaker"
	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/domain"
)

// TestIncidentMark: a reset (the daemon's or the CLI's ApplyAction) or a
// changed configuration marks the incident of a source in error, open or
// half-open as still open, and no other; the next success clears the
// mark and sends recovered, whatever the state shown before it; a failure
// or a throttled poll keeps it.
func TestIncidentMark(t *testing.T) {
	src := testSource()
	past, future := UTCPtr(t0.Add(-time.Minute)), UTCPtr(t0.Add(time.Hour))
	failing := domain.SourceState{Name: "api", ConsecutiveFailures: 2, LastRunAt: UTCPtr(t0), LastOutcome: domain.OutcomeFailure}
	errored := failing
	errored.ErrorReason = "2 consecutive failures; last: x"
	open := failing
	open.BreakerState, open.BreakerUntil = breaker.Open, future
	halfOpen := open
	halfOpen.BreakerUntil = past
	probing := failing
	probing.BreakerState = breaker.HalfOpen
	marked := domain.SourceState{Name: "api", LastRunAt: UTCPtr(t0), LastOutcome: domain.OutcomeSuccess, IncidentOpen: true}
	for _, c := range []struct {
		name string
		in   domain.SourceState
		want bool
	}{
		{"error", errored, true},
		{"open", open, true},
		{"half-open (cooldown over)", halfOpen, true},
		{"half-open (probe)", probing, true},
		{"backoff", failing, false},
		{"ok", domain.SourceState{Name: "api", LastRunAt: UTCPtr(t0), LastOutcome: domain.OutcomeSuccess}, false},
		{"reset again before a success", marked, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			st, err := ApplyAction(ActionReset, src, c.in, "", t0)
			if err != nil {
				t.Fatal(err)
			}
			if st.IncidentOpen != c.want || st.ErrorReason != "" || st.BreakerState != breaker.Closed {
				t.Fatalf("after reset: incident %v (want %v), %+v", st.IncidentOpen, c.want, st)
			}
		})
	}
	tm := NewTiming(src.Name, src.Schedule)
	closed := breaker.Snapshot{State: breaker.Closed}
	notify := &config.Notify{On: []string{config.EventError, config.EventOpen, config.EventRecovered}}
	for _, c := range []struct {
		kind      string
		keep      bool
		recovered bool
	}{
		{domain.OutcomeSuccess, false, true},
		{domain.OutcomeFailure, true, false},
		{domain.OutcomeThrottled, true, false},
	} {
		t.Run("then "+c.kind, func(t *testing.T) {
			prev := marked
			prev.ConsecutiveFailures = 1 // a failure after the reset: backoff
			cur := Apply(prev, src, tm, Outcome{Kind: c.kind, Err: "x", Start: t0, End: t0.Add(time.Second), Brk: closed})
			if cur.IncidentOpen != c.keep {
				t.Errorf("incident %v after a %s, want %v", cur.IncidentOpen, c.kind, c.keep)
			}
			evs := PollEvents(notify, "api", &prev, &cur, c.kind, "x", t0, t0.Add(time.Second))
			got := len(evs) == 1 && evs[0].Event == config.EventRecovered && evs[0].PreviousState == StateBackoff
			if got != c.recovered {
				t.Errorf("events %+v after a %s; want recovered (from backoff): %v", evs, c.kind, c.recovered)
			}
		})
	}
}
