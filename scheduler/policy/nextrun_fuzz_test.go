package policy

import (
	"math"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/breaker"
	"github.com/pacer-dev/pacer/config"
)

// nextRunCase is one input of the next-run rule, from raw fuzz values.
type nextRunCase struct {
	now       time.Time
	tm        Timing
	notBefore time.Time
	brk       breaker.Snapshot
	backoff   breaker.Backoff
	k         int
	jitter    float64
}

// fuzzSchedules are the schedule kinds the fuzzer picks from; "@every"
// takes its duration from the input.
func fuzzSchedule(t *testing.T, kind uint8, every int64) config.Schedule {
	specs := []string{"CRON_TZ=Europe/Berlin 30 2 * * *", "0 * * * *", "CRON_TZ=America/New_York 0,30 1-3 * * *", "*/5 * * * * *"}
	if int(kind) < len(specs) {
		s, err := config.ParseSchedule(specs[kind])
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	if every <= 0 {
		every = -(every + 1) // every int64 maps to [0, MaxInt64]
	}
	return config.Every{D: max(time.Duration(every), 1)}
}

// FuzzNextRun checks that no next run is ever before now (or, on the heap,
// before now's key), over extreme times, periods, backoffs, counts and
// cooldowns: "@every 2562047h" used to wrap around int64 into the past and
// poll ~20 times a second. The rule's result is also after the next tick,
// the backoff or Retry-After, and an open breaker's cooldown; a local
// error's retry is after now and no later than the tick.
func FuzzNextRun(f *testing.F) {
	f.Add(int64(1_800_000_000), int64(0), uint8(9), int64(2562047*time.Hour), "s", int64(0), false, int64(0),
		int64(time.Second), int64(15*time.Minute), 2.0, 5, 0.5)
	f.Add(int64(1_800_000_000), int64(999_999_999), uint8(9), int64(math.MaxInt64), "x", int64(math.MaxInt64), true, int64(math.MaxInt64),
		int64(math.MaxInt64), int64(math.MaxInt64), math.Inf(1), math.MaxInt, 0.99)
	f.Add(int64(9_223_372_036), int64(854_775_807), uint8(9), int64(time.Minute), "edge", int64(-1), false, int64(0),
		int64(time.Second), int64(0), 1e308, 1<<62, 0.0)
	f.Add(int64(-62_135_596_800), int64(0), uint8(0), int64(0), "", int64(math.MinInt64), true, int64(math.MinInt64),
		int64(-1), int64(-1), math.NaN(), -5, math.NaN())
	f.Add(int64(1_774_746_000), int64(0), uint8(0), int64(0), "berlin", int64(0), false, int64(0),
		int64(time.Second), int64(time.Minute), 2.0, 3, 0.5) // 2026-03-29 01:00 UTC: the spring jump
	f.Add(int64(253_402_300_799), int64(0), uint8(2), int64(0), "y9999", int64(time.Hour), true, int64(time.Hour),
		int64(time.Hour), int64(time.Hour), 3.0, 40, 0.1)
	f.Fuzz(func(t *testing.T, sec, nsec int64, kind uint8, every int64, name string, notBeforeOff int64, open bool, untilOff int64,
		initial, maxB int64, mult float64, k int, jitter float64) {
		// Times from year 1 to 9999: cron libraries work on calendar years.
		const minSec, maxSec = -62_135_596_800, 253_402_300_799
		sec = minSec + int64(uint64(sec)%uint64(maxSec-minSec+1))
		now := time.Unix(sec, int64(uint64(nsec)%1e9)).UTC()
		c := nextRunCase{
			now:       now,
			tm:        NewTiming(name, fuzzSchedule(t, kind%6, every)),
			notBefore: now.Add(time.Duration(notBeforeOff)),
			backoff:   breaker.Backoff{Initial: time.Duration(initial), Max: time.Duration(maxB), Multiplier: mult, Jitter: math.Mod(math.Abs(jitter), 1)},
			k:         k,
			jitter:    jitter,
		}
		if open {
			c.brk = breaker.Snapshot{State: breaker.Open, Until: now.Add(time.Duration(untilOff))}
		} else {
			c.brk = breaker.Snapshot{State: breaker.Closed}
		}
		checkNextRun(t, c)
	})
}

func checkNextRun(t *testing.T, c nextRunCase) {
	t.Helper()
	tick := c.tm.Next(c.now)
	if !tick.After(c.now) {
		t.Fatalf("tick %v not after now %v (every %v, phase %v)", tick, c.now, c.tm.Every, c.tm.Phase)
	}
	if back := c.backoff.NextAttemptAt(c.now, c.k, c.jitter); back.Before(c.now) {
		t.Fatalf("backoff %v (k=%d, %+v) before now %v", back, c.k, c.backoff, c.now)
	}
	notBefore := MaxOf(c.notBefore, c.backoff.NextAttemptAt(c.now, c.k, c.jitter))
	next := NextRun(c.now, c.tm, notBefore, c.brk)
	switch {
	case !next.After(c.now):
		t.Fatalf("next %v not after now %v", next, c.now)
	case next.Before(tick):
		t.Fatalf("next %v before the tick %v", next, tick)
	case next.Before(notBefore):
		t.Fatalf("next %v before the backoff or Retry-After %v", next, notBefore)
	case c.brk.State == breaker.Open && !next.After(c.brk.Until):
		t.Fatalf("next %v not after the cooldown %v", next, c.brk.Until)
	case NanoKey(next) < NanoKey(c.now):
		t.Fatalf("heap key of next %v (%d) before now's (%d)", next, NanoKey(next), NanoKey(c.now))
	}
	retry := LocalRetry(c.now, c.tm, c.k, c.jitter)
	if !retry.After(c.now) || retry.After(CeilMicro(tick)) {
		t.Fatalf("local retry %v outside (now %v, tick %v]", retry, c.now, tick)
	}
}
