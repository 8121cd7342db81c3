package hosts

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// upstreamModel is a simulated upstream: it admits perSecond requests per
// wall-clock second (0 = any) and answers 429 beyond, and answers in base
// (±10 %), doubled for a request arriving with more than knee in flight
// (0 = never).
type upstreamModel struct {
	perSecond int
	knee      int
	base      time.Duration
}

// simPoll is a poll in flight in the simulation.
type simPoll struct {
	end time.Time
	o   Outcome
}

// simStats are a simulation's figures after its warm-up.
type simStats struct {
	answers, throttled int
	maxRate            float64
	concs              map[int]int // learned concurrency at each simulated second
	lastConc           int
	rates              []float64 // the learned rate at each simulated second
	perSec             []int     // answers (not throttled) in each simulated second
}

// simulate drives tb's host through the upstream m for d of simulated
// time in 1 ms steps, with an unbounded backlog of polls (500 sources that
// always want to poll), as the scheduler would: a poll starts when the
// host's learned concurrency and rate allow it and Admit does not block
// it. Figures are taken after warm.
func simulate(tb *Table, host string, m upstreamModel, d, warm time.Duration) simStats {
	rng := rand.New(rand.NewPCG(1, 2))
	names := make([]string, 500)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%03d", host, i)
	}
	st := simStats{concs: map[int]int{}}
	var inflight []simPoll
	var tokens float64
	var winSec int64
	winCount, next := 0, 0
	waited := false
	for ms := 0; ms < int(d/time.Millisecond); ms++ {
		now := t0.Add(time.Duration(ms) * time.Millisecond)
		kept := inflight[:0]
		for _, p := range inflight {
			if p.end.After(now) {
				kept = append(kept, p)
				continue
			}
			tb.Finish(host, p.o, now)
			if sec := int(now.Sub(t0) / time.Second); !p.o.Throttled {
				for len(st.perSec) <= sec {
					st.perSec = append(st.perSec, 0)
				}
				st.perSec[sec]++
			}
			if now.Sub(t0) >= warm {
				st.answers++
				if p.o.Throttled {
					st.throttled++
				}
			}
		}
		inflight = kept
		c, r, b := tb.Limits(host)
		if r > 0 {
			tokens = min(tokens+r/1000, float64(b))
		}
		for {
			if len(inflight) >= c {
				waited = true
				break
			}
			if r > 0 && tokens < 1 {
				break
			}
			src := names[next%len(names)]
			if g := tb.Admit(host, src, now); g.Blocked {
				break
			}
			next++
			tokens--
			if sec := now.Unix(); sec != winSec {
				winSec, winCount = sec, 0
			}
			winCount++
			o := Outcome{Source: src, Waited: waited, Inflight: len(inflight) + 1}
			waited = false
			if m.perSecond > 0 && winCount > m.perSecond {
				o.Throttled, o.Latency = true, 5*time.Millisecond
			} else {
				lat := float64(m.base) * (0.9 + 0.2*rng.Float64())
				if m.knee > 0 && o.Inflight > m.knee {
					lat *= 2
				}
				o.Success, o.Latency = true, time.Duration(lat)
			}
			inflight = append(inflight, simPoll{end: now.Add(o.Latency), o: o})
		}
		if ms%1000 == 0 {
			st.rates = append(st.rates, r)
		}
		if ms%1000 == 0 && now.Sub(t0) >= warm {
			st.concs[c]++
			st.lastConc = c
			if r > st.maxRate {
				st.maxRate = r
			}
		}
	}
	return st
}

func TestSimulationLearnedConcurrency(t *testing.T) {
	tb := table(Settings{Concurrency: 64, Adaptive: true}, 500)
	st := simulate(tb, "api.x", upstreamModel{knee: 8, base: 100 * time.Millisecond}, 5*time.Minute, time.Minute)
	t.Logf("learned concurrency per second after the first minute: %v", st.concs)
	for c, n := range st.concs {
		if c < 6 || c > 12 {
			t.Fatalf("learned concurrency %d for %d s after the first minute, want 6..12 (%v)", c, n, st.concs)
		}
	}
	o, _ := tb.Object("api.x", at(5*time.Minute))
	if o.LearnedConcurrency == nil || o.LearnedRate != nil || o.BaselineMs == nil || *o.BaselineMs > 100 || *o.BaselineMs < 80 {
		t.Fatalf("object %+v", o)
	}
}

func TestSimulationLearnedRate(t *testing.T) {
	tb := table(Settings{Concurrency: 64, Adaptive: true}, 500)
	st := simulate(tb, "api.x", upstreamModel{perSecond: 50, base: 50 * time.Millisecond}, 5*time.Minute, time.Minute)
	share := float64(st.throttled) / float64(st.answers)
	perSec := float64(st.answers-st.throttled) / (4 * 60)
	t.Logf("after the first minute: %.1f answered/s, %.2f %% throttled, learned rate up to %.1f/s", perSec, 100*share, st.maxRate)
	for i := 0; i < len(st.rates); i += 15 {
		t.Logf("%3d s: rate %.1f answered %d", i, st.rates[i], st.perSec[min(i, len(st.perSec)-1)])
	}
	if st.maxRate < 0.75*50 || share > 0.03 {
		t.Fatalf("learned rate up to %.1f/s (want >= 37.5), %.2f %% throttled (want <= 3 %%)", st.maxRate, 100*share)
	}
	if perSec < 0.6*50 {
		t.Fatalf("%.1f answers/s after the first minute, want at least 30", perSec)
	}
}

// TestSimulationBoth: one host that both limits the rate and slows down
// past 8 in flight (the e2e upstream of issue 22).
func TestSimulationBoth(t *testing.T) {
	tb := table(Settings{Concurrency: 64, Adaptive: true}, 500)
	st := simulate(tb, "api.x", upstreamModel{perSecond: 50, knee: 8, base: 100 * time.Millisecond}, 5*time.Minute, time.Minute)
	share := float64(st.throttled) / float64(st.answers)
	perSec := float64(st.answers-st.throttled) / (4 * 60)
	t.Logf("after the first minute: %.1f answered/s, %.2f %% throttled, learned rate up to %.1f/s, concurrency %v",
		perSec, 100*share, st.maxRate, st.concs)
	if st.maxRate < 0.75*50 || share > 0.03 {
		t.Fatalf("learned rate up to %.1f/s (want >= 37.5), %.2f %% throttled (want <= 3 %%)", st.maxRate, 100*share)
	}
	for c := range st.concs {
		if c < 6 || c > 12 {
			t.Fatalf("learned concurrency %d, want 6..12 (%v)", c, st.concs)
		}
	}
}
