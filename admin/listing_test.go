package admin_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pacer-dev/pacer/admin"
	"github.com/pacer-dev/pacer/scheduler"
)

// heldLister is the real scheduler whose listings of every source
// (ExplainSources(nil)) are counted and held until release is closed.
type heldLister struct {
	*scheduler.Scheduler
	in, max atomic.Int32
	release chan struct{}
}

func (h *heldLister) ExplainSources(names []string) []scheduler.Explained {
	if names == nil {
		n := h.in.Add(1)
		defer h.in.Add(-1)
		for m := h.max.Load(); n > m && !h.max.CompareAndSwap(m, n); m = h.max.Load() {
		}
		<-h.release
	}
	return h.Scheduler.ExplainSources(names)
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
