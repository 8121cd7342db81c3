package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const fpBase = `
limits:
  g1: {concurrency: 1}
  g2: {concurrency: 2}
sources:
  - name: api
    type: http
    url: https://example.com/${P}
    method: GET
    headers: {A: "1", B: "2"}
    body: "b"
    expect_status: [200]
    max_body: 1MiB
    schedule: "@every 1m"
    timeout: 10s
    backoff: {initial: 1s, max: 15m, multiplier: 2, jitter: 0.1}
    breaker: {failures: 5, cooldown: 1m}
    error_after: 10
    limit: g1
  - name: job
    type: exec
    command: ["/bin/sh", "-c", "exit 0"]
    env: {A: "1", B: "2"}
    dir: /tmp
`

func fingerprints(t *testing.T, yaml string, p string) map[string]string {
	t.Helper()
	cfg := mustLoad(t, yaml, map[string]string{"P": p})
	m := map[string]string{}
	for _, s := range cfg.Sources {
		m[s.Name] = s.Fingerprint
		if s.Fingerprint != Fingerprint(&s) {
			t.Errorf("%s: stored fingerprint differs from Fingerprint()", s.Name)
		}
	}
	return m
}

func TestFingerprintStable(t *testing.T) {
	a := fingerprints(t, fpBase, "status")
	b := fingerprints(t, fpBase, "status")
	if a["api"] != b["api"] || a["job"] != b["job"] || len(a["api"]) != 64 {
		t.Fatalf("fingerprints differ across loads: %v %v", a, b)
	}
	// Same settings written differently (order of keys, defaults made
	// explicit or left out) give the same fingerprint.
	c := fingerprints(t, `
limits:
  g1: {concurrency: 1}
  g2: {concurrency: 2}
sources:
  - {type: http, name: api, url: "https://example.com/status", headers: {B: "2", A: "1"}, body: b,
     expect_status: [200], max_body: 1048576, limit: g1}
  - {name: job, type: exec, command: [/bin/sh, -c, exit 0], env: {B: "2", A: "1"}, dir: /tmp/}
`, "")
	if c["api"] != a["api"] || c["job"] != a["job"] {
		t.Errorf("equivalent configs: %v vs %v", c, a)
	}
	// Not derived from where the file lives.
	dir := t.TempDir()
	p := filepath.Join(dir, "sub", "config.yaml")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(fpBase), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(p, envMap(map[string]string{"P": "status"}))
	if err != nil {
		t.Fatal(err)
	}
	if s := mustSource(t, cfg, "api"); s.Fingerprint != a["api"] {
		t.Errorf("fingerprint depends on the file location")
	}
}

func TestFingerprintChangesWithEveryField(t *testing.T) {
	base := fingerprints(t, fpBase, "status")
	changes := []struct{ name, old, new, src string }{
		{"url", "https://example.com/${P}", "https://example.com/${P}x", "api"},
		{"method", "method: GET", "method: POST", "api"},
		{"header value", `A: "1", B: "2"}` + "\n    body", `A: "1", B: "3"}` + "\n    body", "api"},
		{"header name", `{A: "1", B: "2"}` + "\n    body", `{A: "1", C: "2"}` + "\n    body", "api"},
		{"body", `body: "b"`, `body: "c"`, "api"},
		{"expect_status", "[200]", "[200, 201]", "api"},
		{"max_body", "1MiB", "2MiB", "api"},
		{"schedule", `"@every 1m"`, `"@every 2m"`, "api"},
		{"timeout", "timeout: 10s", "timeout: 11s", "api"},
		{"backoff initial", "initial: 1s", "initial: 2s", "api"},
		{"backoff max", "max: 15m", "max: 16m", "api"},
		{"backoff multiplier", "multiplier: 2,", "multiplier: 3,", "api"},
		{"backoff jitter", "jitter: 0.1", "jitter: 0.2", "api"},
		{"breaker failures", "failures: 5", "failures: 6", "api"},
		{"breaker cooldown", "cooldown: 1m", "cooldown: 2m", "api"},
		{"error_after", "error_after: 10", "error_after: 0", "api"},
		{"limit", "limit: g1", "limit: g2", "api"},
		{"name", "name: api", "name: api2", "api"},
		{"command", `"exit 0"`, `"exit 1"`, "job"},
		{"env", `env: {A: "1", B: "2"}`, `env: {A: "1", B: "x"}`, "job"},
		{"dir", "dir: /tmp", "dir: /", "job"},
	}
	seen := map[string]string{base["api"]: "base api", base["job"]: "base job"}
	for _, c := range changes {
		if !strings.Contains(fpBase, c.old) {
			t.Fatalf("%s: %q not in base", c.name, c.old)
		}
		got := fingerprints(t, strings.Replace(fpBase, c.old, c.new, 1), "status")
		fp := got[c.src]
		if c.name == "name" {
			fp = got["api2"]
		}
		if prev, dup := seen[fp]; dup {
			t.Errorf("changing %s gives the fingerprint of %s", c.name, prev)
		}
		seen[fp] = c.name
	}
	// A different value of an expanded variable changes it too.
	if got := fingerprints(t, fpBase, "other"); got["api"] == base["api"] {
		t.Error("changing an environment variable did not change the fingerprint")
	}
}
