package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// validate accepts a PostgreSQL store now that the backend exists (issue
// 10 item 15 asked that validate and run agree), and never echoes the
// URL's password.
func TestValidatePostgresStore(t *testing.T) {
	for _, store := range []string{"postgres://pacer:hunter2@db.example/pacer", "postgresql://pacer:hunter2@db.example/pacer?sslmode=require", "pacer.db"} {
		dir := t.TempDir()
		path := filepath.Join(dir, "config.yaml")
		cfg := "store: " + store + "\nadmin: {listen: \"\"}\nsources:\n  - {name: a, type: exec, command: [\"true\"]}\n"
		if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		var out, errOut strings.Builder
		if code := Main([]string{"validate", "-config", path}, Env{Stdout: &out, Stderr: &errOut}); code != 0 {
			t.Errorf("validate with store %s: exit %d; stderr %q", store, code, errOut.String())
		}
		if strings.Contains(out.String()+errOut.String(), "hunter2") {
			t.Errorf("validate echoed the store password: %q", out.String()+errOut.String())
		}
	}
}
