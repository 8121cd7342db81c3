package e2e

import (
	"encoding/json"
	"net/http"
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
	u.noArrivals(t, "/p", t0.Add(2*time.Second), time.Until(t0.Add(2*time.Second))+2500*time.Millisecond,
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
	eventually(t, time.Until(t1.Add(2500*time.Millisecond)), "b polled within 2s of trigger during its 30s backoff", func() error {
		if u.Count("/b") <= nb {
			return errf("no request on /b")
		}
		return nil
	})
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
	eventually(t, time.Until(t2.Add(2500*time.Millisecond)), "o polled within 2s of trigger during its 60s cooldown", func() error {
		if u.Count("/o") <= no {
			return errf("no request on /o")
		}
		return nil
	})
	eventually(t, 2*time.Second, "o open again after its triggered probe failed", func() error {
		if o := d.source("o"); o.State != "open" || o.ConsecutiveFailures != 2 {
			return errf("%s", o)
		}
		return nil
	})
	no = u.Count("/o")
	t3 := time.Now()
	in.mustCLI("trigger", "o")
	eventually(t, time.Until(t3.Add(2500*time.Millisecond)), "o polled within 2s of a CLI trigger", func() error {
		if u.Count("/o") <= no {
			return errf("no request on /o")
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
