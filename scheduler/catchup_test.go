package scheduler

import (
	"testing"
	"time"

	"github.com/pacer-dev/pacer/scheduler/policy"
)

// TestCatchUp: a taken-over source whose due time passed is polled at
// once unless its next "@every" tick is within half the period (and a
// second): then that tick takes the missed one's place.
func TestCatchUp(t *testing.T) {
	base := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC) // a tick of phase 0
	sec := func(d float64) time.Time { return base.Add(time.Duration(d * float64(time.Second))) }
	for _, c := range []struct {
		name     string
		every    time.Duration
		due, now time.Time
		want     time.Time
	}{
		{"next tick 200ms away: it takes the missed one's place", time.Second, sec(-1), sec(-0.2), sec(0)},
		{"next tick 600ms away: polled at once", time.Second, sec(-1), sec(-0.6), sec(-1)},
		{"not missed: unchanged", time.Second, sec(0), sec(-0.2), sec(0)},
		{"10s period, next tick 3s away: polled at once", 10 * time.Second, sec(-10), sec(-3), sec(-10)},
		{"10s period, next tick 0.5s away: that tick", 10 * time.Second, sec(-10), sec(-0.5), sec(0)},
		{"a backoff due off the grid, next tick near: that tick", time.Second, sec(-0.7), sec(-0.1), sec(0)},
	} {
		t.Run(c.name, func(t *testing.T) {
			due := c.due
			e := &entry{timing: policy.Timing{Every: c.every}}
			e.st.NextRunAt = &due
			catchUp(e, c.now)
			if e.st.NextRunAt == nil || !e.st.NextRunAt.Equal(c.want) {
				t.Errorf("due %s at %s: next_run_at %v, want %s", c.due.Format("15:04:05.000"), c.now.Format("15:04:05.000"), e.st.NextRunAt, c.want.Format("15:04:05.000"))
			}
		})
	}
	e := &entry{} // a cron schedule (no period): always at once
	due := sec(-1)
	e.st.NextRunAt = &due
	if catchUp(e, sec(-0.1)); !e.st.NextRunAt.Equal(due) {
		t.Errorf("a source without a period: next_run_at moved to %v", e.st.NextRunAt)
	}
}

// TestClusterShare: a member's share of cluster.concurrency by the shards
// it polls is rounded down (the shares of three members add up to at most
// the cap) and never 0 while it polls a shard.
func TestClusterShare(t *testing.T) {
	for _, c := range []struct{ cc, shards, want int }{
		{30, 85, 9}, {30, 86, 10}, {30, 256, 30}, {30, 1, 1}, {2, 85, 1}, {256, 1, 1}, {512, 1, 2},
	} {
		if got := clusterShare(c.cc, c.shards); got != c.want {
			t.Errorf("clusterShare(%d, %d) = %d, want %d", c.cc, c.shards, got, c.want)
		}
	}
	for cc := 3; cc <= 300; cc++ {
		if sum := clusterShare(cc, 85) + clusterShare(cc, 85) + clusterShare(cc, 86); sum > cc {
			t.Errorf("cluster.concurrency %d: three members of 85, 85 and 86 shards get %d in all", cc, sum)
		}
	}
}
