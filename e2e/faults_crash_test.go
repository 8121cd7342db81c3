//go:build faults

package e2e

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/store"
)

// crashSrc is one source of TestFaultCrash.
type crashSrc struct {
	name string
	kind string // ok, slow, fail, failx, hang, thr, thrd, xtrue, xfalse
	path string // http sources: the upstream path (no query)
	url  string
	line string // its line in the config
}

func (s crashSrc) isHTTP() bool { return s.path != "" }

// alwaysFails: every poll of it fails (none succeeds, none is throttled).
func (s crashSrc) alwaysFails() bool {
	return s.kind == "fail" || s.kind == "failx" || s.kind == "hang" || s.kind == "xfalse"
}

func (s crashSrc) throttles() bool { return s.kind == "thr" || s.kind == "thrd" }

// canError: reaches the error state (error_after 6); failx has error_after 0.
func (s crashSrc) canError() bool { return s.alwaysFails() && s.kind != "failx" }

const (
	crashKills       = 50
	crashConcurrency = 32
	crashErrorAfter  = 6
	// Rule 3.8: a poll's state is committed within 250ms of its end. A
	// poll lost at a kill must have ended (as the upstream saw it) no
	// earlier than that before the kill; the upstream's end precedes the
	// daemon's, so allow as much again, plus the stalls measured on the
	// machine (the daemon's wait for a CPU, this process's timer and disk
	// delays) between the poll's end and the kill.
	crashCommitWindow = 250 * time.Millisecond
	crashCommitSlack  = 250 * time.Millisecond
	// How long after a killed daemon is reaped its lock may still be held
	// (pacer run retries its lock for 70ms; the rest is a margin).
	crashLockGrace = 150 * time.Millisecond
	// Tolerance of the "not before its stored next_run_at" check.
	crashEarlyTolerance = 50 * time.Millisecond
)

// crashConfig is the config body of the crash tests (one daemon or each
// member of a cluster): srcs under the crash tests' defaults.
func crashConfig(srcs []crashSrc) string {
	var cfg strings.Builder
	cfg.WriteString(`concurrency: ` + fmt.Sprint(crashConcurrency) + `
shutdown_timeout: 5s
log: {level: info}
defaults:
  schedule: "@every 1s"
  timeout: 10s
  backoff: {initial: 100ms, max: 5s, multiplier: 2, jitter: 0.1}
  breaker: {failures: 3, cooldown: 2s}
  error_after: 6
sources:
`)
	for _, s := range srcs {
		cfg.WriteString(s.line)
	}
	return cfg.String()
}

func crashSources(fu *faultUpstream) []crashSrc {
	var out []crashSrc
	add := func(kind string, n int, mk func(i int, name string) (path, query, extra string)) {
		for i := 0; i < n; i++ {
			name := fmt.Sprintf("%s-%03d", kind, i)
			s := crashSrc{name: name, kind: kind}
			path, query, extra := mk(i, name)
			if path != "" {
				s.path = path
				s.url = fu.URL(path + query)
				s.line = fmt.Sprintf("  - {name: %s, type: http, url: %q%s}\n", name, s.url, extra)
			} else {
				s.line = fmt.Sprintf("  - {name: %s, type: exec%s}\n", name, extra)
			}
			out = append(out, s)
		}
	}
	add("ok", 80, func(i int, n string) (string, string, string) { return "/ok/" + n, "", "" })
	add("slow", 10, func(i int, n string) (string, string, string) {
		return "/slow/" + n, "?n=8&every=50ms", ""
	})
	add("fail", 40, func(i int, n string) (string, string, string) { return "/fail/" + n, "", "" })
	// Never errors: its consecutive failures keep growing all along.
	add("failx", 30, func(i int, n string) (string, string, string) {
		return "/fail/" + n, "", ", error_after: 0"
	})
	add("hang", 30, func(i int, n string) (string, string, string) {
		return "/hang/" + n, "", fmt.Sprintf(", timeout: %dms", 300+(i%6)*100)
	})
	// Throttled: 429 and 503, Retry-After in seconds and as an HTTP date.
	add("thr", 25, func(i int, n string) (string, string, string) {
		return "/throttle/" + n, fmt.Sprintf("?ra=%d&code=%d", 1+i%3, []int{429, 503}[i%2]), ""
	})
	add("thrd", 25, func(i int, n string) (string, string, string) {
		return "/unavail/" + n, fmt.Sprintf("?in=%dms&code=%d", 2000+(i%3)*1000, []int{503, 429}[i%2]), ""
	})
	add("xtrue", 30, func(i int, n string) (string, string, string) { return "", "", `, command: ["true"]` })
	add("xfalse", 30, func(i int, n string) (string, string, string) { return "", "", `, command: ["false"]` })
	return out
}

// crashSnap is one `pacer status -json` read of the store.
type crashSnap struct {
	label      string
	start, end time.Time
	m          map[string]sourceObj
}

// crashTracker holds what every store snapshot so far showed and checks
// each new one against it.
type crashTracker struct {
	t    *testing.T
	srcs []crashSrc
	by   map[string]crashSrc

	maxPolls, maxFail, maxThr map[string]int64
	maxCF                     map[string]int
	errSeen                   map[string]string // name -> error_reason first seen in the store
	errWhere                  map[string]string
	pauseSeen                 map[string]string // name -> paused_reason
	pauseWhere                map[string]string
	pausable                  map[string]bool // sources the test asked to pause

	problems   int
	statesLost int
	logs       func(names ...string) string
}

func (tr *crashTracker) fail(format string, args ...any) {
	tr.t.Helper()
	tr.problems++
	if tr.problems <= 40 {
		tr.t.Errorf(format, args...)
	} else if tr.problems == 41 {
		tr.t.Errorf("(further problems are counted, not printed)")
	}
}

// store checks a snapshot of the store (every field there is committed,
// and nothing in this test resets, resumes or reconfigures a source, so
// each counter only grows and error and pause never go away).
func (tr *crashTracker) store(s crashSnap) {
	tr.t.Helper()
	for _, src := range tr.srcs {
		n := src.name
		o, ok := s.m[n]
		if !ok {
			tr.fail("%s: source %s missing from status -json", s.label, n)
			continue
		}
		if o.PollsTotal < tr.maxPolls[n] || o.FailuresTotal < tr.maxFail[n] || o.ThrottledTotal < tr.maxThr[n] {
			tr.fail("%s: %s: stored counters went down: polls/failures/throttled %d/%d/%d, earlier %d/%d/%d\n%s",
				s.label, n, o.PollsTotal, o.FailuresTotal, o.ThrottledTotal, tr.maxPolls[n], tr.maxFail[n], tr.maxThr[n], tr.logs(n))
		}
		tr.maxPolls[n] = max(tr.maxPolls[n], o.PollsTotal)
		tr.maxFail[n] = max(tr.maxFail[n], o.FailuresTotal)
		tr.maxThr[n] = max(tr.maxThr[n], o.ThrottledTotal)
		switch {
		case src.alwaysFails():
			if o.ConsecutiveFailures < tr.maxCF[n] {
				tr.fail("%s: %s (always failing, never reset): consecutive_failures went down from %d to %d: %s\n%s",
					s.label, n, tr.maxCF[n], o.ConsecutiveFailures, o, tr.logs(n))
			}
			if int64(o.ConsecutiveFailures) != o.FailuresTotal || o.FailuresTotal != o.PollsTotal || o.ThrottledTotal != 0 {
				tr.fail("%s: %s (every poll fails): want consecutive_failures == failures_total == polls_total, throttled 0: %s",
					s.label, n, o)
			}
			tr.maxCF[n] = max(tr.maxCF[n], o.ConsecutiveFailures)
		case src.throttles():
			if o.ConsecutiveFailures != 0 || o.FailuresTotal != 0 || o.ThrottledTotal != o.PollsTotal {
				tr.fail("%s: %s (always throttled): want no failures and throttled_total == polls_total: %s", s.label, n, o)
			}
		default:
			if o.FailuresTotal != 0 || o.ThrottledTotal != 0 {
				tr.fail("%s: %s (always succeeds): failures or throttles recorded: %s\n%s", s.label, n, o, tr.logs(n))
			}
		}
		// Error and pause, once committed, never go away. A source the
		// test paused after it reached error (the pause's CLI call came
		// late on a loaded machine) shows as paused, its error kept.
		errShown := o.State == "error" || (o.State == "paused" && tr.pausable[n])
		if r, ok := tr.errSeen[n]; ok && (!errShown || o.ErrorReason != r) {
			tr.statesLost++
			tr.fail("%s: %s LOST its error state: first stored in %s with reason %q; now state %q reason %q: %s\n%s",
				s.label, n, tr.errWhere[n], r, o.State, o.ErrorReason, o, tr.logs(n))
		}
		if r, ok := tr.pauseSeen[n]; ok && (o.State != "paused" || o.PausedReason != r) {
			tr.statesLost++
			tr.fail("%s: %s LOST its pause: first stored in %s with reason %q; now state %q reason %q: %s\n%s",
				s.label, n, tr.pauseWhere[n], r, o.State, o.PausedReason, o, tr.logs(n))
		}
		if o.ErrorReason != "" {
			want := fmt.Sprintf("%d consecutive failures; last: ", crashErrorAfter)
			if !src.canError() || !strings.HasPrefix(o.ErrorReason, want) || o.ConsecutiveFailures != crashErrorAfter {
				tr.fail("%s: %s (%s) in error with %d consecutive failures, reason %q; want only error_after=%d sources, reason %q...",
					s.label, n, src.kind, o.ConsecutiveFailures, o.ErrorReason, crashErrorAfter, want)
			}
			if _, ok := tr.errSeen[n]; !ok {
				tr.errSeen[n], tr.errWhere[n] = o.ErrorReason, s.label
			}
		}
		if o.State == "paused" {
			if !tr.pausable[n] {
				tr.fail("%s: %s is paused but the test never paused it: %s", s.label, n, o)
			}
			if _, ok := tr.pauseSeen[n]; !ok {
				tr.pauseSeen[n], tr.pauseWhere[n] = o.PausedReason, s.label
			}
		}
		if (o.State == "error" || o.State == "paused") != (o.NextRunAt == nil) {
			tr.fail("%s: %s: state %q with next_run_at %s (null exactly in error and paused)", s.label, n, o.State, fmtTime(o.NextRunAt))
		}
	}
}

// live checks the in-memory view of a freshly restarted daemon against the
// store as the killed daemon left it.
func (tr *crashTracker) live(label string, api map[string]sourceObj, stored map[string]sourceObj) {
	tr.t.Helper()
	for _, src := range tr.srcs {
		n := src.name
		o, ok := api[n]
		if !ok {
			tr.fail("%s: %s missing from /api/sources", label, n)
			continue
		}
		st := stored[n]
		if r, ok := tr.errSeen[n]; ok && (o.State != "error" || o.ErrorReason != r) {
			tr.statesLost++
			tr.fail("%s: %s LOST its error state at the restart (stored reason %q): %s\n%s", label, n, r, o, tr.logs(n))
		}
		if r, ok := tr.pauseSeen[n]; ok && (o.State != "paused" || o.PausedReason != r) {
			tr.statesLost++
			tr.fail("%s: %s LOST its pause at the restart (stored reason %q): %s\n%s", label, n, r, o, tr.logs(n))
		}
		if o.PollsTotal < st.PollsTotal || (src.alwaysFails() && o.ConsecutiveFailures < st.ConsecutiveFailures) {
			tr.fail("%s: %s resumed behind its stored state: stored %s, daemon %s", label, n, st, o)
		}
	}
}

type faultPauseJob struct {
	name, reason string
	start, end   time.Time
	res          cliResult
	err          error
	done         chan struct{}
	reported     bool
}

// TestFaultCrash: kill -9 at 50 random moments (rules 3.8, 3.7, 3.9, 3.13).
//
// A daemon with 300 sources (ok, slow body, failing, failing forever,
// hanging past their timeout, throttled with Retry-After in seconds and as
// an HTTP date, exec true and false) is SIGKILLed 100ms..1.5s after it is
// ready, and restarted on the same store, 50 times; some sources are
// paused through the CLI, a few of those commands straddle a kill. While
// it runs, `pacer status -json` reads the store over and over; after each
// kill it reads the store the dead daemon left. Every store snapshot must
// be consistent with all earlier ones (counters only grow, error and pause
// states and their reasons never go away, an always-failing source has
// consecutive_failures == failures_total == polls_total). For every http
// source and every kill, the requests the upstream saw minus the polls the
// store gained is 0 or 1, and 1 only for a poll in flight at the kill or
// answered within the commit window before it; the polls lost in flight
// at one kill are at most the concurrency. After each restart no source is
// polled before the next_run_at stored by the killed daemon, and none in
// error or paused is polled at all. The killed daemon's lock must not
// block a start. The last run ends with SIGTERM: then nothing is lost.
func TestFaultCrash(t *testing.T) {
	testStart := time.Now()
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, seed>>7|1))
	t.Logf("seed %d", seed)

	fu := newFaultUpstream(t)
	in := newInst(t)
	stalls := faultStartStallMonitor(t, in.dir)
	srcs := crashSources(fu)
	in.writeConfig(crashConfig(srcs))
	t.Logf("%d sources", len(srcs))

	var logMu sync.Mutex
	var epochLogs []func() string // stderr of each epoch's daemon
	logsOf := func(names ...string) string {
		logMu.Lock()
		defer logMu.Unlock()
		var b strings.Builder
		for i := max(0, len(epochLogs)-3); i < len(epochLogs); i++ {
			ls := faultGrep(epochLogs[i](), 8, names...)
			if len(ls) > 0 {
				fmt.Fprintf(&b, "  daemon log of epoch %d:\n    %s\n", i, strings.Join(ls, "\n    "))
			}
		}
		return b.String()
	}
	tr := &crashTracker{
		t: t, srcs: srcs, by: map[string]crashSrc{},
		maxPolls: map[string]int64{}, maxFail: map[string]int64{}, maxThr: map[string]int64{},
		maxCF: map[string]int{}, errSeen: map[string]string{}, errWhere: map[string]string{},
		pauseSeen: map[string]string{}, pauseWhere: map[string]string{}, pausable: map[string]bool{},
		logs: logsOf,
	}
	for _, s := range srcs {
		tr.by[s.name] = s
	}

	// Pause candidates: early ones (before the first kill), then one at a
	// time at random moments (some CLI commands straddle a kill).
	var early, late []string
	wantEarly := map[string]int{"ok": 6, "hang": 3, "failx": 3}
	for _, s := range srcs {
		switch {
		case wantEarly[s.kind] > 0:
			wantEarly[s.kind]--
			early = append(early, s.name)
		case s.kind == "ok" && strings.HasSuffix(s.name, "5"):
			late = append(late, s.name)
		}
	}
	for _, n := range append(append([]string(nil), early...), late...) {
		tr.pausable[n] = true
	}
	var jobs []*faultPauseJob
	var curJob *faultPauseJob

	// Per-epoch accounting for http sources.
	storedPolls := map[string]int64{} // polls_total in the store after the previous kill
	var prevStored map[string]sourceObj
	var (
		killsSurvived, maxLostPerKill, maxCum int
		maxCumName                            string
		maxLostAge, maxAllowed, maxEarly      time.Duration
		maxLostInflight                       int
		maxReady                              time.Duration
		lostTotal, snapsTaken                 int
		killDelays                            []time.Duration
	)
	cum := map[string]int{} // arrivals - polls_total, cumulative, per http source
	var prevPID int
	var prevKill, prevExit time.Time
	var prevHolders []string
	lockHeldAfterKill, unansweredTotal := 0, 0
	var maxLockHeld, maxRunq time.Duration
	cutoff := time.Now()

	for k := 0; k <= crashKills; k++ {
		final := k == crashKills
		epochStart := cutoff
		label := fmt.Sprintf("epoch %d", k)
		d := faultSpawn(in)
		runq := sampleRunq(d.pid())
		t.Cleanup(runq.Stop)
		logMu.Lock()
		epochLogs = append(epochLogs, d.logs)
		logMu.Unlock()
		// Rule 3.13: the lock of the killed daemon never blocks this start.
		readyErr := faultWaitReady(d, 30*time.Second)
		if readyErr != nil {
			holders := faultFileHolders(store.LockPath(in.storePath()))
			var prev string
			if k > 0 {
				prev = fmt.Sprintf(" The previous daemon (pid %d) was SIGKILLed at %s and reaped at %s (%s before this start).",
					prevPID, prevKill.Format("15:04:05.000"), prevExit.Format("15:04:05.000"), d.started.Sub(prevExit).Round(time.Millisecond))
			}
			t.Fatalf("%s: the restarted daemon did not become ready: %v.%s Processes with the lock file open right after that kill: %q; now: %q",
				label, readyErr, prev, prevHolders, holders)
		}
		readyAt := time.Now()
		maxReady = max(maxReady, readyAt.Sub(d.started))

		if k > 0 {
			tr.live(label+" (after restart, /api/sources)", d.sources(), prevStored)
		}
		if k == 0 {
			// Warm up: let the sources reach their states, pause a few.
			for i, n := range early {
				in.mustCLI("pause", n, "-reason", fmt.Sprintf("early pause %d", i))
			}
			sleepUntil(readyAt.Add(4 * time.Second))
		}

		// When this epoch's kill comes: 100ms..1.5s after ready (after the
		// warm-up in epoch 0).
		delay := 100*time.Millisecond + time.Duration(rng.Int64N(int64(1400*time.Millisecond)))
		killBase := readyAt
		if k == 0 {
			killBase = time.Now()
		}

		// A pause via the CLI at a random moment of some epochs, started
		// while the daemon runs (in the first half of the epoch), so that
		// it goes through the daemon; some are still waiting for their
		// answer when the daemon is killed.
		if !final && k >= 1 && k <= crashKills-5 && curJob == nil && len(late) > 0 && rng.IntN(2) == 0 {
			j := &faultPauseJob{name: late[0], reason: fmt.Sprintf("late pause in epoch %d", k), done: make(chan struct{})}
			late = late[1:]
			off := time.Duration(rng.Int64N(int64(delay / 2)))
			curJob = j
			jobs = append(jobs, j)
			go func() {
				defer close(j.done)
				time.Sleep(off)
				j.start = time.Now()
				j.res, j.err = faultCLI(in, 30*time.Second, "pause", j.name, "-reason", j.reason)
				j.end = time.Now()
			}()
		}

		// Read the store over and over while the daemon runs.
		var snaps []crashSnap
		var snapMu sync.Mutex
		var snapErrs []string
		stopSnaps := make(chan struct{})
		snapsDone := make(chan struct{})
		go func() {
			defer close(snapsDone)
			for i := 0; ; i++ {
				select {
				case <-stopSnaps:
					return
				default:
				}
				st := time.Now()
				r, err := faultCLI(in, 30*time.Second, "status", "-json")
				en := time.Now()
				var list []sourceObj
				if err == nil && r.code == 0 {
					err = json.Unmarshal([]byte(r.stdout), &list)
				} else if err == nil {
					err = fmt.Errorf("%s", r)
				}
				snapMu.Lock()
				if err != nil {
					snapErrs = append(snapErrs, err.Error())
				} else {
					m := make(map[string]sourceObj, len(list))
					for _, o := range list {
						m[o.Name] = o
					}
					snaps = append(snaps, crashSnap{label: fmt.Sprintf("%s status #%d", label, i), start: st, end: en, m: m})
				}
				snapMu.Unlock()
				select {
				case <-stopSnaps:
					return
				case <-time.After(100 * time.Millisecond):
				}
			}
		}()

		var killAt time.Time
		if final {
			sleepUntil(time.Now().Add(3 * time.Second))
			killAt = time.Now()
			d.stop(20 * time.Second)
			runq.Stop()
		} else {
			killDelays = append(killDelays, delay)
			sleepUntil(killBase.Add(delay))
			killAt = time.Now()
			d.kill()
			runq.Stop()
			prevPID, prevKill, prevExit = d.pid(), killAt, d.exitAt
			// Rule 3.13: the killed daemon's lock does not block a start,
			// not even one right now (a supervisor restarting it at once).
			// "pacer run" retries its lock for about 70ms; a lock still
			// held well after that means such a start exits 1. Who holds
			// it says why (a child forked, not yet exec'ed, shares the
			// daemon's descriptors).
			lockPath := store.LockPath(in.storePath())
			prevHolders = faultFileHolders(lockPath)
			lastHeld, holders, perr := faultProbeLock(lockPath, time.Now().Add(5*time.Second))
			if perr != nil {
				t.Fatalf("%s: probing the lock file: %v", label, perr)
			}
			if !lastHeld.IsZero() {
				lockHeldAfterKill++
				heldFor := lastHeld.Sub(prevExit)
				maxLockHeld = max(maxLockHeld, heldFor)
				t.Logf("%s: after the daemon (pid %d) was killed and reaped, its lock was still held for at least %s; the lock file was open in: %q then %q",
					label, prevPID, heldFor.Round(time.Millisecond), prevHolders, holders)
				if heldFor > crashLockGrace && !heldByTest(holders) {
					tr.fail("%s: rule 3.13: the lock of the killed daemon (pid %d) was still held %s after it was reaped (a \"pacer run\" started then exits 1, \"in use by a running pacer\"); the lock file was open in: %q, later %q",
						label, prevPID, heldFor.Round(time.Millisecond), prevHolders, holders)
				}
			}
		}
		close(stopSnaps)
		<-snapsDone
		snapMu.Lock()
		for _, e := range snapErrs {
			tr.fail("%s: status -json while the daemon ran (or was killed) failed: %s", label, e)
		}
		for _, s := range snaps {
			tr.store(s)
		}
		snapsTaken += len(snaps)
		snapMu.Unlock()

		// The store as the killed daemon left it.
		offStart := time.Now()
		stored := in.statusAll()
		cutoff = time.Now()
		off := crashSnap{label: label + " (store after the kill)", start: offStart, end: cutoff, m: stored}
		if final {
			off.label = label + " (store after SIGTERM)"
		}
		tr.store(off)

		// Pauses the CLI confirmed are in the store; refused ones are not.
		for _, j := range jobs {
			select {
			case <-j.done:
			default:
				continue
			}
			if j == curJob {
				curJob = nil
			}
			if j.err != nil {
				if !j.reported {
					j.reported = true
					tr.fail("pause %s: %v", j.name, j.err)
				}
				continue
			}
			if !j.end.Before(offStart) {
				continue
			}
			o := stored[j.name]
			if j.res.code == 0 && (o.State != "paused" || o.PausedReason != j.reason) {
				tr.statesLost++
				tr.fail("%s: pause %s (confirmed by the CLI at %s, %s after it started) is not in the store: %s\n%s",
					off.label, j.name, j.end.Format("15:04:05.000"), j.res.took.Round(time.Millisecond), o, logsOf(j.name))
			}
			if j.res.code != 0 && o.State == "paused" {
				tr.fail("%s: pause %s was reported as failed (%s) but is in the store: %s", off.label, j.name, j.res, o)
			}
		}

		// Arrivals against polls recorded, for every http source.
		lostNow, lostInflight := 0, 0
		var lostNames []string
		for _, s := range srcs {
			if !s.isHTTP() {
				continue
			}
			var epoch []faultArrival
			for _, a := range fu.Arrivals(s.path) {
				if !a.At.Before(epochStart) && a.At.Before(cutoff) {
					epoch = append(epoch, a)
				}
			}
			o := stored[s.name]
			recorded := o.PollsTotal - storedPolls[s.name]
			lost := len(epoch) - int(recorded)
			storedPolls[s.name] = o.PollsTotal
			cum[s.name] += lost
			if cum[s.name] > maxCum {
				maxCum, maxCumName = cum[s.name], s.name
			}
			switch {
			case lost < 0:
				// More polls recorded than requests seen: only polls that
				// timed out before their request reached the upstream
				// (a starved machine) can explain that.
				unanswered, recs := unansweredPolls(in, s.name, epochStart)
				unansweredTotal += -lost
				if -lost > unanswered {
					tr.fail("%s: %s: the store counts %d polls for this epoch but the upstream saw %d requests (and only %d recorded polls timed out unanswered): %s\nhistory: %s",
						off.label, s.name, recorded, len(epoch), unanswered, o, recs)
				}
			case final && lost > 0:
				tr.fail("%s: %s: %d of the %d polls of the last epoch are not recorded after a graceful stop: %s",
					off.label, s.name, lost, len(epoch), o)
			case lost > 1:
				tr.fail("%s: %s: %d polls lost at one kill (at most the one in flight or just ended can be): %d requests, %d recorded: %s\n%s",
					off.label, s.name, lost, len(epoch), recorded, o, logsOf(s.name))
			case lost == 1:
				last := epoch[len(epoch)-1]
				if !last.Done.IsZero() && last.Done.Before(killAt) {
					age := killAt.Sub(last.Done)
					// Add what the machine took: the daemon's wait for a CPU
					// and this process's delays (timers, disk).
					stalled := runq.between(last.Done, killAt) + stalls.lateBetween(last.Done, killAt)
					allowed := crashCommitWindow + crashCommitSlack + stalled
					maxLostAge = max(maxLostAge, age)
					maxAllowed = max(maxAllowed, allowed)
					if age > allowed {
						tr.fail("%s: %s: its last poll (request at %s, answered at %s) ended %s before the kill but is not in the store (rule 3.8: committed within 250ms; allowed %s incl. %s of measured machine stalls: the daemon waiting for a CPU, this process's delays): %s\n%s",
							off.label, s.name, last.At.Format("15:04:05.000"), last.Done.Format("15:04:05.000"),
							age.Round(time.Millisecond), allowed.Round(time.Millisecond), stalled.Round(time.Millisecond), o, logsOf(s.name, "store"))
					}
				} else {
					lostInflight++
				}
				lostNow++
				if len(lostNames) < 8 {
					lostNames = append(lostNames, s.name)
				}
			}
			// Not polled before its stored next run time (nor at all in
			// error or paused).
			if prevStored != nil && len(epoch) > 0 {
				p := prevStored[s.name]
				switch {
				case p.NextRunAt == nil:
					tr.fail("%s: %s was polled %d times after the restart although the store had it %q: %s\n%s",
						label, s.name, len(epoch), p.State, p, logsOf(s.name))
				case epoch[0].At.Before(p.NextRunAt.Add(-crashEarlyTolerance)):
					early := p.NextRunAt.Sub(epoch[0].At)
					maxEarly = max(maxEarly, early)
					tr.fail("%s: %s polled at %s after the restart, %s before its stored next_run_at %s (state %q)\n%s",
						label, s.name, epoch[0].At.UTC().Format("15:04:05.000"), early.Round(time.Millisecond),
						fmtTime(p.NextRunAt), p.State, logsOf(s.name))
				default:
					maxEarly = max(maxEarly, p.NextRunAt.Sub(epoch[0].At))
				}
			}
		}
		lostTotal += lostNow
		maxLostPerKill = max(maxLostPerKill, lostNow)
		maxLostInflight = max(maxLostInflight, lostInflight)
		// The polls lost while in flight are bounded by the global cap; the
		// others ended within the commit window (checked above).
		if lostInflight > crashConcurrency {
			tr.fail("%s: %d polls were in flight at the kill (lost, unanswered), more than concurrency %d: %v...",
				off.label, lostInflight, crashConcurrency, lostNames)
		}
		maxRunq = max(maxRunq, runq.total())
		if !final {
			killsSurvived++
			t.Logf("%s: ready after %s, killed %s after ready; %d snapshots; lost polls %d %v",
				label, readyAt.Sub(d.started).Round(time.Millisecond), killAt.Sub(readyAt).Round(time.Millisecond),
				len(snaps), lostNow, lostNames)
		}
		if dir := os.Getenv("PACER_FAULT_LOGDIR"); dir != "" {
			// Keep every daemon's log for a post-mortem.
			_ = os.WriteFile(filepath.Join(dir, fmt.Sprintf("crash-epoch-%02d.log", k)), []byte(d.logs()), 0o644)
		}
		prevStored = stored
		if tr.problems > 200 {
			t.Fatalf("too many problems; stopping after %s", label)
		}
	}
	// A pause still waiting: let it finish (a daemon is no longer running).
	for _, j := range jobs {
		<-j.done
	}

	// The mix did what it was meant to.
	final := prevStored
	counts := map[string]int{}
	for _, s := range srcs {
		counts[final[s.name].State]++
	}
	var cs []string
	for st, n := range counts {
		cs = append(cs, fmt.Sprintf("%s=%d", st, n))
	}
	sort.Strings(cs)
	if len(tr.errSeen) == 0 {
		t.Errorf("no source reached the error state during the test")
	}
	if len(tr.pauseSeen) < len(early) {
		t.Errorf("only %d sources paused (want at least the %d early ones)", len(tr.pauseSeen), len(early))
	}
	maxFailx := 0
	for _, s := range srcs {
		if s.kind == "failx" {
			maxFailx = max(maxFailx, final[s.name].ConsecutiveFailures)
		}
	}
	var pausesOK, pausesFailed int
	for _, j := range jobs {
		if j.err == nil && j.res.code == 0 {
			pausesOK++
		} else {
			pausesFailed++
		}
	}
	sort.Slice(killDelays, func(i, j int) bool { return killDelays[i] < killDelays[j] })

	t.Logf("TestFaultCrash figures: kills survived %d/%d; states lost %d (must be 0); problems %d",
		killsSurvived, crashKills, tr.statesLost, tr.problems)
	t.Logf("  max arrival/count discrepancy (upstream requests - polls recorded): per kill, all sources %d (of which in flight %d, cap %d); per source, cumulative over %d kills %d (%s); total lost polls %d",
		maxLostPerKill, maxLostInflight, crashConcurrency, crashKills, maxCum, maxCumName, lostTotal)
	t.Logf("  oldest lost poll: answered %s before its kill (allowed %s + measured stalls, at most %s); first poll after restart vs stored next_run_at: at most %s early (allowed %s); worst stall of the test process %s; most CPU wait of a daemon in one epoch %s",
		maxLostAge.Round(time.Millisecond), crashCommitWindow+crashCommitSlack, maxAllowed.Round(time.Millisecond),
		max(maxEarly, 0).Round(time.Millisecond), crashEarlyTolerance, stalls.worst().Round(time.Millisecond), maxRunq.Round(time.Millisecond))
	t.Logf("  final states: %s; sources seen in error %d, paused %d; failx max consecutive_failures %d",
		strings.Join(cs, " "), len(tr.errSeen), len(tr.pauseSeen), maxFailx)
	t.Logf("  store snapshots while running %d; late pauses confirmed %d, failed %d; slowest restart-to-ready %s; kill delays %s..%s; upstream requests %d; wall %s",
		snapsTaken, pausesOK, pausesFailed, maxReady.Round(time.Millisecond), killDelays[0].Round(time.Millisecond),
		killDelays[len(killDelays)-1].Round(time.Millisecond), fu.Total(), time.Since(testStart).Round(time.Second))
	t.Logf("  kills after which the dead daemon's lock was still held: %d (longest %s after the reap; allowed %s); polls recorded that timed out before reaching the upstream: %d",
		lockHeldAfterKill, maxLockHeld.Round(time.Millisecond), crashLockGrace, unansweredTotal)
	if tr.statesLost != 0 {
		t.Errorf("%d error/pause states lost across kills", tr.statesLost)
	}
}

// unansweredPolls counts the polls of name recorded in the (stopped)
// store that started at or after since and failed without any answer (a
// timeout or a transport error: no status code), and returns the records.
func unansweredPolls(in *inst, name string, since time.Time) (int, string) {
	r, err := faultCLI(in, 30*time.Second, "history", name, "-json", "-n", "100")
	if err != nil || r.code != 0 {
		return 0, fmt.Sprintf("history failed: %v %s", err, r)
	}
	var recs []histRec
	if err := json.Unmarshal([]byte(r.stdout), &recs); err != nil {
		return 0, fmt.Sprintf("history: %v", err)
	}
	n := 0
	for _, h := range recs {
		if !h.StartedAt.Before(since) && h.Outcome == "failure" && h.StatusCode == nil {
			n++
		}
	}
	return n, r.stdout
}

// heldByTest reports whether one of the processes in holders (as listed by
// faultFileHolders) is a child of the test process: a pacer command the
// test runs, which holds the lock legitimately while it changes a stopped
// store.
func heldByTest(holders []string) bool {
	me := fmt.Sprintf(", parent %d,", os.Getpid())
	for _, h := range holders {
		if strings.Contains(h, me) {
			return true
		}
	}
	return false
}
