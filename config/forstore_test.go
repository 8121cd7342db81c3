package config

import (
	"strings"
	"testing"
)

// forStoreYAML uses variables everywhere a poll needs them and nowhere the
// store commands do.
const forStoreYAML = `
admin: {token_file: "${CREDS}/admin-token"}
defaults: {timeout: "${T}"}
sources:
  - name: api
    type: http
    url: "https://${HOST}/v1?key=${KEY}"
    headers: {Authorization: "Bearer ${TOKEN}"}
    schedule: "@every 5m"
  - name: job
    type: exec
    command: ["${TOOL}", "--quick"]
    env: {A: "${A}"}
    dir: "${DIR}"
  - name: plain
    type: http
    url: "https://example.com/"
`

// TestLoadForStore: with Options.ForStore, unset variables outside store,
// name, type and schedule are no problem, and the sources they reach have
// no fingerprint, so that nothing stored from them looks like a changed
// configuration to a daemon that has the variables.
func TestLoadForStore(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, dir, "config.yaml", forStoreYAML, 0o644)
	if _, err := Load(p, envMap(nil)); err == nil || !strings.Contains(err.Error(), "environment variable HOST is not set") {
		t.Fatalf("strict Load: %v", err)
	}
	cfg, err := LoadWith(p, envMap(nil), Options{ForStore: true})
	if err != nil {
		t.Fatalf("ForStore: %v", err)
	}
	if len(cfg.Sources) != 3 || mustSource(t, cfg, "api").ScheduleSpec != "@every 5m" {
		t.Fatalf("sources: %+v", cfg.Sources)
	}
	for _, s := range cfg.Sources {
		// defaults.timeout is a placeholder: every source inherits it.
		if s.Fingerprint != "" {
			t.Errorf("%s: fingerprint %q from placeholders", s.Name, s.Fingerprint)
		}
	}
	// Without the placeholder in defaults, a source that needs no variable
	// keeps its real fingerprint.
	p2 := writeFile(t, dir, "c2.yaml", strings.Replace(forStoreYAML, `defaults: {timeout: "${T}"}`, "", 1), 0o644)
	cfg, err = LoadWith(p2, envMap(nil), Options{ForStore: true})
	if err != nil {
		t.Fatal(err)
	}
	env := envMap(map[string]string{"CREDS": dir, "HOST": "h.example", "KEY": "k", "TOKEN": "t", "TOOL": "true", "A": "a", "DIR": dir})
	writeFile(t, dir, "admin-token", "tok\n", 0o600)
	full, err := Load(p2, env)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := mustSource(t, cfg, "plain").Fingerprint, mustSource(t, full, "plain").Fingerprint; got != want || got == "" {
		t.Errorf("plain: %q, want %q", got, want)
	}
	for _, n := range []string{"api", "job"} {
		if fp := mustSource(t, cfg, n).Fingerprint; fp != "" {
			t.Errorf("%s: fingerprint %q", n, fp)
		}
	}
	// The same with every variable set is the strict config.
	same, err := LoadWith(p2, env, Options{ForStore: true})
	if err != nil || mustSource(t, same, "api").Fingerprint != mustSource(t, full, "api").Fingerprint {
		t.Errorf("ForStore with the environment differs: %v", err)
	}
	// What only the polls and the admin API need is not checked: the
	// operator's PATH, directories, an unreadable token file.
	p3 := writeFile(t, dir, "c3.yaml", `
admin: {token_file: /nonexistent/admin-token}
sources:
  - {name: job, type: exec, command: ["pacer-tool-only-in-the-units-path"], dir: /nonexistent}
  - {name: job2, type: exec, command: ["./bin/tool"]}
`, 0o644)
	if _, err := Load(p3, envMap(nil)); err == nil {
		t.Fatal("strict Load accepted a missing program")
	}
	if cfg, err := LoadWith(p3, envMap(nil), Options{ForStore: true}); err != nil || len(cfg.Sources) != 2 {
		t.Errorf("ForStore with a missing program, dir and token file: %v", err)
	}
	// What the store commands use stays strict; other problems stay too.
	for _, c := range []struct{ yaml, want string }{
		{"store: \"${S}/p.db\"\n", "store: environment variable S is not set"},
		{"sources:\n  - {name: \"${N}\", type: http, url: \"https://h/\"}\n", "environment variable N is not set"},
		{"sources:\n  - {name: a, type: \"${TY}\", url: \"https://h/\"}\n", "sources[name=a].type: environment variable TY is not set"},
		{"sources:\n  - {name: a, type: http, url: \"https://h/\", schedule: \"${SC}\"}\n", "sources[name=a].schedule: environment variable SC is not set"},
		{"defaults: {schedule: \"${SC}\"}\n", "defaults.schedule: environment variable SC is not set"},
		{"sources:\n  - {name: a, type: http, url: \"ftp://${H}/\"}\n", "sources[name=a].url: invalid URL"}, // a set variable: checked
		{"sources:\n  - {name: a, type: http, url: \"https://h/\", timeout: x}\n", "sources[name=a].timeout: invalid duration"},
	} {
		p := writeFile(t, dir, "bad.yaml", c.yaml, 0o644)
		_, err := LoadWith(p, envMap(map[string]string{"H": "h"}), Options{ForStore: true})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.yaml, err, c.want)
		}
	}
}

// TestLoadForStoreWithoutPollFiles: files that only the polls read (a CA,
// a client certificate, password and token files) may be unreadable for
// the store commands (contract 12.2): no problem, and no fingerprint for
// the sources that name them; Load still reports each one.
func TestLoadForStoreWithoutPollFiles(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, dir, "config.yaml", `
sources:
  - {name: ca, type: http, url: "https://h/", tls: {ca_file: missing-ca.pem}}
  - {name: mtls, type: http, url: "https://h/", tls: {cert_file: missing.pem, key_file: missing.key}}
  - {name: basic, type: http, url: "https://h/", basic_auth: {username: u, password_file: missing.pw}}
  - {name: bearer, type: http, url: "https://h/", bearer_token_file: missing.token}
  - {name: plain, type: http, url: "https://h/"}
`, 0o644)
	_, err := Load(p, envMap(nil))
	for _, want := range []string{"sources[name=ca].tls.ca_file", "sources[name=mtls].tls.cert_file",
		"sources[name=basic].basic_auth.password_file", "sources[name=bearer].bearer_token_file"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("strict Load: want a problem at %s, got %v", want, err)
		}
	}
	cfg, err := LoadWith(p, envMap(nil), Options{ForStore: true})
	if err != nil {
		t.Fatalf("ForStore: %v", err)
	}
	for _, n := range []string{"ca", "mtls", "basic", "bearer"} {
		if fp := mustSource(t, cfg, n).Fingerprint; fp != "" {
			t.Errorf("%s: fingerprint %q computed without its file", n, fp)
		}
	}
	if mustSource(t, cfg, "plain").Fingerprint == "" {
		t.Error("plain: no fingerprint")
	}
}
