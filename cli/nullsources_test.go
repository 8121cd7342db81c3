package cli

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestNullSourcesRefusedEverywhere: a config cut off right after
// "sources:" (YAML null, no source from source_files) is refused alike by
// validate (exit 1), by the first start (exit 1 before anything runs), and
// by a SIGHUP (rejected, every source keeps running; issue 20 item 16a:
// it used to load and stop every source). "sources: []" says it on purpose
// and is accepted by both validate and a reload.
func TestNullSourcesRefusedEverywhere(t *testing.T) {
	shell := map[string]string{"PATH": os.Getenv("PATH")}
	dir := t.TempDir()
	cut := filepath.Join(dir, "cut.yaml")
	empty := filepath.Join(dir, "empty.yaml")
	if err := os.WriteFile(cut, []byte("store: pacer.db\nadmin: {listen: \"\"}\nsources:\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(empty, []byte("store: pacer.db\nadmin: {listen: \"\"}\nsources: []\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, stdout, stderr := runCLI(shell, "validate", "-config", cut); code != exitFailure || !cutSourcesMessage().MatchString(stdout+stderr) {
		t.Errorf("validate of a config cut after sources: exit %d, output %s%s; want %d and %q", code, stdout, stderr, exitFailure, cutSourcesMessage())
	}
	if code, stdout, stderr := runCLI(shell, "validate", "-config", empty); code != exitOK {
		t.Errorf("validate of sources: []: exit %d, output %s%s", code, stdout, stderr)
	}
	// The first start, in a child process: before, it ran with no sources.
	run := exec.Command(os.Args[0], "-test.run=^$", "--", "run", "-config", cut)
	run.Env = append(os.Environ(), "PACER_TEST_MAIN=1")
	var out bytes.Buffer
	run.Stdout, run.Stderr = &out, &out
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- run.Wait() }()
	select {
	case err := <-exited:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != exitFailure || !cutSourcesMessage().MatchString(out.String()) {
			t.Errorf("run on a config cut after sources: %v, output %s; want exit %d and %q", err, out.String(), exitFailure, cutSourcesMessage())
		}
	case <-time.After(30 * time.Second):
		_ = run.Process.Kill()
		<-exited
		t.Errorf("run on a config cut after sources: still running after 30s (it started with no sources): %s", out.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "pacer.db")); err == nil {
		t.Error("the refused first start created the store")
	}

	d := startDaemon(t, "sources:\n  - {name: a, type: exec, command: [\"true\"], schedule: \"@every 1h\"}\n")
	d.get(t, "/readyz")
	path := d.cmd.Args[len(d.cmd.Args)-1]
	head := fmt.Sprintf("store: pacer.db\nadmin: {listen: %q}\nshutdown_timeout: 2s\n", d.admin)
	if err := os.WriteFile(path, []byte(head+"sources:\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := d.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	d.waitFor(t, 10*time.Second, func() error {
		if !cutSourcesMessage().MatchString(d.log()) {
			return fmt.Errorf("no rejection of the cut config logged")
		}
		return nil
	})
	if body := d.get(t, "/api/sources"); !strings.Contains(body, `"name":"a"`) && !strings.Contains(body, `"name": "a"`) {
		t.Errorf("source a is gone after the rejected reload: %s", body)
	}
	// Said on purpose: the reload is taken and the source stops.
	if err := os.WriteFile(path, []byte(head+"sources: []\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := d.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	d.waitFor(t, 10*time.Second, func() error {
		if body := d.get(t, "/api/sources"); strings.Contains(body, `"a"`) {
			return fmt.Errorf("source a still configured after a reload to sources: []: %s", body)
		}
		return nil
	})
}

// cutSourcesMessage is what the config says of a "sources:" key with no
// value and no source from source_files (config.checkNullSources), as it
// reads in a message and in a log line (which escapes its quotes).
func cutSourcesMessage() *regexp.Regexp {
	return regexp.MustCompile(`write \\?"sources: \[\]\\?" for a daemon with no sources`)
}
