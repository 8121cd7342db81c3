package scheduler

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// deliverUpstream serves one document with an ETag, honouring
// If-None-Match with 304, and remembers whether its last request carried
// one.
type deliverUpstream struct {
	body        atomic.Value // string
	conditional atomic.Bool  // the last request had If-None-Match
}

// receiver is a webhook receiver that fails with 500 while failing is set
// and records the bodies it accepted.
type receiver struct {
	failing atomic.Bool
	mu      sync.Mutex
	got     []string
	digests []string
}

func (r *receiver) accepted() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.got...)
}

// TestDeliverInPoll: a changed result is delivered inside the poll, an
// unchanged one (a 304) is not; a failed delivery fails the poll with
// "deliver: ", keeps the last delivered digest, clears the validators so
// the next GET is unconditional, and once the receiver recovers the result
// is delivered once; pacer_deliveries_total counts both outcomes. With
// when: always, an exec source's unchanged output is delivered every time.
func TestDeliverInPoll(t *testing.T) {
	dir := t.TempDir()
	up := &deliverUpstream{}
	up.body.Store("v1")
	usrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b := up.body.Load().(string)
		etag := `"` + sha(b)[:12] + `"`
		w.Header().Set("ETag", etag)
		inm := r.Header.Get("If-None-Match")
		up.conditional.Store(inm != "")
		if inm == etag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		fmt.Fprint(w, b)
	}))
	defer usrv.Close()
	rc := &receiver{}
	rsrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if rc.failing.Load() {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		rc.mu.Lock()
		rc.got, rc.digests = append(rc.got, string(b)), append(rc.digests, r.Header.Get("X-Pacer-Digest"))
		rc.mu.Unlock()
	}))
	defer rsrv.Close()
	out := filepath.Join(dir, "always.out")
	h := start(t, dir, writeConfig(t, dir, fmt.Sprintf(`
concurrency: 2
defaults: {schedule: "0 0 1 1 *", timeout: 5s}
sources:
  - {name: web, type: http, url: %q, deliver: {webhook: {url: %q}}}
  - {name: job, type: exec, command: [echo, same], deliver: {command: [/bin/sh, -c, 'cat >> %s'], when: always}}
`, usrv.URL, rsrv.URL, out)))
	defer h.stop()
	poll := func(name string) {
		t.Helper()
		before := h.source(name).PollsTotal
		if err := h.s.Trigger(name); err != nil {
			t.Fatal(err)
		}
		h.waitFor(name+" polled and committed", 10*time.Second, func() bool {
			if h.source(name).PollsTotal <= before {
				return false
			}
			st, ok, err := h.store.GetState(t.Context(), name)
			if err != nil {
				t.Fatal(err)
			}
			return ok && st.PollsTotal > before
		})
	}
	deliveries := func() string {
		return fmt.Sprintf("success %v failure %v", h.metric("pacer_deliveries_total", "outcome", "success"),
			h.metric("pacer_deliveries_total", "outcome", "failure"))
	}

	poll("web")
	poll("web") // a 304: nothing to deliver
	if got := rc.accepted(); len(got) != 1 || got[0] != "v1" || rc.digests[0] != sha("v1") || !up.conditional.Load() {
		t.Fatalf("receiver got %q (digests %q), last GET conditional %v; want v1 once, then a conditional GET", got, rc.digests, up.conditional.Load())
	}
	up.body.Store("v2")
	rc.failing.Store(true)
	poll("web")
	st := h.stored("web")
	if st.LastOutcome != "failure" || !strings.HasPrefix(st.LastError, "deliver: webhook POST "+rsrv.URL+": 500") ||
		st.Digest != sha("v1") || st.ETag != "" {
		t.Fatalf("after a failed delivery: outcome %s error %q digest %s etag %q", st.LastOutcome, st.LastError, st.Digest, st.ETag)
	}
	if d := deliveries(); d != "success 1 failure 1" {
		t.Errorf("deliveries: %s", d)
	}
	poll("web")
	if up.conditional.Load() {
		t.Error("the GET after a failed delivery was conditional")
	}
	rc.failing.Store(false)
	poll("web")
	poll("web")
	if got := rc.accepted(); len(got) != 2 || got[1] != "v2" {
		t.Errorf("receiver got %q, want v1 then v2 once", got)
	}
	if st := h.stored("web"); st.LastOutcome != "success" || st.Digest != sha("v2") || st.ETag == "" || st.ChangesTotal != 2 {
		t.Errorf("after recovery: %+v", st)
	}

	poll("job")
	poll("job")
	if b, err := os.ReadFile(out); err != nil || string(b) != "same\nsame\n" {
		t.Errorf("when: always: command got %q (%v), want the unchanged output twice", b, err)
	}
	if d := deliveries(); d != "success 4 failure 2" {
		t.Errorf("deliveries: %s, want success 4 (web twice, job twice), failure 2", d)
	}
}
