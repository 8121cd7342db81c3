package scheduler

import (
	"fmt"
	"regexp"
	"strconv"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/pacer-dev/pacer/breaker"
	"github.com/pacer-dev/pacer/scheduler/policy"
)

// stepClock is the clock of a synctest bubble whose wall clock steps, as
// NTP or "date -s" steps a host's: Now is the bubble's time moved by the
// steps taken so far, read without a monotonic reading (as a stored time
// is), while Monotonic and the timers are the bubble's, which no step
// moves. (Go reads the clock without libc: faketime cannot step it.)
type stepClock struct {
	origin time.Time
	off    atomic.Int64 // the sum of the steps, in ns
}

func newStepClock() *stepClock { return &stepClock{origin: time.Now()} }

func (c *stepClock) Now() time.Time {
	return time.Now().Round(0).Add(time.Duration(c.off.Load()))
}
func (c *stepClock) Monotonic() time.Duration       { return time.Since(c.origin) }
func (c *stepClock) NewTimer(d time.Duration) Timer { return RealClock{}.NewTimer(d) }
func (c *stepClock) step(d time.Duration)           { c.off.Add(int64(d)) }

// TestWallClockStep steps the wall clock 40 s back, 1 h back and 1 h
// forward, 10.3 s after the start, with the monotonic clock untouched (issue
// 20 item 13: after a step of -40 s, 20 sources on "@every 2s" were not
// polled for 42 s while "why" said "next poll in 36 s"; after -1 h, not
// again). "@every" periods, backoffs and breaker cooldowns are durations
// on the monotonic clock: every interval between two polls is the same as
// without the step. Cron ticks follow the wall clock: after a step back the
// next tick is the wall clock's (no silence longer than the period), and
// after a step forward the tick the step skipped is polled once (cronie's
// catch-up), so one interval is split in two, and none is longer. Right
// after the step, the state in memory and in the store, and what "why"
// says, give the time left on the monotonic clock (next_run_at is stored
// as a time of the stepped wall clock: a restart resumes from it).
func TestWallClockStep(t *testing.T) {
	cases := []struct {
		name     string
		settings string // of each source
		fail     bool
		want     time.Duration // the interval between two polls
		cron     bool
	}{
		{"every", `schedule: "@every 2s"`, false, 2 * time.Second, false},
		{"cron", `schedule: "*/10 * * * * *"`, false, 10 * time.Second, true},
		{"backoff every", `schedule: "@every 2s", backoff: {initial: 20s, max: 20s, multiplier: 1, jitter: 0}, breaker: {failures: 0}`,
			true, 20 * time.Second, false},
		{"backoff cron", `schedule: "*/10 * * * * *", backoff: {initial: 25s, max: 25s, multiplier: 1, jitter: 0}, breaker: {failures: 0}`,
			true, 25 * time.Second, false},
		{"cooldown", `schedule: "@every 2s", backoff: {initial: 1s, max: 1s, multiplier: 1, jitter: 0}, breaker: {failures: 1, cooldown: 30s}`,
			true, 30*time.Second + time.Millisecond, false},
	}
	const nsrc = 20 // as in the issue
	const slack = 20 * time.Millisecond
	inWhy := regexp.MustCompile(`in (\d+) s$`)
	for _, c := range cases {
		for _, step := range []time.Duration{-40 * time.Second, -time.Hour, time.Hour} {
			t.Run(fmt.Sprintf("%s/%v", c.name, step), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					dir := t.TempDir()
					body := "concurrency: 4\ndefaults: {timeout: 5s, error_after: 0}\nsources:\n"
					for i := range nsrc {
						body += fmt.Sprintf("  - {name: s%d, type: exec, command: [\"true\"], %s}\n", i, c.settings)
					}
					clock := newStepClock()
					s, log := startRecording(t, dir, writeConfig(t, dir, body), clock)
					for i := range nsrc {
						log.setFail(fmt.Sprintf("s%d", i), c.fail)
					}
					time.Sleep(10*time.Second + 300*time.Millisecond)
					clock.step(step)
					if err := s.Healthy(t.Context(), 5*time.Second); err != nil {
						t.Errorf("right after the step: %v", err) // the watchdog's age is monotonic
					}
					time.Sleep(1500 * time.Millisecond) // the loop looks at least once a second
					for i := range nsrc {
						name := fmt.Sprintf("s%d", i)
						o, err := s.ExplainSource(name)
						if err != nil {
							t.Fatal(err)
						}
						if o.NextRunAt == nil {
							t.Fatalf("%s: no next run", name)
						}
						if left := o.NextRunAt.Sub(clock.Now()); left < 0 || left > c.want+slack {
							t.Errorf("%s: next run %v away on the stepped wall clock, want within %v (why: %q)", name, left, c.want, o.Why)
						}
						if m := inWhy.FindStringSubmatch(o.Why); !c.fail && (m == nil || atoi(m[1]) > int(c.want/time.Second)) {
							t.Errorf("%s: why %q, want a next poll within %v", name, o.Why, c.want)
						}
						stored := storedState(t, dir, name)
						if stored.NextRunAt == nil {
							t.Fatalf("%s: no stored next run", name)
						}
						if left := stored.NextRunAt.Sub(clock.Now()); left < -slack || left > c.want+slack {
							t.Errorf("%s: stored next_run_at %v away on the stepped wall clock, want within %v", name, left, c.want)
						}
					}
					time.Sleep(70 * time.Second)
					for i := range nsrc {
						name := fmt.Sprintf("s%d", i)
						ts := log.times(name)
						if min := int((80*time.Second)/c.want) - 1; len(ts) < min {
							t.Errorf("%s: %d polls in 82 s, want at least %d", name, len(ts), min)
						}
						if len(ts) == 0 || time.Since(ts[len(ts)-1]) > c.want+slack {
							t.Errorf("%s: silent at the end of the run (polls %v)", name, gaps(ts))
						}
						short := 0
						for j, g := range gaps(ts) {
							if g > c.want+slack {
								t.Errorf("%s: %v between polls %d and %d, want %v", name, g, j, j+1, c.want)
							}
							if g < c.want-slack {
								short++
							}
						}
						if allowed := map[bool]int{true: 2}[c.cron && step > 0]; short > allowed {
							t.Errorf("%s: %d intervals shorter than %v (%v), want at most %d", name, short, c.want, gaps(ts), allowed)
						}
					}
				})
			})
		}
	}
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// TestWallClockStepDuringPoll: a step of the wall clock while a poll is
// in flight, seen first by the poll's end (the scheduling loop looks once a
// second): the poll's outcome is moved once, not twice (a double move put
// the next poll at once, 555 ms after the previous one on "@every 10s").
func TestWallClockStepDuringPoll(t *testing.T) {
	for _, step := range []time.Duration{-40 * time.Second, -time.Hour, time.Hour} {
		t.Run(step.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				dir := t.TempDir()
				body := "defaults: {timeout: 5s}\nsources:\n  - {name: s, type: exec, command: [\"true\"], schedule: \"@every 10s\"}\n"
				clock := newStepClock()
				_, log := startRecording(t, dir, writeConfig(t, dir, body), clock)
				log.mu.Lock()
				log.hold = 500 * time.Millisecond
				log.mu.Unlock()
				waitUntil(t, "a first poll", 20*time.Second, func() bool { return len(log.times("s")) > 0 })
				time.Sleep(100 * time.Millisecond)
				clock.step(step)
				time.Sleep(35 * time.Second)
				ts := log.times("s")
				if len(ts) < 4 {
					t.Errorf("%d polls in 35 s on @every 10s", len(ts))
				}
				for i, g := range gaps(ts) {
					if g < 10*time.Second-20*time.Millisecond || g > 10*time.Second+20*time.Millisecond {
						t.Errorf("%v between polls %d and %d, want 10s", g, i, i+1)
					}
				}
			})
		})
	}
}

// TestStepPoll: a poll's times read before a step the scheduler has seen
// are moved by it (and its breaker's cooldown); within policy.StepMin nothing moves.
func TestStepPoll(t *testing.T) {
	base := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	k := &clocks{skew: int64(-time.Hour)}
	o := policy.Outcome{Start: base, End: base.Add(time.Second), Brk: breaker.Snapshot{State: breaker.Open, Until: base.Add(time.Minute)}}
	if !k.stepPoll(&o, 0) || !o.Start.Equal(base.Add(-time.Hour)) || !o.End.Equal(base.Add(time.Second-time.Hour)) ||
		!o.Brk.Until.Equal(base.Add(time.Minute-time.Hour)) {
		t.Errorf("after a step of -1h: %v %v %v", o.Start, o.End, o.Brk.Until)
	}
	o2 := policy.Outcome{Start: base, End: base}
	if k.stepPoll(&o2, int64(-time.Hour+policy.StepMin/2)) || !o2.Start.Equal(base) {
		t.Errorf("moved by less than policy.StepMin: %v", o2.Start)
	}
}

// TestStepWhileDown: the wall clock stepped back an hour while no daemon
// ran (nothing saw the step). The next daemon does not wait an hour for a
// healthy source's stored next_run_at: a periodic schedule's due time is
// never further ahead than its next tick. A failing source keeps its
// stored backoff (it may lie further ahead than a tick).
func TestStepWhileDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		body := "defaults: {timeout: 5s, error_after: 0, breaker: {failures: 0}}\nsources:\n" +
			"  - {name: every, type: exec, command: [\"true\"], schedule: \"@every 2s\"}\n" +
			"  - {name: cron, type: exec, command: [\"true\"], schedule: \"*/10 * * * * *\"}\n" +
			"  - {name: failing, type: exec, command: [\"true\"], schedule: \"@every 2s\", backoff: {initial: 40s, max: 40s, multiplier: 1, jitter: 0}}\n"
		cfg := writeConfig(t, dir, body)
		s1, log1 := startRecording(t, dir, cfg, newStepClock())
		log1.setFail("failing", true)
		time.Sleep(11 * time.Second)
		if err := s1.Shutdown(3 * time.Second); err != nil {
			t.Fatal(err)
		}
		failedAt := log1.times("failing")
		clock := newStepClock()
		clock.step(-time.Hour)
		_, log2 := startRecording(t, dir, cfg, clock)
		log2.setFail("failing", true)
		time.Sleep(30 * time.Second)
		for name, within := range map[string]time.Duration{"every": 2 * time.Second, "cron": 10 * time.Second} {
			ts := log2.times(name)
			if len(ts) == 0 || ts[0].Sub(clock.origin) > within+20*time.Millisecond {
				t.Errorf("%s: first poll after the restart %v, want within %v", name, ts, within)
			}
		}
		if ts := log2.times("failing"); len(ts) != 0 {
			t.Errorf("failing: polled %v after the restart, within its 40 s backoff from %v", ts, failedAt)
		}
	})
}

// offsetWallClock is RealClock (in a bubble: the bubble's) moved by an
// offset that can change: a system clock that steps, whose readings carry
// the monotonic clock, unmoved. The scheduler measures its steps as it
// does RealClock's, against the system's monotonic clock.
type offsetWallClock struct {
	RealClock
	off atomic.Int64
}

func (c *offsetWallClock) Now() time.Time {
	return time.Now().Add(time.Duration(c.off.Load()))
}

// TestWallClockStepSystemMonotonic: the steps of a clock without a
// monotonic clock of its own are measured against the system's monotonic
// clock (the path of RealClock): a step back of 40 s or 1 h leaves 20
// sources on "@every 2s" polled every 2 s.
func TestWallClockStepSystemMonotonic(t *testing.T) {
	for _, step := range []time.Duration{-40 * time.Second, -time.Hour} {
		t.Run(step.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				dir := t.TempDir()
				body := "defaults: {timeout: 5s}\nsources:\n"
				for i := range 20 {
					body += fmt.Sprintf("  - {name: s%d, type: exec, command: [\"true\"], schedule: \"@every 2s\"}\n", i)
				}
				clock := &offsetWallClock{}
				_, log := startRecording(t, dir, writeConfig(t, dir, body), clock)
				time.Sleep(10*time.Second + 300*time.Millisecond)
				clock.off.Add(int64(step))
				time.Sleep(30 * time.Second)
				for i := range 20 {
					ts := log.times(fmt.Sprintf("s%d", i))
					for j, g := range gaps(ts) {
						if g < 2*time.Second-20*time.Millisecond || g > 2*time.Second+20*time.Millisecond {
							t.Errorf("s%d: %v between polls %d and %d, want 2s", i, g, j, j+1)
						}
					}
					if len(ts) < 19 {
						t.Errorf("s%d: %d polls in 40 s", i, len(ts))
					}
				}
			})
		})
	}
}
