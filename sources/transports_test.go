package sources

import (
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/config"
)

// countingTLSServer starts a TLS server of ca that counts the connections
// made to it.
func countingTLSServer(t *testing.T, ca *testCA, conns *atomic.Int64) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(okHandler))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{ca.serverCert(t, leaf{cn: "api", dns: []string{"api.internal"}, ips: loopback()})}}
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

// sharedYAML has two sources with equal client settings (a, b) and one
// with other settings (c).
const sharedYAML = `
sources:
  - {name: a, type: http, url: "%[1]s/a", tls: {ca_file: ca.pem}}
  - {name: b, type: http, url: "%[1]s/b", tls: {ca_file: ca.pem}}
  - {name: c, type: http, url: "%[1]s/c", tls: {ca_file: ca.pem}, http2: false}
`

// TestTransportsShared: sources with equal settings share one transport
// and so one connection, also across a reload (a new Config with new
// *Client values); other settings get their own transport.
func TestTransportsShared(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, "CA")
	writeTestFile(t, dir, "ca.pem", ca.pem)
	var conns atomic.Int64
	srv := countingTLSServer(t, ca, &conns)
	p := newTestTransports(t, 4)
	client := NewClient(p, nil)
	pollers := func(cfg *config.Config) map[string]Poller {
		m := map[string]Poller{}
		for i := range cfg.Sources {
			m[cfg.Sources[i].Name] = NewHTTP(cfg.Sources[i], client, nil)
		}
		return m
	}
	poll := func(ps map[string]Poller, name string) {
		t.Helper()
		if res, _ := pollWithin(t, ps[name], 10*time.Second); res.Err != nil {
			t.Fatalf("%s: %v", name, res.Err)
		}
	}
	first := pollers(loadConfig(t, dir, strings.ReplaceAll(sharedYAML, "%[1]s", srv.URL)))
	for _, name := range []string{"a", "b", "a", "b"} {
		poll(first, name)
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("sequential polls of a and b opened %d connections, want 1", n)
	}
	poll(first, "c")
	if n, l := conns.Load(), p.Len(); n != 2 || l != 3 {
		t.Errorf("after c: %d connections (want 2), %d transports (want 3: built-in, a+b, c)", n, l)
	}
	reloaded := pollers(loadConfig(t, dir, strings.ReplaceAll(sharedYAML, "%[1]s", srv.URL)))
	poll(reloaded, "b")
	poll(reloaded, "c")
	if n, l := conns.Load(), p.Len(); n != 2 || l != 3 {
		t.Errorf("after a reload: %d connections (want 2), %d transports (want 3)", n, l)
	}
	runtime.KeepAlive(first)
}

// TestTransportsDropUnused: a transport lives while a poller holds it and
// is dropped once none does; the built-in one stays.
func TestTransportsDropUnused(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, "CA")
	writeTestFile(t, dir, "ca.pem", ca.pem)
	cfg := loadConfig(t, dir, strings.ReplaceAll(sharedYAML, "%[1]s", "https://127.0.0.1:1"))
	p := newTestTransports(t, 1)
	func() {
		client := NewClient(p, nil)
		var ps []Poller
		for i := range cfg.Sources {
			ps = append(ps, NewHTTP(cfg.Sources[i], client, nil))
		}
		runtime.GC()
		runtime.GC()
		if l := p.Len(); l != 3 {
			t.Errorf("%d transports while every poller lives, want 3", l)
		}
		runtime.KeepAlive(ps)
	}()
	eventually(t, 10*time.Second, "unused transports dropped", func() bool {
		runtime.GC()
		return p.Len() == 1
	})
}

// TestTransportsResize: Resize resizes every transport, the built-in one
// and the shared ones, and the pollers keep working over the new ones.
func TestTransportsResize(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, "CA")
	writeTestFile(t, dir, "ca.pem", ca.pem)
	var conns atomic.Int64
	srv := countingTLSServer(t, ca, &conns)
	cfg := loadConfig(t, dir, strings.ReplaceAll(sharedYAML, "%[1]s", srv.URL))
	p := newTestTransports(t, 2)
	poller := NewHTTP(cfg.Sources[0], NewClient(p, nil), nil)
	sizes := func() []int {
		p.mu.Lock()
		defer p.mu.Unlock()
		out := []int{p.def.cur.Load().MaxConnsPerHost}
		for _, sl := range p.byKey {
			out = append(out, sl.cur.Load().MaxConnsPerHost)
		}
		return out
	}
	p.Resize(5)
	if got := sizes(); len(got) != 2 || got[0] != 5 || got[1] != 5 {
		t.Errorf("sizes after Resize(5): %v", got)
	}
	if res, _ := pollWithin(t, poller, 10*time.Second); res.Err != nil {
		t.Fatalf("poll after Resize: %v", res.Err)
	}
}

// TestClientSettingsNeedTransports: over a plain transport, a source with
// client settings fails rather than polling without them; a hand-built
// Client with a missing file fails its polls with that error.
func TestClientSettingsNeedTransports(t *testing.T) {
	src := httpSource("https://127.0.0.1:1/")
	src.Client = &config.Client{TLS: config.TLS{ServerName: "api.internal"}}
	res, _ := pollWithin(t, NewHTTP(src, newTestClient(t, 1), nil), 5*time.Second)
	if !errors.Is(res.Err, errNoTransports) {
		t.Errorf("over a plain transport: %v", res.Err)
	}
	src.Client = &config.Client{TLS: config.TLS{CAFile: "/nonexistent/ca.pem"}}
	res, _ = pollWithin(t, NewHTTP(src, NewClient(newTestTransports(t, 1), nil), nil), 5*time.Second)
	if e := errText(res.Err); !strings.Contains(e, "client settings: tls.ca_file: cannot read /nonexistent/ca.pem") {
		t.Errorf("bad hand-built settings: %s", e)
	}
}
