package sources

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// hit is one request a recording server saw.
type hit struct {
	method, path, auth, key, referer string
}

// recorder starts a loopback server that records each request and answers
// with answer (nil: 200 OK).
func recorder(t *testing.T, answer func(w http.ResponseWriter, r *http.Request) bool) (*httptest.Server, chan hit) {
	t.Helper()
	hits := make(chan hit, 16)
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		hits <- hit{r.Method, r.URL.Path, r.Header.Get("Authorization"), r.Header.Get("X-Api-Key"), r.Header.Get("Referer")}
		if answer != nil && answer(w, r) {
			return
		}
		w.Write([]byte("ok"))
	})
	return srv, hits
}

// redirectTo answers every request whose path is /r with a 307 to the
// URL in the query parameter "to".
func redirectTo(w http.ResponseWriter, r *http.Request) bool {
	if r.URL.Path != "/r" {
		return false
	}
	http.Redirect(w, r, r.URL.Query().Get("to"), http.StatusTemporaryRedirect)
	return true
}

// drain returns the hits recorded so far.
func drain(ch chan hit) []hit {
	var out []hit
	for {
		select {
		case h := <-ch:
			out = append(out, h)
		default:
			return out
		}
	}
}

func boolp(b bool) *bool { return &b }

func TestHTTPRedirectMethods(t *testing.T) {
	b, bHits := recorder(t, nil)
	a, _ := recorder(t, redirectTo)
	client := newTestClient(t, 2)
	target := b.URL + "/target"
	tests := []struct {
		method  string
		follow  *bool
		expect  []int
		err     string // after "METHOD URL: "; "" = success
		reached bool   // b saw the request
	}{
		{method: "GET", reached: true},
		{method: "HEAD", reached: true},
		{method: "GET", follow: boolp(true), reached: true},
		{method: "GET", follow: boolp(false), err: "307 Temporary Redirect"},
		{method: "POST", err: "307 Temporary Redirect"},
		{method: "PUT", err: "307 Temporary Redirect"},
		{method: "DELETE", follow: boolp(true), err: "307 Temporary Redirect"},
		{method: "POST", expect: []int{307}},
	}
	for _, tt := range tests {
		follow := "default"
		if tt.follow != nil {
			follow = fmt.Sprint(*tt.follow)
		}
		t.Run(fmt.Sprintf("%s follow=%s expect=%v", tt.method, follow, tt.expect), func(t *testing.T) {
			src := httpSource(a.URL + "/r?to=" + target)
			src.Method, src.FollowRedirects, src.ExpectStatus = tt.method, tt.follow, tt.expect
			src.Body = "x"
			res, _ := pollWithin(t, NewHTTP(src, client, nil), 5*time.Second)
			want := "<nil>"
			if tt.err != "" {
				want = tt.method + " " + src.URL + ": " + tt.err
			}
			if errText(res.Err) != want {
				t.Errorf("Err = %q, want %q", errText(res.Err), want)
			}
			got := drain(bHits)
			if tt.reached != (len(got) == 1) || (tt.reached && got[0].method != tt.method) {
				t.Errorf("target saw %+v; want reached=%v", got, tt.reached)
			}
			if !tt.reached && res.StatusCode != http.StatusTemporaryRedirect {
				t.Errorf("StatusCode = %d, want 307", res.StatusCode)
			}
		})
	}
}

func TestHTTPRedirectDropsHeaders(t *testing.T) {
	b, bHits := recorder(t, redirectTo)
	a, aHits := recorder(t, redirectTo)
	aPort := a.Listener.Addr().(*net.TCPAddr).Port
	client := newTestClient(t, 4)
	tests := []struct {
		name, to string
		aKeeps   bool // the final request on a still carries the headers
	}{
		{"same origin", "/final", true},
		{"other port", b.URL + "/final", false},
		{"other host", fmt.Sprintf("http://localhost:%d/final", aPort), false},
		{"there and back", b.URL + "/r?to=" + a.URL + "/final", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := httpSource(a.URL + "/r?to=" + tt.to + "&k=s3cr3t")
			src.Headers = map[string]string{"Authorization": "Bearer s3cr3t", "X-Api-Key": "s3cr3t"}
			if res, _ := pollWithin(t, NewHTTP(src, client, nil), 5*time.Second); res.Err != nil {
				t.Fatal(res.Err)
			}
			all := append(drain(aHits), drain(bHits)...)
			if len(all) < 2 || all[0].auth != "Bearer s3cr3t" || all[0].key != "s3cr3t" {
				t.Fatalf("requests %+v: the first must carry the headers", all)
			}
			for _, h := range all[1:] {
				if h.path == "/final" && tt.aKeeps {
					if h.auth != "Bearer s3cr3t" || h.key != "s3cr3t" {
						t.Errorf("same-origin redirect lost the headers: %+v", h)
					}
					continue
				}
				if h.auth != "" || h.key != "" || strings.Contains(h.referer, "s3cr3t") {
					t.Errorf("a request after leaving the origin carried a secret: %+v", h)
				}
			}
		})
	}
}

func TestHTTPRedirectNeverToAdmin(t *testing.T) {
	admin, adminHits := recorder(t, nil)
	other, otherHits := recorder(t, nil)
	a, _ := recorder(t, redirectTo)
	port := fmt.Sprint(admin.Listener.Addr().(*net.TCPAddr).Port)
	for _, listen := range []string{admin.Listener.Addr().String(), ":" + port, "0.0.0.0:" + port, "localhost:" + port} {
		tr := NewTransport(2)
		t.Cleanup(tr.CloseIdleConnections)
		client := NewClient(tr, []string{"", listen})
		for _, to := range []string{admin.URL, "http://localhost:" + port, "http://[::1]:" + port} {
			src := httpSource(a.URL + "/r?to=" + to + "/api/sources/x/pause")
			res, _ := pollWithin(t, NewHTTP(src, client, nil), 5*time.Second)
			if want := "redirect to the admin listener refused"; !strings.Contains(errText(res.Err), want) {
				t.Errorf("admin %s, to %s: Err = %q, want %q", listen, to, errText(res.Err), want)
			}
		}
		// Another port of the same host is followed.
		src := httpSource(a.URL + "/r?to=" + other.URL + "/x")
		if res, _ := pollWithin(t, NewHTTP(src, client, nil), 5*time.Second); res.Err != nil {
			t.Errorf("admin %s: redirect to another port: %v", listen, res.Err)
		}
		if got := drain(otherHits); len(got) != 1 {
			t.Errorf("admin %s: other server saw %+v", listen, got)
		}
	}
	if got := drain(adminHits); len(got) != 0 {
		t.Errorf("the admin listener was reached: %+v", got)
	}
}

func TestParseAdmin(t *testing.T) {
	got := parseAdmin([]string{"", "no-port", "127.0.0.1:9090", "[::1]:80", ":7", "localhost:0080", "x:no"})
	want := []adminAddr{{"127.0.0.1", 9090}, {"::1", 80}, {"", 7}, {"localhost", 80}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("parseAdmin = %v, want %v", got, want)
	}
}
