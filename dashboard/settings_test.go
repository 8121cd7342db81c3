package dashboard

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pacer-dev/pacer/config"
)

// TestSettingsDeliver: a source's page lists its deliver block, its
// re-probe and conditional settings, with the webhook's headers and the
// ${VAR} values masked.
func TestSettingsDeliver(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	yaml := `sources:
  - name: a
    type: http
    url: http://127.0.0.1:1/x
    conditional: false
    error_reprobe: 10m
    deliver:
      file: out/{name}.json
      command: [/bin/cat, "--key=${KEY}"]
      webhook: {url: "http://127.0.0.1:2/in", headers: {X-Key: "${KEY}"}}
`
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	const key = "hunter2-very-secret"
	cfg, err := config.Load(path, func(k string) (string, bool) {
		if k == "KEY" {
			return key, true
		}
		return "", false
	})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, s := range settings(cfg.Sources[0], cfg.Redactor().Redact) {
		got[s.Key] = s.Value
	}
	want := map[string]string{
		"conditional":                  "false",
		"error_reprobe":                "every 10m while in error",
		"deliver":                      "changed results",
		"deliver file":                 filepath.Join(dir, "out", "a.json"),
		"deliver command":              `"/bin/cat" "--key=***"`,
		"deliver webhook":              "POST http://127.0.0.1:2/in",
		"deliver webhook header X-Key": "***",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("setting %q = %q, want %q", k, got[k], v)
		}
	}
	for k, v := range got {
		if strings.Contains(v, key) {
			t.Errorf("setting %q shows the secret: %q", k, v)
		}
	}
}
