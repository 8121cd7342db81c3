package e2e

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Rule 3.9 and section 1: pause, resume, trigger and reset, with the daemon
// running (through the CLI and the API) and without it (the store).
func TestPauseResumeTriggerReset(t *testing.T) {
	t.Parallel()
	u := newUpstream(t)
	in := newInst(t)
	for _, p := range []string{"/b", "/o", "/e"} {
		u.Set(p, behavior{Status: 500})
	}
	in.writeConfig(`concurrency: 4
shutdown_timeout: 2s
defaults:
  schedule: "@every 1s"
  backoff: {initial: 100ms, max: 1s, multiplier: 2, jitter: 0}
sources:
  - {name: p, type: http, url: "` + u.URL("/p") + `"}
  - {name: b, type: http, url: "` + u.URL("/b") + `", breaker: {failures: 0}, error_after: 0,
     backoff: {initial: 30s, max: 1m, multiplier: 2, jitter: 0}}
  - {name: o, type: http, url: "` + u.URL("/o") + `", breaker: {failures: 1, cooldown: 60s}, error_after: 0}
  - {name: e, type: http, url: "` + u.URL("/e") + `", breaker: {failures: 0}, error_after: 1}
  - {name: q, type: http, url: "` + u.URL("/q") + `"}
`)
	d := in.start()
	u.waitArrivals(t, "/p", 1, 3*time.Second)
	u.waitArrivals(t, "/q", 1, 3*time.Second)
	eventually(t, 4*time.Second, "b in backoff, o open, e in error", func() error {
		all := d.sources()
		if o := all["b"]; o.State != "backoff" {
			return errf("b: %s", o)
		}
		if o := all["o"]; o.State != "open" {
			return errf("o: %s", o)
		}
		if o := all["e"]; o.State != "error" {
			return errf("e: %s", o)
		}
		return nil
	})

	// pause (CLI, daemon running): no poll from 2s on.
	t0 := time.Now()
	in.mustCLI("pause", "p", "-reason", "maint")
	eventually(t, time.Until(t0.Add(2*time.Second)), "p paused within 2s of the pause command", func() error {
		if o := d.source("p"); o.State != "paused" || o.PausedReason != "maint" || o.NextRunAt != nil {
			return errf("%s", o)
		}
		return nil
	})
	// From 2 s after the command on (plus what the machine took from this
	// process meanwhile: a starved CLI and daemon take longer), no poll.
	quiet := t0.Add(stalls.within(2*time.Second, t0, time.Now()))
	u.noArrivals(t, "/p", quiet, time.Until(quiet)+2500*time.Millisecond,
		"a paused source must not be polled (2s after pause)")

	// trigger is refused for a paused source and one in error.
	for _, name := range []string{"p", "e"} {
		n := u.Count("/" + name)
		r := in.cli("trigger", name)
		if r.code != 1 || strings.TrimSpace(r.stderr) == "" {
			t.Errorf("trigger %s (paused or in error): want exit 1 and a message, got %s", name, r)
		}
		code, body := d.do(http.MethodPost, "/api/sources/"+name+"/trigger", "", "")
		if code != http.StatusConflict || !isJSONError(body) {
			t.Errorf("POST /api/sources/%s/trigger (paused or in error): want 409 with {\"error\": ...}, got %d %s", name, code, body)
		}
		u.noArrivals(t, "/"+name, time.Now(), 1500*time.Millisecond, "a refused trigger must not poll")
		if c := u.Count("/" + name); c != n {
			t.Errorf("%s: polled after a refused trigger", name)
		}
	}

	// trigger polls now, past the backoff (CLI) ...
	nb := u.Count("/b")
	t1 := time.Now()
	in.mustCLI("trigger", "b")
	// Within 2s of the trigger, during its 30s backoff.
	u.waitArrivals(t, "/b", nb+1, time.Until(t1.Add(2500*time.Millisecond)))
	eventually(t, 2*time.Second, "b's triggered poll recorded", func() error {
		if o := d.source("b"); o.ConsecutiveFailures != 2 || o.State != "backoff" {
			return errf("%s", o)
		}
		return nil
	})
	// ... and past an open breaker (API, then CLI).
	no := u.Count("/o")
	t2 := time.Now()
	code, body := d.do(http.MethodPost, "/api/sources/o/trigger", "", "")
	if code != http.StatusAccepted {
		t.Fatalf("POST /api/sources/o/trigger: want 202, got %d %s", code, body)
	}
	// Within 2s of the trigger, during its 60s cooldown.
	u.waitArrivals(t, "/o", no+1, time.Until(t2.Add(2500*time.Millisecond)))
	eventually(t, 2*time.Second, "o open again after its triggered probe failed", func() error {
		if o := d.source("o"); o.State != "open" || o.ConsecutiveFailures != 2 {
			return errf("%s", o)
		}
		return nil
	})
	no = u.Count("/o")
	t3 := time.Now()
	in.mustCLI("trigger", "o")
	u.waitArrivals(t, "/o", no+1, time.Until(t3.Add(2500*time.Millisecond))) // within 2s of a CLI trigger
	eventually(t, 2*time.Second, "o open again", func() error {
		if o := d.source("o"); o.State != "open" || o.ConsecutiveFailures != 3 {
			return errf("%s", o)
		}
		return nil
	})
	// reset (API, daemon running) of an open breaker: closed, polled at its
	// next tick, not after the 60s cooldown.
	// Its breaker is open for 60 s, so nothing polls it before the reset;
	// the poll at its next tick may come before the API's answer is read.
	resetAt := time.Now()
	code, body = d.do(http.MethodPost, "/api/sources/o/reset", "", "")
	var ro sourceObj
	if code != http.StatusOK || json.Unmarshal(body, &ro) != nil || ro.Breaker != "closed" || ro.ConsecutiveFailures != 0 || ro.State == "open" {
		t.Errorf("POST /api/sources/o/reset: want 200 with a closed breaker, got %d %s", code, body)
	}
	eventually(t, 2500*time.Millisecond, "o polled at its next tick after reset", func() error {
		if u.CountSince("/o", resetAt) == 0 {
			return errf("no request on /o")
		}
		return nil
	})
	eventually(t, 2*time.Second, "o failing again from a fresh count", func() error {
		if o := d.source("o"); o.ConsecutiveFailures != 1 || o.State != "open" {
			return errf("%s", o)
		}
		return nil
	})

	// pause survives a restart.
	d.stop(10 * time.Second)
	d = in.start()
	if o := d.source("p"); o.State != "paused" || o.PausedReason != "maint" {
		t.Errorf("p after restart: %s", o)
	}
	u.noArrivals(t, "/p", d.started, 2500*time.Millisecond, "a paused source must stay paused after a restart")

	// resume (CLI, daemon running).
	t4 := time.Now()
	in.mustCLI("resume", "p")
	eventually(t, time.Until(t4.Add(3500*time.Millisecond)), "p polled again after resume", func() error {
		if u.CountSince("/p", t4) == 0 {
			return errf("no request on /p")
		}
		return nil
	})
	if o := d.source("p"); o.State != "ok" || o.PausedReason != "" || o.NextRunAt == nil {
		t.Errorf("p after resume: %s", o)
	}

	// Without a daemon: reset, pause and resume change the store.
	d.stop(10 * time.Second)
	in.mustCLI("pause", "q", "-reason", "offline")
	if o := in.statusJSON("q"); o.State != "paused" || o.PausedReason != "offline" || o.NextRunAt != nil {
		t.Errorf("q after an offline pause: %s", o)
	}
	in.mustCLI("resume", "q")
	if o := in.statusJSON("q"); o.State == "paused" || o.PausedReason != "" || o.NextRunAt == nil {
		t.Errorf("q after an offline resume: %s", o)
	}
	in.mustCLI("pause", "q")
	if o := in.statusJSON("q"); o.State != "paused" {
		t.Errorf("q after an offline pause: %s", o)
	}
	in.mustCLI("reset", "-all-errored")
	if o := in.statusJSON("e"); o.State == "error" || o.ErrorReason != "" || o.ConsecutiveFailures != 0 || o.NextRunAt == nil {
		t.Errorf("e after an offline reset -all-errored: %s", o)
	}
	in.mustCLI("reset", "o")
	if o := in.statusJSON("o"); o.Breaker != "closed" || o.State == "open" || o.ConsecutiveFailures != 0 {
		t.Errorf("o after an offline reset: %s", o)
	}
	if r := in.cli("pause", "nope"); r.code != 1 {
		t.Errorf("pause of an unknown source: want exit 1, got %s", r)
	}

	d = in.start()
	for _, p := range []string{"/e", "/o"} {
		eventually(t, 3*time.Second, p+" polled after its offline reset", func() error {
			if u.CountSince(p, d.started) == 0 {
				return errf("no request")
			}
			return nil
		})
	}
	u.noArrivals(t, "/q", d.started, 2*time.Second, "q was paused offline")
	if o := d.source("q"); o.State != "paused" {
		t.Errorf("q: %s", o)
	}
}

func isJSONError(body []byte) bool {
	var e struct {
		Error string `json:"error"`
	}
	return json.Unmarshal(body, &e) == nil && e.Error != ""
}

// Rule 3.9: trigger polls under the global and group limits.
func TestTriggerRespectsLimits(t *testing.T) {
	t.Parallel()
	u := newUpstream(t)
	in := newInst(t)
	u.Set("/a", behavior{Hang: true})
	u.Set("/h", behavior{Hang: true})
	in.writeConfig(`concurrency: 2
shutdown_timeout: 2s
limits:
  g: {concurrency: 1}
sources:
  - {name: a, type: http, url: "` + u.URL("/a") + `", schedule: "@every 1s", timeout: 60s, limit: g}
  - {name: b, type: http, url: "` + u.URL("/b") + `", schedule: "0 0 1 1 *", limit: g}
  - {name: h, type: http, url: "` + u.URL("/h") + `", schedule: "@every 1s", timeout: 60s}
  - {name: c, type: http, url: "` + u.URL("/c") + `", schedule: "0 0 1 1 *"}
`)
	d := in.start()
	eventually(t, 3*time.Second, "a and h hanging (both global permits and the group's one taken)", func() error {
		if u.Inflight("/a") != 1 || u.Inflight("/h") != 1 {
			return errf("a %d, h %d", u.Inflight("/a"), u.Inflight("/h"))
		}
		return nil
	})
	for _, n := range []string{"b", "c"} {
		if code, body := d.do(http.MethodPost, "/api/sources/"+n+"/trigger", "", ""); code != http.StatusAccepted {
			t.Fatalf("POST trigger %s: %d %s", n, code, body)
		}
	}
	never(t, 2*time.Second, "a triggered poll must wait for the global and group permits", func() error {
		if u.Count("/b")+u.Count("/c") > 0 {
			return errf("b polled %d times, c %d times while no permit was free", u.Count("/b"), u.Count("/c"))
		}
		return nil
	})
	// Free a global permit: c runs, b still waits for its group.
	u.Set("/h", behavior{})
	u.Release("/h")
	u.waitArrivals(t, "/c", 1, 2500*time.Millisecond)
	if n := u.Count("/b"); n > 0 {
		t.Errorf("b polled while its group's only permit was held by a")
	}
	// Free the group: b runs.
	u.Set("/a", behavior{})
	u.Release("/a")
	u.waitArrivals(t, "/b", 1, 2500*time.Millisecond)
	if pk := u.PeakTag("a") + u.PeakTag("b"); u.PeakTag("a") > 1 || u.PeakTag("b") > 1 || pk > 2 {
		t.Errorf("group g exceeded its concurrency")
	}
}

// Section 1: a pause applied while a poll is in flight is not overwritten by
// that poll's end.
func TestPauseDuringPoll(t *testing.T) {
	t.Parallel()
	u := newUpstream(t)
	in := newInst(t)
	u.Set("/slow", behavior{Hold: 1500 * time.Millisecond})
	u.Set("/slow2", behavior{Hold: 1500 * time.Millisecond, Status: 500})
	in.writeConfig(`concurrency: 2
shutdown_timeout: 2s
sources:
  - {name: slow, type: http, url: "` + u.URL("/slow") + `", schedule: "@every 1s", timeout: 10s}
  - {name: slow2, type: http, url: "` + u.URL("/slow2") + `", schedule: "@every 1s", timeout: 10s, breaker: {failures: 0}, error_after: 0}
`)
	d := in.start()
	eventually(t, 3*time.Second, "polls of slow and slow2 in flight", func() error {
		if u.Inflight("/slow") != 1 || u.Inflight("/slow2") != 1 {
			return errf("not yet")
		}
		return nil
	})
	in.mustCLI("pause", "slow", "-reason", "cli")
	if code, body := d.do(http.MethodPost, "/api/sources/slow2/pause", "", `{"reason": "api"}`); code != http.StatusOK {
		t.Fatalf("POST pause slow2: %d %s", code, body)
	}
	pausedAt := time.Now()
	eventually(t, 3*time.Second, "the polls in flight to end", func() error {
		if u.Inflight("/slow")+u.Inflight("/slow2") > 0 {
			return errf("still in flight")
		}
		return nil
	})
	never(t, 2500*time.Millisecond, "a pause must survive the end of the poll in flight", func() error {
		all := d.sources()
		if o := all["slow"]; o.State != "paused" || o.PausedReason != "cli" {
			return errf("slow: %s", o)
		}
		if o := all["slow2"]; o.State != "paused" || o.PausedReason != "api" {
			return errf("slow2: %s", o)
		}
		if n := u.CountSince("/slow", pausedAt) + u.CountSince("/slow2", pausedAt); n > 0 {
			return errf("%d polls after the pause", n)
		}
		return nil
	})
}

// Section 1: with the admin API disabled, status, pause, resume, trigger and
// reset still reach the running daemon.
func TestCLIWithAdminDisabled(t *testing.T) {
	t.Parallel()
	u := newUpstream(t)
	in := newInst(t)
	in.noAdmin = true
	u.Set("/e", behavior{Status: 500})
	in.writeConfig(`concurrency: 2
shutdown_timeout: 2s
sources:
  - {name: p, type: http, url: "` + u.URL("/p") + `", schedule: "@every 1s"}
  - {name: e, type: http, url: "` + u.URL("/e") + `", schedule: "@every 1s", error_after: 1}
  - {name: y, type: http, url: "` + u.URL("/y") + `", schedule: "0 0 1 1 *"}
`)
	d := in.spawn()
	u.waitArrivals(t, "/p", 1, 5*time.Second)
	eventually(t, 3*time.Second, "e in error (status -json)", func() error {
		if o := in.statusJSON("e"); o.State != "error" {
			return errf("%s", o)
		}
		return nil
	})
	t0 := time.Now()
	in.mustCLI("pause", "p", "-reason", "no api")
	eventually(t, time.Until(t0.Add(2*time.Second)), "status -json p to show the pause within 2s", func() error {
		if o := in.statusJSON("p"); o.State != "paused" || o.PausedReason != "no api" {
			return errf("%s", o)
		}
		return nil
	})
	u.noArrivals(t, "/p", t0.Add(2*time.Second), time.Until(t0.Add(2*time.Second))+2*time.Second, "p paused without the API")
	t1 := time.Now()
	in.mustCLI("trigger", "y")
	eventually(t, time.Until(t1.Add(2500*time.Millisecond)), "y polled after trigger", func() error {
		if u.Count("/y") == 0 {
			return errf("no request")
		}
		return nil
	})
	if r := in.cli("trigger", "e"); r.code != 1 {
		t.Errorf("trigger of a source in error: want exit 1, got %s", r)
	}
	u.Set("/e", behavior{})
	t2 := time.Now()
	in.mustCLI("reset", "e")
	eventually(t, time.Until(t2.Add(3500*time.Millisecond)), "e polled and ok after reset", func() error {
		if o := in.statusJSON("e"); o.State != "ok" || u.CountSince("/e", t2) == 0 {
			return errf("%s", o)
		}
		return nil
	})
	t3 := time.Now()
	in.mustCLI("resume", "p")
	eventually(t, time.Until(t3.Add(3500*time.Millisecond)), "p polled after resume", func() error {
		if u.CountSince("/p", t3) == 0 {
			return errf("no request")
		}
		return nil
	})
	d.stop(10 * time.Second)
}

// Section 2: history.keep bounds the records kept per source.
func TestHistoryKeep(t *testing.T) {
	t.Parallel()
	u := newUpstream(t)
	in := newInst(t)
	in.writeConfig(`history: {keep: 3}
shutdown_timeout: 2s
sources:
  - {name: k, type: http, url: "` + u.URL("/k") + `", schedule: "@every 1s"}
`)
	d := in.start()
	u.waitArrivals(t, "/k", 5, 7*time.Second)
	eventually(t, 2*time.Second, "5 polls counted", func() error {
		if o := d.source("k"); o.PollsTotal < 5 {
			return errf("%s", o)
		}
		return nil
	})
	if h := d.history("k", 20); len(h) != 3 {
		t.Errorf("GET history?n=20 with history.keep 3: %d records", len(h))
	}
	d.stop(10 * time.Second)
	r := in.mustCLI("history", "-json", "-n", "20", "k")
	var recs []histRec
	if err := json.Unmarshal([]byte(r.stdout), &recs); err != nil || len(recs) != 3 {
		t.Errorf("history -json -n 20 with history.keep 3: %v, %d records", err, len(recs))
	}
}

// Section 1: once pause, resume or reset (daemon running) has exited 0, a
// following "pacer status" shows its effect: an operator runs one after the
// other.
func TestCLICommandThenStatus(t *testing.T) {
	t.Parallel()
	u := newUpstream(t)
	in := newInst(t)
	u.Set("/e", behavior{Status: 500})
	in.writeConfig(`concurrency: 2
shutdown_timeout: 2s
sources:
  - {name: p, type: http, url: "` + u.URL("/p") + `", schedule: "@every 1s"}
  - {name: e, type: http, url: "` + u.URL("/e") + `", schedule: "@every 1s", error_after: 1}
`)
	in.start()
	u.waitArrivals(t, "/p", 1, 3*time.Second)
	eventually(t, 3*time.Second, "e in error", func() error {
		if o := in.statusJSON("e"); o.State != "error" {
			return errf("%s", o)
		}
		return nil
	})
	var bad []string
	for i := 0; i < 3; i++ {
		in.mustCLI("pause", "p", "-reason", "r"+strconv.Itoa(i))
		if o := in.statusJSON("p"); o.State != "paused" || o.PausedReason != "r"+strconv.Itoa(i) {
			bad = append(bad, "after pause: "+o.String())
		}
		in.mustCLI("resume", "p")
		if o := in.statusJSON("p"); o.State == "paused" {
			bad = append(bad, "after resume: "+o.String())
		}
	}
	// The upstream recovers first: with error_after 1, a poll that follows
	// the reset within the same second would otherwise fail and put e back
	// in error before status runs, which is correct behaviour, not a lag.
	u.Set("/e", behavior{Status: 200})
	in.mustCLI("reset", "e")
	if o := in.statusJSON("e"); o.State == "error" || o.ErrorReason != "" {
		bad = append(bad, "after reset: "+o.String())
	}
	if len(bad) > 0 {
		t.Errorf("pacer status right after a command that exited 0 still shows the old state (%d of 7 times):\n%s",
			len(bad), strings.Join(bad, "\n"))
	}
}
