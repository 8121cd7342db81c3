package scheduler

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// etagUpstream serves one document with an ETag, honouring If-None-Match
// with 304, and counts the conditional requests it answered with 304.
type etagUpstream struct {
	body atomic.Value // string
	hits atomic.Int64 // 304s sent
	reqs atomic.Int64
}

func newETagUpstream(t *testing.T, body string) (*etagUpstream, string) {
	u := &etagUpstream{}
	u.body.Store(body)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.reqs.Add(1)
		b := u.body.Load().(string)
		etag := `"` + sha(b)[:12] + `"`
		w.Header().Set("ETag", etag)
		if r.Header.Get("If-None-Match") == etag {
			u.hits.Add(1)
			w.WriteHeader(http.StatusNotModified)
			return
		}
		fmt.Fprint(w, b)
	}))
	t.Cleanup(srv.Close)
	return u, srv.URL
}

// TestResultsAcrossRestart: against a real upstream that answers 304 to a
// matching If-None-Match and an exec source whose output changes, polls
// are counted changed or unchanged (pacer_results_total, changes_total,
// last_changed_at, history's changed and digest), and the validators and
// digest survive a restart: the first GET after it is conditional and
// gets a 304, the exec source's first poll after it is unchanged.
func TestResultsAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	up, url := newETagUpstream(t, "v1")
	out := filepath.Join(dir, "out.txt")
	writeOut := func(s string) {
		if err := os.WriteFile(out, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeOut("x1")
	body := fmt.Sprintf(`
concurrency: 2
defaults: {schedule: "0 0 1 1 *", timeout: 5s}
sources:
  - {name: web, type: http, url: %q}
  - {name: job, type: exec, command: [cat, %q]}
`, url, out)
	h := start(t, dir, writeConfig(t, dir, body))
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
	poll("web")
	poll("web")
	if up.hits.Load() != 1 {
		t.Fatalf("upstream sent %d 304s, want 1 (the second GET is conditional)", up.hits.Load())
	}
	poll("job")
	poll("job")
	writeOut("x2")
	poll("job")
	if c, u := h.metric("pacer_results_total", "result", "changed"), h.metric("pacer_results_total", "result", "unchanged"); c != 3 || u != 2 {
		t.Errorf("pacer_results_total changed %v unchanged %v, want 3 and 2", c, u)
	}
	web, job := h.source("web"), h.source("job")
	if web.ChangesTotal != 1 || web.LastChangedAt == nil || job.ChangesTotal != 2 || job.LastChangedAt == nil {
		t.Errorf("changes: web %d %v, job %d %v; want 1 and 2", web.ChangesTotal, web.LastChangedAt, job.ChangesTotal, job.LastChangedAt)
	}
	checkHistory(t, h, "web", []bool{false, true}, []string{"", sha("v1")})
	checkHistory(t, h, "job", []bool{true, false, true}, []string{sha("x2"), sha("x1"), sha("x1")})
	h.stop()

	h = start(t, dir, writeConfig(t, dir, body))
	defer h.stop()
	if st := h.stored("web"); st.ETag == "" || st.Digest != sha("v1") {
		t.Fatalf("stored web: etag %q digest %q", st.ETag, st.Digest)
	}
	poll("web")
	poll("job")
	if up.hits.Load() != 2 || up.reqs.Load() != 3 {
		t.Errorf("after restart: upstream %d requests, %d 304s; want 3 and 2", up.reqs.Load(), up.hits.Load())
	}
	checkHistory(t, h, "job", []bool{false, true}, []string{sha("x2"), sha("x2")})
	up.body.Store("v2")
	poll("web")
	if w := h.source("web"); w.ChangesTotal != 2 || up.hits.Load() != 2 {
		t.Errorf("after the upstream changed: web changes %d, 304s %d; want 2 and 2", w.ChangesTotal, up.hits.Load())
	}
	checkHistory(t, h, "web", []bool{true, false, false}, []string{sha("v2"), "", ""})
}

// checkHistory checks the newest records of name: their changed flags and
// digests, newest first.
func checkHistory(t *testing.T, h *harness, name string, changed []bool, digests []string) {
	t.Helper()
	recs, err := h.s.History(t.Context(), name, len(changed))
	if err != nil || len(recs) != len(changed) {
		t.Fatalf("history of %s: %d records, %v; want %d", name, len(recs), err, len(changed))
	}
	var got, want []string
	for i, r := range recs {
		got = append(got, fmt.Sprintf("%v/%s", r.Changed, r.Digest))
		want = append(want, fmt.Sprintf("%v/%s", changed[i], digests[i]))
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("history of %s (changed/digest, newest first):\n got  %v\n want %v", name, got, want)
	}
}
