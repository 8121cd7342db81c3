package sources

import (
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/config"
)

// TestClientsShared: sources of the same redirect rule and client settings
// share one client, whose rule is theirs; a source that does not follow
// redirects gets another, and its poller takes the 3xx as the answer. A
// client no poller holds is dropped.
func TestClientsShared(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/from" {
			http.Redirect(w, r, "/to", http.StatusFound)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	cs := NewClients(NewClient(NewTransport(4), nil))
	no := false
	a := &config.Source{Name: "a", Type: "http", URL: srv.URL + "/from"}
	b := &config.Source{Name: "b", Type: "http", URL: srv.URL + "/from"}
	c := &config.Source{Name: "c", Type: "http", URL: srv.URL + "/from", FollowRedirects: &no}
	if cs.For(a) != cs.For(b) {
		t.Error("two sources of the same settings got two clients")
	}
	if cs.For(a) == cs.For(c) {
		t.Error("a source without redirects shares the client of one with them")
	}
	for _, tc := range []struct {
		src  *config.Source
		code int
	}{{a, http.StatusNoContent}, {b, http.StatusNoContent}, {c, http.StatusFound}} {
		p, err := New(tc.src, cs, nil)
		if err != nil {
			t.Fatal(err)
		}
		res := p.Poll(t.Context())
		if res.StatusCode != tc.code {
			t.Errorf("%s: status %d (err %v), want %d", tc.src.Name, res.StatusCode, res.Err, tc.code)
		}
	}
	if n := cs.held(); n != 2 {
		t.Errorf("%d clients held, want 2", n)
	}
	// No poller holds them any more: both are dropped.
	eventually(t, 10*time.Second, "the clients dropped", func() bool {
		runtime.GC()
		return cs.held() == 0
	})
}
