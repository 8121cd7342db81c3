package sources

import (
	"net/http"
	"strings"
	"sync"
	"testing"
)

// authRecorder is a handler that records the Authorization of each request
// by path, answering 401 on paths under /deny/.
type authRecorder struct {
	mu  sync.Mutex
	got map[string]string
}

func (a *authRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	a.got[r.URL.Path] = r.Header.Get("Authorization")
	a.mu.Unlock()
	if strings.HasPrefix(r.URL.Path, "/deny/") {
		w.WriteHeader(http.StatusUnauthorized)
	}
}

func (a *authRecorder) at(path string) (string, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	v, ok := a.got[path]
	return v, ok
}

// TestAuthSentAndDropped: basic_auth and bearer_token_file reach the
// server as Authorization, are kept on a redirect within the origin and
// dropped on one to another origin, and never show in a poll's error.
func TestAuthSentAndDropped(t *testing.T) {
	dir := t.TempDir()
	writeTestFile(t, dir, "pw", []byte("pw-6a1f9e\n"))
	writeTestFile(t, dir, "token", []byte("tok-93c2\n"))
	other := &authRecorder{got: map[string]string{}}
	otherSrv := newServer(t, other.ServeHTTP)
	home := &authRecorder{got: map[string]string{}}
	mux := http.NewServeMux()
	mux.HandleFunc("/same", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/final", http.StatusFound) })
	mux.HandleFunc("/away", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, otherSrv.URL+"/landed", http.StatusFound)
	})
	mux.Handle("/", home)
	srv := newServer(t, mux.ServeHTTP)
	p := newTestTransports(t, 2)
	basic, bearer := `basic_auth: {username: pacer, password_file: pw}`, `bearer_token_file: token`
	const basicHeader = "Basic cGFjZXI6cHctNmExZjll" // pacer:pw-6a1f9e (8 bytes: masked anywhere, config.MinSecretLen)

	for _, tt := range []struct{ path, keys, want string }{
		{"/basic", basic, basicHeader},
		{"/bearer", bearer, "Bearer tok-93c2"},
	} {
		if res := pollSource(t, p, dir, srv.URL+tt.path, tt.keys); res.Err != nil {
			t.Fatalf("%s: %v", tt.path, res.Err)
		}
		if got, _ := home.at(tt.path); got != tt.want {
			t.Errorf("%s: server saw Authorization %q, want %q", tt.path, got, tt.want)
		}
	}
	if res := pollSource(t, p, dir, srv.URL+"/same", bearer); res.Err != nil {
		t.Fatal(res.Err)
	}
	if got, _ := home.at("/final"); got != "Bearer tok-93c2" {
		t.Errorf("same-origin redirect: Authorization %q, want the token", got)
	}
	for _, keys := range []string{basic, bearer} {
		if res := pollSource(t, p, dir, srv.URL+"/away", keys); res.Err != nil {
			t.Fatal(res.Err)
		}
		if got, ok := other.at("/landed"); !ok || got != "" {
			t.Errorf("%s: cross-origin redirect reached %v with Authorization %q", keys, ok, got)
		}
	}
	// A poll's error shows the URL; the file's secret in it is masked.
	res := pollSource(t, p, dir, srv.URL+"/deny/tok-93c2", bearer)
	if e := errText(res.Err); !strings.HasSuffix(e, "/deny/***: 401 Unauthorized") || strings.Contains(e, "tok-93c2") {
		t.Errorf("error %q", e)
	}
	res = pollSource(t, p, dir, srv.URL+"/deny/pw-6a1f9e", basic)
	if e := errText(res.Err); !strings.HasSuffix(e, "/deny/***: 401 Unauthorized") {
		t.Errorf("error %q", e)
	}
}
