package config

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestDeliver: a deliver block in defaults is inherited (file with {name}
// replaced and resolved against the config's directory), a source's own
// block replaces it whole, deliver: null turns it off; webhook headers and
// the URL's password are secrets; the block is part of the fingerprint.
func TestDeliver(t *testing.T) {
	dir := t.TempDir()
	cfg, ps := loadIn(t, dir, `
defaults:
  deliver: {file: "out/{name}.json"}
sources:
  - {name: a, type: http, url: "http://h/"}
  - name: b
    type: exec
    command: [/bin/true]
    deliver:
      command: [cat]
      webhook: {url: "https://u:pw-0123456789@sink/in", method: put, headers: {X-Key: "key-0123456789"}}
      when: always
  - {name: c, type: http, url: "http://h/", deliver: null}
`, nil)
	if ps != nil {
		t.Fatal(ps)
	}
	a := mustSource(t, cfg, "a")
	if a.Deliver == nil || a.Deliver.File != filepath.Join(dir, "out", "a.json") || a.Deliver.Always || a.Deliver.Command != nil || a.Deliver.Webhook != nil {
		t.Errorf("a: Deliver %+v", a.Deliver)
	}
	b := mustSource(t, cfg, "b")
	if d := b.Deliver; d == nil || d.File != "" || !d.Always || len(d.Command) != 1 || !filepath.IsAbs(d.Command[0]) ||
		d.Webhook == nil || d.Webhook.Method != "PUT" || d.Webhook.Headers["X-Key"] != "key-0123456789" {
		t.Errorf("b: Deliver %+v", b.Deliver)
	}
	if c := mustSource(t, cfg, "c"); c.Deliver != nil {
		t.Errorf("c: Deliver %+v, want nil (deliver: null)", c.Deliver)
	}
	for _, s := range []string{"key-0123456789", "pw-0123456789"} {
		if !slices.Contains(cfg.Secrets, s) {
			t.Errorf("Secrets %q lack %q", cfg.Secrets, s)
		}
		if got := cfg.Redactor().Redact("error: " + s); strings.Contains(got, s) {
			t.Errorf("Redact kept %q: %q", s, got)
		}
	}
	if w := mustSource(t, mustLoad(t, "sources:\n  - {name: w, type: http, url: \"http://h/\", deliver: {webhook: {url: \"http://s/\"}}}\n", nil), "w").Deliver.Webhook; w.Method != "POST" {
		t.Errorf("webhook method %q, want POST by default", w.Method)
	}

	// A changed block changes the fingerprint; a source without one keeps
	// the fingerprint it had before deliver existed.
	base := "sources:\n  - {name: a, type: http, url: \"http://h/\"%s}\n"
	fps := map[string]string{}
	for _, extra := range []string{"", ", deliver: {file: x}", ", deliver: {file: y}", ", deliver: {file: x, when: always}",
		", deliver: {command: [cat]}", ", deliver: {webhook: {url: \"http://s/\"}}", ", deliver: {webhook: {url: \"http://s/\", headers: {K: v}}}"} {
		fp := mustSource(t, mustLoad(t, strings.Replace(base, "%s", extra, 1), nil), "a").Fingerprint
		if prev, dup := fps[fp]; dup {
			t.Errorf("%q and %q have the same fingerprint", extra, prev)
		}
		fps[fp] = extra
	}
	plain := mustSource(t, mustLoad(t, strings.Replace(base, "%s", "", 1), nil), "a")
	if Fingerprint(plain) != oldFingerprint(plain) {
		t.Error("a source without deliver hashes differently from before")
	}
}

// TestDeliverProblems: every bad key or value of a deliver block is a
// problem that names its path.
func TestDeliverProblems(t *testing.T) {
	src := func(block string) string {
		return "sources:\n  - {name: x, type: http, url: \"http://h/\", deliver: " + block + "}\n"
	}
	for _, c := range []struct{ yaml, want string }{
		{src("{}"), "sources[name=x].deliver: needs at least one target"},
		{src("{when: always}"), "sources[name=x].deliver: needs at least one target"},
		{src("[a]"), "sources[name=x].deliver: "},
		{src("{file: x, bogus: 1}"), "sources[name=x].deliver.bogus: unknown key"},
		{src("{file: \"\"}"), "sources[name=x].deliver.file: must not be empty"},
		{src("{file: out/}"), "sources[name=x].deliver.file: must name a file"},
		{src("{file: [a]}"), "sources[name=x].deliver.file: "},
		{src("{file: x, when: sometimes}"), "sources[name=x].deliver.when: must be changed or always"},
		{src("{command: []}"), "sources[name=x].deliver.command: must be a non-empty list"},
		{src("{command: [no-such-program-pacer]}"), "sources[name=x].deliver.command[0]: \"no-such-program-pacer\" not found"},
		{src("{command: [./missing.sh]}"), "sources[name=x].deliver.command[0]: "},
		{src("{webhook: {method: POST}}"), "sources[name=x].deliver.webhook.url: required"},
		{src("{webhook: null}"), "sources[name=x].deliver.webhook: must be a mapping"},
		{src("{webhook: {url: \"ftp://h/\"}}"), "sources[name=x].deliver.webhook.url: invalid URL: unsupported scheme"},
		{src("{webhook: {url: \"http://h/\", method: \"P T\"}}"), "sources[name=x].deliver.webhook.method: invalid HTTP method"},
		{src("{webhook: {url: \"http://h/\", headers: {\"a b\": v}}}"), "sources[name=x].deliver.webhook.headers.a b: invalid header name"},
		{src("{webhook: {url: \"http://h/\", timeout: 1s}}"), "sources[name=x].deliver.webhook.timeout: unknown key"},
		{"defaults: {deliver: {file: x, x: 1}}\nsources: []\n", "defaults.deliver.x: unknown key"},
		{"defaults: {deliver: {}}\nsources: []\n", "defaults.deliver: needs at least one target"},
	} {
		if ps := mustFail(t, c.yaml, nil); !hasPrefix(ps, c.want) {
			t.Errorf("%s: problems %v, want one starting %q", c.yaml, ps, c.want)
		}
	}
}

// TestDeliverFullFixture: full.yaml's deliver keys load as written.
func TestDeliverFullFixture(t *testing.T) {
	cfg, err := Load("../testdata/config/full.yaml", envMap(nil))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Dir(cfg.Path)
	if d := mustSource(t, cfg, "status-page").Deliver; d == nil || d.File != filepath.Join(dir, "out", "status-page.json") {
		t.Errorf("status-page: Deliver %+v", d)
	}
	if d := mustSource(t, cfg, "partner").Deliver; d == nil || d.File != "" || !d.Always || d.Webhook == nil || d.Webhook.Method != "PUT" {
		t.Errorf("partner: Deliver %+v", d)
	}
	if d := mustSource(t, cfg, "backup-check").Deliver; d != nil {
		t.Errorf("backup-check: Deliver %+v, want nil", d)
	}
}
