package scheduler

import (
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/domain"
	"github.com/pacer-dev/pacer/internal/waitfor"
	"github.com/pacer-dev/pacer/scheduler/policy"
)

// hostUpstream is a loopback upstream on its own address whose answer the
// test switches: "dead" accepts a connection and closes it before any byte
// (a connection-level failure, contract 13.3, that the test can count),
// "ok" answers 200, "throttle" answers 429 with Retry-After. It records
// every arrival's time.
type hostUpstream struct {
	ln       net.Listener
	srv      *http.Server
	mode     atomic.Value // string
	retry    string
	mu       sync.Mutex
	arrivals []time.Time
	calls    atomic.Int64
	okFirst  atomic.Int64 // in "throttle" mode, answer 200 to this many first
}

func newHostUpstream(t *testing.T, addr, mode string) *hostUpstream {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen on %s: %v", addr, err)
	}
	u := &hostUpstream{retry: "5"}
	u.mode.Store(mode)
	u.ln = &closingListener{Listener: ln, u: u}
	u.srv = &http.Server{Handler: http.HandlerFunc(u.serve), ReadHeaderTimeout: 10 * time.Second}
	go u.srv.Serve(u.ln) //nolint:errcheck // ends at Close
	t.Cleanup(func() { u.srv.Close() })
	return u
}

// closingListener closes every connection at once while the mode is
// "dead", counting it as a call.
type closingListener struct {
	net.Listener
	u *hostUpstream
}

func (l *closingListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.u.mode.Load() != "dead" {
			return c, nil
		}
		l.u.record()
		c.Close()
	}
}

func (u *hostUpstream) record() {
	u.calls.Add(1)
	u.mu.Lock()
	u.arrivals = append(u.arrivals, time.Now())
	u.mu.Unlock()
}

func (u *hostUpstream) serve(w http.ResponseWriter, r *http.Request) {
	u.record()
	if u.mode.Load() == "throttle" && u.okFirst.Add(-1) < 0 {
		w.Header().Set("Retry-After", u.retry)
		w.WriteHeader(http.StatusTooManyRequests)
		return
	}
	fmt.Fprint(w, "ok")
}

func (u *hostUpstream) times() []time.Time {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]time.Time(nil), u.arrivals...)
}

// hostSources is n http sources on url, one path each.
func hostSources(n int, url, extra string) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "  - {name: s%03d, type: http, url: \"%s/s%03d\"%s}\n", i, url, i, extra)
	}
	return b.String()
}

// TestDeadHostCostsFailuresThenOneCallPerCooldown: 200 sources of a host
// whose connections are closed before any byte cost about
// breaker.failures calls, then one probe per cooldown; one host_open
// event and no event of a source; once the host answers, one
// host_recovered and every source polled again, none left failing.
func TestDeadHostCostsFailuresThenOneCallPerCooldown(t *testing.T) {
	dir := t.TempDir()
	u := newHostUpstream(t, "127.0.0.2:0", "dead")
	url := "http://" + u.ln.Addr().String()
	body := `concurrency: 16
notify: {command: ["true"], on: [error, open, recovered, host_open, host_recovered]}
hosts:
  breaker: {sources: 2, failures: 5, window: 1m, cooldown: 2s}
defaults:
  schedule: "@every 1s"
  timeout: 5s
  backoff: {initial: 1s, max: 2s, multiplier: 2, jitter: 0}
  breaker: {failures: 3, cooldown: 30s}
  error_after: 3
sources:
` + hostSources(200, url, "")
	h := start(t, dir, writeConfig(t, dir, body))
	defer h.stop()
	begin := time.Now()
	waitfor.True(t, 30*time.Second, "the host open", func() bool {
		o, err := h.s.Host(strings.TrimPrefix(url, "http://"))
		return err == nil && (o.State == "open" || o.State == "half-open")
	})
	time.Sleep(8 * time.Second) // several cooldowns: the bound below is on calls, which load can only lower
	elapsed := time.Since(begin)
	calls := u.calls.Load()
	if limit := int64(5 + 2 + elapsed/(2*time.Second) + 1); calls > limit {
		t.Fatalf("%d calls to a dead host in %v, want <= %d (failures + 2 + one per cooldown)", calls, elapsed, limit)
	}
	blocked := 0
	for i := range 200 {
		if h.source(fmt.Sprintf("s%03d", i)).State == policy.StateBlocked {
			blocked++
		}
	}
	if blocked < 150 {
		t.Fatalf("%d of 200 sources blocked by the open host, want most", blocked)
	}
	if n := h.metric("pacer_hosts", "state", "open") + h.metric("pacer_hosts", "state", "half-open"); n != 1 {
		t.Fatalf("pacer_hosts{state=open or half-open} = %v, want 1", n)
	}
	if objs := h.s.Hosts(); len(objs) != 1 || objs[0].Sources != 200 || objs[0].Why == "" {
		t.Fatalf("Hosts() = %+v; want the one host of 200 sources, with its why", objs)
	}
	u.mode.Store("ok")
	waitfor.True(t, 60*time.Second, "every source polled successfully again", func() bool {
		for i := range 200 {
			if s := h.source(fmt.Sprintf("s%03d", i)); s.State != policy.StateOK {
				return false
			}
		}
		return true
	})
	evs := outboxEvents(t, h)
	if evs["host_open"] != 1 || evs["host_recovered"] != 1 || evs["error"] != 0 || evs["open"] != 0 {
		t.Fatalf("events %v; want one host_open, one host_recovered, no source's error or open", evs)
	}
}

// outboxEvents counts the outbox's events by name.
func outboxEvents(t *testing.T, h *harness) map[string]int {
	t.Helper()
	out := map[string]int{}
	for {
		now := time.Now()
		evs, err := h.store.ClaimEvents(t.Context(), domain.EventClaim{Member: "t", Now: now, Until: now.Add(time.Minute), Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) == 0 {
			return out
		}
		for _, ev := range evs {
			out[ev.Event]++
			if err := h.store.EventSent(t.Context(), ev.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestThrottledHostStopsEverySource: 100 sources of one host, 429 with
// Retry-After 5 after the 20th request: no request reaches the host for
// the 5 s after the first 429 (but those already on their way), whatever
// the siblings' schedules; the siblings are blocked saying why.
func TestThrottledHostStopsEverySource(t *testing.T) {
	dir := t.TempDir()
	u := newHostUpstream(t, "127.0.0.3:0", "throttle")
	u.okFirst.Store(20)
	url := "http://" + u.ln.Addr().String()
	body := `concurrency: 8
hosts: {}
defaults:
  schedule: "@every 1s"
  timeout: 5s
sources:
` + hostSources(100, url, "")
	h := start(t, dir, writeConfig(t, dir, body))
	defer h.stop()
	var first time.Time
	waitfor.True(t, 30*time.Second, "a 429 answered", func() bool {
		ts := u.times()
		if len(ts) > 20 {
			first = ts[20]
			return true
		}
		return false
	})
	waitfor.True(t, 30*time.Second, "a sibling blocked by the throttled host", func() bool {
		for i := range 100 {
			x, err := h.s.ExplainSource(fmt.Sprintf("s%03d", i))
			if err == nil && x.State == policy.StateBlocked && strings.Contains(x.Why, "throttled until") {
				return true
			}
		}
		return false
	})
	time.Sleep(time.Until(first.Add(5500 * time.Millisecond)))
	defer func() {
		// A reset ends the throttling at once.
		u.mode.Store("ok")
		o, err := h.s.ResetHost(strings.TrimPrefix(url, "http://"))
		if err != nil || o.State != "closed" || o.Until != nil {
			t.Errorf("ResetHost = %+v, %v; want it closed, no until", o, err)
		}
		if _, err := h.s.ResetHost("nowhere.example"); err == nil {
			t.Error("ResetHost of an unknown host succeeded")
		}
	}()
	// Polls admitted before the answer was read may still arrive for a
	// moment (1 s of margin on a loaded machine); none after that until
	// the Retry-After has passed.
	for _, at := range u.times() {
		if d := at.Sub(first); d > time.Second && d < 4900*time.Millisecond {
			t.Fatalf("a request reached the throttled host %v after its first 429 (Retry-After 5 s)", d)
		}
	}
}

// TestRespectCacheDefersThePoll: with respect_cache, an answer's
// Cache-Control max-age defers the next poll of an "@every 1s" source to
// not before then; no-cache defers nothing.
func TestRespectCacheDefersThePoll(t *testing.T) {
	var maxAge atomic.Value
	maxAge.Store("max-age=4")
	var polls atomic.Int64
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		polls.Add(1)
		w.Header().Set("Cache-Control", maxAge.Load().(string))
		fmt.Fprint(w, "ok")
	}), ReadHeaderTimeout: 10 * time.Second}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln) //nolint:errcheck // ends at Close
	t.Cleanup(func() { srv.Close() })
	dir := t.TempDir()
	body := "defaults: {schedule: \"@every 1s\", timeout: 5s, respect_cache: true}\nsources:\n" +
		"  - {name: c, type: http, url: \"http://" + ln.Addr().String() + "/\"}\n"
	h := start(t, dir, writeConfig(t, dir, body))
	defer h.stop()
	waitfor.True(t, 30*time.Second, "the first poll", func() bool { return h.source("c").PollsTotal >= 1 })
	first := time.Now()
	o := h.source("c")
	if o.NextRunAt == nil || o.NextRunAt.Sub(*o.LastRunAt) < 3500*time.Millisecond {
		t.Fatalf("next run %v after a poll at %v with max-age=4, want 4 s later", o.NextRunAt, o.LastRunAt)
	}
	if x, err := h.s.ExplainSource("c"); err != nil || !strings.Contains(x.Why, "respect_cache") {
		t.Fatalf("why %q (%v): want it to say the cache deferred the poll", x.Why, err)
	}
	time.Sleep(2 * time.Second) // two ticks of its schedule: a bound load can only make looser
	if n := polls.Load(); n != 1 {
		t.Fatalf("%d polls within 2 s of an answer with max-age=4, want 1", n)
	}
	maxAge.Store("no-cache, max-age=4")
	waitfor.True(t, 30*time.Second, "the deferred poll", func() bool { return polls.Load() >= 2 })
	if d := time.Since(first); d < 3*time.Second {
		t.Fatalf("the second poll came %v after the first, want about 4 s", d)
	}
	waitfor.True(t, 30*time.Second, "polls every second once no-cache", func() bool { return polls.Load() >= 4 })
}
