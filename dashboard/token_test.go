package dashboard_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/dashboard"
)

const token = "tok-0123456789-abcdef"

// With token_file the page is read-only until the token is entered in its
// form; then a session cookie (HttpOnly, SameSite=Strict, Path=/) lets this
// browser act. A wrong token gets 401 and the form again. The JSON API
// keeps requiring the bearer token: the cookie does not open it.
func TestTokenFlow(t *testing.T) {
	f := newFixture(t, token)
	f.poll("xss", "error")

	// Read-only: the token form, the buttons disabled.
	a := f.get("/")
	if a.code != http.StatusOK || !strings.Contains(a.body, `action="/dash/login"`) || !strings.Contains(a.body, `name="token"`) ||
		!strings.Contains(a.body, `class="reset" disabled>reset</button>`) {
		t.Fatalf("GET / with a token: want the token form and disabled buttons: %s", a)
	}
	if p := f.get("/sources/xss"); !strings.Contains(p.body, `id="reset" disabled>`) || !strings.Contains(p.body, `id="pause" disabled>`) {
		t.Errorf("the source page's buttons are not disabled")
	}
	// Actions are refused with 401 and the form, and change nothing.
	for _, act := range []string{"reset", "trigger", "pause", "resume"} {
		a := f.post("/sources/xss/"+act, url.Values{"reason": {"x"}})
		if a.code != http.StatusUnauthorized || !strings.Contains(a.body, `action="/dash/login"`) {
			t.Errorf("POST %s without a session: %s", act, a)
		}
	}
	if s := f.state("xss"); s != "error" {
		t.Fatalf("refused actions changed the state: %s", s)
	}
	// A wrong token: 401, the form again, no cookie.
	for _, bad := range []string{"", "wrong", token + "x", strings.ToUpper(token)} {
		a := f.post("/dash/login", url.Values{"token": {bad}, "back": {"/?state=error"}})
		if a.code != http.StatusUnauthorized || !strings.Contains(a.body, `name="token"`) || len(a.header.Values("Set-Cookie")) > 0 &&
			strings.Contains(strings.Join(a.header.Values("Set-Cookie"), ";"), "pacer_session") {
			t.Errorf("login with %q: %s %v", bad, a, a.header.Values("Set-Cookie"))
		}
	}
	if s := f.state("xss"); s != "error" {
		t.Fatalf("a refused login changed the state: %s", s)
	}

	// The right token: a session cookie with the right attributes, back to
	// where the form was.
	a = f.post("/dash/login", url.Values{"token": {" " + token + " "}, "back": {"/?state=error"}})
	if a.code != http.StatusSeeOther || a.header.Get("Location") != "/?state=error" {
		t.Fatalf("login: %s (Location %q)", a, a.header.Get("Location"))
	}
	var session *http.Cookie
	for _, c := range (&http.Response{Header: a.header}).Cookies() {
		if c.Name == "pacer_session" {
			session = c
		}
	}
	if session == nil {
		t.Fatalf("login set no session cookie: %v", a.header.Values("Set-Cookie"))
	}
	if !session.HttpOnly || session.SameSite != http.SameSiteStrictMode || session.Path != "/" || session.Secure ||
		session.MaxAge != int((12*time.Hour)/time.Second) || len(session.Value) < 43 || strings.Contains(session.Value, token) {
		t.Errorf("session cookie %+v: want HttpOnly, SameSite=Strict, Path=/, not Secure over http, 12 h, 32 random bytes", session)
	}
	if p := f.get("/?state=error"); strings.Contains(p.body, `disabled>reset`) || !strings.Contains(p.body, `action="/dash/logout"`) {
		t.Errorf("after login the buttons are still disabled")
	}
	// The session authorises the page's POSTs...
	a = f.post("/sources/xss/reset", url.Values{"back": {"/sources/xss"}})
	if a.code != http.StatusSeeOther || f.state("xss") == "error" {
		t.Fatalf("POST reset with a session: %s, state %s", a, f.state("xss"))
	}
	// ...but not the JSON API's, which want the bearer token.
	req, _ := http.NewRequest(http.MethodPost, f.srv.URL+"/api/sources/api-one/pause", nil)
	if a := f.do(req); a.code != http.StatusUnauthorized || f.state("api-one") == "paused" {
		t.Errorf("API POST with the session cookie only: %s", a)
	}
	// Logging out ends the session.
	if a := f.post("/dash/logout", nil); a.code != http.StatusSeeOther {
		t.Errorf("logout: %s", a)
	}
	req, _ = http.NewRequest(http.MethodPost, f.srv.URL+"/sources/api-one/pause", nil)
	req.Header.Set("Origin", f.srv.URL)
	req.AddCookie(session) // a stolen copy of the cookie is dead too
	if a := f.do(req); a.code != http.StatusUnauthorized || f.state("api-one") == "paused" {
		t.Errorf("POST with a closed session: %s, state %s", a, f.state("api-one"))
	}
}

// Without token_file, a client on another machine sees the page but
// cannot act (403).
func TestNoTokenRemoteReadOnly(t *testing.T) {
	f := newFixture(t, "")
	d, err := dashboard.New(f.sched, dashboard.Options{})
	if err != nil {
		t.Fatal(err)
	}
	get := httptest.NewRequest(http.MethodGet, "/sources/api-one", nil)
	get.RemoteAddr = "192.0.2.7:5555"
	w := httptest.NewRecorder()
	d.ServeHTTP(w, get)
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `id="pause" disabled>`) || !strings.Contains(w.Body.String(), "read-only from another machine") {
		t.Errorf("GET from another machine: %d, want the page read-only", w.Code)
	}
	post := httptest.NewRequest(http.MethodPost, "/sources/api-one/pause", strings.NewReader("reason=x"))
	post.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	post.RemoteAddr = "192.0.2.7:5555"
	w = httptest.NewRecorder()
	d.ServeHTTP(w, post)
	if w.Code != http.StatusForbidden || f.state("api-one") == "paused" {
		t.Errorf("POST from another machine: %d, state %s", w.Code, f.state("api-one"))
	}
}
