package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// Rule 8.2: a limits group's rate holds for the whole cluster and is
// reached when there is demand. Three members, a group {rate: 3/s, burst:
// 1} of 12 sources on "@every 1s" (demand 12/s): over the 6 s after every
// source is owned, the upstream sees the group's rate, 18 starts, not half
// of it (9 in the issue; 12 to 14 here in half of the runs: when members
// joined, the member giving the group's shard away gave it back only once
// the group's whole queue had gone through at the group's rate, each job
// taking a token only to be refused, and the next owner claimed it a round
// later). Repeated, since the fault showed in one run of two.
func TestClusterGroupRateReached(t *testing.T) {
	const runs = 4
	for run := range runs {
		t.Run(fmt.Sprintf("run%d", run+1), func(t *testing.T) {
			dsn, _ := pgStore(t)
			u := newUpstream(t)
			var b strings.Builder
			b.WriteString("concurrency: 10\nlimits:\n  g: {rate: 3/s, burst: 1}\ndefaults:\n  schedule: \"@every 1s\"\n  timeout: 5s\nsources:\n")
			names := make([]string, 12)
			for i := range names {
				names[i] = fmt.Sprintf("s%d", i)
				fmt.Fprintf(&b, "  - {name: s%d, type: http, url: \"%s\", limit: g}\n", i, u.URL(fmt.Sprintf("/g/%d", i)))
			}
			ms := startCluster(t, dsn, 3, 0, b.String())
			settled(t, ms[0], names, "m1", "m2", "m3")
			from := time.Now()
			until := from.Add(6 * time.Second)
			sleepUntil(until)
			n := 0
			var all []time.Time
			for i := range names {
				for _, at := range u.Times(fmt.Sprintf("/g/%d", i)) {
					all = append(all, at)
					if !at.Before(from) && at.Before(until) {
						n++
					}
				}
			}
			slices.SortFunc(all, time.Time.Compare)
			var offs []string
			for _, at := range all {
				offs = append(offs, fmt.Sprintf("%+.2f", at.Sub(from).Seconds()))
			}
			t.Logf("group g: %d starts in 6 s (rate 3/s: 18); starts from the window's start (s): %s", n, strings.Join(offs, " "))
			// 18 at the rate; a wide margin below it for a loaded
			// machine, still well above half (9).
			if n < 15 || n > 20 {
				t.Errorf("group g (rate 3/s, burst 1) started %d polls in 6 s across the cluster, want 18 (15 to 20)", n)
			}
			// The hand-over of the group's shard, around the window's
			// start, pauses the group for less than a token's interval
			// (333 ms) and a second: 1.7-2.5 s before the fix, 1.3 s
			// with a queue drained at the group's rate, 0.6-0.7 s now.
			for i := 1; i < len(all); i++ {
				if all[i-1].Before(from.Add(-time.Second)) || !all[i].Before(until) {
					continue
				}
				if gap := all[i].Sub(all[i-1]); gap > 1250*time.Millisecond {
					t.Errorf("group g paused for %v (from %+.2f s of the window), want at most 1.25 s", gap.Round(time.Millisecond), all[i-1].Sub(from).Seconds())
				}
			}
		})
	}
}
