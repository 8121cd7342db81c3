package e2e

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestDeliverFile (contract 9.3): deliver.file with {name}, written
// atomically: a reader reading the file in a tight loop while the upstream
// document changes (small and spooled sizes) never sees a partial or empty
// file, and the file ends equal to the last document.
func TestDeliverFile(t *testing.T) {
	t.Parallel()
	up := newDocServer(t)
	versions := map[string]bool{}
	var list []string
	for i, size := range []int{10, 300 << 10, 2 << 20, 5000, 1<<20 + 1} {
		v := strings.Repeat(strconv.Itoa(i), size)
		versions[v] = true
		list = append(list, v)
	}
	up.set("/doc", list[0])
	in := newInst(t)
	in.writeConfig(`shutdown_timeout: 5s
defaults: {schedule: "@every 200ms", deliver: {file: "out/{name}.txt"}}
sources:
  - {name: doc, type: http, url: "` + up.srv.URL + `/doc", max_body: 10MiB}
`)
	path := filepath.Join(in.dir, "out", "doc.txt")
	d := in.start()
	stop := make(chan struct{})
	var reads atomic.Int64
	var bad atomic.Value // string
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			b, err := os.ReadFile(path)
			if os.IsNotExist(err) {
				continue // not delivered yet
			}
			reads.Add(1)
			if err != nil || !versions[string(b)] {
				bad.Store(fmt.Sprintf("read %d bytes (%v): not a whole version", len(b), err))
				return
			}
		}
	})
	defer func() { close(stop); wg.Wait() }()
	for _, v := range list {
		up.set("/doc", v)
		eventually(t, 10*time.Second, fmt.Sprintf("the %d-byte version delivered", len(v)), func() error {
			if s, _ := bad.Load().(string); s != "" {
				t.Fatal(s)
			}
			if b, _ := os.ReadFile(path); string(b) != v {
				return errf("file holds %d bytes", len(b))
			}
			return nil
		})
	}
	if s, _ := bad.Load().(string); s != "" || reads.Load() == 0 {
		t.Fatalf("%s (%d reads)", s, reads.Load())
	}
	if o := d.results("doc"); o.ChangesTotal != int64(len(list)) {
		t.Errorf("changes_total %d, want %d", o.ChangesTotal, len(list))
	}
	if names, _ := os.ReadDir(filepath.Dir(path)); len(names) != 1 {
		t.Errorf("out/ holds %d entries, want only doc.txt (no temporary file left)", len(names))
	}
}

// delivery is one run of a deliver command, as the test's script saved it.
type delivery struct {
	body string
	env  map[string]string
}

// deliveries reads the runs saved in dir by deliverScript, in order.
func deliveries(t *testing.T, dir string) []delivery {
	t.Helper()
	envs, _ := filepath.Glob(filepath.Join(dir, "*.env"))
	sort.Strings(envs)
	var out []delivery
	for _, e := range envs {
		b, err := os.ReadFile(e)
		if err != nil {
			t.Fatal(err)
		}
		body, err := os.ReadFile(strings.TrimSuffix(e, ".env") + ".body")
		if err != nil {
			t.Fatal(err)
		}
		dv := delivery{body: string(body), env: map[string]string{}}
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if k, v, ok := strings.Cut(line, "="); ok {
				dv.env[k] = v
			}
		}
		out = append(out, dv)
	}
	return out
}

// deliverScript saves each run's stdin and PACER_* environment in dir,
// numbered in order.
func deliverScript(dir string) string {
	return `n=$(ls "` + dir + `" | grep -c '\.env$'); f="` + dir + `/$(printf %04d $n)"; cat > "$f.body"; env | grep '^PACER_' > "$f.tmp"; mv "$f.tmp" "$f.env"`
}

// TestDeliverCommand (contract 9.3, 9.1): deliver.command gets the result
// on stdin and PACER_SOURCE, PACER_DIGEST (the body's SHA-256),
// PACER_STATUS, PACER_CONTENT_TYPE and PACER_STARTED_AT, only when it
// changed: the 304s to the conditional GETs after a delivered 200 deliver
// nothing; a new document is delivered once.
func TestDeliverCommand(t *testing.T) {
	t.Parallel()
	up := newDocServer(t)
	up.set("/doc", "first document")
	in := newInst(t)
	runs := filepath.Join(in.dir, "runs")
	if err := os.Mkdir(runs, 0o755); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(in.dir, "deliver.sh")
	writeFile(t, script, deliverScript(runs))
	in.writeConfig(`shutdown_timeout: 5s
defaults: {schedule: "@every 200ms"}
sources:
  - name: doc
    type: http
    url: "` + up.srv.URL + `/doc"
    deliver: {command: [/bin/sh, "` + script + `"]}
`)
	d := in.start()
	eventually(t, 10*time.Second, "several 304s after the first 200", func() error {
		if c := up.counts("/doc"); c.notModified < 3 {
			return errf("%+v", c)
		}
		return nil
	})
	check := func(want []string) {
		t.Helper()
		got := deliveries(t, runs)
		if len(got) != len(want) {
			t.Fatalf("%d deliveries, want %d: %+v", len(got), len(want), got)
		}
		for i, dv := range got {
			started, err := time.Parse(time.RFC3339, dv.env["PACER_STARTED_AT"])
			if dv.body != want[i] || dv.env["PACER_SOURCE"] != "doc" || dv.env["PACER_DIGEST"] != sha(want[i]) ||
				dv.env["PACER_STATUS"] != "200" || !strings.HasPrefix(dv.env["PACER_CONTENT_TYPE"], "text/plain") ||
				err != nil || time.Since(started) > time.Minute {
				t.Errorf("delivery %d: body %q env %v; want %q with its digest", i, dv.body, dv.env, want[i])
			}
		}
	}
	check([]string{"first document"})
	up.set("/doc", "second document")
	eventually(t, 10*time.Second, "the second document delivered", func() error {
		if n := len(deliveries(t, runs)); n < 2 {
			return errf("%d deliveries", n)
		}
		return nil
	})
	before := up.counts("/doc").notModified
	eventually(t, 10*time.Second, "more 304s", func() error {
		if c := up.counts("/doc"); c.notModified < before+2 {
			return errf("%+v", c)
		}
		return nil
	})
	check([]string{"first document", "second document"})
	if v := d.metric("pacer_deliveries_total", "outcome", "success"); v != 2 {
		t.Errorf(`pacer_deliveries_total{outcome="success"} = %v, want 2`, v)
	}
}

// TestDeliverWebhookFailure (contract 9.4): a webhook receiver answering
// 500 fails the poll with "deliver: " in last_error and counts
// pacer_deliveries_total{outcome="failure"}; the next GET carries no
// If-None-Match (the result stays undelivered); once the receiver recovers
// the result is delivered once, with X-Pacer-Source and X-Pacer-Digest.
func TestDeliverWebhookFailure(t *testing.T) {
	t.Parallel()
	var lastINM atomic.Value // string: If-None-Match of the last GET
	var gets atomic.Int64
	usrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lastINM.Store(r.Header.Get("If-None-Match"))
		gets.Add(1)
		w.Header().Set("ETag", `"v1"`)
		if r.Header.Get("If-None-Match") == `"v1"` {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		fmt.Fprint(w, "the document")
	}))
	defer usrv.Close()
	var failing atomic.Bool
	failing.Store(true)
	var mu sync.Mutex
	var got []string
	rsrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if failing.Load() {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		mu.Lock()
		got = append(got, fmt.Sprintf("%s %s %s %s", b, r.Header.Get("X-Pacer-Source"), r.Header.Get("X-Pacer-Digest"), r.Header.Get("X-Key")))
		mu.Unlock()
	}))
	defer rsrv.Close()
	accepted := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), got...)
	}
	in := newInst(t)
	in.env = []string{"SINK_KEY=sink-key-0123456789"}
	in.writeConfig(`shutdown_timeout: 5s
defaults: {schedule: "@every 200ms", backoff: {initial: 100ms, max: 200ms}, breaker: {failures: 0}, error_after: 0}
sources:
  - name: web
    type: http
    url: "` + usrv.URL + `/doc"
    deliver: {webhook: {url: "` + rsrv.URL + `/in", headers: {X-Key: "${SINK_KEY}"}}}
`)
	d := in.start()
	eventually(t, 10*time.Second, "two failed deliveries", func() error {
		if v := d.metric("pacer_deliveries_total", "outcome", "failure"); v < 2 {
			return errf("failures %v", v)
		}
		return nil
	})
	o := d.source("web")
	if want := "deliver: webhook POST " + rsrv.URL + "/in: 500 Internal Server Error"; o.LastError != want || o.FailuresTotal < 2 {
		t.Errorf("source %v; want last_error %q", o, want)
	}
	if inm, _ := lastINM.Load().(string); inm != "" {
		t.Errorf("a GET after a failed delivery sent If-None-Match %q", inm)
	}
	failing.Store(false)
	eventually(t, 10*time.Second, "the result delivered", func() error {
		if len(accepted()) == 0 {
			return errf("nothing delivered")
		}
		return nil
	})
	n := gets.Load()
	eventually(t, 10*time.Second, "three more GETs", func() error {
		if gets.Load() < n+3 {
			return errf("%d GETs", gets.Load())
		}
		return nil
	})
	if a := accepted(); len(a) != 1 || a[0] != "the document web "+sha("the document")+" sink-key-0123456789" {
		t.Errorf("receiver accepted %q, want the document once with its headers", a)
	}
	if inm, _ := lastINM.Load().(string); inm != `"v1"` {
		t.Errorf("after the delivery the GET sent If-None-Match %q, want the delivered ETag", inm)
	}
	if o := d.source("web"); o.State != "ok" || o.ConsecutiveFailures != 0 {
		t.Errorf("after recovery: %v", o)
	}
	if strings.Contains(d.logs(), "sink-key-0123456789") {
		t.Error("the webhook's header value (a secret) is in the daemon's log")
	}
}

// TestDeliverValidate: pacer validate reports every bad deliver key with
// its path.
func TestDeliverValidate(t *testing.T) {
	t.Parallel()
	in := newInst(t)
	in.writeConfig(`defaults: {deliver: {when: often}}
sources:
  - {name: a, type: http, url: "http://127.0.0.1:1/", deliver: {file: ""}}
  - {name: b, type: exec, command: ["true"], deliver: {webhook: {url: "ftp://x/"}, comand: [cat]}}
`)
	r := in.cli("validate")
	if r.code != 1 {
		t.Fatalf("validate: want exit 1, got %s", r)
	}
	lines := nonEmptyLines(r.stderr)
	for _, p := range []string{"defaults.deliver: needs at least one target", "defaults.deliver.when: must be changed or always",
		"sources[name=a].deliver.file: must not be empty", "sources[name=b].deliver.webhook.url: invalid URL",
		"sources[name=b].deliver.comand: unknown key"} {
		if !anyLine(lines, func(l string) bool { return strings.HasPrefix(l, p) }) {
			t.Errorf("validate: no line starting with %q in:\n%s", p, r.stderr)
		}
	}
}

// repeatReader yields n bytes of a repeating pattern without holding them.
type repeatReader struct{ left int64 }

func (r *repeatReader) Read(b []byte) (int, error) {
	if r.left <= 0 {
		return 0, io.EOF
	}
	n := int(min(int64(len(b)), r.left))
	for i := range n {
		b[i] = byte('a' + i%26)
	}
	r.left -= int64(n)
	return n, nil
}

// vmRSS is the VmRSS of pid in KiB, or -1.
func vmRSS(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb
		}
	}
	return -1
}

// TestDeliverLargeBounded (contract 9.5): a 200 MiB body with max_body
// 1GiB delivered to a command running wc -c: the command counts 209715200
// bytes, the daemon's RSS sampled during the poll stays under 64 MiB above
// its idle RSS, and the spool file is never visible in the spool dir
// (TMPDIR); a spool file left there before the start is removed.
func TestDeliverLargeBounded(t *testing.T) {
	t.Parallel()
	const size = 200 << 20
	usrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(size))
		io.Copy(w, &repeatReader{left: size})
	}))
	defer usrv.Close()
	in := newInst(t)
	spool := filepath.Join(in.dir, "spool")
	if err := os.Mkdir(spool, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(spool, "pacer-spool-left-by-a-crash"), "old")
	in.env = []string{"TMPDIR=" + spool}
	count := filepath.Join(in.dir, "count")
	in.writeConfig(`shutdown_timeout: 5s
sources:
  - name: big
    type: http
    url: "` + usrv.URL + `/big"
    max_body: 1GiB
    schedule: "0 0 1 1 *"
    timeout: 2m
    deliver: {command: [/bin/sh, -c, 'wc -c > ` + count + `.tmp && mv ` + count + `.tmp ` + count + `']}
`)
	d := in.start()
	if left, _ := filepath.Glob(filepath.Join(spool, "pacer-spool-*")); len(left) != 0 {
		t.Errorf("spool files left after the start: %q", left)
	}
	idle := vmRSS(d.pid())
	if code, body := d.do(http.MethodPost, "/api/sources/big/trigger", "", ""); code != http.StatusAccepted {
		t.Fatalf("trigger: %d %s", code, body)
	}
	peak, samples := idle, 0
	eventually(t, 90*time.Second, "wc's count", func() error {
		if rss := vmRSS(d.pid()); rss > peak {
			peak = rss
		}
		samples++
		if left, _ := filepath.Glob(filepath.Join(spool, "pacer-spool-*")); len(left) != 0 {
			t.Fatalf("a spool file is visible during the poll: %q", left)
		}
		if _, err := os.Stat(count); err != nil {
			return err
		}
		return nil
	})
	b, _ := os.ReadFile(count)
	if strings.TrimSpace(string(b)) != strconv.Itoa(size) {
		t.Errorf("wc -c counted %q, want %d", b, size)
	}
	t.Logf("idle RSS %d KiB, peak %d KiB during the poll (%d samples)", idle, peak, samples)
	if idle <= 0 || peak-idle >= 64<<10 {
		t.Errorf("RSS grew by %d KiB during the poll (idle %d KiB), want under 64 MiB", peak-idle, idle)
	}
	eventually(t, 10*time.Second, "the poll committed", func() error {
		if o := d.source("big"); o.PollsTotal != 1 || o.LastError != "" {
			return errf("%v", o)
		}
		return nil
	})
}
