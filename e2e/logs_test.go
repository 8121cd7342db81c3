package e2e

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// secretValue comes from ${PACER_E2E_KEY}; it has characters that URL
// escaping changes. Every secret of the test contains "MARKER", which must
// appear nowhere.
const (
	secretValue   = "b64+MARKER/e2e="
	literalHeader = "hdr-MARKER-literal"
	adminToken    = "tok-MARKER-admin"
	marker        = "MARKER"
)

// Rule 3.12: secrets never appear in logs, status, history, validate output
// or the API; state changes are logged with source, from, to and reason.
func TestSecretsNeverShown(t *testing.T) {
	t.Parallel()
	u := newUpstream(t)
	in := newInst(t)
	in.env = []string{"PACER_E2E_KEY=" + secretValue}
	writeFile(t, filepath.Join(in.dir, "token.txt"), "\n  "+adminToken+"  \n")
	in.admin = "  token_file: token.txt\n"
	u.Set("/sec", behavior{Status: 502})
	in.writeConfig(`concurrency: 4
shutdown_timeout: 2s
log:
  level: debug
sources:
  - name: sec
    type: http
    url: "` + u.URL("/sec") + `?key=${PACER_E2E_KEY}"
    headers: {X-Api-Key: "${PACER_E2E_KEY}", X-Static: "` + literalHeader + `"}
    schedule: "@every 1s"
    breaker: {failures: 0}
    error_after: 2
  - name: secx
    type: exec
    command: ["sh", "-c", "echo \"k=$TOKEN\" >&2; exit 1"]
    env: {TOKEN: "${PACER_E2E_KEY}"}
    schedule: "@every 1s"
    breaker: {failures: 0}
    error_after: 0
  - name: secarg
    type: exec
    command: ["sh", "-c", "echo ${PACER_E2E_KEY} >&2; exit 2"]
    schedule: "@every 1s"
    breaker: {failures: 0}
    error_after: 0
`)
	noMarker := func(where, text string) {
		t.Helper()
		if strings.Contains(text, marker) {
			var lines []string
			for _, l := range strings.Split(text, "\n") {
				if strings.Contains(l, marker) {
					lines = append(lines, l)
				}
			}
			t.Errorf("a secret appears in %s:\n%s", where, strings.Join(lines, "\n"))
		}
	}

	r := in.cli("validate")
	if r.code != 0 {
		t.Fatalf("validate: %s", r)
	}
	noMarker("validate output", r.stdout+r.stderr)

	d := in.start()
	u.waitArrivals(t, "/sec", 2, 4*time.Second)
	a := u.Arrivals("/sec")[0]
	if a.Header.Get("X-Api-Key") != secretValue || a.Header.Get("X-Static") != literalHeader {
		t.Errorf("the upstream did not receive the real header values: %v", a.Header)
	}
	if !strings.Contains(a.Raw, "key="+secretValue) {
		t.Errorf("the upstream did not receive the real query: %s", a.Raw)
	}
	wantReason := "2 consecutive failures; last: GET " + u.URL("/sec") + "?key=***: 502 Bad Gateway"
	eventually(t, 3*time.Second, "sec in error, secx and secarg failing", func() error {
		all := d.sources()
		if o := all["sec"]; o.State != "error" || o.ErrorReason != wantReason {
			return errf("sec: %s\nwant error_reason %q", o, wantReason)
		}
		if o := all["secx"]; o.FailuresTotal < 1 || !strings.Contains(o.LastError, "k=***") {
			return errf("secx: last_error should quote the redacted stderr line: %s", o)
		}
		if o := all["secarg"]; o.FailuresTotal < 1 || !strings.Contains(o.LastError, "***") {
			return errf("secarg: %s", o)
		}
		return nil
	})

	for _, p := range []string{"/api/sources", "/api/sources/sec", "/api/sources/secx", "/api/sources/secarg",
		"/api/sources/sec/history", "/api/sources/secx/history", "/api/sources/secarg/history",
		"/metrics", "/readyz", "/healthz", "/api/sources/nope", "/api/sources/sec/reset"} {
		_, body := d.do(http.MethodGet, p, "", "")
		noMarker("GET "+p, string(body))
	}
	// Unauthorized POSTs must not echo the token either.
	_, body := d.do(http.MethodPost, "/api/sources/sec/pause", "wrong-"+adminToken, "")
	noMarker("POST with a wrong token", string(body))
	for _, args := range [][]string{
		{"status", "-json"}, {"status"}, {"status", "-json", "sec"}, {"status", "sec"},
		{"history", "-json", "sec"}, {"history", "sec"}, {"history", "-json", "secx"}, {"history", "secarg"},
		{"validate"},
	} {
		r := in.cli(args...)
		if r.code != 0 {
			t.Errorf("pacer %v: %s", args, r)
		}
		noMarker("pacer "+strings.Join(args, " "), r.stdout+r.stderr)
	}

	// Rule 3.12: state changes logged with source, from, to (and a reason).
	logs := d.logs()
	for _, want := range [][]string{
		{"source=sec", "from=pending", "to=backoff", "reason="},
		{"source=sec", "from=backoff", "to=error", "reason="},
	} {
		if !anyLine(strings.Split(logs, "\n"), func(l string) bool {
			for _, w := range want {
				if !strings.Contains(l, w) {
					return false
				}
			}
			return true
		}) {
			t.Errorf("no log line with %v in:\n%s", want, logs)
		}
	}

	d.stop(10 * time.Second)
	noMarker("the daemon's logs (debug level)", d.logs())
	noMarker("the daemon's stdout", d.stdout.String())

	// validate on a config whose invalid values come from the secret.
	bad := newInst(t)
	bad.env = in.env
	bad.writeConfig(`sources:
  - name: leak
    type: http
    url: "ht!tp://${PACER_E2E_KEY}/x"
    method: "${PACER_E2E_KEY}"
    schedule: "${PACER_E2E_KEY}"
    timeout: "${PACER_E2E_KEY}"
    max_body: "${PACER_E2E_KEY}"
    headers: {"X-Ok": "${PACER_E2E_KEY}"}
  - name: leak2
    type: exec
    command: ["${PACER_E2E_KEY}"]
    schedule: "*/5 * * * * ${PACER_E2E_KEY}"
`)
	r = bad.cli("validate")
	if r.code != 1 {
		t.Errorf("validate of an invalid config: want exit 1, got %s", r)
	}
	noMarker("validate output of an invalid config", r.stdout+r.stderr)
	if len(nonEmptyLines(r.stderr)) < 5 {
		t.Errorf("validate should report every problem:\n%s", r.stderr)
	}
	r = bad.cli("status")
	noMarker("status with an invalid config", r.stdout+r.stderr)
}

// Rule 3.12: one log line per state change, none per successful poll at
// info level; JSON logs carry source, from and to.
func TestStateChangeLogs(t *testing.T) {
	t.Parallel()
	t.Run("text", func(t *testing.T) {
		t.Parallel()
		u := newUpstream(t)
		in := newInst(t)
		in.writeConfig(`log: {level: info, format: text}
sources:
  - {name: fine, type: http, url: "` + u.URL("/fine") + `", schedule: "@every 1s"}
`)
		d := in.start()
		u.waitArrivals(t, "/fine", 2, 4*time.Second)
		count := func() int {
			n := 0
			for _, l := range strings.Split(d.logs(), "\n") {
				if strings.Contains(l, "source=fine") {
					n++
				}
			}
			return n
		}
		eventually(t, time.Second, "the pending -> ok line", func() error {
			if !strings.Contains(d.logs(), "from=pending") || count() == 0 {
				return errf("logs:\n%s", d.logs())
			}
			return nil
		})
		n := count()
		c := u.Count("/fine")
		never(t, 3500*time.Millisecond, "successful polls of an ok source must not be logged at info", func() error {
			if m := count(); m != n {
				return errf("%d lines about source fine, then %d:\n%s", n, m, d.logs())
			}
			return nil
		})
		if got := u.Count("/fine"); got < c+3 {
			t.Errorf("fine polled only %d times in 3.5s", got-c)
		}
		if n != 1 {
			t.Errorf("want exactly one line (the state change pending -> ok) about source fine, got %d:\n%s", n, d.logs())
		}
	})
	t.Run("json", func(t *testing.T) {
		t.Parallel()
		u := newUpstream(t)
		in := newInst(t)
		u.Set("/jf", behavior{Status: 500})
		in.writeConfig(`log: {level: info, format: json}
sources:
  - {name: jf, type: http, url: "` + u.URL("/jf") + `", schedule: "@every 1s"}
`)
		d := in.start()
		u.waitArrivals(t, "/jf", 1, 3*time.Second)
		eventually(t, 2*time.Second, "a JSON state change line for jf", func() error {
			for _, l := range nonEmptyLines(d.logs()) {
				var m map[string]any
				if err := json.Unmarshal([]byte(l), &m); err != nil {
					return errf("a log line is not JSON: %q", l)
				}
				if m["source"] == "jf" && m["from"] == "pending" && m["to"] == "backoff" {
					return nil
				}
			}
			return errf("logs:\n%s", d.logs())
		})
	})
}
