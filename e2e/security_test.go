package e2e

// Process-level security checks of the admin API (contract sections 2 and
// 5, rule 3.12): where it listens, when it refuses to start, what an
// unauthorized or malformed request gets, and that no answer and no log
// line shows a secret.
//
// The listen checks run the daemon in a private network namespace
// (unshare -n, with lo brought up), so that the default address
// 127.0.0.1:9090 is free whatever else runs on the machine, and an
// all-interfaces listener is exposed to nobody. What the daemon listens on
// is read from /proc/PID/net/tcp{,6}, which shows the sockets of the
// daemon's namespace.

import (
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// netnsWrap runs the daemon in a new network namespace with loopback up.
var netnsWrap = []string{"unshare", "-n", "sh", "-c", `ip link set lo up && exec "$0" "$@"`}

// listeners returns the local addresses (host:port) of the TCP sockets that
// pid's network namespace has in LISTEN state on port.
func listeners(t testing.TB, pid, port int) []string {
	t.Helper()
	var out []string
	for _, f := range []string{"tcp", "tcp6"} {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, f))
		if err != nil {
			continue // the process is gone
		}
		for _, line := range strings.Split(string(data), "\n")[1:] {
			fs := strings.Fields(line)
			if len(fs) < 4 || fs[3] != "0A" { // 0A = LISTEN
				continue
			}
			hexIP, hexPort, _ := strings.Cut(fs[1], ":")
			p, err := strconv.ParseUint(hexPort, 16, 16)
			if err != nil || int(p) != port {
				continue
			}
			raw, err := hex.DecodeString(hexIP)
			if err != nil || len(raw)%4 != 0 {
				continue
			}
			// The kernel prints each 32-bit word in host (little-endian) order.
			for i := 0; i < len(raw); i += 4 {
				raw[i], raw[i+1], raw[i+2], raw[i+3] = raw[i+3], raw[i+2], raw[i+1], raw[i]
			}
			out = append(out, net.JoinHostPort(net.IP(raw).String(), strconv.Itoa(port)))
		}
	}
	return out
}

// Section 2: with no admin section the API listens on 127.0.0.1:9090, on
// loopback only.
func TestSecurityDefaultListenIsLoopback(t *testing.T) {
	t.Parallel()
	in := newInst(t)
	in.wrap = netnsWrap
	writeFile(t, in.cfgPath, "store: pacer.db\nlog: {level: debug}\nsources:\n  - {name: s, type: exec, command: [\"true\"], schedule: \"0 0 1 1 *\"}\n")
	d := in.spawn()
	var got []string
	eventually(t, 15*time.Second, "a listener on port 9090", func() error {
		if d.exited() {
			t.Fatalf("pacer run exited: %v\n%s", d.state, d.logs())
		}
		if got = listeners(t, d.pid(), 9090); len(got) == 0 {
			return errf("none yet")
		}
		return nil
	})
	if !slices.Equal(got, []string{"127.0.0.1:9090"}) {
		t.Errorf("the default admin API listens on %v, want only 127.0.0.1:9090", got)
	}
	d.stop(10 * time.Second)
}

// Section 2: a non-loopback admin.listen needs admin.token_file: without
// one `pacer run` exits 1 with a message naming admin.listen and listens on
// nothing; with one it starts. Loopback addresses need no token.
func TestSecurityNonLoopbackListenNeedsToken(t *testing.T) {
	t.Parallel()
	const port = 9191
	cases := []struct {
		listen string
		token  bool
		start  bool
		want   []string // listeners when it starts
	}{
		{"0.0.0.0:9191", false, false, nil},
		{"[::]:9191", false, false, nil},
		{":9191", false, false, nil},
		{"example.invalid:9191", false, false, nil},
		// Go listens on a dual-stack [::] socket for the IPv4 wildcard.
		{"0.0.0.0:9191", true, true, nil},
		{":9191", true, true, nil},
		{"127.0.0.1:9191", false, true, []string{"127.0.0.1:9191"}},
		{"127.9.8.7:9191", false, true, []string{"127.9.8.7:9191"}},
		{"[::1]:9191", false, true, []string{"[::1]:9191"}},
		{"localhost:9191", false, true, nil}, // 127.0.0.1 and/or ::1
	}
	for _, c := range cases {
		name := strings.NewReplacer(":", "_", "[", "", "]", "").Replace(c.listen)
		if c.token {
			name += "_with_token"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			in := newInst(t)
			in.wrap = netnsWrap
			tok := ""
			if c.token {
				writeFile(t, filepath.Join(in.dir, "token"), "tok-123\n")
				tok = "  token_file: token\n"
			}
			writeFile(t, in.cfgPath, "store: pacer.db\nadmin:\n  listen: \""+c.listen+"\"\n"+tok+
				"sources:\n  - {name: s, type: exec, command: [\"true\"], schedule: \"0 0 1 1 *\"}\n")
			d := in.spawn()
			if !c.start {
				code, ok := d.wait(15 * time.Second)
				if !ok {
					t.Fatalf("pacer run with admin.listen %s and no token still runs after 15s; listening on %v\n%s",
						c.listen, listeners(t, d.pid(), port), d.logs())
				}
				if code != 1 || !strings.Contains(d.logs(), "admin.listen") || !strings.Contains(d.logs(), c.listen) {
					t.Errorf("want exit 1 and a message naming admin.listen and %s, got exit %d:\n%s", c.listen, code, d.logs())
				}
				if strings.Contains(d.logs(), "pacer started") {
					t.Errorf("it reported a start:\n%s", d.logs())
				}
				return
			}
			var got []string
			eventually(t, 15*time.Second, "a listener on the port", func() error {
				if d.exited() {
					t.Fatalf("pacer run exited: %v\n%s", d.state, d.logs())
				}
				if got = listeners(t, d.pid(), port); len(got) == 0 {
					return errf("none yet")
				}
				return nil
			})
			if c.want != nil && !slices.Equal(got, c.want) {
				t.Errorf("listening on %v, want %v", got, c.want)
			}
			for _, a := range got {
				host, _, _ := net.SplitHostPort(a)
				ip := net.ParseIP(host)
				if !c.token && (ip == nil || !ip.IsLoopback()) {
					t.Errorf("listening on %s without a token", a)
				}
				if c.token && (ip == nil || !ip.IsUnspecified()) {
					t.Errorf("listening on %s, want all interfaces", a)
				}
			}
			d.stop(10 * time.Second)
		})
	}
}

// view is what an unauthorized request must leave as it was: the daemon's
// sources, the stored ones (status -json reads the store) and the number of
// requests the upstream saw.
type view struct {
	api, store string
	polls      int
}

func (v view) diff(w view) error {
	var out []string
	for _, p := range [][3]string{{"api", v.api, w.api}, {"store", v.store, w.store}} {
		a, b := strings.Split(p[1], "\n"), strings.Split(p[2], "\n")
		for i := range max(len(a), len(b)) {
			var la, lb string
			if i < len(a) {
				la = a[i]
			}
			if i < len(b) {
				lb = b[i]
			}
			if la != lb {
				out = append(out, fmt.Sprintf("%s line %d: %q -> %q", p[0], i+1, la, lb))
			}
		}
	}
	if v.polls != w.polls {
		out = append(out, fmt.Sprintf("upstream requests: %d -> %d", v.polls, w.polls))
	}
	if len(out) > 0 {
		return fmt.Errorf("%s", strings.Join(out, "\n"))
	}
	return nil
}

// Secrets of TestSecurityAPI. Each contains marker.
const (
	secEnvValue = "e2e+MARKER/k=v"
	secLiteral  = "lit-MARKER-e2e"
	secToken    = "tok-MARKER-e2e-0123456789"
)

// rawAnswer is an answer with its headers.
type rawAnswer struct {
	code   int
	header http.Header
	body   []byte
}

func (a rawAnswer) String() string {
	return fmt.Sprintf("%d %s", a.code, strings.TrimSpace(string(a.body)))
}

// rawDo sends a request with the whole Authorization header given.
func rawDo(t testing.TB, addr, method, path, auth string, body io.Reader) rawAnswer {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+addr+path, body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
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
	return rawAnswer{code: resp.StatusCode, header: resp.Header, body: data}
}

// Section 5 and rule 3.12, against the real binary: POSTs without the right
// token get 401 and change nothing (daemon, store, upstream); a 1 MiB body
// is refused and the daemon carries on; a wrong method gets 405 JSON, an
// unknown path 404 JSON; and no answer of any endpoint (error answers,
// /metrics and history after failing polls whose errors quote the URL
// included), no CLI output and no line of the debug-level log shows a
// secret: a ${VAR} value in a header, a URL query, an exec environment and
// exec arguments, a literal header value, or the admin token.
func TestSecurityAPI(t *testing.T) {
	t.Parallel()
	u := newUpstream(t)
	in := newInst(t)
	in.env = []string{"PACER_SEC_KEY=" + secEnvValue}
	writeFile(t, filepath.Join(in.dir, "token"), "\n "+secToken+"\t\n")
	in.admin = "  token_file: token\n"
	u.Set("/fail", behavior{Status: 502})
	in.writeConfig(`concurrency: 2
shutdown_timeout: 5s
log: {level: debug}
defaults:
  schedule: "@every 200ms"
  backoff: {initial: 100ms, max: 200ms, jitter: 0}
  breaker: {failures: 0}
  error_after: 3
sources:
  - name: fail
    type: http
    url: "` + u.URL("/fail") + `?key=${PACER_SEC_KEY}&x=1"
    headers: {X-Key: "${PACER_SEC_KEY}", X-Lit: "` + secLiteral + `"}
  - name: envx
    type: exec
    command: ["sh", "-c", "echo \"k=$TOKEN\" >&2; exit 1"]
    env: {TOKEN: "${PACER_SEC_KEY}"}
  - name: argx
    type: exec
    command: ["sh", "-c", "echo \"$0 $1\" >&2; exit 2", "${PACER_SEC_KEY}", "x${PACER_SEC_KEY}x"]
  - name: idle
    type: http
    url: "` + u.URL("/idle") + `"
    schedule: "0 0 1 1 *"
`)
	d := in.start()
	eventually(t, 15*time.Second, "fail, envx and argx in error, in the daemon and in the store", func() error {
		stored := in.statusAll()
		for _, name := range []string{"fail", "envx", "argx"} {
			if o := d.source(name); o.State != "error" {
				return errf("%s", o)
			}
			if o := stored[name]; o.State != "error" {
				return errf("stored: %s", o)
			}
		}
		return nil
	})
	if a := u.Arrivals("/fail")[0]; a.Header.Get("X-Key") != secEnvValue || a.Header.Get("X-Lit") != secLiteral ||
		!strings.Contains(a.Raw, "key="+secEnvValue) {
		t.Fatalf("the upstream did not get the real secret values: %v %s", a.Header, a.Raw)
	}
	if o := d.source("fail"); !strings.Contains(o.ErrorReason, "/fail?key=***&x=1: 502") {
		t.Errorf("fail: error_reason %q should quote the URL, redacted", o.ErrorReason)
	}

	// Every source is now still: three in error, one on a yearly schedule.
	look := func() view {
		_, api := d.do(http.MethodGet, "/api/sources", "", "")
		return view{api: string(api), store: in.mustCLI("status", "-json").stdout, polls: u.Count("/fail") + u.Count("/idle")}
	}
	before := look()

	// 1. POSTs without the right token: 401 JSON, nothing changes.
	auths := []string{"", "Bearer ", "Bearer " + strings.Repeat("x", len(secToken)), "Bearer " + secToken[:len(secToken)-1],
		"Bearer " + secToken + "x", secToken, "Basic " + secToken, "bearer " + secToken}
	for _, name := range []string{"fail", "idle", "envx", "nope"} {
		for _, action := range []string{"reset", "trigger", "pause", "resume"} {
			for _, auth := range auths {
				a := rawDo(t, in.addr, http.MethodPost, "/api/sources/"+name+"/"+action, auth, strings.NewReader(`{"reason": "x"}`))
				if a.code != http.StatusUnauthorized || !isJSONError(a.body) {
					t.Errorf("POST %s/%s with Authorization %q: want 401 JSON, got %s", name, action, auth, a)
				}
			}
		}
	}
	never(t, 1500*time.Millisecond, "unauthorized POSTs must change nothing", func() error {
		return before.diff(look())
	})

	// 2. A 1 MiB pause body is refused; the daemon carries on.
	big := `{"reason": "` + strings.Repeat("r", 1<<20) + `"}`
	if a := rawDo(t, in.addr, http.MethodPost, "/api/sources/idle/pause", "Bearer "+secToken, strings.NewReader(big)); (a.code != http.StatusBadRequest &&
		a.code != http.StatusRequestEntityTooLarge) || !isJSONError(a.body) {
		t.Errorf("POST pause with a 1 MiB body: want 400 or 413 JSON, got %d %.200s", a.code, a.body)
	}
	for _, p := range []string{"/healthz", "/readyz"} {
		if code, body := d.do(http.MethodGet, p, "", ""); code != http.StatusOK {
			t.Errorf("GET %s after the 1 MiB body: %d %s", p, code, body)
		}
	}
	if o := d.source("idle"); o.State == "paused" {
		t.Errorf("the 1 MiB pause was applied: %s", o)
	}

	// 3. Wrong methods: 405 JSON; unknown paths: 404 JSON.
	for _, c := range []struct{ method, path string }{
		{http.MethodPost, "/healthz"}, {http.MethodDelete, "/readyz"}, {http.MethodPut, "/metrics"},
		{http.MethodPost, "/api/sources"}, {http.MethodDelete, "/api/sources/fail"}, {http.MethodPost, "/api/sources/fail/history"},
		{http.MethodGet, "/api/sources/fail/reset"}, {http.MethodGet, "/api/sources/fail/trigger"}, {http.MethodPut, "/api/sources/fail/pause"},
		{http.MethodPatch, "/api/sources/fail/resume"},
	} {
		a := rawDo(t, in.addr, c.method, c.path, "Bearer "+secToken, nil)
		if a.code != http.StatusMethodNotAllowed || !isJSONError(a.body) || a.header.Get("Allow") == "" {
			t.Errorf("%s %s: want 405 JSON with Allow, got %s (Allow %q)", c.method, c.path, a, a.header.Get("Allow"))
		}
	}
	for _, c := range []struct{ method, path string }{
		{http.MethodGet, "/nope"}, {http.MethodGet, "/api/sources/"}, // "/" is the dashboard {http.MethodGet, "/api/sources/fail/x"}, {http.MethodGet, "/debug/pprof/"},
		{http.MethodGet, "/api/sources/nope"}, {http.MethodGet, "/api/sources/nope/history"}, {http.MethodPost, "/api/sources/nope/pause"},
		{http.MethodPost, "/nope"},
	} {
		a := rawDo(t, in.addr, c.method, c.path, "Bearer "+secToken, nil)
		if a.code != http.StatusNotFound || !isJSONError(a.body) {
			t.Errorf("%s %s: want 404 JSON, got %s", c.method, c.path, a)
		}
	}
	if err := before.diff(look()); err != nil {
		t.Errorf("malformed requests changed something: %v", err)
	}

	// 4. Every answer of every endpoint, with every kind of Authorization,
	// and with state changes in between (so error answers such as 409 are
	// seen too).
	type seen struct{ what, text string }
	var answers []seen
	record := func(what string, a rawAnswer) {
		var hdr strings.Builder
		_ = a.header.Write(&hdr)
		answers = append(answers, seen{what, hdr.String() + "\n" + string(a.body)})
	}
	sweep := func(round string) {
		for _, p := range []string{"/healthz", "/readyz", "/metrics", "/api/sources", "/nope", "/api/sources/fail/history?n=x"} {
			for _, m := range []string{http.MethodGet, http.MethodPost} {
				record(round+" "+m+" "+p, rawDo(t, in.addr, m, p, "", nil))
			}
		}
		for _, name := range []string{"fail", "envx", "argx", "idle", "nope"} {
			for _, sub := range []string{"", "/history", "/history?n=1", "/history?n=0", "/reset", "/trigger", "/pause", "/resume", "/x"} {
				for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodDelete} {
					for _, auth := range []string{"", "Bearer wrong", "Bearer " + secToken} {
						var body io.Reader
						if m == http.MethodPost && sub == "/pause" {
							body = strings.NewReader(`{"reason": "sweep"}`)
						}
						p := "/api/sources/" + name + sub
						record(fmt.Sprintf("%s %s %s (auth %v)", round, m, p, auth != ""), rawDo(t, in.addr, m, p, auth, body))
					}
				}
			}
		}
	}
	sweep("first")
	// Reset and trigger the failing sources once more: history gets more
	// failures quoting the URL, and the sweep sees other states.
	for _, name := range []string{"fail", "envx", "argx"} {
		d.do(http.MethodPost, "/api/sources/"+name+"/reset", secToken, "")
	}
	eventually(t, 15*time.Second, "fail, envx and argx in error again", func() error {
		for _, name := range []string{"fail", "envx", "argx"} {
			if o := d.source(name); o.State != "error" || o.FailuresTotal < 6 {
				return errf("%s", o)
			}
		}
		return nil
	})
	sweep("second")
	for _, name := range []string{"fail", "envx", "argx"} {
		recs := d.history(name, 100)
		if len(recs) < 6 || !strings.Contains(recs[0].Error, "***") {
			t.Errorf("history of %s: want failures whose error shows *** for the secret, got %+v", name, recs)
		}
	}
	if d.metrics().typeOf("pacer_polls_total") != "counter" {
		t.Error("/metrics has no pacer_polls_total")
	}
	for _, a := range answers {
		if strings.Contains(a.text, marker) {
			t.Errorf("the answer to %s shows a secret:\n%s", a.what, a.text)
		}
	}

	// 5. The CLI's outputs, then the daemon's whole log at debug level.
	for _, args := range [][]string{{"status"}, {"status", "-json"}, {"status", "-json", "fail"}, {"history", "-json", "fail"},
		{"history", "envx"}, {"history", "-json", "argx"}, {"validate"}, {"trigger", "nope"}, {"pause", "nope"}} {
		r := in.cli(args...)
		if strings.Contains(r.stdout+r.stderr, marker) {
			t.Errorf("pacer %v shows a secret:\n%s", args, r)
		}
	}
	d.stop(10 * time.Second)
	logs := d.logs() + d.stdout.String()
	if !strings.Contains(logs, "level=DEBUG") && !strings.Contains(logs, "source state changed") {
		t.Fatalf("the log has nothing to check:\n%s", logs)
	}
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, marker) {
			t.Errorf("a log line shows a secret: %s", line)
		}
	}
	// Sanity: the log does quote the redacted URL.
	var reasons []string
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, "source=fail") && strings.Contains(line, "to=error") {
			reasons = append(reasons, line)
		}
	}
	if len(reasons) == 0 || !strings.Contains(reasons[0], "key=***") {
		t.Errorf("no redacted error line for fail in the log: %q", reasons)
	}
}

// Rule 3.12 for what `pacer run` itself prints: a ${VAR} value used in the
// store path is shown as *** in the start-up log and in the error that
// stops the daemon. The admin address is not a secret (issue 24 item 5):
// the start-up log shows it, even from a ${VAR}.
func TestSecurityRunHidesExpandedValues(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		setup func(t *testing.T, in *inst) (listen, store string, env []string)
		start bool // the daemon starts (else it exits 1)
		shown bool // the value is the admin address: shown in the start line
	}{
		{"listen address from a variable", func(t *testing.T, in *inst) (string, string, []string) {
			return "${PACER_SEC_ADDR}", "pacer.db", []string{"PACER_SEC_ADDR=" + in.addr}
		}, true, true},
		{"store in a missing directory from a variable", func(t *testing.T, in *inst) (string, string, []string) {
			return in.addr, "${PACER_SEC_DIR}/pacer.db", []string{"PACER_SEC_DIR=" + filepath.Join(in.dir, "no-"+marker+"-dir")}
		}, false, false},
		{"store locked by another daemon, path from a variable", func(t *testing.T, in *inst) (string, string, []string) {
			dir := filepath.Join(in.dir, "state-"+marker)
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			// The first daemon, on another admin address.
			first := newInst(t)
			first.env = []string{"PACER_SEC_DIR=" + dir}
			writeFile(t, first.cfgPath, "store: \"${PACER_SEC_DIR}/pacer.db\"\nadmin: {listen: \""+first.addr+"\"}\n")
			first.start()
			return in.addr, "${PACER_SEC_DIR}/pacer.db", first.env
		}, false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			in := newInst(t)
			listen, store, env := c.setup(t, in)
			in.env = env
			writeFile(t, in.cfgPath, "store: \""+store+"\"\nadmin: {listen: \""+listen+"\"}\nlog: {level: debug}\n")
			secret := strings.TrimPrefix(env[0], env[0][:strings.IndexByte(env[0], '=')+1])
			d := in.spawn()
			if c.start {
				d.waitReady(15 * time.Second)
				d.stop(10 * time.Second)
			} else if code, ok := d.wait(15 * time.Second); !ok || code != 1 {
				t.Fatalf("want exit 1, got %d (exited %v):\n%s", code, ok, d.logs())
			}
			out := d.logs() + d.stdout.String()
			if c.shown {
				if !strings.Contains(out, "admin="+secret) {
					t.Errorf("the start line does not show the admin address %s:\n%s", secret, out)
				}
				return
			}
			if strings.Contains(out, secret) {
				t.Errorf("pacer run shows the value of a ${VAR} (%q):\n%s", secret, out)
			}
			if !strings.Contains(out, "***") {
				t.Errorf("pacer run does not show *** where the value was:\n%s", out)
			}
		})
	}
}
