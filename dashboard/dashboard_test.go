package dashboard_test

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
)

// wantSecurityHeaders checks the headers every dashboard answer carries.
func wantSecurityHeaders(t *testing.T, what string, a answer) {
	t.Helper()
	want := map[string]string{
		"Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
			"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
		"X-Content-Type-Options": "nosniff",
		"Referrer-Policy":        "same-origin",
	}
	for k, v := range want {
		if got := a.header.Get(k); got != v {
			t.Errorf("%s: %s = %q, want %q", what, k, got, v)
		}
	}
}

// The overview: counts per state, polls in flight against the cap, the
// store's health, the first page of the table in configuration order, the
// strips, the explanations, relative times with the exact time on hover,
// and no inline script or style (the CSP forbids them).
func TestOverview(t *testing.T) {
	f := newFixture(t, "")
	f.poll("xss", "error")
	f.poll("api-one", "ok")
	f.poll("down", "backoff")

	a := f.get("/")
	if a.code != http.StatusOK || !strings.HasPrefix(a.header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET /: %s", a)
	}
	wantSecurityHeaders(t, "GET /", a)
	names := rows(a.body)
	want := []string{"xss", "api-one", "api-two", "down", "secret"}
	for i := range 45 {
		want = append(want, fmt.Sprintf("gen-%03d", i))
	}
	if !slices.Equal(names, want) {
		t.Errorf("rows of page 1 = %v\nwant %v", names, want)
	}
	for _, s := range []string{
		`<span>all</span><b>125</b>`, `<span>error</span><b>1</b>`, `<span>ok</span><b>1</b>`,
		`<span>backoff</span><b>1</b>`, `<span>pending</span><b>122</b>`,
		`polls in flight <b id="inflight">0</b> of 2`, `store <span class="good">ready</span>`,
		`<span class="state s-error">error</span>`, `<i class="o o-failure" title="`,
		`<i class="o o-success" title="`, "backoff: failure 1, next attempt in ",
		"error: 1 consecutive failures; last: ", "; reset to resume",
		"page 1 of 3 · 125 shown of 125", `<a href="/?page=2" rel="next">`,
		`<form method="post" action="/sources/xss/reset"`,
		`<script src="/dash/static/app.js" defer></script>`,
	} {
		if !strings.Contains(a.body, s) {
			t.Errorf("GET / lacks %q", s)
		}
	}
	// A time: relative text, exact RFC 3339 UTC on hover.
	if !regexpTime.MatchString(a.body) {
		t.Errorf("GET / has no <time datetime=... title=...> with a relative text")
	}
	if strings.Count(a.body, "<script") != 1 || strings.Contains(a.body, "style=") || strings.Contains(a.body, "<style") {
		t.Errorf("GET / has inline script or style")
	}
	// A reset button only where it helps (the errored row).
	if n := strings.Count(a.body, `/reset"`); n != 1 {
		t.Errorf("%d reset forms on the overview, want 1 (the errored source)", n)
	}
}

// The table is filtered, searched, sorted and paginated on the server.
func TestTableQuery(t *testing.T) {
	f := newFixture(t, "")
	f.poll("xss", "error")
	f.poll("api-two", "ok")
	f.poll("down", "backoff")
	reversed := func(s []string) []string { slices.Reverse(s); return s }
	gen := func(from, to int) []string {
		var out []string
		for i := from; i <= to; i++ {
			out = append(out, fmt.Sprintf("gen-%03d", i))
		}
		return out
	}
	cases := []struct {
		query string
		want  []string
	}{
		{"state=error", []string{"xss"}},
		{"state=ok", []string{"api-two"}},
		{"state=paused", nil},
		{"q=api", []string{"api-one", "api-two"}},
		{"q=API", []string{"api-one", "api-two"}},
		{"q=gen-11", gen(110, 119)},
		{"q=api&state=ok", []string{"api-two"}},
		{"q=nothing-like-it", nil},
		{"sort=name&q=api&order=desc", []string{"api-two", "api-one"}},
		{"sort=state", append([]string{"xss", "down", "api-one"}, gen(0, 46)...)},
		{"sort=failures&order=desc&q=o", []string{"down", "api-one", "api-two"}},
		{"sort=success&q=api", []string{"api-two", "api-one"}},
		{"page=3", gen(95, 119)},
		{"page=99", gen(95, 119)},
		{"page=2&q=gen", gen(50, 99)},
		{"sort=name&order=desc&page=3", append(reversed(gen(0, 21)), "down", "api-two", "api-one")},
	}
	for _, c := range cases {
		a := f.get("/?" + c.query)
		if a.code != http.StatusOK {
			t.Errorf("?%s: %s", c.query, a)
			continue
		}
		if got := rows(a.body); !slices.Equal(got, c.want) {
			t.Errorf("?%s: rows %v\nwant %v", c.query, got, c.want)
		}
	}
	for _, bad := range []string{"state=broken", "sort=why", "order=up", "page=0", "page=x", "q=" + strings.Repeat("a", 201)} {
		a := f.get("/?" + bad)
		if a.code != http.StatusBadRequest || !strings.Contains(a.body, strings.SplitN(bad, "=", 2)[0]+": ") {
			t.Errorf("?%s: want 400 naming the parameter, got %s", bad, a)
		}
	}
	// The filter keeps the search and the sort in the count links and pager.
	a := f.get("/?q=gen&sort=name&order=desc")
	if !strings.Contains(a.body, `href="/?order=desc&amp;q=gen&amp;sort=name&amp;state=error"`) {
		t.Errorf("the error count link loses the search or the sort")
	}
	if !strings.Contains(a.body, `href="/?order=desc&amp;page=2&amp;q=gen&amp;sort=name" rel="next"`) {
		t.Errorf("the next-page link loses the query")
	}
	// The live fragment is the same part, without the page around it.
	l := f.get("/dash/live?state=error")
	if l.code != http.StatusOK || strings.Contains(l.body, "<html") || !strings.Contains(l.body, `data-now="`) ||
		!slices.Equal(rows(l.body), []string{"xss"}) {
		t.Errorf("GET /dash/live?state=error: %s", l)
	}
	if l := f.get("/dash/live?state=nope"); l.code != http.StatusBadRequest {
		t.Errorf("GET /dash/live?state=nope: %s", l)
	}
}

// An upstream's text is shown as text: a last_error quoting a script tag
// is escaped on the overview, in the fragment and on the source page.
func TestEscaping(t *testing.T) {
	f := newFixture(t, "")
	f.poll("xss", "error")
	o, err := f.sched.Source("xss")
	if err != nil || !strings.Contains(o.LastError, xss) {
		t.Fatalf("the source's last_error does not quote the script tag (the test would prove nothing): %q %v", o.LastError, err)
	}
	for _, p := range []string{"/", "/?state=error", "/dash/live", "/sources/xss"} {
		a := f.get(p)
		if a.code != http.StatusOK {
			t.Fatalf("GET %s: %s", p, a)
		}
		if strings.Contains(a.body, xss) || strings.Contains(a.body, "<script>") {
			t.Errorf("GET %s: the script tag is in the page as markup", p)
		}
		if !strings.Contains(a.body, "&lt;script&gt;alert(1)&lt;/script&gt;") {
			t.Errorf("GET %s: the script tag is not shown as text", p)
		}
	}
	// A search text comes back escaped in the form.
	a := f.get("/?q=" + url.QueryEscape(`"><b>x`))
	if strings.Contains(a.body, `"><b>x`) || !strings.Contains(a.body, `value="&#34;&gt;&lt;b&gt;x"`) {
		t.Errorf("the search text is not escaped in the form")
	}
}

// The source page: settings with the secrets masked (header values never
// shown), state, explanation, history, the four actions; 404 for an
// unknown source.
func TestSourcePage(t *testing.T) {
	f := newFixture(t, "")
	f.poll("secret", "ok")
	f.poll("down", "backoff")
	f.poll("down", "backoff")

	a := f.get("/sources/secret")
	if a.code != http.StatusOK {
		t.Fatalf("GET /sources/secret: %s", a)
	}
	wantSecurityHeaders(t, "GET /sources/secret", a)
	if strings.Contains(a.body, secret) || strings.Contains(a.body, literalHeader) || strings.Contains(a.body, "SECRET") {
		t.Errorf("the source page shows a secret")
	}
	for _, s := range []string{
		"<dt>header X-Key</dt><dd class=\"text\">***</dd>", "<dt>header X-Lit</dt><dd class=\"text\">***</dd>",
		"/s?key=***", `<span class="o o-success"></span> success`, "Last 1 polls",
		`action="/sources/secret/reset"`, `action="/sources/secret/trigger"`, `action="/sources/secret/pause"`,
		`name="reason"`, "next poll in ",
	} {
		if !strings.Contains(a.body, s) {
			t.Errorf("GET /sources/secret lacks %q", s)
		}
	}
	d := f.get("/sources/down")
	for _, s := range []string{"Last 2 polls", "502 Bad Gateway", "backoff: failure 2, next attempt in ", "<dt>error_after</dt><dd class=\"text\">never</dd>",
		"initial 1s, max 15m, multiplier 2"} {
		if !strings.Contains(d.body, s) {
			t.Errorf("GET /sources/down lacks %q", s)
		}
	}
	if a := f.get("/sources/nope"); a.code != http.StatusNotFound || !strings.Contains(a.body, "unknown source") {
		t.Errorf("GET /sources/nope: %s", a)
	}
	if a := f.get("/dash/nope"); a.code != http.StatusNotFound {
		t.Errorf("GET /dash/nope: %s", a)
	}
	// The API's source object carries the same explanation (additive "why").
	api := f.get("/api/sources/down")
	if !strings.Contains(api.body, `"why":"backoff: failure 2, next attempt in `) {
		t.Errorf("GET /api/sources/down has no why: %s", api)
	}
}

// Actions without token_file, from loopback: each POST acts, then sends
// the browser back (303) with a message shown once.
func TestActionsWithoutToken(t *testing.T) {
	f := newFixture(t, "")
	f.poll("xss", "error")

	a := f.post("/sources/xss/reset", url.Values{"back": {"/?state=error"}})
	if a.code != http.StatusSeeOther || a.header.Get("Location") != "/?state=error" {
		t.Fatalf("POST reset: %s (Location %q)", a, a.header.Get("Location"))
	}
	if s := f.state("xss"); s == "error" {
		t.Errorf("after reset: state %s", s)
	}
	page := f.get("/?state=error")
	if !strings.Contains(page.body, `<p class="flash" role="status">xss: reset</p>`) {
		t.Errorf("the flash message is not shown after the redirect")
	}
	if again := f.get("/"); strings.Contains(again.body, `class="flash"`) {
		t.Errorf("the flash message is shown twice")
	}

	a = f.post("/sources/api-one/pause", url.Values{"reason": {"maintenance <b>"}})
	if a.code != http.StatusSeeOther || a.header.Get("Location") != "/sources/api-one" {
		t.Fatalf("POST pause: %s (Location %q)", a, a.header.Get("Location"))
	}
	p := f.get("/sources/api-one")
	if f.state("api-one") != "paused" || !strings.Contains(p.body, "paused: maintenance &lt;b&gt;") ||
		!strings.Contains(p.body, `action="/sources/api-one/resume"`) {
		t.Errorf("after pause: state %s; page shows the reason and a resume button: %v", f.state("api-one"), strings.Contains(p.body, "paused: maintenance"))
	}
	a = f.post("/sources/api-one/trigger", nil)
	if a.code != http.StatusSeeOther {
		t.Errorf("POST trigger of a paused source: %s", a)
	}
	if p := f.get("/sources/api-one"); !strings.Contains(p.body, "trigger refused: ") || !strings.Contains(p.body, "is paused; resume it first") {
		t.Errorf("the refused trigger is not explained")
	}
	if a = f.post("/sources/api-one/resume", nil); a.code != http.StatusSeeOther || f.state("api-one") == "paused" {
		t.Errorf("POST resume: %s, state %s", a, f.state("api-one"))
	}
	if a = f.post("/sources/api-two/trigger", nil); a.code != http.StatusSeeOther {
		t.Errorf("POST trigger: %s", a)
	}
	f.waitState("api-two", "ok")

	// An off-site "back" is ignored.
	for _, back := range []string{"//evil.example/", "https://evil.example/", "/\\evil.example"} {
		a = f.post("/sources/api-two/reset", url.Values{"back": {back}})
		if a.header.Get("Location") != "/sources/api-two" {
			t.Errorf("back %q: Location %q", back, a.header.Get("Location"))
		}
	}
	for _, c := range []struct {
		path string
		code int
	}{{"/sources/nope/reset", http.StatusNotFound}, {"/sources/xss/delete", http.StatusNotFound}} {
		if a := f.post(c.path, nil); a.code != c.code {
			t.Errorf("POST %s: %s, want %d", c.path, a, c.code)
		}
	}
	// The admin guard covers the page's POSTs: another origin gets 403 and
	// changes nothing; a GET does not act.
	req, _ := http.NewRequest(http.MethodPost, f.srv.URL+"/sources/api-two/pause", strings.NewReader("reason=x"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "http://evil.example")
	if a := f.do(req); a.code != http.StatusForbidden || f.state("api-two") == "paused" {
		t.Errorf("cross-origin POST: %s, state %s", a, f.state("api-two"))
	}
	if a := f.get("/sources/api-two/pause"); a.code < 400 || f.state("api-two") == "paused" {
		t.Errorf("GET of an action: %s, state %s", a, f.state("api-two"))
	}
}

// The embedded script and style sheet are served with their types; nothing
// else is.
func TestStatic(t *testing.T) {
	f := newFixture(t, "")
	for p, ct := range map[string]string{"/dash/static/app.js": "text/javascript", "/dash/static/style.css": "text/css"} {
		a := f.get(p)
		if a.code != http.StatusOK || !strings.HasPrefix(a.header.Get("Content-Type"), ct) || len(a.body) < 100 {
			t.Errorf("GET %s: %d %q (%d bytes)", p, a.code, a.header.Get("Content-Type"), len(a.body))
		}
		wantSecurityHeaders(t, p, a)
	}
	for _, p := range []string{"/dash/static/", "/dash/static/nope.js", "/dash/static/..%2fdashboard.go"} {
		if a := f.get(p); a.code != http.StatusNotFound {
			t.Errorf("GET %s: %s, want 404", p, a)
		}
	}
}
