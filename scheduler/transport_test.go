package scheduler

import (
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestTransportPerSettings: under the scheduler, two sources with equal
// client settings poll over one connection; a reload after the CA file's
// contents changed (same path) gives them a new transport, and the old one
// is closed and dropped.
func TestTransportPerSettings(t *testing.T) {
	var newConns, closed atomic.Int64
	var mu sync.Mutex
	polls := map[string]int{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		polls[r.URL.Path]++
		mu.Unlock()
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			newConns.Add(1)
		case http.StateClosed:
			closed.Add(1)
		}
	}
	srv.StartTLS()
	defer srv.Close()
	dir := t.TempDir()
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	caPath := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caPath, caPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	body := fmt.Sprintf(`concurrency: 1
defaults: {schedule: "@every 100ms", tls: {ca_file: ca.pem}}
sources:
  - {name: a, type: http, url: "%[1]s/a"}
  - {name: b, type: http, url: "%[1]s/b"}
`, srv.URL)
	h := start(t, dir, writeConfig(t, dir, body))
	defer h.stop()
	pollsAtLeast := func(n int) func() bool {
		return func() bool {
			mu.Lock()
			defer mu.Unlock()
			return polls["/a"] >= n && polls["/b"] >= n
		}
	}
	h.waitFor("3 polls of a and b", 20*time.Second, pollsAtLeast(3))
	if n, l := newConns.Load(), h.s.deps.transport.Len(); n != 1 || l != 2 {
		t.Errorf("a and b opened %d connections (want 1) over %d transports (want 2: built-in, theirs)", n, l)
	}
	if e := h.source("a").LastError; e != "" {
		t.Fatalf("a: %s", e)
	}

	// Same path, new contents: another CA in the bundle.
	other, err := os.ReadFile("../testdata/config/client/ca.pem")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(caPath, append(caPEM, other...), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := h.s.Reload(t.Context(), writeConfig(t, dir, body)); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	next := max(polls["/a"], polls["/b"]) + 3
	mu.Unlock()
	h.waitFor("3 more polls of a and b", 20*time.Second, pollsAtLeast(next))
	if n := newConns.Load(); n != 2 {
		t.Errorf("after the reload: %d connections, want 2 (one over the new transport)", n)
	}
	h.waitFor("the old transport dropped and its connection closed", 20*time.Second, func() bool {
		runtime.GC()
		return h.s.deps.transport.Len() == 2 && closed.Load() >= 1
	})
	if e := h.source("b").LastError; e != "" {
		t.Errorf("b: %s", e)
	}
}
