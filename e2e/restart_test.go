package e2e

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Rule 3.8: after a graceful restart every source resumes from its stored
// state.
func TestRestartAfterSIGTERM(t *testing.T) {
	t.Parallel()
	testRestart(t, false)
}

// Rule 3.8: the same after kill -9, sent 250ms after a poll's end (the
// state is committed within 250ms of it: that poll must be in the store); a
// poll cut off by the crash leaves no record and counts as nothing.
func TestRestartAfterSIGKILL(t *testing.T) {
	t.Parallel()
	testRestart(t, true)
}

func testRestart(t *testing.T, crash bool) {
	u := newUpstream(t)
	in := newInst(t)
	for _, p := range []string{"/open", "/err", "/back"} {
		u.Set(p, behavior{Status: 500})
	}
	u.Set("/thr", behavior{Status: 429, RetryAfter: "8"})
	u.Set("/hang", behavior{Hang: true})
	cfg := `concurrency: 4
shutdown_timeout: 2s
defaults:
  schedule: "@every 1s"
  backoff: {initial: 100ms, max: 1s, multiplier: 2, jitter: 0}
sources:
  - {name: open, type: http, url: "` + u.URL("/open") + `", breaker: {failures: 1, cooldown: 10s}, error_after: 0}
  - {name: err, type: http, url: "` + u.URL("/err") + `", breaker: {failures: 0}, error_after: 1}
  - {name: paused, type: http, url: "` + u.URL("/paused") + `"}
  - {name: back, type: http, url: "` + u.URL("/back") + `", breaker: {failures: 0}, error_after: 0,
     backoff: {initial: 8s, max: 1m, multiplier: 2, jitter: 0}}
  - {name: ok, type: http, url: "` + u.URL("/ok") + `"}
  - {name: thr, type: http, url: "` + u.URL("/thr") + `"}
`
	if crash {
		cfg += `  - {name: hang, type: http, url: "` + u.URL("/hang") + `", timeout: 60s}
`
	}
	in.writeConfig(cfg)
	d := in.start()

	eventually(t, 5*time.Second, "open, err and back in their states", func() error {
		all := d.sources()
		if o := all["open"]; o.State != "open" || o.Breaker != "open" {
			return errf("open: %s", o)
		}
		if o := all["err"]; o.State != "error" {
			return errf("err: %s", o)
		}
		if o := all["back"]; o.State != "backoff" || o.ConsecutiveFailures != 1 {
			return errf("back: %s", o)
		}
		if o := all["thr"]; o.State != "throttled" || o.ThrottledTotal < 1 {
			return errf("thr: %s", o)
		}
		return nil
	})
	u.waitArrivals(t, "/paused", 1, 3*time.Second)
	in.mustCLI("pause", "paused", "-reason", "maintenance window")
	eventually(t, 2*time.Second, "paused paused", func() error {
		if o := d.source("paused"); o.State != "paused" || o.PausedReason != "maintenance window" || o.NextRunAt != nil {
			return errf("%s", o)
		}
		return nil
	})
	if crash {
		eventually(t, 3*time.Second, "a poll of hang in flight", func() error {
			if u.Inflight("/hang") != 1 {
				return errf("not yet")
			}
			return nil
		})
	}
	u.waitArrivals(t, "/ok", 1, 3*time.Second)

	names := restartNames()
	var before map[string]sourceObj
	okEnded := 0 // polls of ok that ended 250ms or more before the kill
	if crash {
		okEnded = killAfterPollEnd(t, d, u, "/ok", &before)
	} else {
		before = quietSnapshot(t, d, 250*time.Millisecond+pollEndAllowance, restartNames())
		d.stop(10 * time.Second)
	}
	stoppedAt := time.Now()
	for _, n := range names {
		if before[n].PollsTotal == 0 && n != "paused" {
			t.Fatalf("%s was never polled before the stop: %s", n, before[n])
		}
	}

	// Offline: status reads the same state from the store.
	offline := in.statusAll()
	if o := offline["ok"]; crash && o.PollsTotal < int64(okEnded) {
		t.Errorf("ok: %d polls stored, but %d had ended 250ms before the kill (rule 3.8): %s", o.PollsTotal, okEnded, o)
	}
	for _, n := range names {
		if err := sameState(before[n], offline[n]); err != nil {
			t.Errorf("status -json after the stop, %s: %v\nbefore: %s\nstored: %s", n, err, before[n], offline[n])
		}
	}

	d2 := in.start()
	restartedAt := time.Now()
	after := d2.sources()
	for _, n := range names {
		if err := sameState(before[n], after[n]); err != nil {
			t.Errorf("after restart, %s: %v\nbefore: %s\nafter:  %s", n, err, before[n], after[n])
		}
	}
	// The history records of the polls before the stop were committed with
	// their states.
	for _, n := range names {
		if h := d2.history(n, 20); int64(len(h)) != before[n].PollsTotal {
			t.Errorf("%s: %d history records after the restart for polls_total %d", n, len(h), before[n].PollsTotal)
		}
	}
	if crash {
		// The poll in flight at the crash counts as nothing.
		h := d2.history("hang", 10)
		for _, r := range h {
			if r.StartedAt.Before(stoppedAt) {
				t.Errorf("hang: the poll cut off by kill -9 left a history record: %+v", r)
			}
		}
		if o := after["hang"]; o.PollsTotal != 0 || o.FailuresTotal != 0 {
			t.Errorf("hang: the poll cut off by kill -9 was counted: %s", o)
		}
	}

	// The control source is polled again at once.
	eventually(t, 2500*time.Millisecond, "ok polled after the restart", func() error {
		if u.CountSince("/ok", restartedAt) == 0 {
			return errf("no request on /ok")
		}
		return nil
	})

	// back and open: not called before their stored next poll time, and
	// called soon after it.
	for _, n := range []string{"back", "open", "thr"} {
		next := before[n].NextRunAt
		if next == nil {
			t.Errorf("%s: next_run_at is null", n)
			continue
		}
		if n == "open" && next.Before(before[n].LastRunAt.Add(10*time.Second)) {
			t.Errorf("open: next_run_at %s is before the end of its 10s cooldown (last run %s)", fmtTime(next), fmtTime(before[n].LastRunAt))
		}
		if (n == "back" || n == "thr") && next.Before(before[n].LastRunAt.Add(8*time.Second)) {
			t.Errorf("%s: next_run_at %s is before its 8s backoff / Retry-After (last run %s)", n, fmtTime(next), fmtTime(before[n].LastRunAt))
		}
		path := "/" + n
		eventually(t, max(time.Until(*next), 0)+3*time.Second, n+" polled again after its stored next_run_at", func() error {
			if u.CountSince(path, stoppedAt) == 0 {
				return errf("no request on %s since the restart (next_run_at %s)", path, fmtTime(next))
			}
			return nil
		})
		var first time.Time
		for _, a := range u.Arrivals(path) {
			if a.At.After(stoppedAt) {
				first = a.At
				break
			}
		}
		if first.Before(next.Add(-20 * time.Millisecond)) {
			t.Errorf("%s: called at %s after the restart, before its stored next_run_at %s", n,
				first.UTC().Format("15:04:05.000"), next.Format("15:04:05.000"))
		}
	}
	// err and paused: never called after the restart.
	for _, p := range []string{"/err", "/paused"} {
		if n := u.CountSince(p, stoppedAt); n > 0 {
			t.Errorf("%s was called %d times after the restart", p, n)
		}
	}
	all := d2.sources()
	if o := all["err"]; o.State != "error" || o.ErrorReason != before["err"].ErrorReason {
		t.Errorf("err after restart: %s", o)
	}
	if o := all["paused"]; o.State != "paused" || o.PausedReason != "maintenance window" {
		t.Errorf("paused after restart: %s", o)
	}
}

// pollEndAllowance is how much later than the upstream saw its answer
// leave a poll ends for pacer (the answer's way back over loopback and its
// reading), added to the 250ms of rule 3.8.
const pollEndAllowance = 5 * time.Millisecond

// killAfterPollEnd waits for a poll on path to end (as the upstream saw it),
// fills before with the daemon's sources, and sends kill -9 250ms after
// that end: the edge of rule 3.8's window. It returns how many polls on path
// had ended at least 250ms (plus pollEndAllowance) before the kill, all of
// which the store must have.
func killAfterPollEnd(t *testing.T, d *daemon, u *upstream, path string, before *map[string]sourceObj) int {
	t.Helper()
	since := time.Now()
	var end time.Time
	eventually(t, 3*time.Second, "a poll on "+path+" ending", func() error {
		for _, a := range u.Arrivals(path) {
			if a.At.After(since) && !a.End.IsZero() {
				end = a.End
				return nil
			}
		}
		return errf("none since %s", since.Format("15:04:05.000"))
	})
	window := 250*time.Millisecond + pollEndAllowance
	*before = quietSnapshot(t, d, window, restartNames())
	sleepUntil(end.Add(window)) // the kill's place is what is tested
	killAt := time.Now()
	d.kill()
	t.Logf("kill -9 sent %s after the end of a poll on %s", killAt.Sub(end).Round(time.Millisecond), path)
	ended := 0
	for _, a := range u.Arrivals(path) {
		if !a.End.IsZero() && !a.End.After(killAt.Add(-window)) {
			ended++
		}
	}
	if ended == 0 {
		t.Fatalf("no poll on %s ended 250ms before the kill", path)
	}
	return ended
}

// restartNames are the sources whose state testRestart compares.
func restartNames() []string { return []string{"open", "err", "paused", "back", "thr"} }

// quietSnapshot returns the daemon's sources as two reads window apart agree
// on them (sameState): then every state it shows was there for window, so it
// was committed (rule 3.8) before the stop or kill that follows at once. A
// single read could show a poll that ended a moment before it, not yet
// committed when the kill came right after (on a loaded machine the steps
// before it can take long enough for the 8 s backoffs to poll again).
func quietSnapshot(t *testing.T, d *daemon, window time.Duration, names []string) map[string]sourceObj {
	t.Helper()
	var snap map[string]sourceObj
	eventually(t, 30*time.Second, "two reads of the sources "+window.String()+" apart that agree", func() error {
		a := d.sources()
		time.Sleep(window)
		b := d.sources()
		for _, n := range names {
			if err := sameState(a[n], b[n]); err != nil {
				return errf("%s changed: %v", n, err)
			}
		}
		snap = b
		return nil
	})
	return snap
}

// sameState compares what must carry over a restart.
func sameState(a, b sourceObj) error {
	var diffs []string
	if a.State != b.State {
		diffs = append(diffs, fmt.Sprintf("state %q != %q", a.State, b.State))
	}
	if a.Breaker != b.Breaker {
		diffs = append(diffs, fmt.Sprintf("breaker %q != %q", a.Breaker, b.Breaker))
	}
	if a.ConsecutiveFailures != b.ConsecutiveFailures {
		diffs = append(diffs, fmt.Sprintf("consecutive_failures %d != %d", a.ConsecutiveFailures, b.ConsecutiveFailures))
	}
	if a.ErrorReason != b.ErrorReason {
		diffs = append(diffs, fmt.Sprintf("error_reason %q != %q", a.ErrorReason, b.ErrorReason))
	}
	if a.PausedReason != b.PausedReason {
		diffs = append(diffs, fmt.Sprintf("paused_reason %q != %q", a.PausedReason, b.PausedReason))
	}
	if a.LastError != b.LastError {
		diffs = append(diffs, fmt.Sprintf("last_error %q != %q", a.LastError, b.LastError))
	}
	if a.PollsTotal != b.PollsTotal || a.FailuresTotal != b.FailuresTotal || a.ThrottledTotal != b.ThrottledTotal {
		diffs = append(diffs, fmt.Sprintf("counters %d/%d/%d != %d/%d/%d", a.PollsTotal, a.FailuresTotal, a.ThrottledTotal,
			b.PollsTotal, b.FailuresTotal, b.ThrottledTotal))
	}
	if !sameTime(a.NextRunAt, b.NextRunAt) {
		diffs = append(diffs, fmt.Sprintf("next_run_at %s != %s", fmtTime(a.NextRunAt), fmtTime(b.NextRunAt)))
	}
	if !sameTime(a.LastRunAt, b.LastRunAt) {
		diffs = append(diffs, fmt.Sprintf("last_run_at %s != %s", fmtTime(a.LastRunAt), fmtTime(b.LastRunAt)))
	}
	if !sameTime(a.LastSuccessAt, b.LastSuccessAt) {
		diffs = append(diffs, fmt.Sprintf("last_success_at %s != %s", fmtTime(a.LastSuccessAt), fmtTime(b.LastSuccessAt)))
	}
	if len(diffs) > 0 {
		return fmt.Errorf("%s", strings.Join(diffs, "; "))
	}
	return nil
}

// Rule 3.13: one daemon per SQLite store; a lock left by a killed daemon
// never blocks the next start.
func TestOneDaemonPerStore(t *testing.T) {
	t.Parallel()
	u := newUpstream(t)
	in := newInst(t)
	in.writeConfig(`concurrency: 2
sources:
  - {name: ok, type: http, url: "` + u.URL("/ok") + `", schedule: "@every 1s"}
`)
	d1 := in.start()
	u.waitArrivals(t, "/ok", 1, 3*time.Second)

	// A second config on the same store, with another admin port.
	second := filepath.Join(in.dir, "second.yaml")
	writeFile(t, second, `store: `+in.storePath()+`
admin: {listen: "`+freeAddr(t)+`"}
sources:
  - {name: ok, type: http, url: "`+u.URL("/ok2")+`", schedule: "@every 1s"}
`)
	before := in.statusJSON("ok")
	d2 := in.spawnWith(second)
	code, exited := d2.wait(5 * time.Second)
	if !exited {
		t.Fatalf("a second pacer run on a held store is still running after 5s; stderr:\n%s", d2.logs())
	}
	if code != 1 {
		t.Errorf("second pacer run: exit %d, want 1; stderr:\n%s", code, d2.logs())
	}
	if took := d2.exitAt.Sub(d2.started); took > 3*time.Second {
		t.Errorf("second pacer run took %s to give up; it must exit at once", took)
	}
	msg := d2.logs()
	if !strings.Contains(msg, filepath.Base(in.storePath())) || !strings.Contains(msg, strconv.Itoa(d1.pid())) {
		t.Errorf("second pacer run: the message must name the store and the running daemon's pid %d:\n%s", d1.pid(), msg)
	}
	if n := u.Count("/ok2"); n != 0 {
		t.Errorf("the refused daemon polled its source %d times", n)
	}
	// It changed nothing: the first daemon keeps running and its state is intact.
	after := in.statusJSON("ok")
	if after.PollsTotal < before.PollsTotal || after.Type != "http" {
		t.Errorf("the refused daemon changed the store: before %s, after %s", before, after)
	}
	n := u.Count("/ok")
	u.waitArrivals(t, "/ok", n+1, 3*time.Second)
	if d1.exited() {
		t.Fatalf("the first daemon exited")
	}

	// kill -9: the next start is not blocked by the stale lock.
	d1.kill()
	d3 := in.start()
	n = u.Count("/ok")
	u.waitArrivals(t, "/ok", n+1, 3*time.Second)
	d3.stop(10 * time.Second)
}

// Rule 3.7: a source in error whose effective configuration changed while
// the daemon was stopped (its own field, or an inherited default) leaves the
// error state when the daemon loads it; an unchanged one stays in error.
func TestConfigChangeClearsErrorAtStart(t *testing.T) {
	t.Parallel()
	u := newUpstream(t)
	in := newInst(t)
	for _, p := range []string{"/own", "/inherit", "/same"} {
		u.Set(p, behavior{Status: 500})
	}
	cfg := func(defTimeout, ownTimeout string) string {
		return `concurrency: 4
shutdown_timeout: 2s
defaults:
  schedule: "@every 1s"
  timeout: ` + defTimeout + `
  breaker: {failures: 0}
  error_after: 1
sources:
  - {name: own, type: http, url: "` + u.URL("/own") + `", timeout: ` + ownTimeout + `}
  - {name: inherit, type: http, url: "` + u.URL("/inherit") + `"}
  - {name: same, type: http, url: "` + u.URL("/same") + `", timeout: 3s}
`
	}
	in.writeConfig(cfg("5s", "3s"))
	d := in.start()
	eventually(t, 4*time.Second, "own, inherit and same in error", func() error {
		for n, o := range d.sources() {
			if o.State != "error" {
				return errf("%s: %s", n, o)
			}
		}
		return nil
	})
	d.stop(10 * time.Second)
	stoppedAt := time.Now()
	in.writeConfig(cfg("6s", "4s"))
	d = in.start()
	for _, p := range []string{"/own", "/inherit"} {
		eventually(t, 3*time.Second, p+" polled after its configuration changed", func() error {
			if u.CountSince(p, stoppedAt) == 0 {
				return errf("no request")
			}
			return nil
		})
	}
	u.noArrivals(t, "/same", stoppedAt, 2*time.Second, "a source in error with an unchanged configuration must stay in error")
	all := d.sources()
	if o := all["same"]; o.State != "error" || o.ConsecutiveFailures != 1 {
		t.Errorf("same: %s", o)
	}
	for _, n := range []string{"own", "inherit"} {
		if o := all[n]; o.PollsTotal != 2 || o.ConsecutiveFailures > 1 {
			t.Errorf("%s: want a fresh count after the change (polls_total 2, consecutive_failures <= 1): %s", n, o)
		}
	}
}

// The daemon reads the stored states while it loads its config (the store
// named on the config's "store:" line). A config that turns out invalid
// must leave the store exactly as it was: no new store file, and an
// existing one unchanged and not locked once pacer has exited.
func TestInvalidConfigLeavesStoreAlone(t *testing.T) {
	t.Parallel()
	in := newInst(t)
	bad := "sources:\n  - {name: s, type: http, url: \"http://127.0.0.1:1/\", schedule: \"every minute\"}\n"
	in.writeConfig(bad)
	if r := in.cli("run"); r.code != 1 || !strings.Contains(r.stderr, "schedule") {
		t.Fatalf("run with an invalid schedule: want exit 1 naming the schedule, got %s", r)
	}
	if fileExists(in.storePath()) {
		t.Fatal("run with an invalid config created the store")
	}

	// A store with a state in it, then the invalid config again.
	in.writeConfig("sources:\n  - {name: s, type: exec, command: [\"true\"], schedule: \"0 0 1 1 *\"}\n")
	in.mustCLI("pause", "s", "-reason", "kept")
	before := in.mustCLI("status", "-json", "s").stdout
	in.writeConfig(bad)
	if r := in.cli("run"); r.code != 1 {
		t.Fatalf("run with an invalid config over a store: %s", r)
	}
	in.writeConfig("sources:\n  - {name: s, type: exec, command: [\"true\"], schedule: \"0 0 1 1 *\"}\n")
	if after := in.mustCLI("status", "-json", "s").stdout; after != before {
		t.Errorf("the store changed:\n before %s\n after  %s", before, after)
	}
	in.mustCLI("resume", "s") // needs the lock: the failed run released it
}
