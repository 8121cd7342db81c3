package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Rules 3.4, 3.6, 3.7: backoff -> breaker open -> one probe per cooldown ->
// error state with its reason; reset brings the source back; a successful
// half-open probe closes the breaker.
func TestBreakerAndErrorState(t *testing.T) {
	t.Parallel()
	u := newUpstream(t)
	in := newInst(t)
	u.Set("/x", behavior{Status: 500})
	in.writeConfig(`concurrency: 2
shutdown_timeout: 5s
sources:
  - name: x
    type: http
    url: "` + u.URL("/x") + `"
    schedule: "@every 1s"
    backoff: {initial: 100ms, max: 30s, multiplier: 2, jitter: 0}
    breaker: {failures: 3, cooldown: 3s}
    error_after: 5
`)
	d := in.start()

	// First failure: backoff, breaker closed.
	u.waitArrivals(t, "/x", 1, 3*time.Second)
	eventually(t, 2*time.Second, "x in backoff after its first failure", func() error {
		o := d.source("x")
		if o.ConsecutiveFailures > 1 && o.FailuresTotal == int64(o.ConsecutiveFailures) {
			// A starved test process read the state too late: the source
			// moved on (100 ms backoff, 1 s ticks). What follows checks
			// the later states; this one needs a quicker look.
			t.Logf("x: the state after its first failure was not seen in time (now %s)", o)
			return nil
		}
		if o.State != "backoff" || o.Breaker != "closed" || o.ConsecutiveFailures != 1 || o.FailuresTotal != 1 {
			return errf("%s", o)
		}
		if !strings.Contains(o.LastError, "500") {
			return errf("last_error %q should name the 500", o.LastError)
		}
		if o.NextRunAt == nil {
			return errf("next_run_at is null in backoff")
		}
		return nil
	})
	// Third failure opens the breaker.
	u.waitArrivals(t, "/x", 3, 4*time.Second)
	eventually(t, 2*time.Second, "x open after 3 failures", func() error {
		o := d.source("x")
		if o.State != "open" || o.Breaker != "open" || o.ConsecutiveFailures != 3 {
			return errf("%s", o)
		}
		ts := u.Times("/x")
		if o.NextRunAt == nil || o.NextRunAt.Before(ts[2].Add(3*time.Second-50*time.Millisecond)) {
			return errf("next_run_at %s should be at least the 3s cooldown after the failure at %s", fmtTime(o.NextRunAt), ts[2].UTC().Format(time.RFC3339Nano))
		}
		return nil
	})
	// No call during the cooldown, then one probe (half-open) that fails:
	// open again for another cooldown.
	u.waitArrivals(t, "/x", 4, 6*time.Second)
	eventually(t, 2*time.Second, "x open again after a failed probe", func() error {
		if o := d.source("x"); o.State != "open" || o.Breaker != "open" || o.ConsecutiveFailures != 4 {
			return errf("%s", o)
		}
		return nil
	})
	u.waitArrivals(t, "/x", 5, 6*time.Second)
	ts := u.Times("/x")
	for i := 1; i < 3; i++ {
		if gap := ts[i].Sub(ts[i-1]); gap < 500*time.Millisecond || gap > 2500*time.Millisecond {
			t.Errorf("failures %d and %d were %s apart; on @every 1s with a 100-200ms backoff they should be a tick apart", i, i+1, gap.Round(time.Millisecond))
		}
	}
	for i := 3; i < 5; i++ {
		gap := ts[i].Sub(ts[i-1])
		if gap < 3*time.Second {
			t.Errorf("call %d came %s after call %d: no call may be made during the 3s cooldown", i+1, gap.Round(time.Millisecond), i)
		}
		if gap > 3*time.Second+1500*time.Millisecond {
			t.Errorf("probe %d came %s after the breaker opened; it should come right after the 3s cooldown", i+1, gap.Round(time.Millisecond))
		}
	}

	// The fifth failure: error state.
	wantReason := "5 consecutive failures; last: GET " + u.URL("/x") + ": 500 Internal Server Error"
	eventually(t, 2*time.Second, "x in error after 5 failures", func() error {
		o := d.source("x")
		if o.State != "error" || o.ConsecutiveFailures != 5 || o.FailuresTotal != 5 || o.NextRunAt != nil {
			return errf("%s", o)
		}
		if o.ErrorReason != wantReason {
			return errf("error_reason %q, want %q", o.ErrorReason, wantReason)
		}
		return nil
	})
	u.noArrivals(t, "/x", ts[4].Add(time.Millisecond), 5*time.Second, "a source in error must not be called")
	if o := d.source("x"); o.State != "error" || o.NextRunAt != nil {
		t.Fatalf("x left the error state on its own: %s", o)
	}
	if o := in.statusJSON("x"); o.State != "error" || o.ErrorReason != wantReason || o.NextRunAt != nil {
		t.Errorf("status -json x (daemon running): %s", o)
	}
	if v := d.metric("pacer_source_consecutive_failures", "source", "x"); v != 5 {
		t.Errorf(`pacer_source_consecutive_failures{source="x"} = %v in error, want 5`, v)
	}
	if v := d.metric("pacer_sources", "state", "error"); v != 1 {
		t.Errorf(`pacer_sources{state="error"} = %v, want 1`, v)
	}

	// reset (CLI, daemon running): back to polling within 2s (+ a tick).
	resetAt := time.Now()
	in.mustCLI("reset", "x")
	eventually(t, 2500*time.Millisecond, "x reset", func() error {
		o := d.source("x")
		if o.State == "error" || o.ErrorReason != "" || o.Breaker != "closed" {
			return errf("%s", o)
		}
		if o.ConsecutiveFailures != 0 && u.CountSince("/x", resetAt) == 0 {
			return errf("consecutive_failures %d after reset: %s", o.ConsecutiveFailures, o)
		}
		return nil
	})
	eventually(t, 3500*time.Millisecond, "a request on /x after reset", func() error {
		if u.CountSince("/x", resetAt) == 0 {
			return errf("none since %s", resetAt.Format("15:04:05.000"))
		}
		return nil
	})
	if o := d.source("x"); o.FailuresTotal < 5 {
		t.Errorf("reset must keep the counters (failures_total %d): %s", o.FailuresTotal, o)
	}

	// Fail to open again, then let the upstream recover during the cooldown:
	// the half-open probe succeeds and closes the breaker.
	eventually(t, 6*time.Second, "x open again after reset and 3 failures", func() error {
		if o := d.source("x"); o.State != "open" || o.ConsecutiveFailures != 3 {
			return errf("%s", o)
		}
		return nil
	})
	openedAt := u.Last("/x")
	u.Set("/x", behavior{Status: 200})
	eventually(t, 6*time.Second, "the probe after the cooldown to succeed and close the breaker", func() error {
		o := d.source("x")
		if o.State != "ok" || o.Breaker != "closed" || o.ConsecutiveFailures != 0 || o.LastSuccessAt == nil {
			return errf("%s", o)
		}
		return nil
	})
	probe := u.Arrivals("/x")
	var after []time.Time
	for _, a := range probe {
		if a.At.After(openedAt) {
			after = append(after, a.At)
		}
	}
	if len(after) == 0 || after[0].Sub(openedAt) < 3*time.Second {
		t.Errorf("the probe came before the 3s cooldown ended (opened %s, probes %v)", openedAt.Format("15:04:05.000"), after)
	}
	// Closed again: back on its schedule.
	n := u.Count("/x")
	u.waitArrivals(t, "/x", n+1, 2500*time.Millisecond)
}

// Rule 3.4: after the k-th failure the next poll is not before
// now + min(max, initial * multiplier^(k-1)), nor before the next tick;
// breaker.failures: 0 and error_after: 0 disable the breaker and the error state.
func TestBackoffGrowth(t *testing.T) {
	t.Parallel()
	u := newUpstream(t)
	in := newInst(t)
	u.Set("/bk", behavior{Status: 500})
	u.Set("/tick", behavior{Status: 500})
	in.writeConfig(`concurrency: 2
shutdown_timeout: 5s
defaults:
  breaker: {failures: 0}
  error_after: 0
sources:
  - name: bk
    type: http
    url: "` + u.URL("/bk") + `"
    schedule: "@every 1s"
    backoff: {initial: 1500ms, max: 3s, multiplier: 2, jitter: 0}
  - name: tick
    type: http
    url: "` + u.URL("/tick") + `"
    schedule: "@every 2s"
    backoff: {initial: 100ms, max: 1s, multiplier: 2, jitter: 0}
` + jitterSources(u) + `
`)
	d := in.start()
	d.watchStarvation()
	u.waitArrivals(t, "/bk", 5, 16*time.Second)
	ts := u.Times("/bk")
	want := []time.Duration{1500 * time.Millisecond, 3 * time.Second, 3 * time.Second, 3 * time.Second}
	for i, w := range want {
		gap := ts[i+1].Sub(ts[i])
		if gap < w {
			t.Errorf("bk: poll %d came %s after failure %d; the backoff is %s", i+2, gap.Round(time.Millisecond), i+1, w)
		}
		if gap > d.within(w+1200*time.Millisecond, ts[i], ts[i+1]) {
			t.Errorf("bk: poll %d came %s after failure %d; the backoff is %s (and ticks are 1s)", i+2, gap.Round(time.Millisecond), i+1, w)
		}
	}
	// The fifth request has reached the upstream; its outcome is applied a
	// moment later.
	eventually(t, 2*time.Second, "bk's fifth failure applied", func() error {
		if o := d.source("bk"); o.State != "backoff" || o.Breaker != "closed" || o.ConsecutiveFailures < 5 {
			return errf("bk with breaker.failures 0 and error_after 0 after 5 failures: want backoff/closed, got %s", o)
		}
		return nil
	})
	// jitter 0.5 on a 2s backoff: the next poll 1s to 3s after the failure,
	// and not the same delay for every source.
	var gaps []time.Duration
	for i := 0; i < 6; i++ {
		p := fmt.Sprintf("/jit/%d", i)
		u.waitArrivals(t, p, 2, 5*time.Second)
		ts := u.Times(p)
		gap := ts[1].Sub(ts[0])
		gaps = append(gaps, gap)
		if gap < 950*time.Millisecond || gap > d.within(3600*time.Millisecond, ts[0], ts[1]) {
			t.Errorf("%s: next poll %s after a failure with backoff 2s +/- 50%%", p, gap.Round(time.Millisecond))
		}
	}
	lo, hi := gaps[0], gaps[0]
	for _, g := range gaps {
		lo, hi = min(lo, g), max(hi, g)
	}
	if hi-lo < 150*time.Millisecond {
		t.Errorf("six sources with jitter 0.5 on a 2s backoff all waited %s to %s: no jitter", lo.Round(time.Millisecond), hi.Round(time.Millisecond))
	}

	tt := u.Times("/tick")
	if len(tt) < 3 {
		t.Fatalf("tick: %d polls", len(tt))
	}
	// Arrival times carry each poll's start lag (up to tens of ms on a quiet
	// machine), so two polls on consecutive 2s ticks may arrive a little
	// less than 2s apart; a poll on the backoff (at most 1.1s) cannot. A
	// starved machine delays the earlier poll's start by about what it took
	// from the daemon before it (up to its tick 2 s earlier), and the later
	// one's by what it took before that one: both margins come from the
	// machine's stall over those intervals.
	for i := 1; i < len(tt); i++ {
		gap := tt[i].Sub(tt[i-1])
		early := d.within(0, tt[i-1].Add(-2*time.Second), tt[i-1])
		late := d.within(0, tt[i-1], tt[i])
		if gap < 1800*time.Millisecond-early || gap > 3*time.Second+late {
			t.Errorf("tick: failing polls %s apart (machine stalls: %s before the first, %s between); a 100ms-1s backoff must not poll before the next 2s tick",
				gap.Round(time.Millisecond), early.Round(time.Millisecond), late.Round(time.Millisecond))
		}
	}
}

// Rule 3.5: throttling.
func TestThrottling(t *testing.T) {
	t.Parallel()
	u := newUpstream(t)
	in := newInst(t)
	u.Set("/ra", behavior{Status: 429, RetryAfter: "3"})
	u.Set("/date", behavior{Status: 503, RetryAfterIn: 4 * time.Second})
	u.Set("/plain503", behavior{Status: 503})
	u.Set("/nora", behavior{Status: 429})
	u.Set("/hp", behavior{Status: 500})
	in.writeConfig(`concurrency: 4
shutdown_timeout: 5s
defaults:
  schedule: "@every 1s"
  backoff: {initial: 100ms, max: 30s, multiplier: 2, jitter: 0}
sources:
  # A throttle counted as a failure would open the breaker / enter error at once.
  - {name: ra, type: http, url: "` + u.URL("/ra") + `", breaker: {failures: 1, cooldown: 1m}, error_after: 1}
  - {name: date, type: http, url: "` + u.URL("/date") + `", breaker: {failures: 1, cooldown: 1m}, error_after: 1}
  - {name: plain503, type: http, url: "` + u.URL("/plain503") + `", breaker: {failures: 0}, error_after: 0}
  - {name: nora, type: http, url: "` + u.URL("/nora") + `", breaker: {failures: 1, cooldown: 1m}, error_after: 1,
     backoff: {initial: 2s, max: 30s, multiplier: 2, jitter: 0}}
  - {name: hp, type: http, url: "` + u.URL("/hp") + `", breaker: {failures: 1, cooldown: 2s}, error_after: 0}
`)
	d := in.start()

	// 429 with Retry-After: 3.
	u.waitArrivals(t, "/ra", 1, 3*time.Second)
	eventually(t, 2*time.Second, "ra throttled", func() error {
		o := d.source("ra")
		if o.State != "throttled" || o.ThrottledTotal < 1 || o.ThrottledTotal != o.PollsTotal || o.FailuresTotal != 0 || o.ConsecutiveFailures != 0 || o.Breaker != "closed" {
			return errf("%s", o)
		}
		return nil
	})
	// 503 with Retry-After as an HTTP date.
	u.waitArrivals(t, "/date", 1, 3*time.Second)
	eventually(t, 2*time.Second, "date throttled", func() error {
		o := d.source("date")
		if o.State != "throttled" || o.ThrottledTotal < 1 || o.ThrottledTotal != o.PollsTotal || o.FailuresTotal != 0 || o.Breaker != "closed" {
			return errf("%s", o)
		}
		return nil
	})
	// 503 without Retry-After is a failure.
	u.waitArrivals(t, "/plain503", 1, 3*time.Second)
	eventually(t, 2*time.Second, "plain503 failed", func() error {
		o := d.source("plain503")
		if o.State != "backoff" || o.FailuresTotal < 1 || o.ThrottledTotal != 0 || !strings.Contains(o.LastError, "503") {
			return errf("%s", o)
		}
		return nil
	})
	// The half-open probe of hp is throttled: the breaker stays half-open.
	u.waitArrivals(t, "/hp", 1, 3*time.Second)
	eventually(t, 2*time.Second, "hp open", func() error {
		if o := d.source("hp"); o.State != "open" {
			return errf("%s", o)
		}
		return nil
	})
	u.Set("/hp", behavior{Status: 429, RetryAfter: "2"})
	// hp: the throttled probe leaves the breaker half-open.
	u.waitArrivals(t, "/hp", 2, 5*time.Second)
	eventually(t, 2*time.Second, "hp throttled with its breaker half-open", func() error {
		o := d.source("hp")
		if o.State != "throttled" || o.Breaker != "half-open" || o.ThrottledTotal < 1 || o.FailuresTotal != 1 || o.ConsecutiveFailures != 1 {
			return errf("%s", o)
		}
		return nil
	})
	u.Set("/hp", behavior{Status: 200})
	eventually(t, 5*time.Second, "hp's next probe to succeed and close its breaker", func() error {
		o := d.source("hp")
		if o.State != "ok" || o.Breaker != "closed" || o.ConsecutiveFailures != 0 {
			return errf("%s (requests on /hp: %d)", o, u.Count("/hp"))
		}
		return nil
	})
	hp := u.Times("/hp")
	if len(hp) >= 3 && hp[2].Sub(hp[1]) < 2*time.Second {
		t.Errorf("hp: polled %s after a 429 with Retry-After: 2", hp[2].Sub(hp[1]).Round(time.Millisecond))
	}

	u.waitArrivals(t, "/ra", 3, 10*time.Second)
	u.waitArrivals(t, "/date", 2, 7*time.Second)
	ra := u.Times("/ra")
	for i := 1; i < len(ra); i++ {
		if gap := ra[i].Sub(ra[i-1]); gap < 3*time.Second || gap > 4500*time.Millisecond {
			t.Errorf("ra: polls %s apart after a 429 with Retry-After: 3", gap.Round(time.Millisecond))
		}
	}
	if dt := u.Times("/date"); dt[1].Sub(dt[0]) < 2900*time.Millisecond {
		t.Errorf("date: next poll %s after a 503 whose Retry-After date was 3-4s ahead", dt[1].Sub(dt[0]).Round(time.Millisecond))
	}
	// The third request has arrived; its outcome is applied once the
	// response is read, a moment later.
	softly(t, 2*time.Second, "ra after 3 throttles: throttles must not count as failures", func() error {
		if o := d.source("ra"); o.State != "throttled" || o.ThrottledTotal < 3 || o.FailuresTotal != 0 || o.ConsecutiveFailures != 0 || o.Breaker != "closed" {
			return errf("%s", o)
		}
		return nil
	})
	softly(t, 2*time.Second, "date after 2 throttles", func() error {
		if o := d.source("date"); o.State != "throttled" || o.FailuresTotal != 0 || o.ThrottledTotal < 2 {
			return errf("%s", o)
		}
		return nil
	})

	// 429 without Retry-After: the backoff for the number of consecutive
	// throttles (2s, then 4s).
	u.waitArrivals(t, "/nora", 3, 9*time.Second)
	nt := u.Times("/nora")
	for i, w := range []time.Duration{2 * time.Second, 4 * time.Second} {
		if gap := nt[i+1].Sub(nt[i]); gap < w || gap > w+1500*time.Millisecond {
			t.Errorf("nora: throttle %d followed by a poll %s later; the backoff is %s", i+1, gap.Round(time.Millisecond), w)
		}
	}
	if o := d.source("nora"); o.State != "throttled" || o.FailuresTotal != 0 || o.Breaker != "closed" {
		t.Errorf("nora: %s", o)
	}

	if v := d.metric("pacer_polls_total", "outcome", "throttled"); v < 6 {
		t.Errorf(`pacer_polls_total{outcome="throttled"} = %v, want >= 6`, v)
	}
	recs := d.history("ra", 5)
	if len(recs) == 0 || recs[0].Outcome != "throttled" || recs[0].StatusCode == nil || *recs[0].StatusCode != 429 {
		t.Errorf("ra history: want throttled records with status_code 429, got %+v", recs)
	}
}

// Rules 3.3 and 3.4: every kind of failure, and timeouts (an exec source's
// whole process group is killed).
func TestPollFailureKinds(t *testing.T) {
	t.Parallel()
	u := newUpstream(t)
	in := newInst(t)
	pidFile := filepath.Join(in.dir, "grandchild.pid")
	script := filepath.Join(in.dir, "hang.sh")
	writeFile(t, script, "#!/bin/sh\nsleep 300 &\necho $! > \"$PIDFILE\"\necho $$ >> \"$PIDFILE\"\nwait\n")
	if err := os.Chmod(script, 0o755); err != nil {
		t.Fatal(err)
	}
	workDir := filepath.Join(in.dir, "work")
	if err := os.Mkdir(workDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if real, err := filepath.EvalSymlinks(workDir); err == nil {
		workDir = real
	}
	in.env = []string{"E2E_FROM_DAEMON=inherited"}
	u.Set("/slow", behavior{Hang: true})
	u.Set("/big", behavior{Body: 4096})
	u.Set("/small", behavior{Body: 1000})
	u.Set("/created", behavior{Status: 201})
	u.Set("/teapot", behavior{Status: 418})
	in.writeConfig(`concurrency: 8
shutdown_timeout: 5s
defaults:
  schedule: "@every 1s"
  breaker: {failures: 0}
  error_after: 0
  backoff: {initial: 100ms, max: 1s, multiplier: 2, jitter: 0}
sources:
  - {name: slow, type: http, url: "` + u.URL("/slow") + `", timeout: 500ms}
  - {name: hang, type: exec, command: ["./hang.sh"], env: {PIDFILE: "` + pidFile + `"}, timeout: 1s,
     backoff: {initial: 1m, max: 1m, multiplier: 2, jitter: 0}}
  - {name: big, type: http, url: "` + u.URL("/big") + `", max_body: 1KiB}
  - {name: small, type: http, url: "` + u.URL("/small") + `", max_body: 1KiB}
  - {name: exit3, type: exec, command: ["sh", "-c", "echo doing >&1; echo broken pipe dream >&2; exit 3"]}
  - {name: exit0, type: exec, command: ["sh", "-c", "echo hello"]}
  - {name: created, type: http, url: "` + u.URL("/created") + `", expect_status: [200]}
  - {name: teapot, type: http, url: "` + u.URL("/teapot") + `", expect_status: [418]}
  - {name: refused, type: http, url: "http://127.0.0.1:1/nothing-listens"}
  - name: post
    type: http
    url: "` + u.URL("/post") + `"
    method: POST
    body: '{"q": 1}'
    headers: {Content-Type: application/json, X-Extra: "yes"}
  - name: envdir
    type: exec
    command: ["sh", "-c", "test \"$(pwd -P)\" = \"$WANT_DIR\" && test -n \"$PATH\" && test \"$E2E_FROM_DAEMON\" = inherited"]
    env: {WANT_DIR: "` + workDir + `"}
    dir: work
`)
	d := in.start()

	check := func(name string, ok func(o sourceObj, h []histRec) error) {
		t.Helper()
		eventually(t, 6*time.Second, name, func() error {
			o := d.source(name)
			h := d.history(name, 5)
			if len(h) == 0 {
				return errf("no history yet: %s", o)
			}
			if err := ok(o, h); err != nil {
				return errf("%v\nsource: %s\nhistory[0]: %+v", err, o, h[0])
			}
			return nil
		})
	}
	failed := func(substr string) func(o sourceObj, h []histRec) error {
		return func(o sourceObj, h []histRec) error {
			if o.State != "backoff" || o.FailuresTotal < 1 || h[0].Outcome != "failure" {
				return errf("want a failure")
			}
			if !strings.Contains(o.LastError, substr) || !strings.Contains(h[0].Error, substr) {
				return errf("last_error %q / history error %q should contain %q", o.LastError, h[0].Error, substr)
			}
			return nil
		}
	}
	succeeded := func(o sourceObj, h []histRec) error {
		if o.State != "ok" || h[0].Outcome != "success" || o.FailuresTotal != 0 {
			return errf("want a success")
		}
		return nil
	}

	check("slow", failed("timeout"))
	if h := d.history("slow", 1); h[0].DurationMs > 2000 {
		t.Errorf("slow: a poll with a 500ms timeout took %dms", h[0].DurationMs)
	}
	check("big", failed("max_body"))
	check("small", succeeded)
	if h := d.history("small", 1); h[0].Bytes != 1000 || h[0].StatusCode == nil || *h[0].StatusCode != 200 {
		t.Errorf("small: history record %+v, want bytes 1000 and status_code 200", h[0])
	}
	check("exit3", failed("exit status 3"))
	if h := d.history("exit3", 1); h[0].ExitCode == nil || *h[0].ExitCode != 3 {
		t.Errorf("exit3: history record %+v, want exit_code 3", h[0])
	}
	check("exit0", succeeded)
	if h := d.history("exit0", 1); h[0].ExitCode == nil || *h[0].ExitCode != 0 || h[0].Bytes != 6 {
		t.Errorf("exit0: history record %+v, want exit_code 0 and bytes 6", h[0])
	}
	check("created", failed("201"))
	check("teapot", succeeded)
	check("refused", failed("GET http://127.0.0.1:1/nothing-listens"))

	// method, body and headers are sent as configured.
	u.waitArrivals(t, "/post", 1, 3*time.Second)
	if a := u.Arrivals("/post")[0]; a.Method != "POST" || a.Body != `{"q": 1}` ||
		a.Header.Get("Content-Type") != "application/json" || a.Header.Get("X-Extra") != "yes" {
		t.Errorf("post: upstream got %s with body %q and headers %v", a.Method, a.Body, a.Header)
	}
	// exec: env adds to the daemon's environment; a relative dir resolves
	// against the config file's directory.
	check("envdir", succeeded)

	// The exec timeout kills the script and its grandchild.
	check("hang", failed("timeout"))
	h := d.history("hang", 1)
	if h[0].DurationMs > 3500 {
		t.Errorf("hang: a poll with a 1s timeout took %dms", h[0].DurationMs)
	}
	data, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatalf("the script did not write its pid file: %v", err)
	}
	fields := strings.Fields(string(data))
	if len(fields) != 2 {
		t.Fatalf("pid file: %q", data)
	}
	for i, f := range fields {
		pid, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("pid file: %q", data)
		}
		who := []string{"grandchild (sleep 300 &)", "child (the script)"}[i]
		eventually(t, 3*time.Second, fmt.Sprintf("the %s, pid %d, killed at the timeout", who, pid), func() error {
			if !procDead(pid) {
				return errf("still running")
			}
			return nil
		})
	}
}

func jitterSources(u *upstream) string {
	var b strings.Builder
	for i := 0; i < 6; i++ {
		p := fmt.Sprintf("/jit/%d", i)
		u.Set(p, behavior{Status: 500})
		fmt.Fprintf(&b, "  - {name: jit%d, type: http, url: %q, schedule: \"@every 1s\", backoff: {initial: 2s, max: 2s, multiplier: 2, jitter: 0.5}}\n", i, u.URL(p))
	}
	return b.String()
}
