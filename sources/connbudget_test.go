package sources

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/internal/waitfor"
)

// barrierServer answers every request once `batch` requests are in flight
// together (so that each batch of concurrent polls needs batch
// connections), and counts its open connections and their peak.
type barrierServer struct {
	*httptest.Server
	batch      int
	mu         sync.Mutex
	waiting    int
	release    chan struct{}
	open, peak atomic.Int64
}

func newBarrierServer(t *testing.T, batch int) *barrierServer {
	t.Helper()
	s := &barrierServer{batch: batch, release: make(chan struct{})}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		ch := s.release
		if s.waiting++; s.waiting == s.batch {
			s.waiting = 0
			close(ch)
			s.release = make(chan struct{})
		}
		s.mu.Unlock()
		select {
		case <-ch:
		case <-r.Context().Done():
			return
		}
		_, _ = w.Write([]byte("ok"))
	}))
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		switch st {
		case http.StateNew:
			n := s.open.Add(1)
			for p := s.peak.Load(); n > p && !s.peak.CompareAndSwap(p, n); p = s.peak.Load() {
			}
		case http.StateClosed, http.StateHijacked:
			s.open.Add(-1)
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	return s
}

// TestTransportsShareOneConnectionBudget (issue 20 item 11): with a cap
// of 4 polls in flight, the open connections of every transport together
// stay within one connection in use and one idle per poll (8), however
// many client settings there are. Each of 6 settings in turn polls 4 at
// once: without the shared budget each transport kept its 4 idle
// connections, 24 in all.
func TestTransportsShareOneConnectionBudget(t *testing.T) {
	const (
		maxConns = 4
		settings = 6
	)
	srv := newBarrierServer(t, maxConns)
	dir := t.TempDir()
	var yaml strings.Builder
	yaml.WriteString("sources:\n")
	for g := 0; g < settings; g++ {
		for i := 0; i < maxConns; i++ {
			fmt.Fprintf(&yaml, "  - {name: g%d-%d, type: http, url: %q, tls: {server_name: g%d.example}}\n", g, i, srv.URL+"/", g)
		}
	}
	cfg := loadConfig(t, dir, yaml.String())
	p := newTestTransports(t, maxConns)
	client := NewClient(p, nil)
	pollers := make([]Poller, len(cfg.Sources))
	for i := range cfg.Sources {
		pollers[i] = NewHTTP(cfg.Sources[i], client, nil)
	}
	if want := 1 + settings; p.Len() != want {
		t.Fatalf("%d transports, want %d (the built-in one and one per setting)", p.Len(), want)
	}
	budget := int64(2 * maxConns)
	var peakOpen int64
	for round := 0; round < 2; round++ {
		for g := 0; g < settings; g++ {
			var wg sync.WaitGroup
			errs := make(chan error, maxConns)
			for i := 0; i < maxConns; i++ {
				wg.Go(func() {
					if res, _ := pollWithin(t, pollers[g*maxConns+i], 10*time.Second); res.Err != nil {
						errs <- res.Err
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatalf("setting %d: %v", g, err)
			}
			// The budget, or a little over it: a connection of the
			// previous batch that its transport was still putting back
			// in its pool when this batch shed the idle ones is spared
			// (it goes at the next dial past the budget).
			if n := p.OpenConns(); n > budget+maxConns {
				t.Errorf("round %d, after setting %d: %d connections open in the transports, budget %d (+%d)", round, g, n, budget, maxConns)
			}
			peakOpen = max(peakOpen, p.OpenConns())
		}
	}
	// The server sees a close a moment after the client.
	waitfor.NoError(t, 5*time.Second, "the server's open connections within the budget", func() error {
		if n := srv.open.Load(); n > budget+maxConns {
			return fmt.Errorf("the server has %d connections open, budget %d (+%d)", n, budget, maxConns)
		}
		return nil
	})
	// It also sees the closes of idle connections late, while the next
	// batch dials.
	if pk := srv.peak.Load(); pk > 2*budget {
		t.Errorf("the server saw %d connections open at once, budget %d", pk, budget)
	}
	t.Logf("peak %d connections at the server, %d open at the end; transports: peak %d open after a batch; budget %d",
		srv.peak.Load(), srv.open.Load(), peakOpen, budget)
	p.CloseIdleConnections()
	waitOpen(t, p, 0)
}

// waitOpen waits until p counts want open connections.
func waitOpen(t *testing.T, p *Transports, want int64) {
	t.Helper()
	waitfor.NoError(t, 5*time.Second, "the connections counted open", func() error {
		if n := p.OpenConns(); n != want {
			return fmt.Errorf("%d connections counted open, want %d", n, want)
		}
		return nil
	})
}

// TestTransportsBudgetFollowsResize: the budget is 2 × the cap, also after
// a reload changed the cap; a connection is counted once however often it
// is closed.
func TestTransportsBudgetFollowsResize(t *testing.T) {
	p := newTestTransports(t, 4)
	if got := p.connBudget(); got != 8 {
		t.Errorf("budget %d for cap 4, want 8", got)
	}
	p.Resize(10)
	if got := p.connBudget(); got != 20 {
		t.Errorf("budget %d after Resize(10), want 20", got)
	}
	c1, c2 := net.Pipe()
	defer c2.Close()
	cc := p.budget.count(c1)
	if p.OpenConns() != 1 {
		t.Fatalf("%d open after one dial, want 1", p.OpenConns())
	}
	_ = cc.Close()
	_ = cc.Close()
	if p.OpenConns() != 0 {
		t.Errorf("%d open after closing twice, want 0", p.OpenConns())
	}
}
