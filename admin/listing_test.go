package admin_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pacer-dev/pacer/admin"
	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/scheduler"
	"github.com/pacer-dev/pacer/scheduler/policy"
	"github.com/pacer-dev/pacer/scheduler/view"
	"github.com/pacer-dev/pacer/store"
)

// heldLister is the real scheduler whose listings of every source
// (ExplainAll) are counted and held until release is closed.
type heldLister struct {
	*scheduler.Scheduler
	in, max atomic.Int32
	release chan struct{}
}

func (h *heldLister) ExplainAll(fn func([]view.Explained) error) error {
	n := h.in.Add(1)
	defer h.in.Add(-1)
	for m := h.max.Load(); n > m && !h.max.CompareAndSwap(m, n); m = h.max.Load() {
	}
	<-h.release
	return h.Scheduler.ExplainAll(fn)
}

// Issue 20, item 16d: at 100,000 sources a listing of every source holds
// about 126 MiB while it is built and written, and four at once took the
// daemon from 402 to 1,028 MiB. One is built at a time, 8 more wait for
// their turn, the others get 503 with Retry-After.
func TestListingsBounded(t *testing.T) {
	const clients, waiting = 12, 8
	f := newFixture(t)
	h := &heldLister{Scheduler: f.sched, release: make(chan struct{})}
	srv := httptest.NewServer(admin.NewHandler(h, prometheus.NewRegistry(), admin.Options{}))
	defer srv.Close()
	var ok, refused atomic.Int32
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			resp, err := srv.Client().Get(srv.URL + "/api/sources")
			if err != nil {
				t.Errorf("GET /api/sources: %v", err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			switch {
			case resp.StatusCode == http.StatusOK:
				ok.Add(1)
			case resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") != "":
				refused.Add(1)
			default:
				t.Errorf("GET /api/sources: %d (Retry-After %q)", resp.StatusCode, resp.Header.Get("Retry-After"))
			}
		})
	}
	waitFor(t, 30*time.Second, "the clients beyond the one listing and the waiting ones refused", func() error {
		if h.in.Load()+refused.Load() < clients-waiting && h.max.Load() <= 1 {
			return fmt.Errorf("%d listing, %d refused", h.in.Load(), refused.Load())
		}
		return nil
	})
	close(h.release)
	wg.Wait()
	if m := h.max.Load(); m != 1 {
		t.Errorf("%d listings built at once, want 1", m)
	}
	if r, o := refused.Load(), ok.Load(); r != clients-1-waiting || o != 1+waiting {
		t.Errorf("%d listings answered, %d refused with 503 and Retry-After; want %d and %d", o, r, 1+waiting, clients-1-waiting)
	}
}

// GET /api/sources is written a chunk of sources at a time: the array is
// whole and in configuration order across chunks (2,048 sources each),
// each object as GET /api/sources/{name} shows it.
func TestListingStreamed(t *testing.T) {
	const n = 4100
	var b strings.Builder
	b.WriteString("store: pacer.db\nadmin: {listen: \"\"}\ndefaults: {schedule: \"0 0 1 1 *\"}\nsources:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - {name: s%06d, type: exec, command: [\"true\"]}\n", i)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path, os.LookupEnv)
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(cfg.Store, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	sched, err := scheduler.New(cfg, scheduler.Options{Store: st, Registry: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	if err := sched.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := sched.Shutdown(5 * time.Second); err != nil {
			t.Error(err)
		}
	}()
	srv := httptest.NewServer(admin.NewHandler(sched, prometheus.NewRegistry(), admin.Options{}))
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL + "/api/sources")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" || !bytes.HasSuffix(body, []byte("]\n")) {
		t.Fatalf("GET /api/sources: %d %q, ends %q", resp.StatusCode, resp.Header.Get("Content-Type"), body[max(0, len(body)-10):])
	}
	var list []view.Explained
	if err := json.Unmarshal(body, &list); err != nil {
		t.Fatalf("GET /api/sources: not a JSON array: %v", err)
	}
	if len(list) != n {
		t.Fatalf("GET /api/sources: %d sources, want %d", len(list), n)
	}
	for i, o := range list {
		if want := fmt.Sprintf("s%06d", i); o.Name != want || o.State != policy.StatePending || o.Type != "exec" || o.Why == "" {
			t.Fatalf("source %d: %s (%s, %s, why %q), want %s pending with its why", i, o.Name, o.Type, o.State, o.Why, want)
		}
	}
	one, err := sched.ExplainSource("s002048") // the first of the second chunk
	if err != nil {
		t.Fatal(err)
	}
	if got := list[2048]; got.Schedule != one.Schedule || got.Breaker != one.Breaker || !got.NextRunAt.Equal(*one.NextRunAt) {
		t.Errorf("s002048 listed as %+v, shown alone as %+v", got.SourceObject, one.SourceObject)
	}
}
