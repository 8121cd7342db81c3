package dashboard

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/domain"
)

// TestSettingsConditions: a source's page lists its conditions and select,
// a secret in them masked, and names the condition that failed last.
func TestSettingsConditions(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	yaml := `sources:
  - name: a
    type: http
    url: http://127.0.0.1:1/x
    conditions: [status == 200, 'headers["x-key"] == "${KEY}"']
    select: body.json.items
`
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path, func(k string) (string, bool) { return "hunter2-secret", k == "KEY" })
	if err != nil {
		t.Fatal(err)
	}
	red := cfg.Redactor().Redact
	got := map[string]string{}
	for _, s := range settings(cfg.Sources[0], red) {
		got[s.Key] = s.Value
	}
	if got["condition 1"] != "status == 200" || got["condition 2"] != `headers["x-key"] == "***"` || got["select"] != "body.json.items" {
		t.Fatalf("settings %q", got)
	}
	recs := []domain.PollRecord{{Outcome: "success"}, {Outcome: "failure", Condition: `headers["x-key"] == "hunter2-secret"`}, {Condition: "status == 200"}}
	if c := lastCondition(recs, red); c != `headers["x-key"] == "***"` {
		t.Fatalf("lastCondition = %q", c)
	}
}
