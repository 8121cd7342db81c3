package scheduler

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/pacer-dev/pacer/breaker"
	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/store"
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
	okSt := store.SourceState{LastRunAt: ran, LastOutcome: store.OutcomeSuccess}
	backoff := store.SourceState{LastRunAt: ran, LastOutcome: store.OutcomeFailure, ConsecutiveFailures: 1}
	errSt := store.SourceState{LastRunAt: ran, LastOutcome: store.OutcomeFailure, ConsecutiveFailures: 2, ErrorReason: "2 consecutive failures; last: x"}
	open := store.SourceState{LastRunAt: ran, LastOutcome: store.OutcomeFailure, ConsecutiveFailures: 5, BreakerState: breaker.Open, BreakerUntil: &future}
	halfOpen := open
	halfOpen.BreakerUntil = &past // cooldown over: shown half-open
	openErr := errSt
	openErr.BreakerState, openErr.BreakerUntil = breaker.Open, &future
	for _, c := range []struct {
		name      string
		n         *config.Notify
		prev, cur store.SourceState
		kind      string
		want      []string // event:state:previous_state
	}{
		{"no notify", nil, backoff, errSt, store.OutcomeFailure, nil},
		{"ok to backoff", all, okSt, backoff, store.OutcomeFailure, nil},
		{"enters error", all, backoff, errSt, store.OutcomeFailure, []string{"error:error:backoff"}},
		{"stays in error (failed re-probe)", all, errSt, errSt, store.OutcomeFailure, nil},
		{"breaker opens", all, backoff, open, store.OutcomeFailure, []string{"open:open:backoff"}},
		{"breaker opens, default on", def, backoff, open, store.OutcomeFailure, nil},
		{"opens and enters error", all, backoff, openErr, store.OutcomeFailure, []string{"open:error:backoff", "error:error:backoff"}},
		{"failed probe reopens", all, halfOpen, open, store.OutcomeFailure, nil},
		{"recovered from error (re-probe)", all, errSt, okSt, store.OutcomeSuccess, []string{"recovered:ok:error"}},
		{"recovered from open", all, open, okSt, store.OutcomeSuccess, []string{"recovered:ok:open"}},
		{"recovered from half-open", def, halfOpen, okSt, store.OutcomeSuccess, []string{"recovered:ok:half-open"}},
		{"recovered, not wanted", &config.Notify{On: []string{config.EventError}}, errSt, okSt, store.OutcomeSuccess, nil},
		{"backoff to ok", all, backoff, okSt, store.OutcomeSuccess, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			evs := pollEvents(c.n, "s", &c.prev, &c.cur, c.kind, "x", t0, t1)
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

// TestEventsCommittedWithState: a source that enters error and recovers by
// a re-probe leaves error then recovered in the outbox, committed with the
// states; without notify the outbox stays empty.
func TestEventsCommittedWithState(t *testing.T) {
	for _, withNotify := range []bool{true, false} {
		synctest.Test(t, func(t *testing.T) {
			dir := t.TempDir()
			body := lifecycleDefaults + flakySource("re", "error_after: 2\nbreaker: {failures: 0}\nerror_reprobe: 3s")
			if withNotify {
				body = "notify: {command: [\"true\"]}\n" + body
			}
			setFail(t, dir, true)
			h := start(t, dir, writeConfig(t, dir, body))
			defer h.stop()
			h.waitFor("error committed", 30*time.Second, func() bool {
				st, ok, err := h.store.GetState(t.Context(), "re")
				return err == nil && ok && st.ErrorReason != ""
			})
			setFail(t, dir, false)
			h.waitFor("recovery committed", 30*time.Second, func() bool {
				st := h.stored("re")
				return st.ErrorReason == "" && st.LastOutcome == store.OutcomeSuccess
			})
			n, err := h.store.PendingEvents(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if !withNotify {
				if n != 0 {
					t.Fatalf("%d events without notify", n)
				}
				return
			}
			var got []string
			for range 3 {
				evs, err := h.store.ClaimEvents(t.Context(), store.EventClaim{Member: "t", Now: time.Now(), Until: time.Now().Add(time.Minute), Limit: 10})
				if err != nil {
					t.Fatal(err)
				}
				for _, ev := range evs {
					got = append(got, ev.Event+":"+ev.PreviousState)
					if err := h.store.EventSent(t.Context(), ev.ID); err != nil {
						t.Fatal(err)
					}
				}
			}
			if len(got) != 2 || got[0] != "error:backoff" || got[1] != "recovered:error" {
				t.Fatalf("outbox held %v; want error (from backoff), then recovered (from error)", got)
			}
		})
	}
}
