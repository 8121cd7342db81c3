package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConditionsLoad checks that conditions and select are read (from
// defaults, or a source's own, which replaces them) and compiled.
func TestConditionsLoad(t *testing.T) {
	cfg := mustLoad(t, `
defaults:
  conditions: ["status == 200"]
sources:
  - name: orders
    type: http
    url: https://api.example/orders
    conditions:
      - status == 200
      - duration < duration("2s")
      - body.json.status == "ok"
      - tls.not_after - now > duration("336h")
    select: body.json.items.map(i, i.id)
  - name: plain
    type: http
    url: http://api.example/
  - name: job
    type: exec
    command: [/bin/true]
    conditions: ["exit_code == 0", "stdout.json.ready"]
`, nil)
	o := mustSource(t, cfg, "orders")
	if len(o.Conditions) != 4 || o.Select == "" || o.Checks == nil || !o.Checks.NeedsBody() || !o.Checks.NeedsTLS() || !o.Checks.Selects() {
		t.Fatalf("orders: %q %q %v", o.Conditions, o.Select, o.Checks)
	}
	if p := mustSource(t, cfg, "plain"); len(p.Conditions) != 1 || p.Checks == nil || p.Checks.NeedsBody() {
		t.Fatalf("plain inherits %q", p.Conditions)
	}
	if j := mustSource(t, cfg, "job"); j.Checks == nil || !j.Checks.NeedsBody() {
		t.Fatalf("job: %v", j.Checks)
	}
}

// TestConditionsProblems checks the path and column of each problem.
func TestConditionsProblems(t *testing.T) {
	ps := mustFail(t, `
sources:
  - name: orders
    type: http
    url: http://api.example/orders
    conditions:
      - status == 200
      - status ==
      - tls.not_after > now
      - 42
    select: body.json.(
  - name: job
    type: exec
    command: [/bin/true]
    conditions: [status == 200]
`, nil)
	want := []string{
		`sources[name=orders].conditions[1]: column 10: Syntax error: mismatched input '<EOF>'`,
		`sources[name=orders].conditions[2]: column 1: tls is only set for https sources: on an http:// URL this can never hold`,
		`sources[name=orders].conditions[3]: column 1: a condition must be a bool, this is int`,
		`sources[name=orders].select: column 11: Syntax error: no viable alternative at input '.('`,
		`sources[name=job].conditions[0]: column 1: status is only set for http sources`,
	}
	for _, w := range want {
		if !hasPrefix(ps, w) {
			t.Errorf("no problem %q in:\n%v", w, ps)
		}
	}
	var many strings.Builder
	for range 33 {
		many.WriteString("      - status == 200\n")
	}
	ps = mustFail(t, "sources:\n  - name: a\n    type: http\n    url: http://x/\n    conditions:\n"+many.String(), nil)
	if !hasPrefix(ps, "sources[name=a].conditions: 33 conditions: at most 32 are allowed") {
		t.Errorf("33 conditions: %v", ps)
	}
	ps = mustFail(t, "sources:\n  - name: a\n    type: http\n    url: http://x/\n    select: '"+strings.Repeat("1 + ", 1100)+"1'\n", nil)
	if !hasPrefix(ps, "sources[name=a].select: expression is 4401 bytes long: at most 4096 (4 KiB) are allowed") {
		t.Errorf("a long select: %v", ps)
	}
}

// TestConditionsFingerprint checks that the fingerprint covers the
// expressions, and that a source without any keeps its old fingerprint.
func TestConditionsFingerprint(t *testing.T) {
	base := Source{Name: "a", Type: "http", URL: "http://x/"}
	with := base
	with.Conditions = []string{"status == 200"}
	other := base
	other.Conditions = []string{"status == 201"}
	sel := base
	sel.Select = "body.json"
	fps := map[string]bool{Fingerprint(&base): true, Fingerprint(&with): true, Fingerprint(&other): true, Fingerprint(&sel): true}
	if len(fps) != 4 {
		t.Fatalf("fingerprints do not tell the expressions apart")
	}
	if strings.Contains(fpDocOf(t, &base), "conditions") {
		t.Fatalf("a source without conditions has them in its document")
	}
}

// fpDocOf is the canonical document of s.
func fpDocOf(t *testing.T, s *Source) string {
	t.Helper()
	var f fingerprinter
	f.fingerprint(s)
	return f.buf.String()
}

// TestConditionsReload checks that a reload compiles no expression again:
// a changed source with the same expressions gets the same compiled Set.
func TestConditionsReload(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "pacer.yaml")
	text := func(url1, url2 string) string {
		return "sources:\n" +
			"  - {name: a, type: http, url: " + url1 + ", conditions: [status == 200, body.json.ok]}\n" +
			"  - {name: b, type: http, url: " + url2 + ", conditions: [status == 200, body.json.ok]}\n"
	}
	load := func(body string, prev *Config) *Config {
		if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := LoadWith(file, nil, Options{Previous: prev})
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	c1 := load(text("http://x/1", "http://x/2"), nil)
	c2 := load(text("http://x/1", "http://x/3"), c1)
	c3 := load(text("http://x/4", "http://x/3"), c2)
	set := c1.Sources[0].Checks
	for i, c := range []*Config{c1, c2, c3} {
		for _, s := range c.Sources {
			if s.Checks != set {
				t.Fatalf("load %d: source %s compiled its conditions again", i+1, s.Name)
			}
		}
	}
}
