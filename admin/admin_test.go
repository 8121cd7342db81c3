package admin_test

// Security tests of the admin API (contract section 5 and rule 3.12): a real
// scheduler on a real SQLite store in a temporary directory, served through
// httptest, with secrets configured through ${VAR} in a header, a URL query,
// an exec environment and exec arguments, a literal header and the admin
// token.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pacer-dev/pacer/admin"
	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/domain"
	"github.com/pacer-dev/pacer/internal/waitfor"
	"github.com/pacer-dev/pacer/scheduler"
	"github.com/pacer-dev/pacer/scheduler/policy"
	"github.com/pacer-dev/pacer/scheduler/view"
	"github.com/pacer-dev/pacer/store"
)

// Every secret contains marker; no answer and no log line may.
const (
	marker = "MARKER"
	// envSecret is ${PACER_T_KEY}: its query and path escapes differ from it.
	envSecret = "k3y+MARKER/x=y&z"
	// literalHeader is a header value written in the config itself.
	literalHeader = "lit-MARKER-hdr"
	// token is the admin token (the file has white space around it).
	token = "tok-MARKER-0123456789"
)

// syncBuffer is a log destination safe for concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// fixture is a running scheduler behind the admin handler.
type fixture struct {
	t        *testing.T
	srv      *httptest.Server
	sched    *scheduler.Scheduler
	st       *store.Store
	logs     *syncBuffer
	upstream *httptest.Server
	mu       sync.Mutex
	arrivals []*http.Request // requests the upstream saw
}

// newFixture starts a scheduler with these sources, none of which polls on
// its own during a test (yearly schedules): http "fail" (502, secrets in
// query and headers, error after 1 failure), "idle" (never polled), exec
// "envx" (secret in env, echoed on stderr) and "argx" (secret in argv).
func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{t: t, logs: &syncBuffer{}}
	f.upstream = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.arrivals = append(f.arrivals, r.Clone(context.Background()))
		f.mu.Unlock()
		w.WriteHeader(http.StatusBadGateway)
	}))
	t.Cleanup(f.upstream.Close)

	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte("\n\t "+token+"  \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfgText := `store: pacer.db
concurrency: 2
admin: {listen: "127.0.0.1:0", token_file: token}
log: {level: debug}
defaults:
  schedule: "0 0 1 1 *"
  breaker: {failures: 0}
sources:
  - name: fail
    type: http
    url: "` + f.upstream.URL + `/p?key=${PACER_T_KEY}&x=1"
    headers: {X-Key: "${PACER_T_KEY}", X-Lit: "` + literalHeader + `"}
    error_after: 1
  - name: idle
    type: http
    url: "` + f.upstream.URL + `/idle"
    error_after: 0
  - name: envx
    type: exec
    command: ["sh", "-c", "echo \"k=$TOKEN\" >&2; exit 1"]
    env: {TOKEN: "${PACER_T_KEY}"}
    error_after: 0
  - name: argx
    type: exec
    command: ["sh", "-c", "echo '${PACER_T_KEY}' >&2; exit 3", "${PACER_T_KEY}"]
    error_after: 0
`
	cfgPath := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfgText), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(cfgPath, func(k string) (string, bool) {
		if k == "PACER_T_KEY" {
			return envSecret, true
		}
		return os.LookupEnv(k)
	})
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	log := slog.New(slog.NewTextHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	f.st, err = store.Open(cfg.Store, store.Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	f.sched, err = scheduler.New(cfg, scheduler.Options{Store: f.st, Logger: log, Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.sched.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	f.srv = httptest.NewServer(admin.NewHandler(f.sched, reg, admin.Options{Token: token, Logger: log}))
	t.Cleanup(func() {
		f.srv.Close()
		if err := f.sched.Shutdown(5 * time.Second); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if err := f.st.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
		if t.Failed() {
			t.Logf("logs:\n%s", f.logs.String())
		}
	})
	// Start commits every source's initial state: wait for it, so that
	// snapshots taken from now on compare like with like.
	waitFor(t, 10*time.Second, "initial states committed", func() error {
		sts, err := f.st.LoadStates(context.Background())
		if err != nil || len(sts) != len(cfg.Sources) {
			return fmt.Errorf("%d states stored (%v)", len(sts), err)
		}
		return nil
	})
	return f
}

// answer is one HTTP answer.
type answer struct {
	code   int
	header http.Header
	body   []byte
}

func (a answer) String() string { return fmt.Sprintf("%d %s", a.code, bytes.TrimSpace(a.body)) }

// do sends a request; auth is the whole Authorization header ("" = none).
func (f *fixture) do(method, path, auth string, body io.Reader) answer {
	f.t.Helper()
	req, err := http.NewRequest(method, f.srv.URL+path, body)
	if err != nil {
		f.t.Fatalf("%s %s: %v", method, path, err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
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

func (f *fixture) post(path, auth, body string) answer {
	f.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	return f.do(http.MethodPost, path, auth, rd)
}

func (f *fixture) upstreamCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.arrivals)
}

func (f *fixture) source(name string) view.SourceObject {
	f.t.Helper()
	o, err := f.sched.Source(name)
	if err != nil {
		f.t.Fatal(err)
	}
	return o
}

// waitFor polls cond every 10ms until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() error) {
	t.Helper()
	waitfor.NoError(t, d, what, cond)
}

// holdsFor checks cond every 10ms for d and fails at the first violation.
func holdsFor(t *testing.T, d time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		if err := cond(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if time.Now().After(deadline) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// jsonError checks that a is a JSON {"error": "..."} with the code.
func jsonError(t *testing.T, what string, a answer, code int) {
	t.Helper()
	var e map[string]any
	if a.code != code {
		t.Errorf("%s: status %d, want %d (body %s)", what, a.code, code, a.body)
		return
	}
	if ct := a.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("%s: Content-Type %q, want application/json", what, ct)
	}
	if err := json.Unmarshal(a.body, &e); err != nil {
		t.Errorf("%s: body is not JSON: %v: %s", what, err, a.body)
		return
	}
	if msg, ok := e["error"].(string); !ok || msg == "" || len(e) != 1 {
		t.Errorf("%s: body %s, want {\"error\": \"...\"}", what, a.body)
	}
}

// snapshot is everything an unauthorized request must leave as it was: the
// daemon's view and the store's rows.
type snapshot struct {
	api     []view.SourceObject
	stored  []domain.SourceState
	history map[string][]domain.PollRecord
}

func (f *fixture) snapshot() snapshot {
	f.t.Helper()
	s := snapshot{api: f.sched.Sources(), history: map[string][]domain.PollRecord{}}
	var err error
	if s.stored, err = f.st.LoadStates(context.Background()); err != nil {
		f.t.Fatal(err)
	}
	for _, o := range s.api {
		if s.history[o.Name], err = f.st.History(context.Background(), o.Name, 1000); err != nil {
			f.t.Fatal(err)
		}
	}
	return s
}

func (s snapshot) diff(o snapshot) error {
	if !reflect.DeepEqual(s.api, o.api) {
		return fmt.Errorf("sources changed:\nbefore %+v\nafter  %+v", s.api, o.api)
	}
	if !reflect.DeepEqual(s.stored, o.stored) {
		return fmt.Errorf("stored states changed:\nbefore %+v\nafter  %+v", s.stored, o.stored)
	}
	if !reflect.DeepEqual(s.history, o.history) {
		return fmt.Errorf("stored history changed")
	}
	return nil
}

// prepare brings the sources to the states the tests need, with the token:
// "fail" in error (after one poll), "envx" and "argx" failed once, "idle"
// paused. Afterwards nothing changes on its own.
func (f *fixture) prepare() {
	f.t.Helper()
	for _, name := range []string{"fail", "envx", "argx"} {
		if a := f.post("/api/sources/"+name+"/trigger", "Bearer "+token, ""); a.code != http.StatusAccepted {
			f.t.Fatalf("trigger %s with the token: %s", name, a)
		}
	}
	if a := f.post("/api/sources/idle/pause", "Bearer "+token, `{"reason": "maintenance"}`); a.code != http.StatusOK {
		f.t.Fatalf("pause idle with the token: %s", a)
	}
	waitFor(f.t, 10*time.Second, "fail in error, envx and argx failed, all committed", func() error {
		for _, name := range []string{"fail", "envx", "argx"} {
			o := f.source(name)
			if o.FailuresTotal != 1 {
				return fmt.Errorf("%s: %+v", name, o)
			}
			h, err := f.st.History(context.Background(), name, 10)
			if err != nil || len(h) != 1 {
				return fmt.Errorf("%s: stored history %v %v", name, h, err)
			}
		}
		if o := f.source("fail"); o.State != policy.StateError {
			return fmt.Errorf("fail: %+v", o)
		}
		st, ok, err := f.st.GetState(context.Background(), "idle")
		if err != nil || !ok || !st.Paused {
			return fmt.Errorf("idle not stored paused: %+v %v %v", st, ok, err)
		}
		return f.sched.Ready(context.Background())
	})
}

// Section 5: with token_file set, every POST without the right bearer token
// gets 401 JSON and changes nothing, neither in the daemon nor in the store,
// and triggers no poll. The token is compared in constant time: a wrong
// token of the same length is refused like one of another length.
func TestUnauthorizedPostChangesNothing(t *testing.T) {
	f := newFixture(t)
	f.prepare()
	polls := f.upstreamCount()
	before := f.snapshot()

	wrongSameLen := strings.Repeat("x", len(token))
	auths := []struct{ name, header string }{
		{"no header", ""},
		{"empty bearer", "Bearer "},
		{"wrong, same length", "Bearer " + wrongSameLen},
		{"right but last byte", "Bearer " + token[:len(token)-1] + "X"},
		{"shorter (prefix)", "Bearer " + token[:len(token)-1]},
		{"longer (suffix added)", "Bearer " + token + "0"},
		{"much longer", "Bearer " + strings.Repeat(token, 100)},
		{"no Bearer scheme", token},
		{"lower-case scheme", "bearer " + token},
		{"Basic scheme", "Basic " + token},
		{"token twice", "Bearer " + token + " " + token},
		{"tab inside", "Bearer " + token[:4] + "\t" + token[4:]},
	}
	actions := []struct{ action, body string }{
		{"reset", ""}, {"trigger", ""}, {"pause", `{"reason": "hijack"}`}, {"resume", ""},
	}
	for _, src := range []string{"fail", "idle", "envx", "nope"} {
		for _, ac := range actions {
			for _, au := range auths {
				what := fmt.Sprintf("POST %s/%s (%s)", src, ac.action, au.name)
				a := f.post("/api/sources/"+src+"/"+ac.action, au.header, ac.body)
				jsonError(t, what, a, http.StatusUnauthorized)
				if strings.Contains(string(a.body), marker) {
					t.Errorf("%s: the answer shows a secret: %s", what, a.body)
				}
			}
		}
	}
	holdsFor(t, 500*time.Millisecond, "unauthorized requests must change nothing", func() error {
		if n := f.upstreamCount(); n != polls {
			return fmt.Errorf("the upstream saw %d new request(s)", n-polls)
		}
		return before.diff(f.snapshot())
	})

	// The right token, with surrounding white space in the header, works.
	if a := f.post("/api/sources/idle/resume", "Bearer  "+token+" ", ""); a.code != http.StatusOK {
		t.Errorf("resume with the right token: %s", a)
	}
	if o := f.source("idle"); o.State == policy.StatePaused {
		t.Errorf("idle still paused after an authorized resume: %+v", o)
	}
}

// The token check accepts the exact token and nothing else. (That it runs
// in constant time, through crypto/subtle, cannot be observed by a test on a
// shared machine, where timing is noise; what can be checked is its
// result.) Refused, with 401 and no change: a wrong token of every length
// from 0 to twice the token's, every proper prefix, the token with any one
// byte changed, the token with a suffix, and non-ASCII look-alikes.
func TestTokenCheckedExactly(t *testing.T) {
	f := newFixture(t)
	var wrong []string
	for n := 0; n <= 2*len(token)+1; n++ {
		wrong = append(wrong, strings.Repeat("x", n))
	}
	for i := range token {
		wrong = append(wrong, token[:i]) // prefixes
		changed := []byte(token)
		changed[i] ^= 0x01
		wrong = append(wrong, string(changed))
	}
	for _, sfx := range []string{"0", "x", "\u00e9", "\x7e", token} {
		wrong = append(wrong, token+sfx)
	}
	wrong = append(wrong,
		"\u00e9"+token[1:],                             // first byte replaced by a 2-byte rune
		strings.Replace(token, "0", "\u0030\u0301", 1), // combining accent
		strings.Replace(token, "M", "\uff2d", 1),       // full-width M
		strings.ToLower(token),
		"\xff\xfe"+token,
	)
	before := f.snapshot()
	for _, w := range wrong {
		a := f.post("/api/sources/idle/pause", "Bearer "+w, "")
		jsonError(t, fmt.Sprintf("token %q (%d bytes)", w, len(w)), a, http.StatusUnauthorized)
	}
	if err := before.diff(f.snapshot()); err != nil {
		t.Errorf("requests with a wrong token changed something: %v", err)
	}
	if a := f.post("/api/sources/idle/pause", "Bearer "+token, ""); a.code != http.StatusOK {
		t.Errorf("the right token: %s, want 200", a)
	}
	if o := f.source("idle"); o.State != policy.StatePaused {
		t.Errorf("idle not paused by the request with the right token: %+v", o)
	}
}

// Request bodies are capped: a 1 MiB pause body is refused with a 4xx JSON
// error, the source is not paused, and the API keeps serving. A body under
// the cap and one that is not JSON behave as documented.
func TestRequestBodyCapped(t *testing.T) {
	f := newFixture(t)
	big := `{"reason": "` + strings.Repeat("r", 1<<20) + `"}`
	cases := []struct {
		name  string
		body  io.Reader
		codes []int // acceptable answers
		pause bool  // whether the source ends up paused
	}{
		{"1 MiB JSON", strings.NewReader(big), []int{http.StatusBadRequest, http.StatusRequestEntityTooLarge}, false},
		{"1 MiB, unknown length", io.MultiReader(strings.NewReader(big)), []int{http.StatusBadRequest, http.StatusRequestEntityTooLarge}, false},
		{"64 MiB of zeros", io.LimitReader(zeros{}, 64<<20), []int{http.StatusBadRequest, http.StatusRequestEntityTooLarge}, false},
		{"not JSON", strings.NewReader("reason=x"), []int{http.StatusBadRequest}, false},
		{"JSON of the wrong shape", strings.NewReader(`{"reason": 5}`), []int{http.StatusBadRequest}, false},
		{"small reason", strings.NewReader(`{"reason": "short"}`), []int{http.StatusOK}, true},
	}
	for _, c := range cases {
		a := f.do(http.MethodPost, "/api/sources/idle/pause", "Bearer "+token, c.body)
		ok := false
		for _, code := range c.codes {
			ok = ok || a.code == code
		}
		if !ok {
			t.Errorf("%s: got %s, want one of %v", c.name, a, c.codes)
		} else if a.code >= 400 {
			jsonError(t, c.name, a, a.code)
		}
		if got := f.source("idle").State == policy.StatePaused; got != c.pause {
			t.Errorf("%s: paused = %v, want %v", c.name, got, c.pause)
		}
		if h := f.do(http.MethodGet, "/healthz", "", nil); h.code != http.StatusOK {
			t.Fatalf("%s: the API stopped serving: healthz %s", c.name, h)
		}
	}
	if o := f.source("idle"); o.PausedReason != "short" {
		t.Errorf("paused_reason %q, want \"short\"", o.PausedReason)
	}
}

// zeros is an endless stream of zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// routes is every endpoint of section 5 with its method.
var routes = []struct{ method, path string }{
	{http.MethodGet, "/healthz"},
	{http.MethodGet, "/readyz"},
	{http.MethodGet, "/metrics"},
	{http.MethodGet, "/api/sources"},
	{http.MethodGet, "/api/sources/fail"},
	{http.MethodGet, "/api/sources/fail/history"},
	{http.MethodPost, "/api/sources/fail/reset"},
	{http.MethodPost, "/api/sources/fail/trigger"},
	{http.MethodPost, "/api/sources/fail/pause"},
	{http.MethodPost, "/api/sources/fail/resume"},
}

// A wrong method gets 405 with a JSON error and an Allow header naming the
// right one, before (and whether or not) the token is checked.
func TestWrongMethod405(t *testing.T) {
	f := newFixture(t)
	before := f.snapshot()
	methods := []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions, "TRACE", "BREW"}
	for _, r := range routes {
		for _, m := range methods {
			if m == r.method || (r.method == http.MethodGet && m == http.MethodHead) {
				continue
			}
			for _, auth := range []string{"", "Bearer " + token} {
				what := fmt.Sprintf("%s %s (token: %v)", m, r.path, auth != "")
				a := f.do(m, r.path, auth, nil)
				if got := a.header.Get("Allow"); got != r.method {
					t.Errorf("%s: Allow %q, want %q", what, got, r.method)
				}
				if m == http.MethodHead {
					if a.code != http.StatusMethodNotAllowed {
						t.Errorf("%s: status %d, want 405", what, a.code)
					}
					continue // no body to a HEAD
				}
				jsonError(t, what, a, http.StatusMethodNotAllowed)
			}
		}
	}
	if err := before.diff(f.snapshot()); err != nil {
		t.Errorf("wrong-method requests changed something: %v", err)
	}
}

// Unknown paths and unknown sources get 404 with a JSON error, whatever the
// method and the token.
func TestUnknownPath404(t *testing.T) {
	f := newFixture(t)
	cases := []struct{ method, path string }{
		{http.MethodGet, "/"},
		{http.MethodGet, "/api"},
		{http.MethodGet, "/api/"},
		{http.MethodGet, "/api/sources/"},
		{http.MethodGet, "/api/sources/fail/"},
		{http.MethodGet, "/api/sources/fail/nope"},
		{http.MethodGet, "/api/sources/fail/history/x"},
		{http.MethodGet, "/api/sources/a/b/c/d"},
		{http.MethodGet, "/api/source/fail"},
		{http.MethodGet, "/metricsx"},
		{http.MethodGet, "/healthz/"},
		{http.MethodGet, "/debug/pprof/"},
		{http.MethodGet, "/debug/vars"},
		{http.MethodPost, "/api/sources/fail/delete"},
		{http.MethodDelete, "/nope"},
		// Unknown sources: 404 from every endpoint that names one.
		{http.MethodGet, "/api/sources/nope"},
		{http.MethodGet, "/api/sources/nope/history"},
		{http.MethodGet, "/api/sources/" + url.PathEscape("a/b")},
		{http.MethodGet, "/api/sources/" + url.PathEscape("../fail")},
		{http.MethodGet, "/api/sources/%00"},
		{http.MethodPost, "/api/sources/nope/reset"},
		{http.MethodPost, "/api/sources/nope/trigger"},
		{http.MethodPost, "/api/sources/nope/pause"},
		{http.MethodPost, "/api/sources/nope/resume"},
	}
	for _, c := range cases {
		a := f.do(c.method, c.path, "Bearer "+token, nil)
		jsonError(t, c.method+" "+c.path, a, http.StatusNotFound)
	}
}

// Rule 3.12: no answer of any endpoint, error answers included, and no log
// line at debug level shows a secret: the ${VAR} value (in a header, a URL
// query quoted by error texts, an exec environment and exec arguments), a
// literal header value or the admin token.
func TestNoSecretInAnyAnswerOrLog(t *testing.T) {
	f := newFixture(t)
	f.prepare()

	// The upstream and the commands did get the real values: the test
	// would prove nothing if the secrets never reached the sources.
	f.mu.Lock()
	first := f.arrivals[0]
	f.mu.Unlock()
	if first.Header.Get("X-Key") != envSecret || first.Header.Get("X-Lit") != literalHeader || !strings.Contains(first.URL.RawQuery, "key="+envSecret) {
		t.Fatalf("the upstream did not get the secret values: %v %v", first.Header, first.URL)
	}
	// The texts that quote the URL or the command's output must be there,
	// redacted.
	if o := f.source("fail"); !strings.Contains(o.ErrorReason, "/p?key=***") || !strings.Contains(o.LastError, "502") {
		t.Errorf("fail: error_reason %q does not quote the redacted URL", o.ErrorReason)
	}
	if o := f.source("envx"); !strings.Contains(o.LastError, "k=***") {
		t.Errorf("envx: last_error %q does not quote the redacted stderr", o.LastError)
	}

	var answers, labels []string
	record := func(what string, a answer) {
		var hdr strings.Builder
		_ = a.header.Write(&hdr)
		answers = append(answers, hdr.String()+"\n"+string(a.body))
		labels = append(labels, what)
	}
	// (A request that itself carries a secret may see it echoed, as in
	// "no such endpoint: PATH": that tells the client nothing new.)
	names := []string{"fail", "idle", "envx", "argx", "nope"}
	methods := []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete}
	auths := []string{"", "Bearer wrong", "Bearer " + token + "x", "Bearer " + token}
	for _, name := range names {
		for _, sub := range []string{"", "/history", "/history?n=1", "/history?n=0", "/history?n=" + url.QueryEscape(envSecret),
			"/reset", "/trigger", "/pause", "/resume", "/nope"} {
			for _, m := range methods {
				for _, au := range auths {
					p := "/api/sources/" + name + sub
					body := ""
					if strings.HasSuffix(sub, "/pause") {
						body = `{"reason": "audit"}`
					}
					a := f.post(p, au, body)
					if m != http.MethodPost {
						a = f.do(m, p, au, nil)
					}
					record(m+" "+p, a)
				}
			}
		}
	}
	for _, p := range []string{"/healthz", "/readyz", "/metrics", "/api/sources", "/nope", "/api/sources/fail/history?n=10000", "/api/sources/fail/history?n=x"} {
		for _, m := range methods {
			record(m+" "+p, f.do(m, p, "", nil))
		}
	}
	// A bad pause body and an oversized one.
	record("POST pause bad JSON", f.post("/api/sources/idle/pause", "Bearer "+token, "{"))
	record("POST pause 1 MiB", f.post("/api/sources/idle/pause", "Bearer "+token, strings.Repeat("x", 1<<20)))
	// Trigger the failing sources again (past their error: reset first) so
	// that history has several failures whose errors quote the URL.
	for _, name := range []string{"fail", "envx", "argx"} {
		record("reset "+name, f.post("/api/sources/"+name+"/reset", "Bearer "+token, ""))
		record("trigger "+name, f.post("/api/sources/"+name+"/trigger", "Bearer "+token, ""))
	}
	waitFor(t, 10*time.Second, "second failures", func() error {
		for _, name := range []string{"fail", "envx", "argx"} {
			if o := f.source(name); o.FailuresTotal < 2 {
				return fmt.Errorf("%s: %+v", name, o)
			}
		}
		return nil
	})
	for _, name := range []string{"fail", "envx", "argx", "idle"} {
		a := f.do(http.MethodGet, "/api/sources/"+name+"/history?n=100", "", nil)
		record("history "+name, a)
		var recs []map[string]any
		if err := json.Unmarshal(a.body, &recs); err != nil {
			t.Fatalf("history %s: %v", name, err)
		}
		if name != "idle" && (len(recs) < 2 || !strings.Contains(fmt.Sprint(recs[0]["error"]), "***")) {
			t.Errorf("history %s: want failures whose error quotes a redacted secret, got %s", name, a.body)
		}
	}
	record("metrics", f.do(http.MethodGet, "/metrics", "", nil))
	record("sources", f.do(http.MethodGet, "/api/sources", "", nil))

	for i, a := range answers {
		if strings.Contains(a, marker) {
			t.Errorf("the answer to %s shows a secret:\n%s", labels[i], a)
		}
	}
	if len(answers) < 500 {
		t.Fatalf("only %d answers checked", len(answers))
	}

	// The whole log at debug level, after a shutdown (which logs too).
	if err := f.sched.Shutdown(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	logs := f.logs.String()
	if !strings.Contains(logs, "source state changed") {
		t.Fatalf("no state change logged: the log check would prove nothing:\n%s", logs)
	}
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, marker) {
			t.Errorf("a log line shows a secret: %s", line)
		}
	}
}
