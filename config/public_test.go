package config

import (
	"slices"
	"testing"
)

// Issue 24 item 5: an admin address from ${VAR} is not a secret (the start
// log shows it); the same value substituted by another key, before or
// after admin in the file, stays one; a token read from a file stays one.
func TestAdminListenFromVarIsNotASecret(t *testing.T) {
	env := map[string]string{"ADDR": "127.0.0.1:9191", "TOKEN": "s3cr3t-t0ken-value"}
	cfg, ps := loadIn(t, t.TempDir(), `admin: {listen: "${ADDR}"}
sources:
  - {name: a, type: http, url: "http://127.0.0.1/", headers: {X-Token: "${TOKEN}"}}
`, env)
	if len(ps) != 0 {
		t.Fatal(ps)
	}
	if cfg.Admin.Listen != "127.0.0.1:9191" || slices.Contains(cfg.Secrets, "127.0.0.1:9191") {
		t.Errorf("listen %q, secrets %q: the address should not be a secret", cfg.Admin.Listen, cfg.Secrets)
	}
	if got := cfg.Redactor().Redact("admin=" + cfg.Admin.Listen); got != "admin=127.0.0.1:9191" {
		t.Errorf("the start line's address redacted: %q", got)
	}
	if !slices.Contains(cfg.Secrets, "s3cr3t-t0ken-value") {
		t.Errorf("the header's ${TOKEN} is not a secret any more: %q", cfg.Secrets)
	}
	for _, body := range []string{
		"admin: {listen: \"${ADDR}\"}\nsources:\n  - {name: a, type: http, url: \"http://127.0.0.1/\", headers: {X: \"${ADDR}\"}}\n",
		"sources:\n  - {name: a, type: http, url: \"http://127.0.0.1/\", headers: {X: \"${ADDR}\"}}\nadmin: {listen: \"${ADDR}\"}\n",
	} {
		cfg, ps := loadIn(t, t.TempDir(), body, env)
		if len(ps) != 0 {
			t.Fatal(ps)
		}
		if !slices.Contains(cfg.Secrets, "127.0.0.1:9191") || cfg.Redactor().Redact(cfg.Admin.Listen) != "***" {
			t.Errorf("a value another key substitutes too must stay a secret:\n%s\nsecrets %q", body, cfg.Secrets)
		}
	}
}
