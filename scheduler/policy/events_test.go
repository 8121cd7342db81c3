package policy

import (
	"testing"
	"time"

	"github.com/pacer-dev/pacer/breaker"
	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/domain"
)

// TestPollEvents: which transitions of one poll make which events
// (contract 10.1), filtered by notify.on, and none without notify.
func TestPollEvents(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC)
	t1 := t0.Add(time.Second)
	past, future := t0.Add(-time.Minute), t0.Add(time.Hour)
	all := &config.Notify{On: []string{config.EventError, config.EventOpen, config.EventRecovered}}
	def := &config.Notify{On: []string{config.EventError, config.EventRecovered}}
	ran := &t0
	okSt := domain.SourceState{LastRunAt: ran, LastOutcome: domain.OutcomeSuccess}
	backoff := domain.SourceState{LastRunAt: ran, LastOutcome: domain.OutcomeFailure, ConsecutiveFailures: 1}
	errSt := domain.SourceState{LastRunAt: ran, LastOutcome: domain.OutcomeFailure, ConsecutiveFailures: 2, ErrorReason: "2 consecutive failures; last: x"}
	open := domain.SourceState{LastRunAt: ran, LastOutcome: domain.OutcomeFailure, ConsecutiveFailures: 5, BreakerState: breaker.Open, BreakerUntil: &future}
	halfOpen := open
	halfOpen.BreakerUntil = &past // cooldown over: shown half-open
	openErr := errSt
	openErr.BreakerState, openErr.BreakerUntil = breaker.Open, &future
	for _, c := range []struct {
		name      string
		n         *config.Notify
		prev, cur domain.SourceState
		kind      string
		want      []string // event:state:previous_state
	}{
		{"no notify", nil, backoff, errSt, domain.OutcomeFailure, nil},
		{"ok to backoff", all, okSt, backoff, domain.OutcomeFailure, nil},
		{"enters error", all, backoff, errSt, domain.OutcomeFailure, []string{"error:error:backoff"}},
		{"stays in error (failed re-probe)", all, errSt, errSt, domain.OutcomeFailure, nil},
		{"breaker opens", all, backoff, open, domain.OutcomeFailure, []string{"open:open:backoff"}},
		{"breaker opens, default on", def, backoff, open, domain.OutcomeFailure, nil},
		{"opens and enters error", all, backoff, openErr, domain.OutcomeFailure, []string{"open:error:backoff", "error:error:backoff"}},
		{"failed probe reopens", all, halfOpen, open, domain.OutcomeFailure, nil},
		{"recovered from error (re-probe)", all, errSt, okSt, domain.OutcomeSuccess, []string{"recovered:ok:error"}},
		{"recovered from open", all, open, okSt, domain.OutcomeSuccess, []string{"recovered:ok:open"}},
		{"recovered from half-open", def, halfOpen, okSt, domain.OutcomeSuccess, []string{"recovered:ok:half-open"}},
		{"recovered, not wanted", &config.Notify{On: []string{config.EventError}}, errSt, okSt, domain.OutcomeSuccess, nil},
		{"backoff to ok", all, backoff, okSt, domain.OutcomeSuccess, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			evs := PollEvents(c.n, "s", &c.prev, &c.cur, c.kind, "x", t0, t1)
			var got []string
			ids := map[string]bool{}
			for _, ev := range evs {
				got = append(got, ev.Event+":"+ev.State+":"+ev.PreviousState)
				if ev.Source != "s" || !ev.At.Equal(t1) || len(ev.ID) != 32 || ids[ev.ID] || ev.ConsecutiveFailures != c.cur.ConsecutiveFailures {
					t.Errorf("event %+v: want source s, at %v, a fresh 32-hex id, the current failures", ev, t1)
				}
				ids[ev.ID] = true
			}
			if len(got) != len(c.want) {
				t.Fatalf("events %v, want %v", got, c.want)
			}
			for i := range got {
				if got[i] != c.want[i] {
					t.Fatalf("events %v, want %v", got, c.want)
				}
			}
		})
	}
}
