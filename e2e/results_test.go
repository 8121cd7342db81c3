package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// docServer is an upstream of documents that honours If-None-Match and
// If-Modified-Since with 304 (net/http's ServeContent rules), counting per
// path the requests, those that carried a validator and the 304s.
type docServer struct {
	srv *httptest.Server
	mu  sync.Mutex
	doc map[string]string
	n   map[string]*docCount
}

type docCount struct{ reqs, conditional, notModified int }

func newDocServer(t *testing.T) *docServer {
	s := &docServer{doc: map[string]string{}, n: map[string]*docCount{}}
	modified := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		body, c := s.doc[r.URL.Path], s.count(r.URL.Path)
		c.reqs++
		if r.Header.Get("If-None-Match") != "" || r.Header.Get("If-Modified-Since") != "" {
			c.conditional++
		}
		etag := `"` + sha(body)[:16] + `"`
		if r.Header.Get("If-None-Match") == etag {
			c.notModified++
		}
		s.mu.Unlock()
		w.Header().Set("ETag", etag)
		http.ServeContent(w, r, "", modified, strings.NewReader(body))
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *docServer) count(p string) *docCount {
	if s.n[p] == nil {
		s.n[p] = &docCount{}
	}
	return s.n[p]
}

func (s *docServer) set(p, body string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.doc[p] = body
}

func (s *docServer) counts(p string) docCount {
	s.mu.Lock()
	defer s.mu.Unlock()
	return *s.count(p)
}

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// resultObj is the part of the source object of contract 9.2.
type resultObj struct {
	PollsTotal    int64      `json:"polls_total"`
	LastChangedAt *time.Time `json:"last_changed_at"`
	ChangesTotal  int64      `json:"changes_total"`
}

// resultRec is the part of a history record of contract 9.2.
type resultRec struct {
	Outcome    string `json:"outcome"`
	StatusCode *int   `json:"status_code"`
	Changed    bool   `json:"changed"`
	Digest     string `json:"digest"`
}

func (d *daemon) results(name string) resultObj {
	d.t.Helper()
	var o resultObj
	d.getJSON("/api/sources/"+name, &o)
	return o
}

func (d *daemon) resultHistory(name string, n int) []resultRec {
	d.t.Helper()
	var recs []resultRec
	d.getJSON(fmt.Sprintf("/api/sources/%s/history?n=%d", name, n), &recs)
	return recs
}

// TestConditionalAndChanges (contract 9.1, 9.2) against the binary: the
// second GET of a source carries the first 200's validators and gets a
// 304, recorded as an unchanged success without digest; conditional: false
// sends none and its equal bodies are unchanged by digest; an exec source's
// output is digested and a new output is a change. After a restart the
// first GET is conditional again (the validators were stored) and a
// changed upstream document is a change. History (API and pacer history
// -json), the source object and pacer_results_total show it.
func TestConditionalAndChanges(t *testing.T) {
	t.Parallel()
	up := newDocServer(t)
	up.set("/doc", "v1")
	up.set("/plain", "p1")
	in := newInst(t)
	out := filepath.Join(in.dir, "out.txt")
	writeFile(t, out, "x1")
	in.writeConfig(`shutdown_timeout: 5s
defaults: {schedule: "@every 1s"}
sources:
  - {name: doc, type: http, url: "` + up.srv.URL + `/doc"}
  - {name: plain, type: http, url: "` + up.srv.URL + `/plain", conditional: false}
  - {name: job, type: exec, command: [cat, "` + out + `"]}
`)
	d := in.start()
	eventually(t, 15*time.Second, "three polls of each source", func() error {
		for _, n := range []string{"doc", "plain", "job"} {
			if o := d.results(n); o.PollsTotal < 3 {
				return errf("%s: %d polls", n, o.PollsTotal)
			}
		}
		return nil
	})
	if c := up.counts("/doc"); c.conditional != c.reqs-1 || c.notModified != c.reqs-1 {
		t.Errorf("/doc: %+v; want every request but the first conditional, answered 304", c)
	}
	if c := up.counts("/plain"); c.conditional != 0 {
		t.Errorf("/plain (conditional: false): %+v; want no conditional request", c)
	}
	checkResults(t, d.resultHistory("doc", 100), sha("v1"), "")
	checkResults(t, d.resultHistory("plain", 100), sha("p1"), sha("p1"))
	checkResults(t, d.resultHistory("job", 100), sha("x1"), sha("x1"))
	for _, n := range []string{"doc", "plain", "job"} {
		if o := d.results(n); o.ChangesTotal != 1 || o.LastChangedAt == nil {
			t.Errorf("%s: %+v; want one change", n, o)
		}
	}

	writeFile(t, out, "x2")
	eventually(t, 10*time.Second, "job's new output is a change", func() error {
		if o := d.results("job"); o.ChangesTotal != 2 {
			return errf("job: %+v", o)
		}
		return nil
	})
	if v := d.metric("pacer_results_total", "result", "changed"); v != 4 {
		t.Errorf(`pacer_results_total{result="changed"} = %v, want 4`, v)
	}
	if v := d.metric("pacer_results_total", "result", "unchanged"); v < 6 {
		t.Errorf(`pacer_results_total{result="unchanged"} = %v, want at least 6`, v)
	}
	d.stop(10 * time.Second)

	var cli []resultRec
	if err := json.Unmarshal([]byte(in.mustCLI("history", "-json", "-n", "100", "doc").stdout), &cli); err != nil {
		t.Fatal(err)
	}
	checkResults(t, cli, sha("v1"), "")

	before := up.counts("/doc")
	d = in.start()
	eventually(t, 10*time.Second, "a poll of doc after the restart", func() error {
		if c := up.counts("/doc"); c.reqs <= before.reqs {
			return errf("%+v", c)
		}
		return nil
	})
	if c := up.counts("/doc"); c.conditional-before.conditional != c.reqs-before.reqs || c.notModified == before.notModified {
		t.Errorf("/doc after the restart: %+v (before %+v); want conditional requests answered 304", c, before)
	}
	up.set("/doc", "v2")
	eventually(t, 10*time.Second, "the changed document is a change", func() error {
		if o := d.results("doc"); o.ChangesTotal != 2 {
			return errf("doc: %+v", o)
		}
		return nil
	})
	changes := 0
	for _, r := range d.resultHistory("doc", 100) {
		if r.Changed {
			changes++
			if changes == 1 && r.Digest != sha("v2") {
				t.Errorf("doc's newest change %+v; want digest %s (v2)", r, sha("v2"))
			}
		}
	}
	if changes != 2 {
		t.Errorf("doc's history has %d changes, want 2 (v1, v2)", changes)
	}
}

// checkResults checks a history, newest first, whose oldest record is the
// first result (changed, digest first) and every later one unchanged with
// digest later ("" for a 304).
func checkResults(t *testing.T, recs []resultRec, first, later string) {
	t.Helper()
	if len(recs) < 2 {
		t.Fatalf("history %+v: want at least 2 records", recs)
	}
	last := recs[len(recs)-1]
	if last.Outcome != "success" || !last.Changed || last.Digest != first {
		t.Errorf("first record %+v; want a changed success with digest %s", last, first)
	}
	for _, r := range recs[:len(recs)-1] {
		if r.Outcome != "success" || r.Changed || r.Digest != later {
			t.Errorf("later record %+v; want an unchanged success with digest %q", r, later)
		}
		if later == "" && (r.StatusCode == nil || *r.StatusCode != http.StatusNotModified) {
			t.Errorf("later record %+v; want status 304", r)
		}
	}
}
