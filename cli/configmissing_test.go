package cli

import (
	"path/filepath"
	"strings"
	"testing"
)

// Issue 24 item 5: a missing default config (./config.yaml, neither
// -config nor $PACER_CONFIG given) names both ways to give one; a missing
// file named on purpose is said as before.
func TestMissingDefaultConfigNamesTheWays(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	noEnv := func(string) (string, bool) { return "", false }
	var out, errOut strings.Builder
	if code := Main([]string{"validate"}, Env{Stdout: &out, Stderr: &errOut, LookupEnv: noEnv}); code != 1 ||
		!strings.Contains(errOut.String(), "-config FILE") || !strings.Contains(errOut.String(), "$PACER_CONFIG") {
		t.Errorf("validate without a config: exit %d, stderr %q: want both -config and $PACER_CONFIG named", code, errOut.String())
	}
	errOut.Reset()
	named := filepath.Join(dir, "nope.yaml")
	if code := Main([]string{"validate", "-config", named}, Env{Stdout: &out, Stderr: &errOut, LookupEnv: noEnv}); code != 1 ||
		strings.Contains(errOut.String(), "PACER_CONFIG") || !strings.Contains(errOut.String(), "nope.yaml") {
		t.Errorf("validate -config %s: exit %d, stderr %q", named, code, errOut.String())
	}
}
