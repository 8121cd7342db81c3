package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Notifications (contract 10.1 to 10.3) with the real binary: a webhook
// receiver in the test, sources on the fake upstream.

// notifyEvent is the documented JSON of an event.
type notifyEvent struct {
	ID                  string    `json:"id"`
	Event               string    `json:"event"`
	Source              string    `json:"source"`
	State               string    `json:"state"`
	PreviousState       string    `json:"previous_state"`
	Reason              string    `json:"reason"`
	ConsecutiveFailures int       `json:"consecutive_failures"`
	At                  time.Time `json:"at"`
}

// Modes of the receiver.
const (
	recvOK   = iota // 200
	recvFail        // 500
	recvHang        // no answer until the client gives up
)

// hookReceiver is a webhook that records what it accepted and every
// attempt; its mode can change at run time.
type hookReceiver struct {
	mu       sync.Mutex
	mode     int
	accepted []notifyEvent
	attempts []notifyEvent
	keys     []string // JSON keys of the last body
	srv      *httptest.Server
}

func newHookReceiver(t *testing.T, mode int) *hookReceiver {
	r := &hookReceiver{mode: mode}
	r.srv = httptest.NewServer(r)
	t.Cleanup(r.srv.Close)
	return r
}

func (r *hookReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(req.Body, 1<<20))
	var ev notifyEvent
	var raw map[string]any
	if json.Unmarshal(body, &ev) != nil || json.Unmarshal(body, &raw) != nil {
		http.Error(w, "bad JSON", http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	r.attempts = append(r.attempts, ev)
	r.keys = r.keys[:0]
	for k := range raw {
		r.keys = append(r.keys, k)
	}
	mode := r.mode
	r.mu.Unlock()
	switch mode {
	case recvFail:
		http.Error(w, "down", http.StatusInternalServerError)
		return
	case recvHang:
		<-req.Context().Done()
		return
	}
	r.mu.Lock()
	r.accepted = append(r.accepted, ev)
	r.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

func (r *hookReceiver) setMode(m int) {
	r.mu.Lock()
	r.mode = m
	r.mu.Unlock()
}

func (r *hookReceiver) got() (accepted, attempts []notifyEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.accepted), slices.Clone(r.attempts)
}

func notifyYAML(r *hookReceiver, extra string) string {
	return "notify:\n  webhook: {url: \"" + r.srv.URL + "/hook\"}\n  timeout: 2s\n" + extra
}

// TestNotifyErrorThenRecovered (a): a source that fails twice enters error
// (error_after: 2), is re-probed and recovers: the receiver gets error then
// recovered, with the documented JSON, and distinct ids.
func TestNotifyErrorThenRecovered(t *testing.T) {
	t.Parallel()
	u := newUpstream(t)
	u.Set("/a", behavior{Status: 500})
	r := newHookReceiver(t, recvOK)
	in := newInst(t)
	in.writeConfig(notifyYAML(r, "") + `defaults:
  schedule: "@every 1s"
  breaker: {failures: 0}
  error_after: 2
sources:
  - {name: a, type: http, url: "` + u.URL("/a") + `", error_reprobe: 1s}
`)
	d := in.start()
	eventually(t, 15*time.Second, "the error event", func() error {
		if acc, _ := r.got(); len(acc) != 1 {
			return errf("accepted %+v", acc)
		}
		return nil
	})
	u.Set("/a", behavior{})
	eventually(t, 15*time.Second, "the recovered event", func() error {
		if acc, _ := r.got(); len(acc) != 2 {
			return errf("accepted %+v", acc)
		}
		return nil
	})
	acc, _ := r.got()
	e, rec := acc[0], acc[1]
	if e.Event != "error" || e.Source != "a" || e.State != "error" || e.PreviousState != "backoff" || e.ConsecutiveFailures != 2 ||
		!strings.HasPrefix(e.Reason, "2 consecutive failures; last: ") || e.At.IsZero() {
		t.Errorf("error event %+v", e)
	}
	if rec.Event != "recovered" || rec.State != "ok" || rec.PreviousState != "error" || rec.ConsecutiveFailures != 0 || rec.At.Before(e.At) {
		t.Errorf("recovered event %+v", rec)
	}
	if len(e.ID) != 32 || e.ID == rec.ID {
		t.Errorf("ids %q and %q: want two distinct 32-hex ids", e.ID, rec.ID)
	}
	r.mu.Lock()
	keys := slices.Sorted(slices.Values(r.keys))
	r.mu.Unlock()
	want := []string{"at", "consecutive_failures", "event", "id", "previous_state", "reason", "source", "state"}
	if !slices.Equal(keys, want) {
		t.Errorf("JSON keys %v, want %v", keys, want)
	}
	eventually(t, 5*time.Second, "sent counted, nothing pending", func() error {
		if s, p := d.metric("pacer_notifications_total", "outcome", "sent"), d.metric("pacer_notifications_pending"); s != 2 || p != 0 {
			return errf("sent %v, pending %v", s, p)
		}
		return nil
	})
}

// TestNotifySurvivesKill9 (b): the error event is committed, the receiver
// answers 500, the daemon is killed with -9 before any delivery succeeded;
// after a restart with the receiver fixed the event arrives, same id.
func TestNotifySurvivesKill9(t *testing.T) {
	t.Parallel()
	u := newUpstream(t)
	u.Set("/a", behavior{Status: 500})
	r := newHookReceiver(t, recvFail)
	in := newInst(t)
	in.writeConfig(notifyYAML(r, "") + `defaults:
  schedule: "@every 1s"
  breaker: {failures: 0}
  error_after: 1
sources:
  - {name: a, type: http, url: "` + u.URL("/a") + `"}
`)
	d := in.start()
	eventually(t, 15*time.Second, "a refused delivery", func() error {
		if _, att := r.got(); len(att) == 0 {
			return errf("no attempt yet")
		}
		return nil
	})
	d.kill()
	_, att := r.got()
	id := att[0].ID
	if acc, _ := r.got(); len(acc) != 0 {
		t.Fatalf("accepted before the kill: %+v", acc)
	}
	r.setMode(recvOK)
	in.start()
	eventually(t, 20*time.Second, "the event after the restart", func() error {
		if acc, _ := r.got(); len(acc) != 1 || acc[0].ID != id || acc[0].Event != "error" {
			return errf("accepted %+v; want the error event %s", acc, id)
		}
		return nil
	})
}

// TestNotifyHangingReceiverDoesNotSlowPolls (c): while the receiver hangs,
// 50 sources on "@every 1s" flap between error and ok; each is still
// polled about every second, the outbox stays within the events made, and
// once the receiver answers every event arrives, in order per source.
func TestNotifyHangingReceiverDoesNotSlowPolls(t *testing.T) {
	t.Parallel()
	const n, hang, flip = 50, 60 * time.Second, 3 * time.Second
	u := newUpstream(t)
	r := newHookReceiver(t, recvHang)
	var b strings.Builder
	b.WriteString(notifyYAML(r, "") + "concurrency: 16\ndefaults:\n  schedule: \"@every 1s\"\n  breaker: {failures: 0}\n  error_after: 1\n" +
		"  error_reprobe: 1s\n  backoff: {initial: 1s, max: 1s, jitter: 0}\nsources:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - {name: f%02d, type: http, url: \"%s\"}\n", i, u.URL(fmt.Sprintf("/f%02d", i)))
	}
	in := newInst(t)
	in.writeConfig(b.String())
	d := in.start()
	d.watchStarvation()
	from := time.Now().Add(2 * time.Second)
	until := from.Add(hang)
	flips, maxPending := 0, 0.0
	for fail := true; time.Now().Before(until); fail = !fail {
		st := 0
		if fail {
			st = 500
		}
		for i := range n {
			u.Set(fmt.Sprintf("/f%02d", i), behavior{Status: st})
		}
		flips++
		sleepUntil(time.Now().Add(flip))
		maxPending = max(maxPending, d.metric("pacer_notifications_pending"))
	}
	for i := range n {
		u.Set(fmt.Sprintf("/f%02d", i), behavior{})
	}
	// Each source was polled at least every 1.5 s (plus what the machine
	// took from the processes meanwhile): no start lag from the hanging
	// receiver.
	var maxGap time.Duration
	for i := range n {
		ts := u.Times(fmt.Sprintf("/f%02d", i))
		var prev time.Time
		for _, at := range ts {
			if at.Before(from) || at.After(until) {
				continue
			}
			if !prev.IsZero() {
				maxGap = max(maxGap, at.Sub(prev))
			}
			// A starved machine delays every process, the daemon too:
			// the bound grows by the stall this process saw meanwhile.
			if !prev.IsZero() && at.Sub(prev) > d.within(1500*time.Millisecond, prev, at) {
				t.Errorf("f%02d: %v between two polls at %v (bound with the machine's stall %v)", i, at.Sub(prev), at.Format(time.StampMilli), d.within(1500*time.Millisecond, prev, at))
			}
			prev = at
		}
	}
	// At most two events (error, recovered) per source and flip are made.
	if bound := float64(2 * n * (flips + 1)); maxPending == 0 || maxPending > bound {
		t.Errorf("pending peaked at %v; want some, at most %v", maxPending, bound)
	}
	r.setMode(recvOK)
	eventually(t, 150*time.Second, "the outbox drained", func() error {
		if p := d.metric("pacer_notifications_pending"); p != 0 {
			return errf("pending %v", p)
		}
		return nil
	})
	acc, _ := r.got()
	bySource := map[string][]notifyEvent{}
	ids := map[string]bool{}
	for _, ev := range acc {
		bySource[ev.Source] = append(bySource[ev.Source], ev)
		ids[ev.ID] = true
	}
	if len(bySource) != n {
		t.Errorf("events of %d sources, want %d", len(bySource), n)
	}
	for src, evs := range bySource {
		if !sort.SliceIsSorted(evs, func(i, j int) bool { return evs[i].At.Before(evs[j].At) }) {
			t.Errorf("%s: events out of order", src)
		}
		for i, ev := range evs {
			if want := []string{"error", "recovered"}[i%2]; ev.Event != want {
				t.Errorf("%s: event %d is %s, want %s (they alternate)", src, i, ev.Event, want)
				break
			}
		}
	}
	t.Logf("%d flips, %d events delivered (%d ids), pending peaked at %v, longest gap between two polls of a source %v",
		flips, len(acc), len(ids), maxPending, maxGap)
}

// TestNotifyClusterOnce (d): three members on PostgreSQL, each running a
// sender: every event is delivered once (by id).
func TestNotifyClusterOnce(t *testing.T) {
	dsn, _ := pgStore(t)
	u := newUpstream(t)
	r := newHookReceiver(t, recvOK)
	var b strings.Builder
	b.WriteString(notifyYAML(r, "") + "defaults:\n  schedule: \"@every 1s\"\n  breaker: {failures: 0}\n  error_after: 1\n  error_reprobe: 1s\nsources:\n")
	const n = 30
	for i := range n {
		u.Set(fmt.Sprintf("/c%02d", i), behavior{Status: 500})
		fmt.Fprintf(&b, "  - {name: c%02d, type: http, url: \"%s\"}\n", i, u.URL(fmt.Sprintf("/c%02d", i)))
	}
	ms := startCluster(t, dsn, 3, 0, b.String())
	eventually(t, 30*time.Second, "an error event per source", func() error {
		if acc, _ := r.got(); len(acc) < n {
			return errf("%d accepted", len(acc))
		}
		return nil
	})
	for i := range n {
		u.Set(fmt.Sprintf("/c%02d", i), behavior{})
	}
	eventually(t, 30*time.Second, "a recovered event per source", func() error {
		if acc, _ := r.got(); len(acc) < 2*n {
			return errf("%d accepted", len(acc))
		}
		return nil
	})
	never(t, 3*time.Second, "a second delivery of an event", func() error {
		acc, _ := r.got()
		seen := map[string]bool{}
		for _, ev := range acc {
			if seen[ev.ID] {
				return errf("event %s (%s of %s) delivered twice", ev.ID, ev.Event, ev.Source)
			}
			seen[ev.ID] = true
		}
		return nil
	})
	if acc, _ := r.got(); len(acc) != 2*n {
		t.Errorf("%d events accepted, want %d (error and recovered of each source)", len(acc), 2*n)
	}
	// The members' senders share the work: their counts add up to it.
	sent, by := 0.0, []float64{}
	for _, m := range ms {
		v := m.d.metric("pacer_notifications_total", "outcome", "sent")
		sent += v
		by = append(by, v)
	}
	if sent != 2*n {
		t.Errorf("members sent %v (%v), want %d in all", sent, by, 2*n)
	}
	t.Logf("sent per member: %v", by)
}

// TestNotifyReload: a daemon without notify makes no event; a SIGHUP that
// adds the section applies it: the next source to enter error is notified,
// at the new target.
func TestNotifyReload(t *testing.T) {
	t.Parallel()
	u := newUpstream(t)
	u.Set("/a", behavior{Status: 500})
	r := newHookReceiver(t, recvOK)
	in := newInst(t)
	body := `defaults:
  schedule: "@every 1s"
  breaker: {failures: 0}
  error_after: 1
sources:
  - {name: a, type: http, url: "` + u.URL("/a") + `"}
  - {name: b, type: http, url: "` + u.URL("/b") + `"}
`
	in.writeConfig(body)
	d := in.start()
	eventually(t, 10*time.Second, "a in error", func() error {
		if o := d.source("a"); o.State != "error" {
			return errf("%s", o)
		}
		return nil
	})
	in.writeConfig(notifyYAML(r, "") + body)
	d.signal(syscall.SIGHUP)
	eventually(t, 10*time.Second, "the reload", func() error {
		if !strings.Contains(d.logs(), "configuration reloaded") {
			return errf("not yet")
		}
		return nil
	})
	u.Set("/b", behavior{Status: 500})
	eventually(t, 15*time.Second, "b's error event", func() error {
		acc, _ := r.got()
		if len(acc) != 1 || acc[0].Source != "b" || acc[0].Event != "error" {
			return errf("accepted %+v; want b's error only", acc)
		}
		return nil
	})
}
