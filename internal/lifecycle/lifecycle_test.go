package lifecycle

import (
	"github.com/pacer-dev/pacer/internal/clock"
	"testing"
	"testing/synctest"
	"time"
)

// TestStopBy, in a synctest bubble (fake time): a stage whose goroutines
// end on cancellation stops at once; one whose goroutine ignores it gives
// up exactly at the deadline on the clock, and reports it.
func TestStopBy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var c clock.Real
		var g Stage
		ctx := g.Begin()
		for range 3 {
			g.Spawn(func() { <-ctx.Done() })
		}
		start := c.Now()
		if !g.StopBy(c, start.Add(time.Minute)) {
			t.Fatal("StopBy: false for goroutines that end on cancellation")
		}
		if d := c.Now().Sub(start); d != 0 {
			t.Errorf("StopBy took %v for goroutines that end at once", d)
		}

		var stuck Stage
		stuck.Begin()
		release := make(chan struct{})
		stuck.Spawn(func() { <-release })
		start = c.Now()
		if stuck.StopBy(c, start.Add(time.Minute)) {
			t.Fatal("StopBy: true with a goroutine still running")
		}
		if d := c.Now().Sub(start); d != time.Minute {
			t.Errorf("StopBy gave up after %v, want the deadline's 1m", d)
		}
		close(release)
		synctest.Wait()
	})
}

// TestStopByNeverBegun: a stage never begun has nothing to stop.
func TestStopByNeverBegun(t *testing.T) {
	var g Stage
	if !g.StopBy(clock.Real{}, time.Now()) {
		t.Fatal("StopBy of a stage never begun: false")
	}
}

// TestAwaitByPastDeadline: with the deadline already past, done closed
// wins and an open done loses, without waiting.
func TestAwaitByPastDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := clock.Real{}
		closed := make(chan struct{})
		close(closed)
		if !AwaitBy(c, closed, c.Now().Add(-time.Hour)) {
			t.Error("AwaitBy: false for a closed channel")
		}
		start := c.Now()
		if AwaitBy(c, make(chan struct{}), start.Add(-time.Hour)) {
			t.Error("AwaitBy: true for an open channel")
		}
		if d := c.Now().Sub(start); d != 0 {
			t.Errorf("AwaitBy past its deadline waited %v", d)
		}
	})
}
