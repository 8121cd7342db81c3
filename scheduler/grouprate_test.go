package scheduler

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// TestGroupRateAndBurstInFakeTime checks rule 3.2's token bucket exactly, on
// the bubble's clock: a group of rate 2/s and burst 1 never starts two polls
// less than 500 ms apart, a burst of 5 lets its first five through at once and
// the sixth only a token later, and 30/m starts one every 2 s. The e2e test of
// the same rule measures at the upstream, where a loaded machine shifts each
// start by its lag; here nothing does, so the bounds have no margin.
func TestGroupRateAndBurstInFakeTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var b strings.Builder
		b.WriteString("concurrency: 16\nhistory: {keep: 100}\nlimits:\n  b1: {rate: 2/s}\n  b5: {rate: 2/s, burst: 5}\n  perm: {rate: 30/m}\n" +
			"defaults: {schedule: \"* * * * * *\", timeout: 5s}\nsources:\n")
		groups := map[string]int{"b1": 6, "b5": 6, "perm": 3}
		for _, g := range []string{"b1", "b5", "perm"} {
			for i := range groups[g] {
				b.WriteString(flakySource(fmt.Sprintf("%s-%d", g, i), "limit: "+g))
			}
		}
		dir := t.TempDir()
		h := start(t, dir, writeConfig(t, dir, b.String()))
		defer h.stop()
		time.Sleep(10 * time.Second)

		starts := func(g string) []time.Time {
			var ts []time.Time
			for i := range groups[g] {
				recs, err := h.s.History(t.Context(), fmt.Sprintf("%s-%d", g, i), 100)
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range recs {
					ts = append(ts, r.StartedAt)
				}
			}
			slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
			return ts
		}
		checkRate := func(g string, ts []time.Time, burst int, every time.Duration) {
			t.Helper()
			if len(ts) < 2*burst+2 {
				t.Fatalf("%s: %d starts in 10 s", g, len(ts))
			}
			// Token bucket: any window [ts[i], ts[j]] holds at most burst +
			// its length / every starts; with burst 1 that is a gap of every
			// between any two.
			for i := range ts {
				for j := i + burst; j < len(ts); j++ {
					if need := time.Duration(j-i-burst+1) * every; ts[j].Sub(ts[i]) < need {
						t.Fatalf("%s: starts %d and %d %s apart; burst %d at one per %s needs %s", g, i, j, ts[j].Sub(ts[i]), burst, every, need)
					}
				}
			}
			// And the rate is reached: every source is due every second.
			if span := ts[len(ts)-1].Sub(ts[0]); span > time.Duration(len(ts)-burst)*every+every/2 {
				t.Errorf("%s: %d starts over %s; one per %s is reachable", g, len(ts), span, every)
			}
		}
		checkRate("b1", starts("b1"), 1, 500*time.Millisecond)
		b5 := starts("b5")
		checkRate("b5", b5, 5, 500*time.Millisecond)
		if d := b5[4].Sub(b5[0]); d != 0 {
			t.Errorf("b5: the first 5 starts took %s; a full bucket of 5 lets them through at once", d)
		}
		checkRate("perm", starts("perm"), 1, 2*time.Second)
	})
}
