package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Round 3 hardening of notifications (issue 20): the pending gauge after a
// kill -9, recovered after a reset, the outbox bounded per source.

// TestNotifyPendingDrainsAfterKill9: with the receiver down, three sources
// enter error and recover, so that the outbox holds their events; the
// daemon is killed with -9 and restarted, the receiver comes back. Once the
// receiver has every event, pacer_notifications_pending returns to 0
// (contract 10.1, 10.5), in the same run.
func TestNotifyPendingDrainsAfterKill9(t *testing.T) {
	for _, c := range []struct {
		name string
		down int
	}{{"refusing", recvFail}, {"hanging", recvHang}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			pendingDrainsAfterKill9(t, c.down)
		})
	}
	t.Run("flapping", func(t *testing.T) {
		t.Parallel()
		pendingDrainsFlapping(t)
	})
}

// pendingDrainsFlapping: 20 sources flap between error and ok while the
// receiver hangs (deliveries are in flight at the kill), the daemon is
// killed with -9 in the middle, restarted, the flapping stops and the
// receiver answers: once it has every event the daemon attempted, the
// gauge returns to 0.
func pendingDrainsFlapping(t *testing.T) {
	const n = 20
	u := newUpstream(t)
	r := newHookReceiver(t, recvHang)
	var b strings.Builder
	b.WriteString(notifyYAML(r, "") + "defaults:\n  schedule: \"@every 1s\"\n  breaker: {failures: 0}\n  error_after: 1\n  error_reprobe: 1s\nsources:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - {name: f%02d, type: http, url: %q}\n", i, u.URL(fmt.Sprintf("/f%02d", i)))
	}
	in := newInst(t)
	in.writeConfig(b.String())
	flap := func(d time.Duration) {
		for fail, until := true, time.Now().Add(d); time.Now().Before(until); fail = !fail {
			st := 0
			if fail {
				st = 500
			}
			for i := range n {
				u.Set(fmt.Sprintf("/f%02d", i), behavior{Status: st})
			}
			sleepUntil(time.Now().Add(1500 * time.Millisecond))
		}
	}
	d := in.start()
	flap(8 * time.Second)
	d.kill()
	d = in.start()
	flap(5 * time.Second)
	for i := range n {
		u.Set(fmt.Sprintf("/f%02d", i), behavior{})
	}
	eventually(t, 20*time.Second, "every source ok", func() error {
		for name, s := range d.sources() {
			if s.State != "ok" {
				return errf("%s is %s", name, s.State)
			}
		}
		return nil
	})
	r.setMode(recvOK)
	eventually(t, 120*time.Second, "the receiver has every event attempted", func() error {
		acc, att := r.got()
		ids := map[string]bool{}
		for _, ev := range acc {
			ids[ev.ID] = true
		}
		for _, ev := range att {
			if !ids[ev.ID] {
				return errf("%d accepted; %s of %s (%s) not yet", len(acc), ev.Event, ev.Source, ev.ID)
			}
		}
		return nil
	})
	eventually(t, 30*time.Second, "pacer_notifications_pending back to 0", func() error {
		if p := d.metric("pacer_notifications_pending"); p != 0 {
			acc, _ := r.got()
			return errf("pending %v; %d events accepted", p, len(acc))
		}
		return nil
	})
	acc, att := r.got()
	t.Logf("%d events accepted, %d attempts; sent %v", len(acc), len(att), d.metric("pacer_notifications_total", "outcome", "sent"))
}

func pendingDrainsAfterKill9(t *testing.T, down int) {
	names := []string{"a", "b", "c"}
	u := newUpstream(t)
	for _, n := range names {
		u.Set("/"+n, behavior{Status: 500})
	}
	r := newHookReceiver(t, down)
	var b strings.Builder
	b.WriteString(notifyYAML(r, "") + "defaults:\n  schedule: \"@every 1s\"\n  breaker: {failures: 0}\n  error_after: 1\n  error_reprobe: 1s\nsources:\n")
	for _, n := range names {
		fmt.Fprintf(&b, "  - {name: %s, type: http, url: %q}\n", n, u.URL("/"+n))
	}
	in := newInst(t)
	in.writeConfig(b.String())
	d := in.start()
	eventually(t, 20*time.Second, "every source in error", func() error {
		for _, n := range names {
			if s := d.source(n); s.State != "error" {
				return errf("%s is %s", n, s.State)
			}
		}
		return nil
	})
	for _, n := range names {
		u.Set("/"+n, behavior{})
	}
	eventually(t, 20*time.Second, "every source recovered, events pending", func() error {
		for _, n := range names {
			if s := d.source(n); s.State != "ok" {
				return errf("%s is %s", n, s.State)
			}
		}
		if p := d.metric("pacer_notifications_pending"); p == 0 {
			return errf("nothing pending yet")
		}
		return nil
	})
	d.kill()
	d = in.start()
	r.setMode(recvOK)
	eventually(t, 90*time.Second, "the receiver has every event", func() error {
		acc, _ := r.got()
		seen := map[string]bool{}
		for _, ev := range acc {
			seen[ev.Source+":"+ev.Event] = true
		}
		for _, n := range names {
			if !seen[n+":error"] || !seen[n+":recovered"] {
				return errf("accepted %d events; none yet of %s", len(acc), n)
			}
		}
		return nil
	})
	eventually(t, 20*time.Second, "pacer_notifications_pending back to 0", func() error {
		if p := d.metric("pacer_notifications_pending"); p != 0 {
			return errf("pending %v", p)
		}
		return nil
	})
	acc, att := r.got()
	t.Logf("%d events accepted, %d attempts; sent %v", len(acc), len(att), d.metric("pacer_notifications_total", "outcome", "sent"))
}

// TestNotifyRecoveredAfterReset: a source enters error (event error), its
// upstream heals and it is reset with the CLI, by the running daemon or
// with the daemon stopped and then restarted: its first success sends
// recovered, so that an incident tool that opened on error resolves; the
// next error opens a new incident. The receiver gets error, recovered,
// error (contract 10.1).
func TestNotifyRecoveredAfterReset(t *testing.T) {
	for _, restart := range []bool{false, true} {
		t.Run(map[bool]string{false: "running", true: "stopped"}[restart], func(t *testing.T) {
			t.Parallel()
			u := newUpstream(t)
			u.Set("/a", behavior{Status: 500})
			r := newHookReceiver(t, recvOK)
			in := newInst(t)
			in.writeConfig(notifyYAML(r, "") + `defaults:
  schedule: "@every 1s"
  breaker: {failures: 0}
  error_after: 1
sources:
  - {name: a, type: http, url: "` + u.URL("/a") + `"}
`)
			d := in.start()
			events := func(n int) func() error {
				return func() error {
					acc, _ := r.got()
					if len(acc) < n {
						return errf("accepted %d events: %s", len(acc), eventNames(acc))
					}
					return nil
				}
			}
			eventually(t, 20*time.Second, "the error event", events(1))
			u.Set("/a", behavior{})
			if restart {
				d.stop(10 * time.Second)
				in.mustCLI("reset", "a")
				d = in.start()
			} else {
				in.mustCLI("reset", "a")
			}
			eventually(t, 20*time.Second, "a success after the reset", func() error {
				if s := d.source("a"); s.State != "ok" || s.LastSuccessAt == nil {
					return errf("a is %s", s.State)
				}
				return nil
			})
			u.Set("/a", behavior{Status: 500})
			eventually(t, 20*time.Second, "the next error event", events(3))
			acc, _ := r.got()
			if got := eventNames(acc); got != "error recovered error" {
				t.Fatalf("the receiver got %q; want \"error recovered error\"", got)
			}
			if rec := acc[1]; rec.State != "ok" || rec.ConsecutiveFailures != 0 || !rec.At.After(acc[0].At) {
				t.Errorf("recovered event %+v", rec)
			}
		})
	}
}

// eventNames is the events' names, space-separated.
func eventNames(evs []notifyEvent) string {
	names := make([]string, len(evs))
	for i, ev := range evs {
		names[i] = ev.Event
	}
	return strings.Join(names, " ")
}

// TestNotifyOutboxBoundedPerSource: 20 sources on "@every 200ms" whose
// upstream fails every other request flap between an open breaker and ok
// for 25 s (an event per poll) while the receiver refuses everything. The
// outbox keeps at most 64 events per source (and one in delivery, and
// what one housekeeping pass lets in), the older ones counted as dropped;
// once the receiver accepts, what was kept arrives in order per source,
// open and recovered alternating.
func TestNotifyOutboxBoundedPerSource(t *testing.T) {
	t.Parallel()
	const n, perSource, slack, flapFor = 20, 64, 6, 25 * time.Second
	var flapping atomic.Bool
	flapping.Store(true)
	var mu sync.Mutex
	calls := map[string]int{}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		mu.Lock()
		calls[req.URL.Path]++
		odd := calls[req.URL.Path]%2 == 1
		mu.Unlock()
		if odd && flapping.Load() {
			http.Error(w, "flap", http.StatusInternalServerError)
		}
	}))
	defer up.Close()
	r := newHookReceiver(t, recvFail)
	var b strings.Builder
	b.WriteString(notifyYAML(r, "  on: [open, recovered]\n") + "defaults:\n  schedule: \"@every 200ms\"\n" +
		"  backoff: {initial: 100ms, max: 200ms}\n  breaker: {failures: 1, cooldown: 200ms}\n  error_after: 0\nsources:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - {name: f%02d, type: http, url: %q}\n", i, fmt.Sprintf("%s/f%02d", up.URL, i))
	}
	in := newInst(t)
	in.writeConfig(b.String())
	d := in.start()
	maxPending := 0.0
	for until := time.Now().Add(flapFor); time.Now().Before(until); {
		sleepUntil(time.Now().Add(500 * time.Millisecond))
		maxPending = max(maxPending, d.metric("pacer_notifications_pending"))
	}
	flapping.Store(false)
	eventually(t, 20*time.Second, "every source ok", func() error {
		for name, s := range d.sources() {
			if s.State != "ok" {
				return errf("%s is %s", name, s.State)
			}
		}
		return nil
	})
	dropped := d.metric("pacer_notifications_total", "outcome", "dropped")
	if bound := float64(n * (perSource + slack)); maxPending > bound || dropped == 0 {
		t.Errorf("pending peaked at %v (bound %v), %v dropped; want the bound kept by dropping", maxPending, bound, dropped)
	}
	pending := d.metric("pacer_notifications_pending")
	r.setMode(recvOK)
	eventually(t, 120*time.Second, "the outbox drained", func() error {
		if p := d.metric("pacer_notifications_pending"); p != 0 {
			return errf("pending %v", p)
		}
		return nil
	})
	acc, _ := r.got()
	bySource := map[string][]notifyEvent{}
	for _, ev := range acc {
		bySource[ev.Source] = append(bySource[ev.Source], ev)
	}
	for src, evs := range bySource {
		if len(evs) > perSource+slack {
			t.Errorf("%s: %d events delivered after the outage; want at most %d", src, len(evs), perSource+slack)
		}
		// The first may be one kept because it was in delivery when the
		// older ones went: the others follow each other.
		for i := 1; i < len(evs); i++ {
			if evs[i].At.Before(evs[i-1].At) || (i > 1 && evs[i].Event == evs[i-1].Event) {
				t.Errorf("%s: event %d (%s at %v) after %s at %v: want them in order, open and recovered alternating",
					src, i, evs[i].Event, evs[i].At, evs[i-1].Event, evs[i-1].At)
				break
			}
		}
	}
	t.Logf("%d sources flapped for %v: pending peaked at %v, %v dropped, %v pending at the end of the outage; %d delivered after",
		n, flapFor, maxPending, dropped, pending, len(acc))
}
