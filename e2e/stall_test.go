package e2e

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// stallMonitor measures how late this test process wakes up from 10 ms
// sleeps, for the whole run. On a loaded machine every process on it (the
// daemon under test too) is delayed about as much, so a timing bound of the
// contract ("within 2 s", "polled every second") is checked as the bound plus
// the lateness seen over the interval it covers: strict on a quiet machine,
// and not failing on a starved one for what the machine did. The samples are
// kept in a ring of fixed size (10 min at one sample per 10 ms).
type stallMonitor struct {
	mu   sync.Mutex
	ring []stallSample
	next int
	full bool
}

type stallSample struct {
	at   time.Time     // end of the sleep
	late time.Duration // how much longer than asked it took (0 when on time)
}

// stallTick is the probe's period; stallRing how many probes are kept.
const (
	stallTick = 10 * time.Millisecond
	stallRing = 60_000
)

// stalls is started by TestMain; the tests read it.
var stalls = startStallMonitor()

func startStallMonitor() *stallMonitor {
	m := &stallMonitor{ring: make([]stallSample, stallRing)}
	go func() {
		for {
			t0 := time.Now()
			time.Sleep(stallTick)
			now := time.Now()
			late := now.Sub(t0) - stallTick
			if late < time.Millisecond {
				continue
			}
			m.mu.Lock()
			m.ring[m.next] = stallSample{at: now, late: late}
			m.next++
			if m.next == len(m.ring) {
				m.next, m.full = 0, true
			}
			m.mu.Unlock()
		}
	}()
	return m
}

// lateBetween is the total lateness of the probes that ended in (a, b]: about
// how long the machine kept this process (and so the daemon) from running in
// that interval.
func (m *stallMonitor) lateBetween(a, b time.Time) time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.next
	if m.full {
		n = len(m.ring)
	}
	var sum time.Duration
	for _, s := range m.ring[:n] {
		if s.at.After(a) && !s.at.After(b) {
			sum += s.late
		}
	}
	return sum
}

// within is bound plus the lateness seen from a to b: the margin a timing
// check of the interval [a, b] allows for a loaded machine.
func (m *stallMonitor) within(bound time.Duration, a, b time.Time) time.Duration {
	return bound + m.lateBetween(a, b)
}

// waitSampler follows how long processes have waited for a CPU: read
// gives each one's wait (runDelay) and is called every period while the
// sampler lives; a nil map is no sample.
type waitSampler struct {
	mu      sync.Mutex
	pts     []waitPoint // in time order
	stop    chan struct{}
	stopped chan struct{}
}

// waitPoint is the processes' waits at one time.
type waitPoint struct {
	at   time.Time
	wait map[int]time.Duration
}

func startWaitSampler(period time.Duration, read func() map[int]time.Duration) *waitSampler {
	s := &waitSampler{stop: make(chan struct{}), stopped: make(chan struct{})}
	go func() {
		defer close(s.stopped)
		tick := time.NewTicker(period)
		defer tick.Stop()
		for {
			if w := read(); w != nil {
				s.mu.Lock()
				s.pts = append(s.pts, waitPoint{at: time.Now(), wait: w})
				s.mu.Unlock()
			}
			select {
			case <-s.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

// Stop ends the sampling (call it once the processes are dead or about to
// be).
func (s *waitSampler) Stop() {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	<-s.stopped
}

// runqSampler follows how long the threads of a process have waited for
// a CPU (the run_delay of /proc/PID/task/*/schedstat, summed), every 20ms
// while it lives: the time the machine kept it from running.
type runqSampler struct {
	*waitSampler
	pid int
}

func sampleRunq(pid int) *runqSampler {
	return &runqSampler{pid: pid, waitSampler: startWaitSampler(20*time.Millisecond, func() map[int]time.Duration {
		if w, ok := runDelay(pid); ok {
			return map[int]time.Duration{pid: w}
		}
		return nil
	})}
}

// runDelay sums the run-queue wait of every thread of pid.
func runDelay(pid int) (time.Duration, bool) {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0, false
	}
	var sum int64
	for _, e := range ents {
		data, err := os.ReadFile(dir + "/" + e.Name() + "/schedstat")
		if err != nil {
			continue
		}
		if f := strings.Fields(string(data)); len(f) >= 2 {
			n, _ := strconv.ParseInt(f[1], 10, 64)
			sum += n
		}
	}
	return time.Duration(sum), true
}

// between is how much the process waited for a CPU from a to b (as far as
// the samples tell: from the last one at or before a to the last one at or
// before b).
func (s *runqSampler) between(a, b time.Time) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	var from, to time.Duration
	haveTo := false
	for _, p := range s.pts {
		if !p.at.After(a) {
			from = p.wait[s.pid]
		}
		if !p.at.After(b) {
			to, haveTo = p.wait[s.pid], true
		}
	}
	if !haveTo || to < from {
		return 0
	}
	return to - from
}

// total is the run-queue wait over the whole life sampled.
func (s *runqSampler) total() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.pts) == 0 {
		return 0
	}
	return s.pts[len(s.pts)-1].wait[s.pid] - s.pts[0].wait[s.pid]
}

// watchStarvation starts following how long the daemon's threads wait for a
// CPU, for within; a test calls it right after the start of a daemon whose
// timing it checks (the sampling costs a read of /proc per thread every
// 20 ms, so not every daemon has it).
func (d *daemon) watchStarvation() {
	d.runq = sampleRunq(d.pid())
	d.t.Cleanup(d.runq.Stop)
}

// within is bound plus what the machine took from the daemon from a to b:
// the larger of this process's lateness and the daemon's run-queue wait
// (when watchStarvation runs). A starved daemon starts its polls late by
// about as much; a daemon that breaks the bound on its own does not get it.
func (d *daemon) within(bound time.Duration, a, b time.Time) time.Duration {
	extra := stalls.lateBetween(a, b)
	if d.runq != nil {
		extra = max(extra, d.runq.between(a, b))
	}
	return bound + extra
}
