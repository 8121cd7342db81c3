package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Rule 3.10: SIGTERM stops starting polls, waits up to shutdown_timeout for
// those in flight, cancels the rest (recorded as interrupted), exits 0.
func TestShutdownInterruptsHangingPoll(t *testing.T) {
	t.Parallel()
	u := newUpstream(t)
	in := newInst(t)
	u.Set("/hang", behavior{Hang: true})
	u.Set("/short", behavior{Hold: 1500 * time.Millisecond})
	in.writeConfig(`concurrency: 4
shutdown_timeout: 2s
sources:
  - {name: hang, type: http, url: "` + u.URL("/hang") + `", schedule: "@every 1s", timeout: 30s}
  - {name: short, type: http, url: "` + u.URL("/short") + `", schedule: "@every 1s", timeout: 10s}
`)
	d := in.start()
	eventually(t, 3*time.Second, "hang in flight", func() error {
		if u.Inflight("/hang") != 1 {
			return errf("not yet")
		}
		return nil
	})
	// SIGTERM right after a poll of short started: it ends 1.5s later,
	// within the 2s shutdown_timeout.
	n := u.Count("/short")
	u.waitArrivals(t, "/short", n+1, 4*time.Second)
	nShort := u.Count("/short")
	sigAt := time.Now()
	d.signal(syscall.SIGTERM)
	code, ok := d.wait(2*time.Second + 3*time.Second)
	if !ok {
		t.Fatalf("pacer run still running %s after SIGTERM with shutdown_timeout 2s", time.Since(sigAt).Round(time.Millisecond))
	}
	took := d.exitAt.Sub(sigAt)
	if code != 0 {
		t.Errorf("pacer run exited %d after SIGTERM, want 0", code)
	}
	if took < 1500*time.Millisecond {
		t.Errorf("pacer run exited %s after SIGTERM: it did not wait for the polls in flight", took.Round(time.Millisecond))
	}
	if c := u.Count("/short"); c != nShort {
		t.Errorf("%d poll(s) of short started after SIGTERM", c-nShort)
	}
	if c := u.Cancelled("/short"); c != 0 {
		t.Errorf("short's poll in flight was cut off although it ended within shutdown_timeout")
	}
	eventually(t, 2*time.Second, "the hanging request to be cut off", func() error {
		if u.Cancelled("/hang") != 1 {
			return errf("cancelled: %d", u.Cancelled("/hang"))
		}
		return nil
	})

	r := in.mustCLI("history", "-json", "hang")
	var recs []histRec
	if err := json.Unmarshal([]byte(r.stdout), &recs); err != nil || len(recs) == 0 {
		t.Fatalf("history -json hang: %v %s", err, r)
	}
	if recs[0].Outcome != "interrupted" {
		t.Errorf("hang: the poll cut off by shutdown must be recorded as interrupted, got %+v", recs[0])
	}
	if o := in.statusJSON("hang"); o.FailuresTotal != 0 || o.ConsecutiveFailures != 0 || o.State == "backoff" {
		t.Errorf("hang: an interrupted poll must not count as a failure: %s", o)
	}
	r = in.mustCLI("history", "-json", "short")
	if err := json.Unmarshal([]byte(r.stdout), &recs); err != nil || len(recs) == 0 {
		t.Fatalf("history -json short: %v %s", err, r)
	}
	if recs[0].Outcome != "success" || recs[0].DurationMs < 1400 {
		t.Errorf("short: the poll in flight at SIGTERM should have completed: %+v", recs[0])
	}
}

// Rule 3.10: SIGINT too.
func TestShutdownOnSIGINT(t *testing.T) {
	t.Parallel()
	u := newUpstream(t)
	in := newInst(t)
	in.writeConfig(`sources:
  - {name: ok, type: http, url: "` + u.URL("/ok") + `", schedule: "@every 1s"}
`)
	d := in.start()
	u.waitArrivals(t, "/ok", 1, 3*time.Second)
	d.signal(syscall.SIGINT)
	code, ok := d.wait(5 * time.Second)
	if !ok || code != 0 {
		t.Errorf("after SIGINT: exited %v, code %d; want exit 0 within 5s", ok, code)
	}
}

// Rule 3.11: SIGHUP reloads the config: added sources start, removed ones
// stop (their state is kept), changed ones take their new settings and leave
// the error state; an invalid config is rejected and the old one stays.
func TestReloadOnSIGHUP(t *testing.T) {
	t.Parallel()
	u := newUpstream(t)
	in := newInst(t)
	for _, p := range []string{"/errchg", "/errtm", "/errsame"} {
		u.Set(p, behavior{Status: 500})
	}
	src := func(name, path, extra string) string {
		return fmt.Sprintf("  - {name: %s, type: http, url: %q%s}\n", name, u.URL(path), extra)
	}
	const head = `concurrency: 4
shutdown_timeout: 2s
defaults:
  schedule: "@every 1s"
  backoff: {initial: 100ms, max: 1s, multiplier: 2, jitter: 0}
sources:
`
	const errX = ", breaker: {failures: 0}, error_after: 1"
	v1 := head + src("keep", "/keep", "") + src("gone", "/gone", "") + src("chg", "/chg-old", "") +
		src("errchg", "/errchg", errX) + src("errtm", "/errtm", errX+", timeout: 5s") + src("errsame", "/errsame", errX)
	v2 := head + src("keep", "/keep", "") + src("chg", "/chg-new", "") +
		src("errchg", "/errchg2", errX) + src("errtm", "/errtm", errX+", timeout: 6s") + src("errsame", "/errsame", errX) +
		src("new", "/new", "")
	in.writeConfig(v1)
	d := in.start()

	for _, p := range []string{"/keep", "/gone", "/chg-old"} {
		u.waitArrivals(t, p, 1, 3*time.Second)
	}
	eventually(t, 3*time.Second, "errchg, errtm and errsame in error", func() error {
		all := d.sources()
		for _, n := range []string{"errchg", "errtm", "errsame"} {
			if all[n].State != "error" {
				return errf("%s: %s", n, all[n])
			}
		}
		return nil
	})
	u.waitArrivals(t, "/gone", 2, 3*time.Second)
	goneBefore := d.source("gone")
	keepBefore := d.source("keep")
	errtmBefore := d.source("errtm")

	// Reload.
	in.writeConfig(v2)
	hupAt := time.Now()
	d.signal(syscall.SIGHUP)
	for _, p := range []string{"/new", "/chg-new", "/errchg2", "/errtm"} {
		p := p
		eventually(t, 3500*time.Millisecond, "a request on "+p+" after the reload", func() error {
			if u.CountSince(p, hupAt) == 0 {
				return errf("none")
			}
			return nil
		})
	}
	eventually(t, 2*time.Second, "errchg out of error with its new URL", func() error {
		if o := d.source("errchg"); o.State != "ok" || o.ErrorReason != "" || o.ConsecutiveFailures != 0 {
			return errf("%s", o)
		}
		return nil
	})
	eventually(t, 2*time.Second, "errtm polled again (its timeout changed), then in error again", func() error {
		o := d.source("errtm")
		if o.PollsTotal <= errtmBefore.PollsTotal || o.State != "error" || o.ConsecutiveFailures != 1 {
			return errf("%s", o)
		}
		return nil
	})
	if code, body := d.do(http.MethodGet, "/api/sources/gone", "", ""); code != http.StatusNotFound {
		t.Errorf("GET /api/sources/gone after its removal: want 404, got %d %s", code, body)
	}
	settled := hupAt.Add(time.Second)
	sleepUntil(settled)
	for _, p := range []string{"/gone", "/chg-old"} {
		u.noArrivals(t, p, settled, 0, "no request after the reload on "+p)
	}
	u.noArrivals(t, "/errsame", hupAt, 0, "an unchanged source in error must stay in error after the reload")
	never(t, 2500*time.Millisecond, "removed or replaced sources polled after the reload", func() error {
		for _, p := range []string{"/gone", "/chg-old", "/errsame"} {
			if n := u.CountSince(p, settled); n > 0 {
				return errf("%d request(s) on %s", n, p)
			}
		}
		return nil
	})
	if o := d.source("errsame"); o.State != "error" {
		t.Errorf("errsame (unchanged, in error) after the reload: %s", o)
	}
	if o := d.source("keep"); o.PollsTotal < keepBefore.PollsTotal || o.State != "ok" {
		t.Errorf("keep (unchanged) lost its state in the reload: before %s, after %s", keepBefore, o)
	}
	if o := d.source("chg"); o.State != "ok" {
		t.Errorf("chg after the reload: %s", o)
	}

	// An invalid config is rejected, each problem logged; the old one stays.
	invalid := strings.Replace(v2, "concurrency: 4", "concurrency: 0", 1) + src("bad", "/bad", `, schedule: "every so often"`)
	in.writeConfig(invalid)
	logOff := d.stderr.Len()
	badAt := time.Now()
	d.signal(syscall.SIGHUP)
	eventually(t, 3*time.Second, "the rejected reload logged with each problem", func() error {
		l := d.logs()[logOff:]
		if !strings.Contains(l, "concurrency") || !strings.Contains(l, "bad") {
			return errf("log since SIGHUP:\n%s", l)
		}
		return nil
	})
	n := u.Count("/new")
	u.waitArrivals(t, "/new", n+2, 4*time.Second)
	if d.exited() {
		t.Fatalf("the daemon exited on an invalid config")
	}
	if code, _ := d.do(http.MethodGet, "/readyz", "", ""); code != http.StatusOK {
		t.Errorf("/readyz after a rejected reload: %d", code)
	}
	if code, _ := d.do(http.MethodGet, "/api/sources/bad", "", ""); code != http.StatusNotFound {
		t.Errorf("a source of the rejected config was loaded")
	}
	if u.CountSince("/bad", badAt) != 0 {
		t.Errorf("a source of the rejected config was polled")
	}
	if v := d.metric("pacer_concurrency_limit", ""); v != 4 {
		t.Errorf("pacer_concurrency_limit %v after a rejected reload, want 4", v)
	}

	// Re-adding a removed source unchanged restores its stored state.
	in.writeConfig(v2 + src("gone", "/gone", ""))
	readdAt := time.Now()
	d.signal(syscall.SIGHUP)
	eventually(t, 3500*time.Millisecond, "gone back with its stored state and polled", func() error {
		code, body := d.do(http.MethodGet, "/api/sources/gone", "", "")
		if code != http.StatusOK {
			return errf("GET /api/sources/gone: %d", code)
		}
		var o sourceObj
		if err := json.Unmarshal(body, &o); err != nil {
			return err
		}
		if o.PollsTotal < goneBefore.PollsTotal {
			return errf("polls_total %d < %d before its removal: its stored state was lost", o.PollsTotal, goneBefore.PollsTotal)
		}
		if u.CountSince("/gone", readdAt) == 0 {
			return errf("not polled yet")
		}
		return nil
	})
}
