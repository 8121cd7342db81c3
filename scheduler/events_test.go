package scheduler

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/pacer-dev/pacer/domain"
)

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
				return st.ErrorReason == "" && st.LastOutcome == domain.OutcomeSuccess
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
				evs, err := h.store.ClaimEvents(t.Context(), domain.EventClaim{Member: "t", Now: time.Now(), Until: time.Now().Add(time.Minute), Limit: 10})
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
