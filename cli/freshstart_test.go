package cli

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// freshConfig writes a config whose store does not exist yet, with admin
// listening on listen ("" for none), and returns its path and the store's.
func freshConfig(t *testing.T, listen string) (cfgPath, storePath string) {
	t.Helper()
	dir := t.TempDir()
	storePath = filepath.Join(dir, "pacer.db")
	cfgPath = filepath.Join(dir, "config.yaml")
	body := "store: " + storePath + "\nadmin:\n  listen: \"" + listen + "\"\n" +
		"sources:\n  - {name: a, type: exec, command: [\"/bin/true\"], schedule: \"@every 1m\"}\n"
	if err := os.WriteFile(cfgPath, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return cfgPath, storePath
}

// noStoreFiles fails t if anything of the store at path exists.
func noStoreFiles(t *testing.T, path, after string) {
	t.Helper()
	for _, p := range []string{path, path + ".lock", path + "-wal", path + "-shm"} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s left %s behind", after, p)
		}
	}
}

// Issue 24 item 5: a first start that fails on a busy admin port leaves no
// empty store and no lock file behind, and says why.
func TestBusyAdminPortLeavesNoStore(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cfgPath, storePath := freshConfig(t, ln.Addr().String())
	var out, errOut strings.Builder
	code := Main([]string{"run", "-config", cfgPath}, Env{Stdout: &out, Stderr: &errOut, LookupEnv: func(string) (string, bool) { return "", false }})
	if code != 1 || !strings.Contains(errOut.String(), "admin.listen") || !strings.Contains(errOut.String(), "address already in use") {
		t.Errorf("run on a busy port: exit %d, stderr %q", code, errOut.String())
	}
	noStoreFiles(t, storePath, "a start on a busy port")
}

// Issue 24 item 5: pacer reset before any daemon ran says there is nothing
// to reset and does not create the store.
func TestResetWithoutStore(t *testing.T) {
	cfgPath, storePath := freshConfig(t, "")
	for _, args := range [][]string{{"reset", "-config", cfgPath, "a"}, {"reset", "-config", cfgPath, "-all-errored"}} {
		var out, errOut strings.Builder
		code := Main(args, Env{Stdout: &out, Stderr: &errOut, LookupEnv: func(string) (string, bool) { return "", false }})
		if code != 0 || !(strings.Contains(out.String(), "nothing to reset") || strings.Contains(out.String(), "no source is in error")) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out.String(), errOut.String())
		}
		noStoreFiles(t, storePath, strings.Join(args, " "))
	}
}
