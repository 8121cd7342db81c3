package config

import (
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// closedURL returns http://127.0.0.1:PORT for a port nothing listens on.
func closedURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

// getError returns the error text of a GET of u (which must fail).
func getError(t *testing.T, u string) string {
	t.Helper()
	resp, err := http.Get(u)
	if err == nil {
		resp.Body.Close()
		t.Fatalf("GET %s succeeded", u)
	}
	return err.Error()
}

// TestRedactWhereSubstituted: with SEKRET=x, only the x that was
// substituted is masked, not every "x" (issue 10 item 8: "/x" in a path
// showed as "/***"), also in a transport error quoting the URL.
func TestRedactWhereSubstituted(t *testing.T) {
	base := closedURL(t)
	cfg := mustLoad(t, `
sources:
  - name: x
    type: http
    url: "`+base+`/x?key=${SEKRET}"
    headers: {X-Key: "${SEKRET}"}
    body: "x=${SEKRET}&y=x&z=1"
  - name: p
    type: http
    url: "`+base+`/p/${P}/x"
`, map[string]string{"SEKRET": "x", "P": "é-ü"})
	r := cfg.Redactor()
	src := mustSource(t, cfg, "x")
	cases := []struct{ in, want string }{
		{"GET " + src.URL + ": 502 Bad Gateway", "GET " + base + "/x?key=***: 502 Bad Gateway"},
		{"open /x: no such file; sources[name=x] x", "open /x: no such file; sources[name=x] x"},
		{"x=x&y=x&z=1", "x=***&y=x&z=1"},
		{"x=x&y=x", "x=x&y=x"},     // shorter than MinSecretLen: not a rule
		{getError(t, src.URL), ""}, // filled in below
		{url.QueryEscape(src.URL), url.QueryEscape(base+"/x?key=") + "***"},
		{"body " + quoteInner(src.Body), "body x=***&y=x&z=1"},
	}
	cases[4].want = strings.Replace(cases[4].in, "key=x", "key=***", 1)
	if !strings.Contains(cases[4].in, `"`+src.URL+`"`) {
		t.Fatalf("transport error %q does not quote the URL", cases[4].in)
	}
	for _, c := range cases {
		if got := r.Redact(c.in); got != c.want {
			t.Errorf("Redact(%q)\n = %q\nwant %q", c.in, got, c.want)
		}
	}
	// A secret in the path, which net/url writes escaped (%C3%A9).
	p := mustSource(t, cfg, "p")
	u, err := url.Parse(p.URL)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(u.String(), "%C3%A9") {
		t.Fatalf("u.String() = %q is not escaped", u.String())
	}
	for _, in := range []string{p.URL, u.String(), getError(t, p.URL)} {
		got := r.Redact(in)
		if strings.Contains(got, "é") || strings.Contains(got, "%C3%A9") || !strings.Contains(got, "/p/***/x") {
			t.Errorf("Redact(%q) = %q", in, got)
		}
	}
	// Problems too: the path of source x is not masked.
	ps := mustFail(t, `
sources:
  - {name: x, type: http, url: "ftp://h/x", headers: {K: "${SEKRET}"}}
`, map[string]string{"SEKRET": "x"})
	if len(ps) != 1 || ps[0].String() != `sources[name=x].url: invalid URL: unsupported scheme "ftp": must be http or https` {
		t.Errorf("problems: %v", ps)
	}
}

// TestRedactLongSecretAnywhere: a secret of MinSecretLen bytes or more is
// masked wherever it appears (a command echoing it), raw and escaped.
func TestRedactLongSecretAnywhere(t *testing.T) {
	const secret = "s3cr3t/v+lue&x"
	base := closedURL(t)
	cfg := mustLoad(t, `
sources:
  - name: q
    type: http
    url: "`+base+`/q?key=${K}"
`, map[string]string{"K": secret})
	r := cfg.Redactor()
	for _, in := range []string{
		"exit status 1: " + secret,
		"redirect to /next?k=" + url.QueryEscape(secret),
		"path /a/" + url.PathEscape(secret) + "/b",
		getError(t, mustSource(t, cfg, "q").URL),
	} {
		got := r.Redact(in)
		if strings.Contains(got, "s3cr3t") || !strings.Contains(got, "***") {
			t.Errorf("Redact(%q) = %q", in, got)
		}
	}
}

// TestURLUserinfoPasswordIsSecret: the password of a URL's user info is a
// secret like a ${VAR} value (issue 10 item 7), and so is that of a
// PostgreSQL store URL (one mechanism).
func TestURLUserinfoPasswordIsSecret(t *testing.T) {
	base := closedURL(t)
	withUser := strings.Replace(base, "http://", "http://alice:hunter2@", 1)
	cfg := mustLoad(t, `
store: "postgres://pacer:pw@db.internal/pacer"
sources:
  - {name: a, type: http, url: "`+withUser+`/status"}
  - {name: b, type: http, url: "http://bob:p%40ss%2Fw0rd-long@example.com/"}
`, nil)
	r := cfg.Redactor()
	a := mustSource(t, cfg, "a")
	for _, want := range []string{"hunter2", "pw", "p@ss/w0rd-long", "p%40ss%2Fw0rd-long"} {
		if !containsString(cfg.Secrets, want) {
			t.Errorf("Secrets %q lacks %q", cfg.Secrets, want)
		}
	}
	cases := []struct{ in, want string }{
		{"GET " + a.URL + ": 502", "GET " + strings.Replace(base, "http://", "http://alice:***@", 1) + "/status: 502"},
		{"open store " + cfg.Store + ": refused", "open store postgres://pacer:***@db.internal/pacer: refused"},
		{"pw and hunter2 elsewhere", "pw and hunter2 elsewhere"}, // short: masked only where substituted
		{"GET http://bob:p%40ss%2Fw0rd-long@example.com/", "GET http://bob:***@example.com/"},
		{"the password p@ss/w0rd-long", "the password ***"},
	}
	for _, c := range cases {
		if got := r.Redact(c.in); got != c.want {
			t.Errorf("Redact(%q)\n = %q\nwant %q", c.in, got, c.want)
		}
	}
	if got := r.Redact(getError(t, a.URL)); strings.Contains(got, "hunter2") {
		t.Errorf("transport error shows the password: %q", got)
	}
	// Without a password there is nothing to hide.
	cfg = mustLoad(t, "sources:\n  - {name: a, type: http, url: \"http://alice@example.com/\"}\n", nil)
	if len(cfg.Secrets) != 0 {
		t.Errorf("Secrets = %q", cfg.Secrets)
	}
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestAddSpan merges secret ranges.
func TestAddSpan(t *testing.T) {
	var sp [][2]int
	for _, r := range [][2]int{{5, 7}, {1, 2}, {2, 3}, {9, 9}, {6, 10}, {12, 13}} {
		sp = addSpan(sp, r[0], r[1])
	}
	want := [][2]int{{1, 3}, {5, 10}, {12, 13}}
	if len(sp) != len(want) {
		t.Fatalf("got %v, want %v", sp, want)
	}
	for i := range want {
		if sp[i] != want[i] {
			t.Fatalf("got %v, want %v", sp, want)
		}
	}
}
