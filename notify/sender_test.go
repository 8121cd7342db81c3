package notify

import (
	"encoding/json"
	"fmt"
	"github.com/pacer-dev/pacer/internal/clock"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/domain"
	"github.com/pacer-dev/pacer/internal/waitfor"
	"github.com/pacer-dev/pacer/store"
)

// openStore opens a real SQLite store in a temp dir.
func openStore(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "pacer.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// commitEvents puts n events of each source in the outbox, named "000",
// "001" ... in order.
func commitEvents(t *testing.T, st *store.Store, sources []string, n int) {
	t.Helper()
	var evs []domain.Event
	for i := range n {
		for _, src := range sources {
			evs = append(evs, domain.Event{Source: src, Event: fmt.Sprintf("%03d", i), State: "error", PreviousState: "backoff",
				Reason: "2 consecutive failures", ConsecutiveFailures: 2, At: time.Now()})
		}
	}
	if err := st.Commit(t.Context(), domain.Batch{Events: evs}, 10); err != nil {
		t.Fatal(err)
	}
}

func startSender(t *testing.T, st *store.Store, n *config.Notify) (*Sender, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	s, err := New(n, nil, Options{Outbox: st, Registry: reg, Member: "t", Interval: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(func() {
		if !s.Stop(5 * time.Second) {
			t.Error("sender did not stop")
		}
	})
	return s, reg
}

func counter(t *testing.T, reg *prometheus.Registry, outcome string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if mf.GetName() == "pacer_notifications_total" && hasLabel(m, outcome) {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func hasLabel(m *dto.Metric, v string) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == "outcome" && l.GetValue() == v {
			return true
		}
	}
	return false
}

func waitUntil(t *testing.T, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	waitfor.True(t, limit, what, cond)
}

// receiver is a webhook that records the events it accepted; answer
// decides the status of each request (nil: 200).
type receiver struct {
	mu       sync.Mutex
	got      []payload              // accepted, in order of arrival
	arrivals map[string][]time.Time // by source/event
	answer   func(p payload) int
	cur, max int
	hold     chan struct{} // when set, each request waits for it to close
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	var p payload
	body, _ := io.ReadAll(req.Body)
	if err := json.Unmarshal(body, &p); err != nil || req.Header.Get("Content-Type") != "application/json" {
		http.Error(w, "bad body", http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	r.cur++
	r.max = max(r.max, r.cur)
	if r.arrivals == nil {
		r.arrivals = map[string][]time.Time{}
	}
	r.arrivals[p.Source+"/"+p.Event] = append(r.arrivals[p.Source+"/"+p.Event], time.Now())
	hold := r.hold
	r.mu.Unlock()
	if hold != nil {
		<-hold
	}
	code := http.StatusOK
	if r.answer != nil {
		code = r.answer(p)
	}
	r.mu.Lock()
	r.cur--
	if code/100 == 2 {
		r.got = append(r.got, p)
	}
	r.mu.Unlock()
	w.WriteHeader(code)
}

func (r *receiver) accepted() []payload {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

func webhookNotify(url string) *config.Notify {
	return &config.Notify{On: []string{"error"}, Webhook: &config.Webhook{URL: url, Method: "POST"}, Timeout: 2 * time.Second, MaxAge: time.Hour}
}

// TestInFlightBounded: 20 events of 20 sources against a receiver that
// holds every request: never more than 4 at once, and all arrive.
func TestInFlightBounded(t *testing.T) {
	st := openStore(t)
	var srcs []string
	for i := range 20 {
		srcs = append(srcs, fmt.Sprintf("s%02d", i))
	}
	commitEvents(t, st, srcs, 1)
	rc := &receiver{hold: make(chan struct{})}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	n := webhookNotify(srv.URL)
	n.Timeout = 30 * time.Second
	startSender(t, st, n)
	waitUntil(t, "4 requests in flight", 10*time.Second, func() bool {
		rc.mu.Lock()
		defer rc.mu.Unlock()
		return rc.cur == maxInFlight
	})
	// Several passes of the loop (200 ms) go by with the 4 held.
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		rc.mu.Lock()
		cur := rc.cur
		rc.mu.Unlock()
		if cur > maxInFlight {
			t.Fatalf("%d requests in flight", cur)
		}
		time.Sleep(20 * time.Millisecond)
	}
	close(rc.hold)
	waitUntil(t, "all 20 accepted", 20*time.Second, func() bool { return len(rc.accepted()) == 20 })
	if rc.max != maxInFlight {
		t.Errorf("at most %d in flight, want %d", rc.max, maxInFlight)
	}
}

// fakeClock is a clock whose Now is moved by hand; its timers (the
// sender's interval) run on the wall clock.
type fakeClock struct {
	clock.Real
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

// startFake starts a sender on the fake clock c.
func startFake(t *testing.T, st *store.Store, n *config.Notify, c *fakeClock) (*Sender, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	s, err := New(n, nil, Options{Outbox: st, Registry: reg, Member: "t", Interval: 50 * time.Millisecond, Clock: c})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(func() { s.Stop(5 * time.Second) })
	return s, reg
}

// idlePasses waits until the loop read the outbox twice more.
func idlePasses(t *testing.T, s *Sender) {
	t.Helper()
	p0 := s.passes.Load()
	waitUntil(t, "two passes of the loop", 10*time.Second, func() bool { return s.passes.Load() >= p0+2 })
}

// TestBackoffAndOrder, on a fake clock: the first event of a source fails
// 3 times; it is retried 1 s, 2 s, then 4 s after each failure and not
// before, and the source's later events wait for it (in order per source);
// another source is not held up.
func TestBackoffAndOrder(t *testing.T) {
	st := openStore(t)
	commitEvents(t, st, []string{"a", "b"}, 3)
	clock := &fakeClock{t: time.Now()}
	fails := 0
	rc := &receiver{}
	rc.answer = func(p payload) int {
		if p.Source == "a" && p.Event == "000" && fails < 3 {
			fails++
			return http.StatusInternalServerError
		}
		return http.StatusOK
	}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	s, reg := startFake(t, st, webhookNotify(srv.URL), clock)
	arrivals := func() int {
		rc.mu.Lock()
		defer rc.mu.Unlock()
		return len(rc.arrivals["a/000"])
	}
	waitUntil(t, "b's 3 events", 10*time.Second, func() bool { return len(rc.accepted()) == 3 })
	if arrivals() != 1 {
		t.Fatalf("a/000 arrived %d times before any retry", arrivals())
	}
	at := clock.Now()
	for k, d := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second} {
		waitUntil(t, "the failure recorded", 10*time.Second, func() bool { return counter(t, reg, "failed") == float64(k+1) })
		clock.set(at.Add(d - time.Millisecond))
		idlePasses(t, s)
		if n := arrivals(); n != k+1 {
			t.Fatalf("retry %d came before its backoff of %v", k+1, d)
		}
		at = at.Add(d)
		clock.set(at)
		waitUntil(t, "the retry", 10*time.Second, func() bool { return arrivals() == k+2 })
	}
	waitUntil(t, "all 6 accepted", 10*time.Second, func() bool { return len(rc.accepted()) == 6 })
	order := map[string][]string{}
	for _, p := range rc.accepted() {
		order[p.Source] = append(order[p.Source], p.Event)
	}
	for _, src := range []string{"a", "b"} {
		if !slices.Equal(order[src], []string{"000", "001", "002"}) {
			t.Errorf("events of %s accepted in order %v", src, order[src])
		}
	}
	// The receiver records an event before it answers, the sender counts
	// it once the answer is read: the count follows shortly.
	waitUntil(t, "6 counted as sent", 10*time.Second, func() bool { return counter(t, reg, "sent") == 6 })
}

// TestDroppedAfterMaxAge, on a fake clock: an event that keeps failing is
// dropped once older than max_age, counted, and the outbox is empty.
func TestDroppedAfterMaxAge(t *testing.T) {
	st := openStore(t)
	clock := &fakeClock{t: time.Now()}
	commitEvents(t, st, []string{"a"}, 1)
	rc := &receiver{answer: func(payload) int { return http.StatusServiceUnavailable }}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	n := webhookNotify(srv.URL)
	n.MaxAge = 10 * time.Second
	s, reg := startFake(t, st, n, clock)
	waitUntil(t, "a failure", 10*time.Second, func() bool { return counter(t, reg, "failed") >= 1 })
	clock.set(clock.Now().Add(9 * time.Second))
	idlePasses(t, s)
	if got := counter(t, reg, "dropped"); got != 0 {
		t.Fatalf("dropped before max_age: %v", got)
	}
	clock.set(clock.Now().Add(2 * time.Second))
	waitUntil(t, "the drop", 10*time.Second, func() bool { return counter(t, reg, "dropped") == 1 })
	if p, err := st.PendingEvents(t.Context()); err != nil || p != 0 {
		t.Errorf("pending after the drop: %d, %v", p, err)
	}
	if len(rc.accepted()) != 0 {
		t.Errorf("accepted %v", rc.accepted())
	}
}

// TestWebhookNoRedirect: a 3xx is not followed and is a failure.
func TestWebhookNoRedirect(t *testing.T) {
	st := openStore(t)
	commitEvents(t, st, []string{"a"}, 1)
	rc := &receiver{}
	mux := http.NewServeMux()
	mux.Handle("/ok", rc)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/ok", http.StatusTemporaryRedirect) })
	srv := httptest.NewServer(mux)
	defer srv.Close()
	_, reg := startSender(t, st, webhookNotify(srv.URL+"/in"))
	waitUntil(t, "a failure", 10*time.Second, func() bool { return counter(t, reg, "failed") >= 1 })
	if len(rc.accepted()) != 0 || counter(t, reg, "sent") != 0 {
		t.Errorf("the redirect was followed: %v", rc.accepted())
	}
}
