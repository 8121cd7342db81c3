package rates

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/pacer-dev/pacer/internal/clock"
)

func TestRingKeepsTheLastSizeOldestFirst(t *testing.T) {
	var r Ring
	if got := r.Samples(); len(got) != 0 {
		t.Fatalf("empty ring: %d samples", len(got))
	}
	base := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	for i := range Size + 25 {
		r.Add(Sample{At: base.Add(time.Duration(i) * Every), Inflight: i})
	}
	got := r.Samples()
	if len(got) != Size {
		t.Fatalf("samples: %d, want %d", len(got), Size)
	}
	for i, s := range got {
		if s.Inflight != 25+i {
			t.Fatalf("sample %d is the %dth added, want the %dth (oldest first, the first 25 dropped)", i, s.Inflight, 25+i)
		}
	}
	got[0].Inflight = -1
	if r.Samples()[0].Inflight == -1 {
		t.Error("Samples returned the ring's own memory, not a copy")
	}
}

// counters is a fake daemon's pacer_polls_total and load: 3 successes
// and 1 failure a second, 2 polls in flight of 8.
type counters struct {
	mu    sync.Mutex
	clk   clock.Clock
	start time.Time
}

func (c *counters) read() Reading {
	c.mu.Lock()
	defer c.mu.Unlock()
	secs := c.clk.Now().Sub(c.start).Seconds()
	var r Reading
	r.Polls[Success], r.Polls[Failure] = 3*secs, secs
	r.Inflight, r.Limit = 2, 8
	return r
}

// TestSamplerOnTheClock runs the sampler for 70 minutes of fake time: the
// ring holds the last hour, a sample every 10 s, each with the rates the
// counters grew by.
func TestSamplerOnTheClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := clock.Real{}
		c := &counters{clk: clk, start: clk.Now()}
		s := NewSampler(clk, c.read)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			s.Run(ctx)
		}()
		began := clk.Now()
		time.Sleep(5 * time.Second) // mid-period
		synctest.Wait()
		if n := len(s.Samples()); n != 0 {
			t.Fatalf("after 5 s: %d samples, want 0", n)
		}
		time.Sleep(70*time.Minute - 5*time.Second)
		synctest.Wait()
		got := s.Samples()
		if len(got) != Size {
			t.Fatalf("after 70 min: %d samples, want %d", len(got), Size)
		}
		if last := got[len(got)-1].At; !last.Equal(began.Add(70 * time.Minute)) {
			t.Errorf("newest sample at %v, want %v", last.Sub(began), 70*time.Minute)
		}
		for i, smp := range got {
			if i > 0 && smp.At.Sub(got[i-1].At) != Every {
				t.Fatalf("samples %d and %d are %v apart, want %v", i-1, i, smp.At.Sub(got[i-1].At), Every)
			}
			if smp.PerSecond[Success] != 3 || smp.PerSecond[Failure] != 1 || smp.PerSecond[Throttled] != 0 {
				t.Fatalf("sample %d: %v per second, want 3 successes and 1 failure", i, smp.PerSecond)
			}
			if smp.Inflight != 2 || smp.Limit != 8 {
				t.Fatalf("sample %d: %d in flight of %d, want 2 of 8", i, smp.Inflight, smp.Limit)
			}
		}
		cancel()
		<-done // Run ends with its context
	})
}

func TestRateWhenTheClockSteppedBack(t *testing.T) {
	now := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	var a, b Reading
	a.Polls[Success], b.Polls[Success] = 100, 150
	b.Polls[Failure] = -5 // a counter never shrinks; if it seemed to, no negative rate
	s := rate(a, b, now, now.Add(-time.Second), Every)
	if s.PerSecond[Success] != 5 || s.PerSecond[Failure] != 0 {
		t.Errorf("rate over a backward step: %v, want 5/s over the nominal 10 s and 0 failures", s.PerSecond)
	}
}
