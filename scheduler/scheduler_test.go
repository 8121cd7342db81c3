package scheduler

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/domain"
	"github.com/pacer-dev/pacer/scheduler/policy"
	"github.com/pacer-dev/pacer/scheduler/view"
	"github.com/pacer-dev/pacer/sources"
	"github.com/pacer-dev/pacer/store"
)

const lifecycleDefaults = `
concurrency: 2
history: {keep: 5}
defaults:
  schedule: "@every 1s"
  timeout: 5s
  backoff: {initial: 1s, max: 8s, multiplier: 2, jitter: 0}
  breaker: {failures: 3, cooldown: 30s}
  error_after: 6
sources:
`

// TestLifecycle drives one source through backoff, open, half-open, ok and
// error, and back through reset, in fake time (rules 3.4, 3.6, 3.7, 3.8).
func TestLifecycle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		cfg := writeConfig(t, dir, lifecycleDefaults+flakySource("flaky", ""))
		setFail(t, dir, true)
		h := start(t, dir, cfg)
		defer h.stop()

		h.waitFor("first failure", 3*time.Second, func() bool { return h.source("flaky").ConsecutiveFailures == 1 })
		if o := h.source("flaky"); o.State != policy.StateBackoff || o.Breaker != "closed" || !strings.Contains(o.LastError, "exit status 1") {
			t.Fatalf("after one failure: %+v", o)
		}
		h.waitFor("breaker open", 10*time.Second, func() bool { return h.source("flaky").State == policy.StateOpen })
		o := h.source("flaky")
		if o.ConsecutiveFailures != 3 || o.Breaker != "open" {
			t.Fatalf("open: %+v", o)
		}
		openedAt := time.Now()
		polls := o.PollsTotal

		// No call during the cooldown.
		time.Sleep(29 * time.Second)
		if o := h.source("flaky"); o.PollsTotal != polls || o.State != policy.StateOpen {
			t.Fatalf("polled during cooldown: %+v", o)
		}
		// Then one probe, which fails: open again for a full cooldown.
		h.waitFor("probe", 5*time.Second, func() bool { return h.source("flaky").PollsTotal == polls+1 })
		if d := time.Since(openedAt); d < 30*time.Second {
			t.Fatalf("probe after %v, before the cooldown", d)
		}
		o = h.source("flaky")
		if o.State != policy.StateOpen || o.ConsecutiveFailures != 4 {
			t.Fatalf("after failed probe: %+v", o)
		}
		if h.metric("pacer_source_consecutive_failures", "source", "flaky") != 4 {
			t.Errorf("metric consecutive failures %v", h.metric("pacer_source_consecutive_failures", "source", "flaky"))
		}
		// A successful probe closes the breaker and resets the count.
		setFail(t, dir, false)
		h.waitFor("recovery", 32*time.Second, func() bool { return h.source("flaky").State == policy.StateOK })
		if o := h.source("flaky"); o.ConsecutiveFailures != 0 || o.Breaker != "closed" || o.LastSuccessAt == nil {
			t.Fatalf("after good probe: %+v", o)
		}
		// Failing again: 3 failures open it, and error_after (6) ends in error.
		setFail(t, dir, true)
		h.waitFor("error", 2*time.Minute, func() bool { return h.source("flaky").State == policy.StateError })
		o = h.source("flaky")
		if o.ConsecutiveFailures != 6 || o.NextRunAt != nil || !strings.HasPrefix(o.ErrorReason, "6 consecutive failures; last: exec sh: exit status 1") {
			t.Fatalf("error: %+v", o)
		}
		polls = o.PollsTotal
		time.Sleep(10 * time.Minute)
		if got := h.source("flaky").PollsTotal; got != polls {
			t.Fatalf("source in error was polled %d times", got-polls)
		}
		// Committed to the store.
		if st := h.stored("flaky"); st.ErrorReason != o.ErrorReason || st.ConsecutiveFailures != 6 || st.NextRunAt != nil {
			t.Fatalf("stored: %+v", st)
		}
		if err := h.s.Trigger("flaky"); !errors.Is(err, ErrConflict) {
			t.Fatalf("trigger in error: %v", err)
		}
		// Reset: polled again at its next tick.
		setFail(t, dir, false)
		if o, err := h.s.Reset("flaky"); err != nil || o.State != policy.StateOK || o.ConsecutiveFailures != 0 || o.NextRunAt == nil {
			t.Fatalf("reset: %+v, %v", o, err)
		}
		h.waitFor("poll after reset", 2*time.Second, func() bool { return h.source("flaky").PollsTotal == polls+1 })
		if o := h.source("flaky"); o.State != policy.StateOK {
			t.Fatalf("after reset: %+v", o)
		}
		recs, err := h.s.History(t.Context(), "flaky", 100)
		if err != nil || len(recs) != 5 {
			t.Fatalf("history: %d records (keep 5), %v", len(recs), err)
		}
		if recs[0].Outcome != domain.OutcomeSuccess || !recs[0].StartedAt.After(recs[1].StartedAt) {
			t.Errorf("history not newest first: %+v", recs[:2])
		}
	})
}

// TestPersistedWithin250ms checks rule 3.8: each poll's state is committed
// within 250 ms of its end, to the microsecond: the bubble's clock is exact,
// and the store is read at the poll's end (its UpdatedAt) plus 250 ms, so a
// commit 251 ms after the end fails the test.
func TestPersistedWithin250ms(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		cfg := writeConfig(t, dir, lifecycleDefaults+flakySource("a", ""))
		setFail(t, dir, true)
		h := start(t, dir, cfg)
		defer h.stop()
		for k := 1; k <= 3; k++ {
			h.waitFor("failure", 10*time.Second, func() bool { return h.source("a").ConsecutiveFailures == k })
			h.s.tab.mu.Lock()
			end := h.s.tab.entries["a"].st.UpdatedAt
			h.s.tab.mu.Unlock()
			time.Sleep(time.Until(end.Add(250 * time.Millisecond)))
			mem := h.source("a")
			st := h.stored("a")
			if st.ConsecutiveFailures != k || st.NextRunAt == nil || !st.NextRunAt.Truncate(time.Millisecond).Equal(*mem.NextRunAt) || st.PollsTotal != mem.PollsTotal {
				t.Fatalf("stored %+v, memory %+v", st, mem)
			}
		}
	})
}

// TestRestartResumes stops a scheduler with a source in each durable state
// and starts another on the same store: every state carries over, and the
// open breaker is not probed before its stored time.
func TestRestartResumes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		body := lifecycleDefaults + flakySource("open", "") + flakySource("errored", "error_after: 2\nbreaker: {failures: 0}") +
			flakySource("paused", "") + flakySource("backoff", "schedule: \"@every 1s\"\nbackoff: {initial: 1h, max: 1h}")
		cfg := writeConfig(t, dir, body)
		setFail(t, dir, true)
		h := start(t, dir, cfg)
		if _, err := h.s.Pause("paused", "maintenance window"); err != nil {
			t.Fatal(err)
		}
		h.waitFor("states", 30*time.Second, func() bool {
			return h.source("open").State == policy.StateOpen && h.source("errored").State == policy.StateError && h.source("backoff").ConsecutiveFailures == 1
		})
		before := map[string]view.SourceObject{}
		for _, n := range []string{"open", "errored", "paused", "backoff"} {
			before[n] = h.source(n)
		}
		h.stop()

		time.Sleep(5 * time.Second) // the daemon is down for a while
		cfg = writeConfig(t, dir, body)
		h = start(t, dir, cfg)
		defer h.stop()
		for n, b := range before {
			a := h.source(n)
			if a.State != b.State || a.ConsecutiveFailures != b.ConsecutiveFailures || a.ErrorReason != b.ErrorReason ||
				a.PausedReason != b.PausedReason || a.PollsTotal != b.PollsTotal || !sameTime(a.NextRunAt, b.NextRunAt) {
				t.Errorf("%s: before %+v\nafter %+v", n, b, a)
			}
		}
		// Nothing is polled before its stored time: the open breaker's
		// cooldown (30s from opening) and the hour of backoff.
		openAt := *before["open"].NextRunAt
		time.Sleep(time.Until(openAt) - 10*time.Millisecond)
		if got := h.source("open").PollsTotal; got != before["open"].PollsTotal {
			t.Fatalf("open source polled before its stored time")
		}
		h.waitFor("probe after restart", 2*time.Second, func() bool { return h.source("open").PollsTotal > before["open"].PollsTotal })
		// History goes on where it stopped: the probe is the newest record,
		// numbered after the ones from before the restart.
		h.waitFor("probe committed", 2*time.Second, func() bool { return h.stored("open").PollsTotal > before["open"].PollsTotal })
		hist, err := h.store.History(t.Context(), "open", 100)
		if n := int(before["open"].PollsTotal) + 1; err != nil || len(hist) != n {
			t.Fatalf("history of open: %d records, %v; want %d", len(hist), err, n)
		}
		if hist[0].StartedAt.Before(openAt) || hist[1].StartedAt.After(openAt) {
			t.Errorf("newest record started %v, the one before it %v; the probe (after %v) must come first",
				hist[0].StartedAt, hist[1].StartedAt, openAt)
		}
		for i, r := range hist {
			if want := int64(len(hist) - i); r.Seq != want {
				t.Errorf("record %d has Seq %d, want %d", i, r.Seq, want)
			}
		}
		if h.source("backoff").PollsTotal != before["backoff"].PollsTotal || h.source("errored").PollsTotal != before["errored"].PollsTotal ||
			h.source("paused").PollsTotal != 0 {
			t.Fatalf("a source was polled early: %+v %+v %+v", h.source("backoff"), h.source("errored"), h.source("paused"))
		}
	})
}

func sameTime(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(*b)
}

// TestPauseResumeTrigger checks rule 3.9 in the running scheduler.
func TestPauseResumeTrigger(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		cfg := writeConfig(t, dir, lifecycleDefaults+flakySource("s", "schedule: \"@every 10m\"\nbreaker: {failures: 1, cooldown: 1h}"))
		h := start(t, dir, cfg)
		defer h.stop()
		if _, err := h.s.Pause("s", "noisy"); err != nil {
			t.Fatal(err)
		}
		if o := h.source("s"); o.State != policy.StatePaused || o.PausedReason != "noisy" || o.NextRunAt != nil {
			t.Fatalf("paused: %+v", o)
		}
		if err := h.s.Trigger("s"); !errors.Is(err, ErrConflict) {
			t.Fatalf("trigger while paused: %v", err)
		}
		time.Sleep(10 * time.Minute)
		if o := h.source("s"); o.PollsTotal != 0 {
			t.Fatalf("paused source polled: %+v", o)
		}
		if _, err := h.s.Resume("s"); err != nil {
			t.Fatal(err)
		}
		h.waitFor("poll after resume", 11*time.Minute, func() bool { return h.source("s").PollsTotal == 1 })

		// Trigger goes past an open breaker (failures: 1, cooldown 1h).
		setFail(t, dir, true)
		if err := h.s.Trigger("s"); err != nil {
			t.Fatal(err)
		}
		h.waitFor("failure", time.Second, func() bool { return h.source("s").State == policy.StateOpen })
		if err := h.s.Trigger("s"); err != nil {
			t.Fatal(err)
		}
		h.waitFor("triggered probe", time.Second, func() bool { return h.source("s").PollsTotal == 3 })
		setFail(t, dir, false)
		if err := h.s.Trigger("s"); err != nil {
			t.Fatal(err)
		}
		h.waitFor("closed", time.Second, func() bool { return h.source("s").State == policy.StateOK })
		if _, err := h.s.Source("nope"); !errors.Is(err, ErrNotFound) {
			t.Errorf("unknown source: %v", err)
		}
		if err := h.s.Trigger("nope"); !errors.Is(err, ErrNotFound) {
			t.Errorf("trigger unknown: %v", err)
		}
	})
}

// Once shutdown has begun, trigger is refused with a conflict instead of
// being accepted for a poll that will never start.
func TestTriggerDuringShutdown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		cfg := writeConfig(t, dir, lifecycleDefaults+flakySource("s", "schedule: \"@every 10m\""))
		h := start(t, dir, cfg)
		if err := h.s.Trigger("s"); err != nil {
			t.Fatalf("trigger before shutdown: %v", err)
		}
		h.stop()
		if err := h.s.Trigger("s"); !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "shutting down") {
			t.Fatalf("trigger after shutdown: %v; want a conflict naming the shutdown", err)
		}
	})
}

// TestReload checks rule 3.11: added sources start, removed ones stop,
// changed ones leave the error state; stored state of a removed source is
// restored when it is added back unchanged.
func TestReload(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		setFail(t, dir, true)
		keep := flakySource("keep", "error_after: 1")
		gone := flakySource("gone", "error_after: 1")
		h := start(t, dir, writeConfig(t, dir, lifecycleDefaults+keep+gone))
		defer h.stop()
		h.waitFor("errors", 5*time.Second, func() bool {
			return h.source("keep").State == policy.StateError && h.source("gone").State == policy.StateError
		})
		// "keep" changes (error_after), "gone" goes, "new" comes.
		err := h.s.Reload(t.Context(), writeConfig(t, dir, lifecycleDefaults+flakySource("keep", "error_after: 3")+flakySource("new", "")))
		if err != nil {
			t.Fatal(err)
		}
		// After a config change: failures cleared, not in error.
		if o := h.source("keep"); o.State != policy.StatePending && o.State != policy.StateOK || o.ConsecutiveFailures != 0 || o.ErrorReason != "" || o.Breaker != "closed" {
			t.Fatalf("changed source not cleared: %+v", o)
		}
		if _, err := h.s.Source("gone"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("removed source still there: %v", err)
		}
		h.waitFor("new polled", 3*time.Second, func() bool { return h.source("new").PollsTotal > 0 })
		h.waitFor("keep polled", 3*time.Second, func() bool { return h.source("keep").ConsecutiveFailures > 0 })
		time.Sleep(300 * time.Millisecond)
		// "gone" comes back unchanged: its error state is restored.
		err = h.s.Reload(t.Context(), writeConfig(t, dir, lifecycleDefaults+flakySource("keep", "error_after: 3")+gone))
		if err != nil {
			t.Fatal(err)
		}
		if o := h.source("gone"); o.State != policy.StateError {
			t.Fatalf("re-added source lost its state: %+v", o)
		}
	})
}

// TestDowntimeRunsOnce: after a long downtime an overdue source runs once at
// start, not once per missed tick, then keeps its schedule.
func TestDowntimeRunsOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		body := lifecycleDefaults + flakySource("s", "schedule: \"@every 1s\"")
		h := start(t, dir, writeConfig(t, dir, body))
		h.waitFor("polled", 3*time.Second, func() bool { return h.source("s").PollsTotal >= 2 })
		h.stop()
		polls := h.stored("s").PollsTotal

		time.Sleep(10 * time.Minute) // 600 ticks missed
		h = start(t, dir, writeConfig(t, dir, body))
		defer h.stop()
		time.Sleep(500 * time.Millisecond)
		if got := h.source("s").PollsTotal - polls; got != 1 {
			t.Fatalf("%d polls in the first half second after a 10 minute downtime, want 1", got)
		}
		time.Sleep(3 * time.Second)
		if got := h.source("s").PollsTotal - polls; got < 3 || got > 5 {
			t.Fatalf("%d polls in 3.5s on @every 1s", got)
		}
		if skipped := h.metric("pacer_polls_total", "outcome", "skipped"); skipped != 0 {
			t.Errorf("missed ticks during downtime counted as skipped: %v", skipped)
		}
	})
}

// blockingPoller polls until its context is cancelled.
type blockingPoller struct{}

func (blockingPoller) Poll(ctx context.Context) sources.Result {
	<-ctx.Done()
	return sources.Result{Err: ctx.Err(), ExitCode: -1}
}

// While shutdown waits for a poll in flight, sources that fall due are not
// dispatched, and they do not make the loop spin (dispatching is the first
// stage Shutdown stops; before that it wakes about once a second, the
// watchdog's beat, not every few milliseconds).
func TestShutdownLoopIdles(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		cfg := writeConfig(t, dir, lifecycleDefaults+`  - {name: slow, type: exec, command: ["true"], schedule: "@every 100ms"}
  - {name: due, type: exec, command: ["true"], schedule: "@every 100ms"}
`)
		st, err := store.Open(filepath.Join(dir, "pacer.db"), store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		var passes atomic.Int64
		s, err := New(cfg, Options{Store: st, Registry: prometheus.NewRegistry(),
			LoopHook: func() { passes.Add(1) },
			NewPoller: func(src *config.Source) (sources.Poller, error) {
				if src.Name == "slow" {
					return blockingPoller{}, nil
				}
				return noopPoller{}, nil
			}})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		waitUntil(t, "slow's poll", 5*time.Second, func() bool { return s.wk.inflightN.Load() > 0 })
		before := passes.Load()
		if err := s.Shutdown(3 * time.Second); err != nil {
			t.Fatal(err)
		}
		if n := passes.Load() - before; n > 10 {
			t.Errorf("the loop made %d passes during a 3 s shutdown; want a few", n)
		}
	})
}

// A poll's record and state hold their times to the microsecond, as the
// store does: the same record read before and after its commit is the same
// (real time here, where a poll's start is almost never a whole
// microsecond).
func TestTimesKeptToTheMicrosecond(t *testing.T) {
	dir := t.TempDir()
	cfg := writeConfig(t, dir, lifecycleDefaults+flakySource("s", "schedule: \"@every 100ms\""))
	h := start(t, dir, cfg)
	defer h.stop()
	var recs []domain.PollRecord
	h.waitFor("three polls", 10*time.Second, func() bool {
		var err error
		recs, err = h.s.History(context.Background(), "s", 5)
		if err != nil {
			t.Fatal(err)
		}
		return len(recs) >= 3
	})
	for _, r := range recs {
		if r.StartedAt.Nanosecond()%1000 != 0 {
			t.Errorf("record %d started at %s: finer than the store keeps", r.Seq, r.StartedAt.Format(time.RFC3339Nano))
		}
	}
	o := h.source("s")
	for name, at := range map[string]*time.Time{"last_run_at": o.LastRunAt, "last_success_at": o.LastSuccessAt, "next_run_at": o.NextRunAt} {
		if at != nil && at.Nanosecond()%1000 != 0 {
			t.Errorf("%s = %s: finer than the store keeps", name, at.Format(time.RFC3339Nano))
		}
	}
}

// A second Start (or StartFrom) is refused and changes nothing: the
// goroutines of the first keep their stages, and Shutdown still stops them
// all (the package's goleak check sees any left behind). Real time: a hung
// Shutdown fails the test instead of hanging a bubble.
func TestStartTwice(t *testing.T) {
	dir := t.TempDir()
	h := start(t, dir, writeConfig(t, dir, lifecycleDefaults+flakySource("s", "schedule: \"@every 100ms\"")))
	h.waitFor("a poll", 10*time.Second, func() bool { return h.source("s").PollsTotal > 0 })
	if err := h.s.Start(context.Background()); err == nil || !strings.Contains(err.Error(), "already started") {
		t.Errorf("second Start: %v; want an error", err)
	}
	if err := h.s.StartFrom(nil); err == nil || !strings.Contains(err.Error(), "already started") {
		t.Errorf("second StartFrom: %v; want an error", err)
	}
	polls := h.source("s").PollsTotal
	h.waitFor("polls go on", 10*time.Second, func() bool { return h.source("s").PollsTotal > polls })
	stopped := make(chan struct{})
	go func() {
		h.stop()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(30 * time.Second):
		t.Fatal("Shutdown did not return after a second Start")
	}
	if err := h.s.Ready(context.Background()); err == nil {
		t.Error("ready after shutdown")
	}
}

// pacer_source_consecutive_failures has a series only for the sources
// whose count is > 0 (contract section 6): a healthy fleet exports none,
// and a source that recovers loses its series.
func TestConsecutiveFailuresMetricOnlyWhenFailing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		cfg := writeConfig(t, dir, lifecycleDefaults+flakySource("flaky", "")+
			"  - {name: healthy, type: exec, command: [\"true\"], schedule: \"@every 1s\"}\n")
		h := start(t, dir, cfg)
		defer h.stop()
		h.waitFor("healthy polls", 3*time.Second, func() bool {
			return h.source("healthy").PollsTotal > 0 && h.source("flaky").PollsTotal > 0
		})
		if h.series("pacer_source_consecutive_failures") != 0 {
			t.Fatalf("a healthy fleet exports %d failure series", h.series("pacer_source_consecutive_failures"))
		}
		setFail(t, dir, true)
		h.waitFor("two failures", 10*time.Second, func() bool { return h.source("flaky").ConsecutiveFailures == 2 })
		if n := h.series("pacer_source_consecutive_failures"); n != 1 || h.metric("pacer_source_consecutive_failures", "source", "flaky") != 2 {
			t.Fatalf("%d failure series, flaky = %v; want only flaky = 2", n, h.metric("pacer_source_consecutive_failures", "source", "flaky"))
		}
		setFail(t, dir, false)
		h.waitFor("recovery", 10*time.Second, func() bool { return h.source("flaky").ConsecutiveFailures == 0 })
		if n := h.series("pacer_source_consecutive_failures"); n != 0 {
			t.Fatalf("%d failure series after recovery; want none", n)
		}
	})
}
