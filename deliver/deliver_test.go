package deliver

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/internal/waitfor"
	"github.com/pacer-dev/pacer/sources"
)

func TestMain(m *testing.M) {
	if os.Getenv(lowFDEnv) != "" {
		os.Exit(lowFDChild())
	}
	goleak.VerifyTestMain(m)
}

// body returns a Body holding data (in memory, or spooled when large).
func body(t *testing.T, data []byte) *sources.Capture {
	t.Helper()
	c := sources.NewCapture(t.TempDir())
	if _, err := c.Write(data); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func result(t *testing.T, data string) Result {
	return Result{Source: "src-a", Digest: "d1g357", Status: 200, ContentType: "application/json",
		StartedAt: time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC), Body: body(t, []byte(data))}
}

// errText returns the text of err, or "<nil>".
func errText(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	waitfor.True(t, within, what, cond)
}

// TestFile: the file target creates its parent directory, replaces the
// file whole (small and spooled results), leaves no temporary file and
// fails with an error naming the file when it cannot write.
func TestFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out", "sub", "a.json")
	dl := New(nil)
	for _, data := range []string{`{"v":1}`, strings.Repeat("x", 3<<20), ""} {
		if err := dl.Deliver(t.Context(), &config.Deliver{File: path}, result(t, data), nil); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != data {
			t.Fatalf("file holds %d bytes (%v), want %d", len(got), err, len(data))
		}
		if fi, _ := os.Stat(path); fi.Mode().Perm() != fileMode {
			t.Errorf("mode %v, want %v", fi.Mode().Perm(), os.FileMode(fileMode))
		}
	}
	if names, _ := os.ReadDir(filepath.Dir(path)); len(names) != 1 {
		t.Errorf("directory holds %v, want only a.json", names)
	}
	blocker := filepath.Join(dir, "plain")
	if err := os.WriteFile(blocker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	err := dl.Deliver(t.Context(), &config.Deliver{File: filepath.Join(blocker, "x.json")}, result(t, "v"), nil)
	if want := "deliver: file " + filepath.Join(blocker, "x.json") + ": create directory: not a directory"; errText(err) != want {
		t.Errorf("error %q, want %q", errText(err), want)
	}
}

// TestFileNeverPartial: while versions of different sizes are delivered,
// a reader in a tight loop sees one version whole every time, never an
// empty or partial file.
func TestFileNeverPartial(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	versions := map[string]bool{}
	var list []string
	for i := range 30 {
		v := strings.Repeat(strconv.Itoa(i%10), 1+(i*7919)%(200<<10))
		versions[v] = true
		list = append(list, v)
	}
	dl := New(nil)
	if err := dl.Deliver(t.Context(), &config.Deliver{File: path}, result(t, list[0]), nil); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var reads int
	var bad string
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			b, err := os.ReadFile(path)
			reads++
			if err != nil || !versions[string(b)] {
				bad = fmt.Sprintf("read %d bytes (%v): not a whole version", len(b), err)
				return
			}
		}
	})
	for _, v := range list[1:] {
		if err := dl.Deliver(t.Context(), &config.Deliver{File: path}, result(t, v), nil); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	if bad != "" || reads == 0 {
		t.Fatalf("%s (%d reads)", bad, reads)
	}
}

// TestCommand: the command gets the result on stdin and the PACER_*
// variables; a non-zero exit fails with the first line of its stderr,
// redacted.
func TestCommand(t *testing.T) {
	dir := t.TempDir()
	script := `cat > "$1/stdin"; env | grep '^PACER_' | sort > "$1/env"`
	r := result(t, "the result\nline 2\n")
	err := New(nil).Deliver(t.Context(), &config.Deliver{Command: []string{"/bin/sh", "-c", script, "sh", dir}}, r, nil)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "stdin")); string(b) != "the result\nline 2\n" {
		t.Errorf("stdin %q", b)
	}
	env, _ := os.ReadFile(filepath.Join(dir, "env"))
	for _, want := range []string{"PACER_SOURCE=src-a", "PACER_DIGEST=d1g357", "PACER_STATUS=200",
		"PACER_CONTENT_TYPE=application/json", "PACER_STARTED_AT=2026-12-02T06:00:00Z"} {
		if !strings.Contains(string(env), want+"\n") {
			t.Errorf("env lacks %s:\n%s", want, env)
		}
	}

	redact := config.NewRedactor("hunter2-secret").Redact
	for _, c := range []struct {
		name, script, want string
	}{
		{"first stderr line", `echo; echo "first hunter2-secret line" >&2; echo second >&2; exit 3`,
			"deliver: command sh: exit status 3: first *** line"},
		{"no stderr", `exit 1`, "deliver: command sh: exit status 1"},
		{"does not read stdin", `exit 0`, ""},
	} {
		err := New(nil).Deliver(t.Context(), &config.Deliver{Command: []string{"/bin/sh", "-c", c.script}}, result(t, strings.Repeat("y", 2<<20)), redact)
		if c.want == "" && err != nil || c.want != "" && errText(err) != c.want {
			t.Errorf("%s: error %q, want %q", c.name, errText(err), c.want)
		}
	}
	err = New(nil).Deliver(t.Context(), &config.Deliver{Command: []string{filepath.Join(dir, "missing")}}, r, nil)
	if !strings.HasPrefix(errText(err), "deliver: command missing: ") {
		t.Errorf("missing program: %q", errText(err))
	}
}

// TestCommandKilledAtDeadline: at the poll's deadline the command's whole
// process group is killed, a child it forked included, and the delivery
// fails with a timeout.
func TestCommandKilledAtDeadline(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	script := `sleep 60 & echo $! > "$1"; wait`
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	err := New(nil).Deliver(ctx, &config.Deliver{Command: []string{"/bin/sh", "-c", script, "sh", pidFile}}, result(t, "x"), nil)
	if errText(err) != "deliver: command sh: timeout" || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error %q, want a timeout", errText(err))
	}
	b, rerr := os.ReadFile(pidFile)
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if rerr != nil || pid <= 0 {
		t.Fatalf("no pid of the forked sleeper: %q %v", b, rerr)
	}
	eventually(t, 5*time.Second, "the forked sleeper is still alive", func() bool {
		return processGone(pid)
	})
}

// processGone reports whether pid no longer runs (gone, or a zombie).
func processGone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	i := bytes.LastIndexByte(b, ')')
	return i > 0 && i+2 < len(b) && b[i+2] == 'Z'
}

// received is what a webhook receiver got.
type received struct {
	method, contentType, source, digest, key string
	length                                   int64
	body                                     []byte
}

// TestWebhook: the result is the request's body with its Content-Length
// and Content-Type, X-Pacer-Source, X-Pacer-Digest and the configured
// headers; an answer outside 2xx fails with its status, a redirect is not
// followed.
func TestWebhook(t *testing.T) {
	var mu sync.Mutex
	var got []received
	var redirected int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/elsewhere" {
			mu.Lock()
			redirected++
			mu.Unlock()
			return
		}
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, received{r.Method, r.Header.Get("Content-Type"), r.Header.Get("X-Pacer-Source"),
			r.Header.Get("X-Pacer-Digest"), r.Header.Get("X-Key"), r.ContentLength, b})
		mu.Unlock()
		switch r.URL.Path {
		case "/fail":
			w.WriteHeader(http.StatusInternalServerError)
		case "/redirect":
			http.Redirect(w, r, "/elsewhere", http.StatusFound)
		}
	}))
	defer srv.Close()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	dl := New(tr)
	big := strings.Repeat("z", 3<<20)
	for _, data := range []string{"payload", big, ""} {
		w := &config.Webhook{URL: srv.URL + "/in", Method: "PUT", Headers: map[string]string{"X-Key": "k-123"}}
		if err := dl.Deliver(t.Context(), &config.Deliver{Webhook: w}, result(t, data), nil); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		g := got[len(got)-1]
		mu.Unlock()
		if g.method != "PUT" || g.contentType != "application/json" || g.source != "src-a" || g.digest != "d1g357" ||
			g.key != "k-123" || g.length != int64(len(data)) || string(g.body) != data {
			t.Errorf("%d bytes: received %s %q %q %q %q length %d body %d", len(data), g.method, g.contentType, g.source, g.digest, g.key, g.length, len(g.body))
		}
	}
	r := result(t, "x")
	r.ContentType = ""
	if err := dl.Deliver(t.Context(), &config.Deliver{Webhook: &config.Webhook{URL: srv.URL + "/in", Method: "POST"}}, r, nil); err != nil {
		t.Fatal(err)
	}
	if g := got[len(got)-1]; g.contentType != "application/octet-stream" || g.method != "POST" {
		t.Errorf("without a content type: %q %s", g.contentType, g.method)
	}
	for path, want := range map[string]string{"/fail": "500 Internal Server Error", "/redirect": "302 Found"} {
		err := dl.Deliver(t.Context(), &config.Deliver{Webhook: &config.Webhook{URL: srv.URL + path, Method: "POST"}}, result(t, "x"), nil)
		if w := "deliver: webhook POST " + srv.URL + path + ": " + want; errText(err) != w {
			t.Errorf("%s: error %q, want %q", path, errText(err), w)
		}
	}
	if redirected != 0 {
		t.Errorf("the redirect was followed %d times", redirected)
	}
}

// TestWebhookRedaction: neither a configured header's value echoed in the
// receiver's status line nor the password of the webhook's URL appears
// in the error.
func TestWebhookRedaction(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer ln.Close()
	wg.Go(func() { // answers each request with its X-Key in the reason phrase
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			req, err := http.ReadRequest(bufio.NewReader(c))
			if err == nil {
				io.Copy(io.Discard, req.Body)
				fmt.Fprintf(c, "HTTP/1.1 401 bad key %s\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", req.Header.Get("X-Key"))
			}
			c.Close()
		}
	})
	const key, pw = "header-secret-0123", "url-password-4567"
	redact := config.NewRedactor(key, pw).Redact
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	dl := New(tr)
	w := &config.Webhook{URL: "http://u:" + pw + "@" + ln.Addr().String() + "/in", Method: "POST", Headers: map[string]string{"X-Key": key}}
	err = dl.Deliver(t.Context(), &config.Deliver{Webhook: w}, result(t, "x"), redact)
	if text := errText(err); !strings.HasPrefix(text, "deliver: webhook POST http://u:") || !strings.Contains(text, "401 bad key ***") ||
		strings.Contains(text, key) || strings.Contains(text, pw) {
		t.Errorf("error %q: a secret shows, or not the answer", text)
	}
	// Without a redactor the URL's password is still not shown.
	w.URL = "http://u:" + pw + "@127.0.0.1:1/in"
	if text := errText(dl.Deliver(t.Context(), &config.Deliver{Webhook: w}, result(t, "x"), nil)); text == "<nil>" || strings.Contains(text, pw) {
		t.Errorf("closed port: %q", text)
	}
}

// TestOrderAndAllMustSucceed: the targets run in the order file, command,
// webhook; the first failure stops the delivery.
func TestOrderAndAllMustSucceed(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "out")
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer srv.Close()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	// The command sees the file already written.
	check := `test "$(cat "$1")" = data || { echo "file not written first" >&2; exit 1; }; exit "$2"`
	d := &config.Deliver{File: file, Command: []string{"/bin/sh", "-c", check, "sh", file, "0"},
		Webhook: &config.Webhook{URL: srv.URL, Method: "POST"}}
	if err := New(tr).Deliver(t.Context(), d, result(t, "data"), nil); err != nil || hits.Load() != 1 {
		t.Fatalf("all targets: %v, webhook hits %d", err, hits.Load())
	}
	d.Command[5] = "4"
	if err := New(tr).Deliver(t.Context(), d, result(t, "data"), nil); errText(err) != "deliver: command sh: exit status 4" || hits.Load() != 1 {
		t.Errorf("failing command: %q, webhook hits %d (want 1: not called)", errText(err), hits.Load())
	}
}
