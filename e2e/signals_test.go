package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"strconv"
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

// Rule 3.10 from the first moment: a SIGTERM sent as soon as the admin
// port listens, before the daemon has logged its start, still ends in exit
// 0 (the signal handlers are installed before the port opens; they were
// installed after it, and once in a while such a SIGTERM killed the
// process). Each round signals within one read of /proc of the listener.
func TestSIGTERMAsSoonAsListening(t *testing.T) {
	t.Parallel()
	for round := range 8 {
		in := newInst(t)
		in.writeConfig("sources:\n  - {name: s, type: exec, command: [\"true\"], schedule: \"0 0 1 1 *\"}\n")
		_, p, _ := net.SplitHostPort(in.addr)
		port, _ := strconv.Atoi(p)
		d := in.spawn()
		deadline := time.Now().Add(15 * time.Second)
		for len(listeners(t, d.pid(), port)) == 0 {
			if d.exited() || time.Now().After(deadline) {
				t.Fatalf("round %d: no listener on %s (exited %v)\n%s", round, in.addr, d.exited(), d.logs())
			}
			runtime.Gosched()
		}
		d.signal(syscall.SIGTERM)
		if code, ok := d.wait(10 * time.Second); !ok || code != 0 {
			t.Fatalf("round %d: SIGTERM once the admin port listened: exited %v, code %d (-1: killed by the signal); want 0\n%s",
				round, ok, code, d.logs())
		}
	}
}

// Rule 3.11: SIGHUP reloads the config: added sources start, removed ones
// stop (their state is kept), changed ones take their new settings and leave
// the error state; an invalid config is rejected and the old one stays.
func TestReloadOnSIGHUP(t *testing.T) {
	t.Parallel()
	u := newUpstream(t)
	in := newInst(t)
	for _, p := range []string{"/errchg", "/errtm", "/errsame", "/errgone"} {
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
		src("errchg", "/errchg", errX) + src("errtm", "/errtm", errX+", timeout: 5s") + src("errsame", "/errsame", errX) +
		src("errgone", "/errgone", errX) + src("resched", "/resched", `, schedule: "0 0 1 1 *"`)
	v2 := head + src("keep", "/keep", "") + src("chg", "/chg-new", "") + src("resched", "/resched", "") +
		src("errchg", "/errchg2", errX) + src("errtm", "/errtm", errX+", timeout: 6s") + src("errsame", "/errsame", errX) +
		src("new", "/new", "")
	in.writeConfig(v1)
	d := in.start()

	for _, p := range []string{"/keep", "/gone", "/chg-old"} {
		u.waitArrivals(t, p, 1, 3*time.Second)
	}
	eventually(t, 3*time.Second, "errchg, errtm, errsame and errgone in error", func() error {
		all := d.sources()
		for _, n := range []string{"errchg", "errtm", "errsame", "errgone"} {
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
	for _, p := range []string{"/new", "/chg-new", "/errchg2", "/errtm", "/resched"} {
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
	if v := d.metric("pacer_concurrency_limit"); v != 4 {
		t.Errorf("pacer_concurrency_limit %v after a rejected reload, want 4", v)
	}

	// Re-adding a removed source unchanged restores its stored state (also
	// the error state).
	errgoneBefore := u.Count("/errgone")
	in.writeConfig(v2 + src("gone", "/gone", "") + src("errgone", "/errgone", errX))
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
	if o := d.source("errgone"); o.State != "error" || o.ConsecutiveFailures != 1 {
		t.Errorf("errgone re-added unchanged must still be in error: %s", o)
	}
	if n := u.Count("/errgone"); n != errgoneBefore {
		t.Errorf("errgone re-added unchanged (in error) was polled")
	}
}

// Rule 3.11: a reload changes the global concurrency and a group's limits.
func TestReloadLimitsAndConcurrency(t *testing.T) {
	t.Parallel()
	u := newUpstream(t)
	in := newInst(t)
	cfg := func(conc, group int) string {
		var b strings.Builder
		fmt.Fprintf(&b, "concurrency: %d\nshutdown_timeout: 2s\nlimits:\n  g: {concurrency: %d}\nsources:\n", conc, group)
		for i := 0; i < 8; i++ {
			fmt.Fprintf(&b, "  - {name: free%d, type: http, url: %q, schedule: \"@every 1s\", timeout: 5s}\n", i, u.URL(fmt.Sprintf("/free/%d", i)))
		}
		for i := 0; i < 5; i++ {
			fmt.Fprintf(&b, "  - {name: g%d, type: http, url: %q, schedule: \"@every 1s\", timeout: 5s, limit: g}\n", i, u.URL(fmt.Sprintf("/g/%d", i)))
		}
		return b.String()
	}
	for i := 0; i < 8; i++ {
		u.Set(fmt.Sprintf("/free/%d", i), behavior{Hold: 800 * time.Millisecond})
	}
	for i := 0; i < 5; i++ {
		u.Set(fmt.Sprintf("/g/%d", i), behavior{Hold: 800 * time.Millisecond})
	}
	in.writeConfig(cfg(3, 1))
	d := in.start()
	sleepUntil(time.Now().Add(3 * time.Second))
	if pk := u.Peak(); pk > 3 {
		t.Errorf("before the reload: %d in flight with concurrency 3", pk)
	}
	if pk := u.PeakTag("g"); pk > 1 {
		t.Errorf("before the reload: group g had %d in flight with concurrency 1", pk)
	}

	for _, step := range []struct{ conc, group int }{{8, 3}, {2, 1}} {
		in.writeConfig(cfg(step.conc, step.group))
		d.signal(syscall.SIGHUP)
		softly(t, 2*time.Second, fmt.Sprintf("pacer_concurrency_limit %d after the reload", step.conc), func() error {
			if v := d.metric("pacer_concurrency_limit"); v != float64(step.conc) {
				return errf("%v", v)
			}
			return nil
		})
		// Polls started under the old limits end within 800ms.
		sleepUntil(time.Now().Add(1200 * time.Millisecond))
		u.ResetPeaks()
		sleepUntil(time.Now().Add(3 * time.Second))
		if pk := u.Peak(); pk > step.conc {
			t.Errorf("after the reload to concurrency %d: %d in flight", step.conc, pk)
		} else if step.conc == 8 && pk < 5 {
			t.Errorf("after the reload to concurrency 8 with 13 sources holding 800ms: only %d in flight at most", pk)
		}
		if pk := u.PeakTag("g"); pk > step.group {
			t.Errorf("after the reload to group concurrency %d: %d in flight in group g", step.group, pk)
		} else if step.group == 3 && pk < 2 {
			t.Errorf("after the reload to group concurrency 3: at most %d in flight in group g", pk)
		}
	}
}

// Rule 3.11 with rule 3.2: polls queued (admitted by their group, waiting
// for a global permit) when a reload lowers the group's concurrency start
// under the new limit.
func TestReloadGroupLimitAppliesToQueuedPolls(t *testing.T) {
	t.Parallel()
	u := newUpstream(t)
	in := newInst(t)
	cfg := func(group int) string {
		var b strings.Builder
		b.WriteString("concurrency: 2\nshutdown_timeout: 2s\n")
		if group > 0 {
			fmt.Fprintf(&b, "limits:\n  g: {concurrency: %d}\n", group)
		}
		b.WriteString("sources:\n")
		for i := 0; i < 2; i++ {
			fmt.Fprintf(&b, "  - {name: block%d, type: http, url: %q, schedule: \"@every 1s\", timeout: 60s}\n", i, u.URL(fmt.Sprintf("/block/%d", i)))
		}
		for i := 0; i < 3 && group > 0; i++ {
			fmt.Fprintf(&b, "  - {name: g%d, type: http, url: %q, schedule: \"@every 1s\", timeout: 5s, limit: g}\n", i, u.URL(fmt.Sprintf("/g/%d", i)))
		}
		return b.String()
	}
	for i := 0; i < 2; i++ {
		u.Set(fmt.Sprintf("/block/%d", i), behavior{Hang: true})
	}
	for i := 0; i < 3; i++ {
		u.Set(fmt.Sprintf("/g/%d", i), behavior{Hold: 1500 * time.Millisecond})
	}
	// First the blockers alone: they take both global permits.
	in.writeConfig(cfg(0))
	d := in.start()
	eventually(t, 3*time.Second, "both blockers hanging", func() error {
		if n := u.InflightTag("block"); n != 2 {
			return errf("%d in flight", n)
		}
		return nil
	})
	// Then the members, group concurrency 3: they queue for global permits.
	in.writeConfig(cfg(3))
	d.signal(syscall.SIGHUP)
	blockedAt := time.Now()
	sleepUntil(blockedAt.Add(1500 * time.Millisecond)) // every member ticked and queued
	if n := u.CountSince("/g/0", blockedAt) + u.CountSince("/g/1", blockedAt) + u.CountSince("/g/2", blockedAt); n > 0 {
		t.Fatalf("group members polled while no global permit was free")
	}
	if code, _ := d.do(http.MethodGet, "/api/sources/g2", "", ""); code != http.StatusOK {
		t.Fatalf("the members were not added by the reload")
	}
	// Lower the group's concurrency to 1, then free the global permits.
	logOff := d.stderr.Len()
	in.writeConfig(cfg(1))
	d.signal(syscall.SIGHUP)
	eventually(t, 3*time.Second, "the second reload", func() error {
		if !strings.Contains(d.logs()[logOff:], "reload") {
			return errf("no reload logged")
		}
		return nil
	})
	sleepUntil(time.Now().Add(300 * time.Millisecond))
	for i := 0; i < 2; i++ {
		p := fmt.Sprintf("/block/%d", i)
		u.Set(p, behavior{})
		u.Release(p)
	}
	u.ResetPeaks()
	eventually(t, 5*time.Second, "group members polled after the blockers ended", func() error {
		if n := u.CountSince("/g/0", blockedAt) + u.CountSince("/g/1", blockedAt) + u.CountSince("/g/2", blockedAt); n < 2 {
			return errf("%d polls", n)
		}
		return nil
	})
	sleepUntil(time.Now().Add(2 * time.Second))
	if pk := u.PeakTag("g"); pk > 1 {
		t.Errorf("group g, reloaded to concurrency 1, had %d polls in flight (polls queued before the reload started under the old limit 3)", pk)
	}
}
