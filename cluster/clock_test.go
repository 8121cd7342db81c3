package cluster_test

import (
	"context"
	"github.com/pacer-dev/pacer/internal/clock"
	"sync"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/cluster"
	"github.com/pacer-dev/pacer/internal/waitfor"
)

// fakeTimer is a timer the test fires by hand, recording what it was set to.
type fakeTimer struct {
	c    chan time.Time
	mu   *sync.Mutex
	sets *[]time.Duration
}

func (f fakeTimer) C() <-chan time.Time { return f.c }
func (f fakeTimer) Stop() bool          { return true }
func (f fakeTimer) Reset(d time.Duration) bool {
	f.mu.Lock()
	*f.sets = append(*f.sets, d)
	f.mu.Unlock()
	return true
}

// timerClock is the wall clock with the test's timers.
type timerClock struct {
	clock.Real
	newTimer func(d time.Duration) clock.Timer
}

func (c timerClock) NewTimer(d time.Duration) clock.Timer { return c.newTimer(d) }

// The round loop waits on the timers of the clock it is given, not on the
// process's own (issue 21: one clock for the scheduler, the cluster and the
// notifier): a round follows each tick of the injected timer, and none
// comes without one.
func TestRunWaitsOnTheInjectedClock(t *testing.T) {
	dsn := newDSN(t)
	var mu sync.Mutex
	var sets []time.Duration
	tick := make(chan time.Time)
	m, err := cluster.New(openStore(t, dsn), cluster.Options{Name: "a", Lease: 30 * time.Second, Fingerprint: "f",
		Clock: timerClock{newTimer: func(d time.Duration) clock.Timer {
			mu.Lock()
			sets = append(sets, d)
			mu.Unlock()
			return fakeTimer{c: tick, mu: &mu, sets: &sets}
		}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); m.Run(ctx) }()
	rounds := func() int { mu.Lock(); defer mu.Unlock(); return len(sets) }
	// The timer is made once and set again after each round: with k ticks
	// taken, k+2 settings (the first round's runs before any tick).
	waitfor.True(t, 30*time.Second, "the first round", func() bool { return rounds() >= 2 })
	for k := 1; k <= 3; k++ {
		select { // taken only by a loop waiting on the injected timer
		case tick <- time.Now():
		case <-time.After(30 * time.Second):
			t.Fatalf("tick %d: the round loop does not wait on the injected timer (%d timer settings)", k, rounds())
		}
		waitfor.True(t, 30*time.Second, "the round after a tick of the injected timer", func() bool { return rounds() >= k+2 })
		if got := rounds(); got != k+2 {
			t.Fatalf("after %d ticks of the injected timer: %d timer settings, want %d", k, got, k+2)
		}
	}
	cancel()
	<-done
	mu.Lock()
	defer mu.Unlock()
	if sets[0] != time.Second { // min(lease/3, roundEvery)
		t.Errorf("the first round's timer was set to %v, want 1s", sets[0])
	}
}
