package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStateDirectoryStore checks that the commands agree on the default
// store under systemd: with $STATE_DIRECTORY set and no store key, pause
// writes $STATE_DIRECTORY/pacer.db (not pacer.db next to the config), status
// reads it, and trigger names it.
func TestStateDirectoryStore(t *testing.T) {
	dir, stateDir := t.TempDir(), t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	cfg := "sources:\n  - {name: a, type: exec, command: [\"/bin/true\"], schedule: \"@every 1m\"}\n"
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	lookup := func(k string) (string, bool) {
		if k == "STATE_DIRECTORY" {
			return stateDir + ":" + dir, true
		}
		return "", false
	}
	run := func(args ...string) (int, string, string) {
		var out, errOut strings.Builder
		code := Main(args, Env{Stdout: &out, Stderr: &errOut, LookupEnv: lookup})
		return code, out.String(), errOut.String()
	}
	if code, _, errOut := run("pause", "-config", path, "a"); code != 0 {
		t.Fatalf("pause: exit %d: %s", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(stateDir, "pacer.db")); err != nil {
		t.Fatalf("pause did not write the store in STATE_DIRECTORY: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "pacer.db")); !os.IsNotExist(err) {
		t.Fatalf("pause wrote a store next to the config (stat: %v)", err)
	}
	if code, out, errOut := run("status", "-config", path, "a"); code != 0 || !strings.Contains(out, "paused") {
		t.Errorf("status: exit %d, output %q (%s): want the paused state from STATE_DIRECTORY", code, out, errOut)
	}
	if code, _, errOut := run("trigger", "-config", path, "a"); code == 0 || !strings.Contains(errOut, filepath.Join(stateDir, "pacer.db")) {
		t.Errorf("trigger: exit %d, %q: want a refusal naming %s", code, errOut, filepath.Join(stateDir, "pacer.db"))
	}
}
