package config

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestExpandFile: ${file:PATH} is the file's contents without one trailing
// newline; a relative PATH resolves against $CREDENTIALS_DIRECTORY when it
// is set, else against the config's directory; the value is a secret.
func TestExpandFile(t *testing.T) {
	dir, creds := t.TempDir(), t.TempDir()
	writeFile(t, dir, "partner.key", "key-from-config-dir\n", 0o600)
	writeFile(t, creds, "partner.key", "key-from-credentials\r\n", 0o600)
	writeFile(t, dir, "abs.key", "absolute-key-value", 0o600)
	writeFile(t, dir, "two.key", "two-lines\n\n", 0o600)
	writeFile(t, creds, "two.key", "two-lines\n\n", 0o600)
	cfgYAML := `
sources:
  - name: p
    type: http
    url: "http://127.0.0.1:1/api?k=${file:partner.key}"
    headers: {X-Key: "${file:partner.key}", X-Abs: "${file:` + filepath.Join(dir, "abs.key") + `}"}
    body: "${file:two.key}"
`
	cases := []struct {
		name string
		env  map[string]string
		key  string
	}{
		{"config dir", nil, "key-from-config-dir"},
		{"credentials dir", map[string]string{CredentialsDirectoryEnv: creds}, "key-from-credentials"},
		{"empty credentials dir", map[string]string{CredentialsDirectoryEnv: ""}, "key-from-config-dir"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, ps := loadIn(t, dir, cfgYAML, c.env)
			if ps != nil {
				t.Fatal(ps)
			}
			s := mustSource(t, cfg, "p")
			if s.Headers["X-Key"] != c.key || s.Headers["X-Abs"] != "absolute-key-value" || s.Body != "two-lines\n" {
				t.Errorf("headers %q, body %q", s.Headers, s.Body)
			}
			if s.URL != "http://127.0.0.1:1/api?k="+c.key {
				t.Errorf("url %q", s.URL)
			}
			if !containsString(cfg.Secrets, c.key) {
				t.Errorf("%q not among the secrets", c.key)
			}
			if got := cfg.Redactor().Redact("GET " + s.URL + ": refused"); got != "GET http://127.0.0.1:1/api?k=***: refused" {
				t.Errorf("redacted %q", got)
			}
		})
	}
}

// TestExpandFileProblems: a file that cannot be read is a problem naming
// the field and the file, never a secret's contents; with
// Options.ForStore it is a placeholder.
func TestExpandFileProblems(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "big.key", strings.Repeat("x", maxExpandFile+1), 0o600)
	writeFile(t, dir, "ok.key", "the-secret-value", 0o600)
	cfgYAML := `
sources:
  - name: p
    type: http
    url: "ftp://h/${file:ok.key}"
    headers: {A: "${file:nope.key}", B: "${file:big.key}", C: "${file:}", D: "${file:` + dir + `}"}
`
	_, ps := loadIn(t, dir, cfgYAML, nil)
	want := []string{
		`sources[name=p].url: invalid URL: unsupported scheme: must be http or https`, // the URL holds a secret
		`sources[name=p].headers.A: ${file:nope.key}: cannot read ` + filepath.Join(dir, "nope.key") + `: no such file or directory`,
		`sources[name=p].headers.B: ${file:big.key}: cannot read ` + filepath.Join(dir, "big.key") + `: larger than 65536 bytes`,
		`sources[name=p].headers.C: ${file:} needs a path (write $$ for a literal $)`,
		`sources[name=p].headers.D: ${file:` + dir + `}: cannot read ` + dir + `: not a regular file`,
	}
	got := make([]string, len(ps))
	for i, p := range ps {
		got[i] = p.String()
		if strings.Contains(got[i], "the-secret-value") {
			t.Errorf("problem shows the secret: %s", got[i])
		}
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// The store commands need none of these files; a name stays strict.
	p := writeFile(t, dir, "store.yaml", `
sources:
  - {name: p, type: http, url: "http://127.0.0.1:1/", headers: {A: "${file:nope.key}"}}
  - {name: "${file:nope.key}", type: http, url: "http://127.0.0.1:1/"}
`, 0o644)
	ps = loadProblems(t, p, nil, Options{ForStore: true})
	if len(ps) != 1 || !strings.HasPrefix(ps[0].String(), "sources[1].name: ${file:nope.key}: cannot read") {
		t.Errorf("problems: %v", ps)
	}
}

// TestAdminTokenFileFromCredentials: admin.token_file expands variables,
// so ${CREDENTIALS_DIRECTORY}/admin-token names systemd's credential.
func TestAdminTokenFileFromCredentials(t *testing.T) {
	dir, creds := t.TempDir(), t.TempDir()
	writeFile(t, creds, "admin-token", "admin-token-value\n", 0o600)
	cfg, ps := loadIn(t, dir, "admin: {listen: \"0.0.0.0:9090\", token_file: \"${CREDENTIALS_DIRECTORY}/admin-token\"}\n",
		map[string]string{CredentialsDirectoryEnv: creds})
	if ps != nil {
		t.Fatal(ps)
	}
	if cfg.Admin.TokenFile != filepath.Join(creds, "admin-token") || !containsString(cfg.Secrets, "admin-token-value") {
		t.Errorf("token file %q, secrets %d", cfg.Admin.TokenFile, len(cfg.Secrets))
	}
}
