package e2e

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSecurityRedirectToAdminPortWithLeadingZeros (contract 12.4): an
// upstream redirecting a poll to the admin listener with its port written
// with leading zeros (":0P", ":00P", which the dialer reads as P) fails the
// poll with the refusal, and nothing of the admin API reaches the
// delivered file: to 127.0.0.1, to localhost (/metrics), to [::1], and a
// HEAD redirected by a 307.
func TestSecurityRedirectToAdminPortWithLeadingZeros(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, host, path, method string
		code                     int
	}{
		{"127.0.0.1 :0P", "127.0.0.1", "/api/sources", "GET", http.StatusFound},
		{"localhost :00P metrics", "localhost", "/metrics", "GET", http.StatusFound},
		{"[::1] :0P", "[::1]", "/api/sources", "GET", http.StatusFound},
		{"HEAD 307", "127.0.0.1", "/api/sources", "HEAD", http.StatusTemporaryRedirect},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			in := newInst(t)
			_, port, _ := net.SplitHostPort(in.addr)
			zeros := "0"
			if c.host == "localhost" {
				zeros = "00"
			}
			if c.host == "[::1]" {
				in.addr = "[::1]:" + port // the admin listens where the redirect leads
			}
			to := fmt.Sprintf("http://%s:%s%s%s", c.host, zeros, port, c.path)
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, to, c.code)
			}))
			t.Cleanup(up.Close)
			in.writeConfig(`sources:
  - {name: r, type: http, method: ` + c.method + `, url: "` + up.URL + `/doc", schedule: "@every 300ms", deliver: {file: out.txt}}
`)
			d := in.start()
			var last sourceObj
			eventually(t, 20*time.Second, "a failed poll refusing the redirect", func() error {
				last = d.source("r")
				if !strings.Contains(last.LastError, "redirect to the admin listener refused") {
					return fmt.Errorf("source %s", last)
				}
				return nil
			})
			if last.LastSuccessAt != nil {
				t.Errorf("a poll redirected to %s succeeded: %s", to, last)
			}
			if data, err := os.ReadFile(filepath.Join(in.dir, "out.txt")); err == nil {
				t.Errorf("the redirect to %s delivered %d bytes: %.200s", to, len(data), data)
			}
			d.stop(10 * time.Second)
		})
	}
}

// TestSecurityEncodedSecretInUpstreamAnswer (rule 3.12): an upstream
// quoting a header's secret back in its status line, percent-encoded in
// lowercase or JSON-escaped, has it shown as *** in last_error, the
// error_reason, the history, `pacer history`, the source page and the log.
func TestSecurityEncodedSecretInUpstreamAnswer(t *testing.T) {
	t.Parallel()
	const secret = "k+y/8=Z!"
	quoted := map[string]string{
		"lower": "k%2by%2f8%3dZ%21",
		"json":  `\u006b\u002b\u0079\u002f\u0038\u003d\u005a\u0021`,
	}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		fmt.Fprintf(conn, "HTTP/1.1 400 bad key <%s>\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", quoted[strings.TrimPrefix(r.URL.Path, "/")])
	}))
	t.Cleanup(up.Close)
	in := newInst(t)
	in.env = []string{"SEK8=" + secret}
	in.writeConfig(`log: {level: debug}
sources:
  - {name: lower, type: http, url: "` + up.URL + `/lower", headers: {X-Key: "${SEK8}"}, schedule: "@every 300ms", error_after: 2}
  - {name: json, type: http, url: "` + up.URL + `/json", headers: {X-Key: "${SEK8}"}, schedule: "@every 300ms", error_after: 2}
`)
	d := in.start()
	shows := func(what, text string) {
		t.Helper()
		for _, s := range []string{secret, quoted["lower"], quoted["json"], strings.ToUpper(quoted["lower"]), strings.ReplaceAll(quoted["json"], `\`, `\\`), `\u006b`} {
			if strings.Contains(text, s) {
				t.Errorf("%s shows the secret as %q:\n%s", what, s, text)
			}
		}
	}
	for name := range quoted {
		var o sourceObj
		eventually(t, 20*time.Second, name+" in error", func() error {
			if o = d.source(name); o.State != "error" {
				return fmt.Errorf("%s", o)
			}
			return nil
		})
		if !strings.Contains(o.LastError, "400 bad key <***>") {
			t.Errorf("%s: last_error %q, want 400 bad key <***>", name, o.LastError)
		}
		shows(name+": the API's source", o.String())
		recs := d.history(name, 10)
		if len(recs) == 0 {
			t.Fatalf("%s: no history", name)
		}
		for _, r := range recs {
			shows(name+": a history record", r.Error)
		}
		r := in.cli("history", name)
		shows("pacer history "+name, r.stdout+r.stderr)
		code, page := d.do(http.MethodGet, "/sources/"+name, "", "")
		if code != http.StatusOK || !strings.Contains(string(page), "bad key") {
			t.Errorf("%s: the source page (%d) does not show the error:\n%.500s", name, code, page)
		}
		shows(name+": the source page", string(page))
	}
	d.stop(10 * time.Second)
	logs := d.logs() + d.stdout.String()
	if !strings.Contains(logs, "bad key") {
		t.Errorf("the log does not quote the error:\n%s", logs)
	}
	shows("the log", logs)
}
