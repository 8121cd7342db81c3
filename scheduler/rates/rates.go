// Package rates keeps the daemon's last hour of load for the status page's
// charts (contract 15.4): every 10 s a sample of the polls per second by
// outcome and of the polls in flight against the cap, in a ring of 360
// samples held in memory. The samples are differences of the counters the
// metrics already keep (pacer_polls_total by outcome), read by one
// goroutine on the daemon's injected clock: nothing is counted twice and
// no poll pays for the chart.
package rates

import (
	"context"
	"sync"
	"time"

	"github.com/pacer-dev/pacer/internal/clock"
)

// Window: Size samples, one Every, an hour.
const (
	Every = 10 * time.Second
	Size  = 360
)

// Outcomes charted, in the order of Reading.Polls and Sample.PerSecond:
// the outcomes of pacer_polls_total that are polls (skipped ticks are not).
const (
	Success = iota
	Failure
	Throttled
	Rejected
	Interrupted
	Local
	NumOutcomes
)

// OutcomeNames are the pacer_polls_total labels of the outcomes, by index.
func OutcomeNames() [NumOutcomes]string {
	return [NumOutcomes]string{"success", "failure", "throttled", "rejected", "interrupted", "local_error"}
}

// Reading is the counters at one moment: the polls so far by outcome (they
// only grow) and the polls in flight and the cap now.
type Reading struct {
	Polls    [NumOutcomes]float64
	Inflight int
	Limit    int
}

// Sample is one point of the window: the polls per second by outcome over
// the interval that ends At, and the polls in flight and the cap at At.
type Sample struct {
	At        time.Time
	PerSecond [NumOutcomes]float64
	Inflight  int
	Limit     int
}

// Ring holds the last Size samples; it is safe for concurrent use.
type Ring struct {
	mu   sync.Mutex
	buf  [Size]Sample
	next int // where the next sample goes
	n    int // samples held, at most Size
}

// Add appends s, dropping the oldest sample when the ring is full.
func (r *Ring) Add(s Sample) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.buf[r.next] = s
	r.next = (r.next + 1) % Size
	r.n = min(r.n+1, Size)
}

// Samples returns a copy of the samples held, oldest first.
func (r *Ring) Samples() []Sample {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Sample, r.n)
	start := (r.next - r.n + Size) % Size
	for i := range r.n {
		out[i] = r.buf[(start+i)%Size]
	}
	return out
}

// Sampler fills a Ring from a reading of the counters every Every, on a
// clock.Clock. Run is its one goroutine.
type Sampler struct {
	ring  Ring
	read  func() Reading
	clk   clock.Clock
	every time.Duration
}

// NewSampler returns a sampler of read on clk; Run starts it.
func NewSampler(clk clock.Clock, read func() Reading) *Sampler {
	return &Sampler{read: read, clk: clk, every: Every}
}

// Samples returns the window, oldest first (see Ring.Samples).
func (s *Sampler) Samples() []Sample { return s.ring.Samples() }

// Run samples every Every until ctx ends. The first reading is the base of
// the first sample, taken one period later. A tick is planned from the
// previous one's plan, not from when it ran, so samples do not drift; a
// tick that comes late (a stopped machine) is not repeated.
func (s *Sampler) Run(ctx context.Context) {
	prev, prevAt := s.read(), s.clk.Now()
	next := prevAt.Add(s.every)
	t := s.clk.NewTimer(s.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		cur, now := s.read(), s.clk.Now()
		s.ring.Add(rate(prev, cur, prevAt, now, s.every))
		prev, prevAt = cur, now
		next = next.Add(s.every)
		if !next.After(now) { // late by a period or more: plan from now
			next = now.Add(s.every)
		}
		t.Reset(next.Sub(now))
	}
}

// rate is the sample of the interval from a (at from) to b (at to): the
// counters' growth per second, over the nominal period when the clock
// stepped back or stood still.
func rate(a, b Reading, from, to time.Time, nominal time.Duration) Sample {
	secs := to.Sub(from).Seconds()
	if secs <= 0 {
		secs = nominal.Seconds()
	}
	s := Sample{At: to, Inflight: b.Inflight, Limit: b.Limit}
	for i := range NumOutcomes {
		s.PerSecond[i] = max(b.Polls[i]-a.Polls[i], 0) / secs
	}
	return s
}
