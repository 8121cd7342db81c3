package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// pacer status (from the store, no daemon) shows a source in a pause
// window as paused with the window's reason, in the table and in -json
// with the maintenance field; a source in a silence window keeps its state
// and says so in WHY.
func TestStatusMaintenance(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	cfg := "maintenance:\n" +
		"  - {name: always, schedule: \"* * * * *\", duration: 1m, sources: [a], action: pause}\n" +
		"  - {name: hush, schedule: \"* * * * *\", duration: 1m, sources: [b], action: silence}\n" +
		"sources:\n  - {name: a, type: exec, command: [\"/bin/true\"], schedule: \"@every 1m\"}\n" +
		"  - {name: b, type: exec, command: [\"/bin/true\"], schedule: \"@every 1m\"}\n"
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (int, string, string) {
		var out, errOut strings.Builder
		code := Main(args, Env{Stdout: &out, Stderr: &errOut, LookupEnv: func(string) (string, bool) { return "", false }})
		return code, out.String(), errOut.String()
	}
	code, out, errOut := run("status", "-config", path)
	if code != 0 {
		t.Fatalf("status: exit %d: %s", code, errOut)
	}
	// WHY is clipped to fit 120 columns.
	if !strings.Contains(out, "paused: maintenance: always until ") || !strings.Contains(out, "notifications held (maintenance: h") {
		t.Errorf("status table:\n%s", out)
	}
	code, out, errOut = run("status", "-config", path, "-json", "b")
	var b struct{ State, Why string }
	if code != 0 || json.Unmarshal([]byte(out), &b) != nil || b.State != "pending" || !strings.Contains(b.Why, "; notifications held (maintenance: hush until ") {
		t.Errorf("status -json b: exit %d %q %s", code, out, errOut)
	}
	code, out, errOut = run("status", "-config", path, "-json", "a")
	var o struct {
		State, Why  string
		Maintenance *struct{ Name, Action string }
	}
	if code != 0 || json.Unmarshal([]byte(out), &o) != nil || o.State != "paused" || o.Maintenance == nil || o.Maintenance.Name != "always" {
		t.Errorf("status -json a: exit %d %q %s", code, out, errOut)
	}
}
