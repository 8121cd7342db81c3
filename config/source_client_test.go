package config

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// clientDir returns a temp dir holding the fixture CA, client certificate,
// its key, another key, a password and a token (testdata/config/client).
func clientDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, name := range []string{"ca.pem", "client.pem", "client.key", "other.key", "billing.pw", "partner.token"} {
		data, err := os.ReadFile(filepath.Join("../testdata/config/client", name))
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, dir, "files/"+name, string(data), 0o600)
	}
	return dir
}

func TestClientSettingsLoaded(t *testing.T) {
	dir := clientDir(t)
	cfg, ps := loadIn(t, dir, `
defaults:
  tls: {ca_file: files/ca.pem, min_version: "1.3"}
  proxy_url: http://u:proxy-pw@127.0.0.1:3128
sources:
  - {name: a, type: http, url: "https://a/"}
  - {name: b, type: http, url: "https://b/"}
  - name: c
    type: http
    url: https://c/
    tls: {cert_file: files/client.pem, key_file: files/client.key, server_name: api.internal}
    http2: false
    follow_redirects: false
  - {name: d, type: http, url: "https://d/", tls: {ca_file: "", min_version: ""}, proxy_url: ""}
  - {name: e, type: exec, command: ["/bin/true"]}
`, nil)
	if ps != nil {
		t.Fatal(ps)
	}
	a, b, c, d, e := mustSource(t, cfg, "a"), mustSource(t, cfg, "b"), mustSource(t, cfg, "c"), mustSource(t, cfg, "d"), mustSource(t, cfg, "e")
	if a.Client == nil || a.Client != b.Client {
		t.Fatalf("a and b inherit the same settings but have Clients %p and %p", a.Client, b.Client)
	}
	want := TLS{CAFile: filepath.Join(dir, "files/ca.pem"), MinVersion: "1.3"}
	if a.Client.TLS != want || a.Client.ProxyURL != "http://u:proxy-pw@127.0.0.1:3128" || !a.Client.HTTP2Enabled() {
		t.Errorf("a: %+v", *a.Client)
	}
	if c.Client == a.Client || c.Client.TLS.ServerName != "api.internal" || c.Client.TLS.CAFile != want.CAFile ||
		c.Client.TLS.KeyFile != filepath.Join(dir, "files/client.key") || c.Client.HTTP2Enabled() {
		t.Errorf("c overrides key by key: %+v", *c.Client)
	}
	if c.FollowRedirects == nil || *c.FollowRedirects || a.FollowRedirects != nil {
		t.Errorf("follow_redirects: a %v, c %v", a.FollowRedirects, c.FollowRedirects)
	}
	if d.Client != nil || e.Client != nil {
		t.Errorf("d cleared every setting, e is exec: Clients %+v %+v", d.Client, e.Client)
	}
	conf, err := c.Client.TLSConfig()
	if err != nil || conf.RootCAs == nil || len(conf.Certificates) != 1 || conf.ServerName != "api.internal" || conf.MinVersion != 0x0304 {
		t.Errorf("c's tls.Config: %+v, %v", conf, err)
	}
	if !strings.Contains(strings.Join(cfg.Secrets, "\n"), "proxy-pw") {
		t.Error("the proxy password is not a secret")
	}
	if got := cfg.Redactor().Redact(a.Client.ProxyURL); strings.Contains(got, "proxy-pw") {
		t.Errorf("redacted proxy URL %q", got)
	}
}

// TestClientDefaultsKeepFingerprints: settings written with their built-in
// values give no Client and the fingerprint of a config without them.
func TestClientDefaultsKeepFingerprints(t *testing.T) {
	plain := mustLoad(t, `sources: [{name: a, type: http, url: "https://a/"}]`, nil)
	explicit := mustLoad(t, `
defaults: {http2: true, proxy_url: "", tls: {ca_file: "", insecure_skip_verify: false}}
sources: [{name: a, type: http, url: "https://a/"}]`, nil)
	if explicit.Sources[0].Client != nil || explicit.Sources[0].Fingerprint != plain.Sources[0].Fingerprint {
		t.Errorf("built-in values written out: Client %+v, fingerprint changed %v", explicit.Sources[0].Client,
			explicit.Sources[0].Fingerprint != plain.Sources[0].Fingerprint)
	}
}

// TestClientFileContentsInFingerprint: a reload after a file's contents
// changed (same path) yields another fingerprint and transport key.
func TestClientFileContentsInFingerprint(t *testing.T) {
	dir := clientDir(t)
	yaml := `sources: [{name: a, type: http, url: "https://a/", tls: {ca_file: files/ca.pem}, bearer_token_file: files/partner.token}]`
	first, ps := loadIn(t, dir, yaml, nil)
	if ps != nil {
		t.Fatal(ps)
	}
	again, _ := loadIn(t, dir, yaml, nil)
	if again.Sources[0].Fingerprint != first.Sources[0].Fingerprint || again.Sources[0].Client.Key() != first.Sources[0].Client.Key() {
		t.Fatal("same files, different fingerprint or key")
	}
	// Another valid CA (the client certificate parses as one) at the same path.
	cert, _ := os.ReadFile(filepath.Join(dir, "files/client.pem"))
	writeFile(t, dir, "files/ca.pem", string(cert), 0o600)
	ca, _ := loadIn(t, dir, yaml, nil)
	writeFile(t, dir, "files/partner.token", "rotated\n", 0o600)
	tok, _ := loadIn(t, dir, yaml, nil)
	if ca == nil || tok == nil {
		t.Fatal("reloads failed")
	}
	if ca.Sources[0].Fingerprint == first.Sources[0].Fingerprint || ca.Sources[0].Client.Key() == first.Sources[0].Client.Key() {
		t.Error("changed CA contents: same fingerprint or transport key")
	}
	if tok.Sources[0].Fingerprint == ca.Sources[0].Fingerprint || tok.Sources[0].Auth.BearerToken != "rotated" {
		t.Error("rotated token: same fingerprint or old token")
	}
}

func TestClientSettingsProblems(t *testing.T) {
	dir := clientDir(t)
	writeFile(t, dir, "files/garbage.pem", "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n", 0o600)
	writeFile(t, dir, "files/empty.pem", "", 0o600)
	writeFile(t, dir, "files/empty.token", "\n", 0o600)
	writeFile(t, dir, "files/two-lines.token", "a\nb\n", 0o600)
	missing := filepath.Join(dir, "files/missing.pem")
	src := `{name: x, type: http, url: "https://x/", %s}`
	tests := []struct {
		keys string // of source x
		want string // a problem's prefix
	}{
		{`tls: {ca_file: files/missing.pem}`, "sources[name=x].tls.ca_file: cannot read " + missing + ": no such file or directory"},
		{`tls: {ca_file: files/garbage.pem}`, "sources[name=x].tls.ca_file: cannot parse " + filepath.Join(dir, "files/garbage.pem") + ": x509:"},
		{`tls: {ca_file: files/empty.pem}`, "sources[name=x].tls.ca_file: cannot parse " + filepath.Join(dir, "files/empty.pem") + ": no PEM CERTIFICATE block"},
		{`tls: {ca_file: files}`, "sources[name=x].tls.ca_file: cannot read " + filepath.Join(dir, "files") + ": not a regular file"},
		{`tls: {cert_file: files/client.pem}`, "sources[name=x].tls.key_file: required with cert_file"},
		{`tls: {key_file: files/client.key}`, "sources[name=x].tls.cert_file: required with key_file"},
		{`tls: {cert_file: files/client.pem, key_file: files/other.key}`, "sources[name=x].tls.key_file: cannot use " + filepath.Join(dir, "files/client.pem") + " with " + filepath.Join(dir, "files/other.key") + ": tls: private key does not match public key"},
		{`tls: {cert_file: files/client.key, key_file: files/client.key}`, "sources[name=x].tls.cert_file: cannot use"},
		{`tls: {cert_file: files/missing.pem, key_file: files/client.key}`, "sources[name=x].tls.cert_file: cannot read " + missing},
		{`tls: {cert_file: files/client.pem, key_file: files/missing.pem}`, "sources[name=x].tls.key_file: cannot read " + missing},
		{`tls: {min_version: "1.4"}`, `sources[name=x].tls.min_version: must be "1.0", "1.1", "1.2" or "1.3", got "1.4"`},
		{`tls: {insecure_skip_verify: yes}`, `sources[name=x].tls.insecure_skip_verify: expected true or false, got "yes"`},
		{`tls: {server_name: "a b"}`, `sources[name=x].tls.server_name: invalid server name "a b"`},
		{`tls: {ca: x}`, "sources[name=x].tls.ca: unknown key"},
		{`http2: 1`, `sources[name=x].http2: expected true or false, got "1"`},
		{`proxy_url: ftp://p:21`, "sources[name=x].proxy_url: invalid proxy URL: scheme must be http, https, socks5 or socks5h"},
		{`proxy_url: "http://"`, "sources[name=x].proxy_url: invalid proxy URL: missing host"},
		{`proxy_url: "http://u:pw@[::1"`, "sources[name=x].proxy_url: invalid URL"},
		{`bearer_token_file: files/missing.pem`, "sources[name=x].bearer_token_file: cannot read " + missing},
		{`bearer_token_file: files/empty.token`, "sources[name=x].bearer_token_file: " + filepath.Join(dir, "files/empty.token") + " is empty"},
		{`bearer_token_file: files/two-lines.token`, "sources[name=x].bearer_token_file: " + filepath.Join(dir, "files/two-lines.token") + ": invalid token"},
		{`bearer_token_file: ""`, "sources[name=x].bearer_token_file: must not be empty"},
		{`basic_auth: {password_file: files/billing.pw}`, "sources[name=x].basic_auth.username: required"},
		{`basic_auth: {username: "a:b"}`, "sources[name=x].basic_auth.username: invalid username"},
		{`basic_auth: {username: a, password: b}`, "sources[name=x].basic_auth.password: unknown key"},
		{`basic_auth: {username: a}, bearer_token_file: files/partner.token`, "sources[name=x].bearer_token_file: cannot be used together with basic_auth"},
		{`basic_auth: {username: a}, headers: {authorization: v}`, "sources[name=x].basic_auth: cannot be used together with an Authorization header"},
		{`bearer_token_file: files/partner.token, headers: {Authorization: v}`, "sources[name=x].bearer_token_file: cannot be used together with an Authorization header"},
	}
	for _, tt := range tests {
		_, ps := loadIn(t, dir, "sources: ["+strings.Replace(src, "%s", tt.keys, 1)+"]", nil)
		if !hasPrefix(ps, tt.want) {
			t.Errorf("%s:\n got %v\nwant %s...", tt.keys, ps, tt.want)
		}
	}
}

// TestClientProblemsWhereWritten: a bad file in defaults is reported once,
// at defaults; keys of an exec source are reported there.
func TestClientProblemsWhereWritten(t *testing.T) {
	dir := clientDir(t)
	_, ps := loadIn(t, dir, `
defaults: {tls: {ca_file: files/missing.pem}}
sources:
  - {name: a, type: http, url: "https://a/"}
  - {name: b, type: http, url: "https://b/"}
  - {name: e, type: exec, command: ["/bin/true"], follow_redirects: false}
  - {name: f, type: exec, command: ["/bin/true"], bearer_token_file: files/partner.token}
`, nil)
	want := []string{
		"defaults.tls.ca_file: cannot read " + filepath.Join(dir, "files/missing.pem") + ": no such file or directory",
		"sources[name=f].bearer_token_file: not allowed for type exec",
		"sources[name=e].follow_redirects: not allowed for type exec",
	}
	if len(ps) != len(want) {
		t.Fatalf("got %d problems, want %d:\n%v", len(ps), len(want), ps)
	}
	for _, w := range want {
		if !hasPrefix(ps, w) {
			t.Errorf("missing %q in\n%v", w, ps)
		}
	}
}

func TestAuthLoaded(t *testing.T) {
	dir := clientDir(t)
	writeFile(t, dir, "files/crlf.pw", "p\r\n", 0o600)
	cfg, ps := loadIn(t, dir, `
sources:
  - {name: basic, type: http, url: "https://a/", basic_auth: {username: pacer, password_file: files/billing.pw}}
  - {name: bearer, type: http, url: "https://b/", bearer_token_file: files/partner.token}
  - {name: crlf, type: http, url: "https://c/", basic_auth: {username: u, password_file: files/crlf.pw}}
  - {name: nopw, type: http, url: "https://d/", basic_auth: {username: u}}
`, nil)
	if ps != nil {
		t.Fatal(ps)
	}
	basic, bearer := mustSource(t, cfg, "basic").Auth, mustSource(t, cfg, "bearer").Auth
	if basic.Password != "not-a-real-password" || basic.PasswordFile != filepath.Join(dir, "files/billing.pw") {
		t.Errorf("basic: %+v", *basic)
	}
	cred := base64.StdEncoding.EncodeToString([]byte("pacer:not-a-real-password"))
	if basic.Header() != "Basic "+cred || bearer.Header() != "Bearer not-a-real-token" {
		t.Errorf("headers %q %q", basic.Header(), bearer.Header())
	}
	if got := mustSource(t, cfg, "crlf").Auth.Password; got != "p" {
		t.Errorf("crlf password %q", got)
	}
	if got := mustSource(t, cfg, "nopw").Auth.Header(); got != "Basic "+base64.StdEncoding.EncodeToString([]byte("u:")) {
		t.Errorf("no password: %q", got)
	}
	out := cfg.Redactor().Redact("pw not-a-real-password tok not-a-real-token hdr " + basic.Header())
	for _, s := range []string{"not-a-real-password", "not-a-real-token", cred} {
		if strings.Contains(out, s) {
			t.Errorf("redacted text %q shows %q", out, s)
		}
	}
	for _, s := range cfg.Sources {
		if strings.Contains(s.Fingerprint, "not-a-real") {
			t.Error("fingerprint shows a secret")
		}
	}
}

// TestAuthSecretsNeverInProblems: a problem quoting a value equal to a
// file's secret shows it masked.
func TestAuthSecretsNeverInProblems(t *testing.T) {
	dir := clientDir(t)
	_, ps := loadIn(t, dir, `
sources:
  - name: x
    type: http
    url: https://x/
    tls: {min_version: "not-a-real-token"}
    bearer_token_file: files/partner.token
  - name: y
    type: http
    url: https://y/
    basic_auth: {username: pacer, password_file: files/billing.pw}
    method: "not-a-real-password x"
`, nil)
	if ps == nil {
		t.Fatal("config loaded")
	}
	text := ps.Error()
	if strings.Contains(text, "not-a-real") || !strings.Contains(text, `got "***"`) {
		t.Errorf("problems show a secret or lost the masked value:\n%s", text)
	}
}
