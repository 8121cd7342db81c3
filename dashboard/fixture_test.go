package dashboard_test

// The handler tests run the dashboard over a real scheduler on a real
// SQLite store in a temporary directory, mounted in the admin handler (so
// that its guard runs too), served by httptest on loopback.

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pacer-dev/pacer/admin"
	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/dashboard"
	"github.com/pacer-dev/pacer/scheduler"
	"github.com/pacer-dev/pacer/store"
)

const (
	// secret is ${PACER_D_KEY}, used in a URL and a header.
	secret = "k3y-SECRET-42"
	// literalHeader is a header value written in the config itself.
	literalHeader = "lit-SECRET-hdr"
	// xss is what the "xss" source writes on stderr: its last_error quotes it.
	xss = "<script>alert(1)</script>"
	// generated is the number of extra pending sources, for the pages.
	generated = 120
)

type fixture struct {
	t     *testing.T
	srv   *httptest.Server
	sched *scheduler.Scheduler
	dash  *dashboard.Dashboard
	cl    *http.Client // no redirects followed, with a cookie jar
}

// newFixture starts a scheduler whose sources never poll on their own
// (yearly schedule): "xss" (exec, fails quoting a script tag, error after
// 1 failure), "api-one" and "api-two" (http, 200), "down" (http, 502, no
// error state), "secret" (secrets in its URL and headers), and gen-000 to
// gen-119 (never polled). token "" runs without token_file; extra is YAML
// of top-level sections added to the config.
func newFixture(t *testing.T, token string, extra ...string) *fixture {
	t.Helper()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/down") {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(up.Close)
	dir := t.TempDir()
	var b strings.Builder
	b.WriteString(strings.Join(extra, ""))
	fmt.Fprintf(&b, `store: pacer.db
concurrency: 2
admin: {listen: "127.0.0.1:0"}
defaults:
  schedule: "0 0 1 1 *"
  breaker: {failures: 0}
  error_after: 0
sources:
  - name: xss
    type: exec
    command: ["sh", "-c", "echo '%s' >&2; exit 1"]
    error_after: 1
  - name: api-one
    type: http
    url: "%s/one"
  - name: api-two
    type: http
    url: "%s/two"
  - name: down
    type: http
    url: "%s/down"
  - name: secret
    type: http
    url: "%s/s?key=${PACER_D_KEY}"
    headers: {X-Key: "${PACER_D_KEY}", X-Lit: "%s"}
`, xss, up.URL, up.URL, up.URL, up.URL, literalHeader)
	for i := range generated {
		fmt.Fprintf(&b, "  - {name: gen-%03d, type: exec, command: [\"true\"]}\n", i)
	}
	cfgPath := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfgPath, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(cfgPath, func(k string) (string, bool) {
		if k == "PACER_D_KEY" {
			return secret, true
		}
		return os.LookupEnv(k)
	})
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	log := slog.New(slog.DiscardHandler)
	st, err := store.Open(cfg.Store, store.Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	sched, err := scheduler.New(cfg, scheduler.Options{Store: st, Logger: log, Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	if err := sched.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	dash, err := dashboard.New(sched, dashboard.Options{Token: token, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(admin.NewHandler(sched, reg, admin.Options{Token: token, Logger: log, Dashboard: dash}))
	t.Cleanup(func() {
		srv.Close()
		if err := sched.Shutdown(5 * time.Second); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if err := st.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
	})
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	cl := &http.Client{Jar: jar, Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return &fixture{t: t, srv: srv, sched: sched, dash: dash, cl: cl}
}

type answer struct {
	code   int
	header http.Header
	body   string
}

func (a answer) String() string { return fmt.Sprintf("%d %.300s", a.code, a.body) }

func (f *fixture) do(req *http.Request) answer {
	f.t.Helper()
	resp, err := f.cl.Do(req)
	if err != nil {
		f.t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		f.t.Fatalf("%s %s: read: %v", req.Method, req.URL, err)
	}
	return answer{code: resp.StatusCode, header: resp.Header, body: string(data)}
}

func (f *fixture) get(path string) answer {
	f.t.Helper()
	req, err := http.NewRequest(http.MethodGet, f.srv.URL+path, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	return f.do(req)
}

// post sends a form as a browser on the page would (with its Origin).
func (f *fixture) post(path string, form url.Values) answer {
	f.t.Helper()
	req, err := http.NewRequest(http.MethodPost, f.srv.URL+path, strings.NewReader(form.Encode()))
	if err != nil {
		f.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", f.srv.URL)
	return f.do(req)
}

// poll triggers a poll of name and waits for it to end in state want.
func (f *fixture) poll(name, want string) {
	f.t.Helper()
	o, err := f.sched.Source(name)
	if err != nil {
		f.t.Fatal(err)
	}
	if err := f.sched.Trigger(name); err != nil {
		f.t.Fatalf("trigger %s: %v", name, err)
	}
	f.waitPolled(name, want, o.PollsTotal+1)
}

func (f *fixture) waitState(name, want string) { f.t.Helper(); f.waitPolled(name, want, 0) }

// waitPolled waits until name is in state want after at least polls polls.
func (f *fixture) waitPolled(name, want string, polls int64) {
	f.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		o, err := f.sched.Source(name)
		if err != nil {
			f.t.Fatal(err)
		}
		if o.State == want && o.PollsTotal >= polls {
			return
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("%s: state %s, want %s", name, o.State, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (f *fixture) state(name string) string {
	f.t.Helper()
	o, err := f.sched.Source(name)
	if err != nil {
		f.t.Fatal(err)
	}
	return o.State
}

var (
	rowName = regexp.MustCompile(`<tr class="row" data-name="([^"]+)"`)
	// regexpTime is a relative time with its exact time on hover.
	regexpTime = regexp.MustCompile(`<time datetime="\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ" title="\d{4}-[-:T\d]+Z">(in \d+ (s|min)|\d+ (s|min) ago|now)</time>`)
)

// rows lists the names of the table's rows in page order.
func rows(body string) []string {
	var out []string
	for _, m := range rowName.FindAllStringSubmatch(body, -1) {
		out = append(out, m[1])
	}
	return out
}
