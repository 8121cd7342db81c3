package notify

import (
	"github.com/pacer-dev/pacer/internal/clock"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// manualClock reads the wall clock; its timers fire only when the test
// calls fire, so that a tick comes from this clock or not at all.
type manualClock struct {
	clock.Real
	mu     sync.Mutex
	timers []*manualTimer
}

// manualTimer is a timer of a manualClock: armed for d until fired or
// stopped.
type manualTimer struct {
	c     chan time.Time
	mu    sync.Mutex
	d     time.Duration
	armed bool
}

func (c *manualClock) NewTimer(d time.Duration) clock.Timer {
	t := &manualTimer{c: make(chan time.Time, 1), d: d, armed: true}
	c.mu.Lock()
	c.timers = append(c.timers, t)
	c.mu.Unlock()
	return t
}

// fire fires the armed timers of duration d; it returns how many.
func (c *manualClock) fire(d time.Duration) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, t := range c.timers {
		t.mu.Lock()
		if t.armed && t.d == d {
			t.armed = false
			t.c <- time.Now()
			n++
		}
		t.mu.Unlock()
	}
	return n
}

func (t *manualTimer) C() <-chan time.Time { return t.c }

func (t *manualTimer) Stop() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	was := t.armed
	t.armed = false
	return was
}

func (t *manualTimer) Reset(d time.Duration) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	was := t.armed
	t.armed, t.d = true, d
	return was
}

// TestIntervalOnTheSendersClock: the sender's reading of the outbox every
// interval is a timer of its clock: until that timer fires, no pass
// housekeeps (the pending gauge stays unset however long the wall clock
// runs), and each firing makes one housekept pass and sets the timer
// again for the interval.
func TestIntervalOnTheSendersClock(t *testing.T) {
	const interval = 7 * time.Millisecond // wall time would tick often
	st := openStore(t)
	commitEvents(t, st, []string{"a"}, 2)
	clock := &manualClock{}
	reg := prometheus.NewRegistry()
	// No notify section: a pass only counts the outbox, when it
	// housekeeps.
	s, err := New(nil, nil, Options{Outbox: st, Registry: reg, Member: "t", Interval: interval, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(func() { s.Stop(5 * time.Second) })
	waitUntil(t, "the pass of the wake-up at start", 10*time.Second, func() bool { return s.passes.Load() >= 1 })
	p0 := s.passes.Load()
	waitUntil(t, "passes on wake-ups", 10*time.Second, func() bool {
		s.Wake()
		return s.passes.Load() >= p0+3
	})
	if g := pendingGauge(t, reg); g != 0 {
		t.Fatalf("pacer_notifications_pending %v before the clock's timer fired: a tick came from elsewhere", g)
	}
	p0 = s.passes.Load()
	waitUntil(t, "the interval's timer armed", 10*time.Second, func() bool { return clock.fire(interval) == 1 })
	waitUntil(t, "the housekept pass", 10*time.Second, func() bool { return s.passes.Load() > p0 && pendingGauge(t, reg) == 2 })
	// Set again as it fired: the next firing housekeeps again.
	commitEvents(t, st, []string{"b"}, 1)
	waitUntil(t, "the interval's timer armed again", 10*time.Second, func() bool { return clock.fire(interval) == 1 })
	waitUntil(t, "the next housekept pass", 10*time.Second, func() bool { return pendingGauge(t, reg) == 3 })
}
