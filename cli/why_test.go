package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// pacer status shows the explanation of each source's wait in a last
// column (WHY), the same sentence as the dashboard, and status -json
// carries it as "why".
func TestStatusWhy(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	cfg := "sources:\n  - {name: a, type: exec, command: [\"/bin/true\"], schedule: \"@every 1m\"}\n" +
		"  - {name: b, type: exec, command: [\"/bin/true\"], schedule: \"@every 1m\"}\n"
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (int, string, string) {
		var out, errOut strings.Builder
		code := Main(args, Env{Stdout: &out, Stderr: &errOut, LookupEnv: func(string) (string, bool) { return "", false }})
		return code, out.String(), errOut.String()
	}
	if code, _, errOut := run("pause", "-config", path, "-reason", "maintenance", "a"); code != 0 {
		t.Fatalf("pause: exit %d: %s", code, errOut)
	}
	code, out, errOut := run("status", "-config", path)
	if code != 0 {
		t.Fatalf("status: exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.HasSuffix(strings.Join(strings.Fields(lines[0]), " "), "LAST ERROR WHY") ||
		!strings.HasSuffix(lines[1], "paused: maintenance") || !strings.HasSuffix(lines[2], "first poll at its first schedule tick") {
		t.Errorf("status table:\n%s", out)
	}
	code, out, errOut = run("status", "-config", path, "-json", "a")
	var o struct {
		Name, State, Why string
	}
	if code != 0 || json.Unmarshal([]byte(out), &o) != nil || o.Why != "paused: maintenance" || o.State != "paused" {
		t.Errorf("status -json a: exit %d %q %s: want why \"paused: maintenance\"", code, out, errOut)
	}
}
