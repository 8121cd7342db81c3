package cli

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSourceFilesReloadAndCredentials runs the daemon on a config whose
// sources are in source files, one with a secret from a credentials file
// (${file:...} under $CREDENTIALS_DIRECTORY): the secret never shows in the
// log or the API; a SIGHUP after a file is added starts its source; a
// SIGHUP after a file is broken is rejected with the problem naming the
// file, and every source keeps running; validate reports the problems of
// every file; status works without the credentials; a pattern that
// matches nothing is a warning in the log.
func TestSourceFilesReloadAndCredentials(t *testing.T) {
	const secret = "file-secret-4242"
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadGateway) // the error quotes the URL, which holds the secret
	}))
	defer upstream.Close()
	files, creds := t.TempDir(), t.TempDir()
	write := func(dir, name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(creds, "web.key", secret+"\n")
	write(files, "a.yaml", fmt.Sprintf(`sources:
  - {name: web, type: http, url: "%s/x?k=${file:web.key}", headers: {X-Key: "${file:web.key}"}, schedule: "@every 1s"}
  - {name: a, type: exec, command: ["true"], schedule: "@every 1h"}
`, upstream.URL))
	d := startDaemon(t, fmt.Sprintf("source_files: [%q, \"none.d/*.yaml\"]\n", filepath.Join(files, "*.yaml")), "CREDENTIALS_DIRECTORY="+creds)
	path := d.cmd.Args[len(d.cmd.Args)-1]
	sources := func() string { return d.get(t, "/api/sources") }
	d.waitFor(t, 20*time.Second, func() error {
		if body := sources(); !strings.Contains(body, "502 Bad Gateway") || !strings.Contains(body, `"name":"a"`) {
			return fmt.Errorf("web has not failed yet: %s", body)
		}
		return nil
	})
	if body := sources(); strings.Contains(body, secret) || !strings.Contains(body, "k=***") {
		t.Errorf("API shows the secret or no mask: %s", body)
	}
	if !strings.Contains(d.log(), "level=WARN") || !strings.Contains(d.log(), "matches no file") {
		t.Errorf("no warning of the pattern that matches nothing:\n%s", d.log())
	}

	// A file added: its source starts on SIGHUP.
	write(files, "b.yaml", "sources:\n  - {name: b, type: exec, command: [\"true\"], schedule: \"@every 1h\"}\n")
	if err := d.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	d.waitFor(t, 10*time.Second, func() error {
		if body := sources(); !strings.Contains(body, `"name":"b"`) {
			return fmt.Errorf("b not loaded: %s", body)
		}
		return nil
	})

	// A file broken: the reload is rejected, naming the file; the old
	// sources stay.
	write(files, "b.yaml", "sources:\n  - {name: b, type: exec, command: [\"true\"], schedule: \"@every 1h\"}\n  - {name: web, type: exec, command: [\"true\"], timeout: soon}\n")
	if err := d.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	bPath := filepath.Join(files, "b.yaml")
	d.waitFor(t, 10*time.Second, func() error {
		if !strings.Contains(d.log(), bPath+": sources[1].name: duplicate name") {
			return fmt.Errorf("no rejection naming %s logged", bPath)
		}
		return nil
	})
	body := sources()
	for _, name := range []string{"web", "a", "b"} {
		if !strings.Contains(body, `"name":"`+name+`"`) {
			t.Errorf("source %s is gone after the rejected reload: %s", name, body)
		}
	}
	if strings.Contains(d.log(), secret) {
		t.Errorf("the log shows the secret:\n%s", d.log())
	}

	// validate reports the problems of every file, without the secret.
	env := map[string]string{"PATH": os.Getenv("PATH"), "CREDENTIALS_DIRECTORY": creds}
	code, stdout, stderr := runCLI(env, "validate", "-config", path)
	out := stdout + stderr
	if code != exitFailure || !strings.Contains(out, bPath+": sources[1].name: duplicate name \"web\" (also used by sources[0] of "+filepath.Join(files, "a.yaml")+")") ||
		!strings.Contains(out, bPath+": sources[1].timeout: invalid duration") || strings.Contains(out, secret) {
		t.Errorf("validate: exit %d\n%s", code, out)
	}
	// status needs neither the credentials nor a valid web source's key.
	write(files, "b.yaml", "sources:\n  - {name: b, type: exec, command: [\"true\"], schedule: \"@every 1h\"}\n")
	code, stdout, stderr = runCLI(map[string]string{"PATH": os.Getenv("PATH")}, "status", "-config", path)
	if code != exitOK || !strings.Contains(stdout, "web") || strings.Contains(stdout+stderr, secret) {
		t.Errorf("status without CREDENTIALS_DIRECTORY: exit %d\n%s%s", code, stdout, stderr)
	}
}

// TestValidateWarnsOfUnmatchedSourceFiles: a source_files pattern that
// matches no file is no error, but validate warns of it.
func TestValidateWarnsOfUnmatchedSourceFiles(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	cfg := "source_files: [\"teams/*.yaml\"]\nsources:\n  - {name: a, type: exec, command: [\"true\"]}\n"
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCLI(map[string]string{"PATH": os.Getenv("PATH")}, "validate", "-config", path)
	if code != exitOK || !strings.Contains(stdout, "ok (1 sources") ||
		stderr != "warning: source_files[0]: pattern \"teams/*.yaml\" matches no file\n" {
		t.Errorf("validate: exit %d\nstdout %q\nstderr %q", code, stdout, stderr)
	}
}
