package e2e

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// originDo sends a request to the daemon with the given Host ("" = the
// address itself) and Origin ("" = none) headers.
func originDo(t testing.TB, d *daemon, method, path, host, origin, body string) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, "http://"+d.in.addr+path, rd)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	if host != "" {
		req.Host = host
	}
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	resp, err := apiClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read: %v", method, path, err)
	}
	return resp.StatusCode, data
}

// Section 11.4, against the real binary on its default kind of listener
// (loopback): a POST with a foreign Origin ("null" included) gets 403 JSON
// and changes nothing; so does any request whose Host is a name other than
// localhost (DNS rebinding), GET included. A same-origin POST, one without
// Origin (curl, scripts) and Hosts that are IP addresses or localhost are
// served.
func TestSecurityOriginAndHost(t *testing.T) {
	t.Parallel()
	u := newUpstream(t)
	in := newInst(t)
	in.writeConfig(`sources:
  - {name: s, type: http, url: "` + u.URL("/s") + `", schedule: "0 0 1 1 *"}
`)
	d := in.start()
	_, port, err := net.SplitHostPort(in.addr)
	if err != nil {
		t.Fatal(err)
	}
	own := "http://" + in.addr
	before := d.source("s")
	if before.State != "pending" {
		t.Fatalf("s: %s, want pending", before)
	}

	refused := []struct{ name, method, path, host, origin string }{
		{"cross-site POST", http.MethodPost, "/api/sources/s/pause", "", "http://evil.example"},
		{"null Origin", http.MethodPost, "/api/sources/s/pause", "", "null"},
		{"another port", http.MethodPost, "/api/sources/s/trigger", "", "http://127.0.0.1:1"},
		{"localhost page against 127.0.0.1", http.MethodPost, "/api/sources/s/pause", "", "http://localhost:" + port},
		{"rebinding POST", http.MethodPost, "/api/sources/s/pause", "evil.example:" + port, "http://evil.example:" + port},
		{"rebinding GET", http.MethodGet, "/api/sources", "evil.example:" + port, ""},
		{"rebinding GET metrics", http.MethodGet, "/metrics", "evil.example", ""},
	}
	for _, c := range refused {
		code, body := originDo(t, d, c.method, c.path, c.host, c.origin, `{"reason": "hijack"}`)
		if code != http.StatusForbidden || !isJSONError(body) {
			t.Errorf("%s: %s %s (Host %q, Origin %q): got %d %s, want 403 JSON", c.name, c.method, c.path, c.host, c.origin, code, body)
		}
	}
	never(t, 500*time.Millisecond, "refused requests must change nothing", func() error {
		if o := d.source("s"); o.State != "pending" || o.PausedReason != "" || o.PollsTotal != 0 {
			return errf("s changed: %s", o)
		}
		if n := u.Count("/s"); n != 0 {
			return errf("the upstream was called %d time(s)", n)
		}
		return nil
	})

	served := []struct {
		name, method, path, host, origin, want string
	}{
		{"same-origin POST", http.MethodPost, "/api/sources/s/pause", "", own, "paused"},
		{"POST without Origin", http.MethodPost, "/api/sources/s/resume", "", "", "pending"},
		{"same-origin POST by localhost", http.MethodPost, "/api/sources/s/pause", "localhost:" + port, "http://localhost:" + port, "paused"},
		{"GET by IPv6 loopback Host", http.MethodGet, "/api/sources/s", "[::1]:" + port, "", "paused"},
		{"GET by localhost", http.MethodGet, "/api/sources/s", "localhost", "", "paused"},
	}
	for _, c := range served {
		code, body := originDo(t, d, c.method, c.path, c.host, c.origin, "")
		if code != http.StatusOK {
			t.Errorf("%s: got %d %s, want 200", c.name, code, body)
		}
		if o := d.source("s"); o.State != c.want {
			t.Errorf("%s: s is %s, want %s", c.name, o, c.want)
		}
	}
	// The CLI is no browser: it keeps working.
	in.mustCLI("resume", "s")
	eventually(t, 3*time.Second, "s resumed by the CLI", func() error {
		if o := d.source("s"); o.State != "pending" {
			return fmt.Errorf("s: %s", o)
		}
		return nil
	})
}
