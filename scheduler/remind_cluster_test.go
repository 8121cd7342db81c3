package scheduler

import (
	"slices"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/domain"
)

// TestRemindersOnACluster (contract 15.3, 8): two members on one store, a
// source in error with remind_every: 2s: the member that polls it sends
// the reminders, from the state both read, so that none is doubled (no
// two within 1.5 s) and they keep coming when the source moves to the
// other member (its RemindAt goes with the state).
func TestRemindersOnACluster(t *testing.T) {
	st := openPG(t)
	a, b := newClusterMember(t, st, "a"), newClusterMember(t, st, "b")
	runMember(t, a)
	runMember(t, b)
	dir := t.TempDir()
	cfg := writeConfig(t, dir, `notify: {command: ["true"], on: [error], remind_every: 2s}
sources:
  - {name: r, type: exec, command: ["false"], schedule: "@every 1s", error_after: 1, breaker: {failures: 0}}
`)
	startMemberScheduler(t, cfg, st, a, nil)
	startMemberScheduler(t, cfg, st, b, nil)
	waitUntil(t, "r in error", 30*time.Second, func() bool {
		s, ok, err := st.GetState(t.Context(), "r")
		return err == nil && ok && s.ErrorReason != ""
	})
	time.Sleep(7 * time.Second)
	if err := st.LeaveCluster(t.Context(), "a"); err != nil { // r's shard goes to b if a had it
		t.Fatal(err)
	}
	time.Sleep(8 * time.Second)
	var at []time.Time
	for range 100 {
		evs, err := st.ClaimEvents(t.Context(), domain.EventClaim{Member: "t", Now: time.Now(), Until: time.Now().Add(time.Minute), Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) == 0 {
			break
		}
		for _, ev := range evs {
			if ev.Reminder {
				at = append(at, ev.At)
			}
			if err := st.EventSent(t.Context(), ev.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
	slices.SortFunc(at, func(x, y time.Time) int { return x.Compare(y) })
	if len(at) < 4 {
		t.Fatalf("%d reminders in 15 s at 2 s; want at least 4", len(at))
	}
	for i := 1; i < len(at); i++ {
		if d := at[i].Sub(at[i-1]); d < 1500*time.Millisecond {
			t.Fatalf("reminders %s apart (at %v): doubled", d, at)
		}
	}
}
