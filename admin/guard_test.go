package admin_test

// Tests of the origin and Host checks (contract section 11.4) through a
// real listener on loopback: a web page the operator visits must not be
// able to drive the API, neither with a plain cross-site POST nor through
// DNS rebinding.

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/scheduler/policy"
)

// doWith sends a request with extra headers; host, when not "", replaces
// the Host header (the connection still goes to the test server).
func (f *fixture) doWith(method, path, host string, hdr map[string][]string, body string) answer {
	f.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, f.srv.URL+path, rd)
	if err != nil {
		f.t.Fatalf("%s %s: %v", method, path, err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	for k, vs := range hdr {
		req.Header[k] = vs
	}
	if host != "" {
		req.Host = host
	}
	resp, err := f.srv.Client().Do(req)
	if err != nil {
		f.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		f.t.Fatalf("%s %s: read: %v", method, path, err)
	}
	return answer{code: resp.StatusCode, header: resp.Header, body: data}
}

// hostPort is the test server's host:port, as a browser addressing it by
// IP would send it in Host.
func (f *fixture) hostPort() string {
	u, err := url.Parse(f.srv.URL)
	if err != nil {
		f.t.Fatal(err)
	}
	return u.Host
}

func (f *fixture) port() string {
	u, err := url.Parse(f.srv.URL)
	if err != nil {
		f.t.Fatal(err)
	}
	return u.Port()
}

// actions are the POST endpoints, each with a body it accepts.
var actions = []struct{ action, body string }{
	{"reset", ""}, {"trigger", ""}, {"pause", `{"reason": "hijack"}`}, {"resume", ""},
}

// A POST whose Origin is present and is not the listener's own gets 403
// JSON and changes nothing (daemon, store, upstream), even with the right
// token: the scheme, the host or the port differing, "null", a second
// Origin value, an empty one.
func TestCrossOriginPostRefused(t *testing.T) {
	f := newFixture(t)
	f.prepare()
	polls := f.upstreamCount()
	before := f.snapshot()
	own := "http://" + f.hostPort()
	origins := []struct {
		name   string
		values []string
	}{
		{"another site", []string{"http://evil.example"}},
		{"another site, same port", []string{"http://evil.example:" + f.port()}},
		{"null (sandboxed frame, redirect)", []string{"null"}},
		{"another port", []string{"http://127.0.0.1:1"}},
		{"another scheme", []string{"https://" + f.hostPort()}},
		{"localhost for 127.0.0.1 (another origin)", []string{"http://localhost:" + f.port()}},
		{"own origin with a path", []string{own + "/"}},
		{"own origin and a foreign one", []string{own, "http://evil.example"}},
		{"empty", []string{""}},
	}
	for _, src := range []string{"fail", "idle", "envx"} {
		for _, ac := range actions {
			for _, o := range origins {
				what := fmt.Sprintf("POST %s/%s, Origin %s", src, ac.action, o.name)
				a := f.doWith(http.MethodPost, "/api/sources/"+src+"/"+ac.action, "", map[string][]string{"Origin": o.values}, ac.body)
				jsonError(t, what, a, http.StatusForbidden)
			}
		}
	}
	holdsFor(t, 300*time.Millisecond, "cross-origin requests must change nothing", func() error {
		if n := f.upstreamCount(); n != polls {
			return fmt.Errorf("the upstream saw %d new request(s)", n-polls)
		}
		return before.diff(f.snapshot())
	})
	// GETs are not refused for their Origin: the browser keeps their
	// answers from the page (no CORS headers).
	if a := f.doWith(http.MethodGet, "/api/sources", "", map[string][]string{"Origin": {"http://evil.example"}}, ""); a.code != http.StatusOK {
		t.Errorf("GET with a foreign Origin: %s, want 200", a)
	}
}

// A same-origin POST (the page served by this listener, addressed by IP or
// by localhost) and one without Origin (curl, the CLI, scripts) are served.
func TestSameOriginAndNoOriginPostAccepted(t *testing.T) {
	f := newFixture(t)
	cases := []struct {
		name, host, origin, action string
		want                       string
	}{
		{"same origin by IP", "", "http://" + f.hostPort(), "pause", policy.StatePaused},
		{"no Origin", "", "", "resume", policy.StatePending},
		{"same origin by localhost", "localhost:" + f.port(), "http://localhost:" + f.port(), "pause", policy.StatePaused},
		{"same origin, host in capitals", "LOCALHOST:" + f.port(), "http://localhost:" + f.port(), "resume", policy.StatePending},
	}
	for _, c := range cases {
		hdr := map[string][]string{}
		if c.origin != "" {
			hdr["Origin"] = []string{c.origin}
		}
		a := f.doWith(http.MethodPost, "/api/sources/idle/"+c.action, c.host, hdr, "")
		if a.code != http.StatusOK {
			t.Errorf("%s: POST %s: %s, want 200", c.name, c.action, a)
		}
		if o := f.source("idle"); o.State != c.want {
			t.Errorf("%s: after POST %s idle is %q, want %q", c.name, c.action, o.State, c.want)
		}
	}
}

// On a loopback listener a request whose Host is neither an IP address nor
// localhost gets 403 JSON, GET and POST alike, and changes nothing (DNS
// rebinding: evil.example resolved to 127.0.0.1 makes the page
// same-origin with it).
func TestRebindingHostRefused(t *testing.T) {
	f := newFixture(t)
	f.prepare()
	polls := f.upstreamCount()
	before := f.snapshot()
	hosts := []string{
		"evil.example",
		"evil.example:" + f.port(),
		"localhost.evil.example:" + f.port(),
		"127.0.0.1.nip.io:" + f.port(),
		"localhostx:" + f.port(),
		"[::1].evil.example",
	}
	for _, h := range hosts {
		for _, r := range routes {
			body := ""
			if strings.HasSuffix(r.path, "/pause") {
				body = `{"reason": "hijack"}`
			}
			// The page is same-origin with the name it was loaded from.
			hdr := map[string][]string{"Origin": {"http://" + h}}
			a := f.doWith(r.method, r.path, h, hdr, body)
			jsonError(t, fmt.Sprintf("%s %s, Host %s", r.method, r.path, h), a, http.StatusForbidden)
			if r.method == http.MethodGet {
				a := f.doWith(r.method, r.path, h, nil, "")
				jsonError(t, fmt.Sprintf("%s %s, Host %s, no Origin", r.method, r.path, h), a, http.StatusForbidden)
			}
		}
	}
	holdsFor(t, 300*time.Millisecond, "requests with a foreign Host must change nothing", func() error {
		if n := f.upstreamCount(); n != polls {
			return fmt.Errorf("the upstream saw %d new request(s)", n-polls)
		}
		return before.diff(f.snapshot())
	})
}

// On a loopback listener, Hosts that are IP addresses or localhost (with
// or without a port) are served.
func TestIPAndLocalhostHostAccepted(t *testing.T) {
	f := newFixture(t)
	p := f.port()
	for _, h := range []string{"127.0.0.1:" + p, "127.0.0.1", "localhost:" + p, "localhost", "Localhost:" + p,
		"[::1]:" + p, "[::1]", "10.1.2.3:" + p, "[2001:db8::1]:" + p} {
		for _, path := range []string{"/healthz", "/api/sources", "/api/sources/idle"} {
			if a := f.doWith(http.MethodGet, path, h, nil, ""); a.code != http.StatusOK {
				t.Errorf("GET %s, Host %s: %s, want 200", path, h, a)
			}
		}
	}
}

// An HTTP/1.0 request without a Host header (what some health checkers
// send) is no browser's and is served on loopback too.
func TestNoHostHeaderAccepted(t *testing.T) {
	f := newFixture(t)
	conn, err := net.Dial("tcp", f.hostPort())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET /healthz HTTP/1.0\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		t.Errorf("GET /healthz over HTTP/1.0 without Host: %d %s, want 200", resp.StatusCode, body)
	}
}

// A POST without Origin whose Referer is another origin's page (a browser
// that sends no Origin, a form posted from another site) gets 403 JSON
// and changes nothing; one whose Referer is a page of this listener is
// served, and Origin, when present, decides alone.
func TestForeignRefererWithoutOriginRefused(t *testing.T) {
	f := newFixture(t)
	f.prepare()
	polls := f.upstreamCount()
	before := f.snapshot()
	own := "http://" + f.hostPort()
	foreign := []string{"http://evil.example/page", "http://evil.example:" + f.port() + "/", "https://" + f.hostPort() + "/",
		"http://127.0.0.1:1/x", "http://localhost:" + f.port() + "/", "not a url", "/relative/page", "//" + f.hostPort() + "/", "null"}
	for _, ref := range foreign {
		for _, ac := range actions {
			what := fmt.Sprintf("POST fail/%s, Referer %q", ac.action, ref)
			a := f.doWith(http.MethodPost, "/api/sources/fail/"+ac.action, "", map[string][]string{"Referer": {ref}}, ac.body)
			jsonError(t, what, a, http.StatusForbidden)
		}
	}
	holdsFor(t, 300*time.Millisecond, "foreign-Referer requests must change nothing", func() error {
		if n := f.upstreamCount(); n != polls {
			return fmt.Errorf("the upstream saw %d new request(s)", n-polls)
		}
		return before.diff(f.snapshot())
	})
	// Origin decides when present (own Origin, foreign Referer); a page of
	// this listener as Referer passes.
	served := map[string]map[string][]string{}
	for _, ref := range foreign {
		served["own Origin, Referer "+ref] = map[string][]string{"Origin": {own}, "Referer": {ref}}
	}
	for _, ref := range []string{own + "/", own + "/sources/fail?x=1", strings.ToUpper(own) + "/"} {
		served["Referer "+ref] = map[string][]string{"Referer": {ref}}
	}
	for what, hdr := range served {
		if a := f.doWith(http.MethodPost, "/api/sources/idle/pause", "", hdr, `{"reason": "r"}`); a.code != http.StatusOK {
			t.Errorf("POST with %s: %s, want 200", what, a)
		}
	}
}
