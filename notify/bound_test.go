package notify

import (
	"bytes"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// syncBuffer is a log destination safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *syncBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// TestOutboxBoundedPerSource: while the receiver refuses, a source with
// more than maxPerSource events in the outbox keeps its newest (and the
// one in flight, if any), the older ones dropped and counted; another
// source is untouched. Once the receiver accepts, what was kept arrives
// in order, every event once.
func TestOutboxBoundedPerSource(t *testing.T) {
	const many, few = maxPerSource + 36, 3
	st := openStore(t)
	commitEvents(t, st, []string{"a"}, many)
	commitEvents(t, st, []string{"b"}, few)
	clock := &fakeClock{t: time.Now()}
	var down atomic.Bool
	down.Store(true)
	rc := &receiver{answer: func(payload) int {
		if down.Load() {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	}}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	var logs syncBuffer
	reg := prometheus.NewRegistry()
	s, err := New(webhookNotify(srv.URL), nil, Options{Outbox: st, Registry: reg, Member: "t", Interval: 50 * time.Millisecond,
		Clock: clock, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	defer s.Stop(5 * time.Second)
	waitUntil(t, "the outbox bounded", 10*time.Second, func() bool {
		n, err := st.PendingEvents(t.Context())
		return err == nil && n <= maxPerSource+1+few && counter(t, reg, "dropped") > 0
	})
	idlePasses(t, s)
	n, err := st.PendingEvents(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if dropped := counter(t, reg, "dropped"); int(dropped)+n != many+few {
		t.Fatalf("%v dropped, %d pending; want them to add up to the %d made", dropped, n, many+few)
	}
	if lines := strings.Count(logs.String(), "notifications dropped"); lines != 1 || !strings.Contains(logs.String(), "source=a") {
		t.Errorf("%d log lines about the drop; want one, naming a:\n%s", lines, logs.String())
	}
	down.Store(false)
	clock.set(clock.Now().Add(10 * time.Minute)) // past every retry's backoff (5 m at most), within max_age
	waitUntil(t, "what was kept delivered", 20*time.Second, func() bool { return len(rc.accepted()) == n })
	order := map[string][]string{}
	for _, p := range rc.accepted() {
		order[p.Source] = append(order[p.Source], p.Event)
	}
	want := func(from, to int) []string {
		var out []string
		for i := from; i < to; i++ {
			out = append(out, fmt.Sprintf("%03d", i))
		}
		return out
	}
	a := order["a"]
	if len(a) == maxPerSource+1 && a[0] == "000" {
		a = a[1:] // in flight when the bound applied: kept, and first
	}
	if !slices.Equal(a, want(many-maxPerSource, many)) {
		t.Errorf("a's events delivered: %v; want its newest %d, in order", order["a"], maxPerSource)
	}
	if !slices.Equal(order["b"], want(0, few)) {
		t.Errorf("b's events delivered: %v; want all %d, in order", order["b"], few)
	}
	waitUntil(t, "nothing pending", 10*time.Second, func() bool {
		n, err := st.PendingEvents(t.Context())
		return err == nil && n == 0
	})
}
