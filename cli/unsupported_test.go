package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Issue 10 item 15: validate reports a PostgreSQL store, which run
// refuses, as a problem; run and the other commands say the same; the URL
// (with its password) is not echoed. A SQLite store still validates.
func TestPostgresStoreReportedByValidate(t *testing.T) {
	const want = "store: PostgreSQL is not supported yet by this build\n"
	for _, c := range []struct {
		store string
		args  []string
		code  int
	}{
		{"postgres://pacer:hunter2@db.example/pacer", []string{"validate"}, 1},
		{"PostgreSQL://pacer:hunter2@db.example/pacer", []string{"validate"}, 1},
		{"postgres://pacer:hunter2@db.example/pacer", []string{"status"}, 1},
		{"postgres://pacer:hunter2@db.example/pacer", []string{"run"}, 1},
		{"pacer.db", []string{"validate"}, 0},
	} {
		dir := t.TempDir()
		path := filepath.Join(dir, "config.yaml")
		cfg := "store: " + c.store + "\nadmin: {listen: \"\"}\nsources:\n  - {name: a, type: exec, command: [\"true\"]}\n"
		if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		var out, errOut strings.Builder
		code := Main(append(c.args, "-config", path), Env{Stdout: &out, Stderr: &errOut})
		if code != c.code {
			t.Errorf("%s with store %s: exit %d, want %d; stderr %q", c.args[0], c.store, code, c.code, errOut.String())
		}
		if c.code == 1 && errOut.String() != want {
			t.Errorf("%s with store %s: stderr %q, want %q", c.args[0], c.store, errOut.String(), want)
		}
		if strings.Contains(out.String()+errOut.String(), "hunter2") {
			t.Errorf("%s echoed the store password", c.args[0])
		}
	}
}
