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

// TestSecurityTokenFormRateLimited (section 11.4): one client hammering
// the page's token form with wrong tokens for 3 s has at most 5 of them
// compared, plus one per 2 s; the rest get 429. The log says so at most
// once a second, with counts, instead of a line per guess.
func TestSecurityTokenFormRateLimited(t *testing.T) {
	t.Parallel()
	in := newInst(t)
	writeFile(t, filepath.Join(in.dir, "token"), "tok-ratelimit-0123456789\n")
	in.admin = "  token_file: token\n"
	in.writeConfig("sources:\n  - {name: s, type: exec, command: [\"true\"], schedule: \"0 0 1 1 *\"}\n")
	d := in.start()
	logBefore := len(d.logs())
	own := "http://" + in.addr
	codes := map[int]int{}
	start := time.Now()
	for time.Since(start) < 3*time.Second {
		req, err := http.NewRequest(http.MethodPost, own+"/dash/login", strings.NewReader("token=wrong"))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", own)
		resp, err := apiClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		codes[resp.StatusCode]++
	}
	elapsed := time.Since(start)
	total := codes[http.StatusUnauthorized] + codes[http.StatusTooManyRequests]
	if allowed := 5 + int(elapsed/(2*time.Second)) + 1; codes[http.StatusUnauthorized] > allowed {
		t.Errorf("%d wrong tokens compared in %v, want at most %d (answers %v)", codes[http.StatusUnauthorized], elapsed, allowed, codes)
	}
	if codes[http.StatusTooManyRequests] == 0 || len(codes) != 2 {
		t.Errorf("answers %v: want 401s then 429s only", codes)
	}
	lines := strings.Count(d.logs()[logBefore:], "wrong token entered")
	if maxLines := int(elapsed/time.Second) + 2; lines > maxLines {
		t.Errorf("%d log lines about wrong tokens in %v, want at most %d", lines, elapsed, maxLines)
	}
	t.Logf("%d attempts in %v (%.0f/s): %v; %d log lines, %d log bytes", total, elapsed, float64(total)/elapsed.Seconds(), codes, lines, len(d.logs())-logBefore)
}

// TestSecurityForeignRefererWithoutOrigin (section 11.4): a POST without
// Origin whose Referer is another site's page gets 403 and changes
// nothing, on the JSON API and on the page's actions; with the page's own
// Referer it is served.
func TestSecurityForeignRefererWithoutOrigin(t *testing.T) {
	t.Parallel()
	in := newInst(t)
	in.writeConfig("sources:\n  - {name: s, type: exec, command: [\"true\"], schedule: \"0 0 1 1 *\"}\n")
	d := in.start()
	own := "http://" + in.addr
	post := func(path, referer, ctype, body string) int {
		req, err := http.NewRequest(http.MethodPost, own+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", ctype)
		req.Header.Set("Referer", referer)
		resp, err := (&http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		}}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, ref := range []string{"http://evil.example/page", "https://" + in.addr + "/", "null"} {
		if code := post("/api/sources/s/pause", ref, "application/json", `{"reason": "hijack"}`); code != http.StatusForbidden {
			t.Errorf("API pause with Referer %q: %d, want 403", ref, code)
		}
		if code := post("/sources/s/pause", ref, "application/x-www-form-urlencoded", "reason=hijack"); code != http.StatusForbidden {
			t.Errorf("page pause with Referer %q: %d, want 403", ref, code)
		}
	}
	if o := d.source("s"); o.State == "paused" {
		t.Fatalf("a foreign Referer paused s: %s", o)
	}
	if code := post("/sources/s/pause", own+"/sources/s", "application/x-www-form-urlencoded", "reason=ok"); code != http.StatusSeeOther {
		t.Errorf("page pause with its own Referer: %d, want 303", code)
	}
	if o := d.source("s"); o.State != "paused" {
		t.Errorf("s after the page's own pause: %s", o)
	}
}
