package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

// TestServiceUnit checks deploy/pacer.service with systemd-analyze verify
// (with ExecStart pointed at an existing executable) and that it keeps the
// settings the service relies on.
func TestServiceUnit(t *testing.T) {
	data, err := os.ReadFile("../deploy/pacer.service")
	if err != nil {
		t.Fatal(err)
	}
	unit := string(data)
	for _, want := range []string{
		"Type=notify", "ExecReload=/bin/kill -HUP $MAINPID", "WatchdogSec=", "Restart=on-failure",
		"DynamicUser=yes", "StateDirectory=pacer", "ConfigurationDirectory=pacer", "LimitNOFILE=",
		"NoNewPrivileges=yes", "ProtectSystem=strict", "ProtectHome=yes", "PrivateTmp=yes", "PrivateDevices=yes",
		"RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6", "SystemCallFilter=@system-service", "CapabilityBoundingSet=\n",
	} {
		if !strings.Contains(unit, want) {
			t.Errorf("unit lacks %q", want)
		}
	}
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Fatalf("systemd-analyze is needed (.ci/run installs it): %v", err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "pacer.service")
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(unit, "/usr/local/bin/pacer", self)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", path).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// gcPercent reads the collector's setting without changing it.
func gcPercent() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

// startupGC raises the collector's target during start-up and restores the
// setting once; a higher setting or GOGC=off is left alone.
func TestStartupGC(t *testing.T) {
	orig := debug.SetGCPercent(100)
	defer debug.SetGCPercent(orig)

	restore := startupGC()
	if got := gcPercent(); got != 400 {
		t.Errorf("during start-up GC percent = %d, want 400", got)
	}
	restore()
	if got := gcPercent(); got != 100 {
		t.Errorf("after start-up GC percent = %d, want 100 restored", got)
	}
	debug.SetGCPercent(50)
	restore() // a second call does nothing
	if got := gcPercent(); got != 50 {
		t.Errorf("a second restore changed GC percent to %d", got)
	}

	for _, keep := range []int{-1, 800} {
		debug.SetGCPercent(keep)
		r := startupGC()
		if got := gcPercent(); got != keep {
			t.Errorf("with GC percent %d set, start-up changed it to %d", keep, got)
		}
		r()
		if got := gcPercent(); got != keep {
			t.Errorf("with GC percent %d set, restore changed it to %d", keep, got)
		}
	}
}

// TestReadCommandsLeaveNoStore: before any daemon ran, status shows the
// configured sources as never polled and history shows none, and neither
// creates the store file (made by root, the service could not write it).
func TestReadCommandsLeaveNoStore(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	cfg := "store: pacer.db\nsources:\n  - {name: a, type: exec, command: [\"true\"], schedule: \"@every 1m\"}\n"
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"status", "-config", path}, "pending"},
		{[]string{"status", "-config", path, "a"}, "pending"},
		{[]string{"history", "-config", path, "-json", "a"}, "[]"},
	} {
		var out, errOut strings.Builder
		if code := Main(c.args, Env{Stdout: &out, Stderr: &errOut}); code != 0 {
			t.Fatalf("%v: exit %d: %s", c.args, code, errOut.String())
		}
		if !strings.Contains(out.String(), c.want) {
			t.Errorf("%v: output %q lacks %q", c.args, out.String(), c.want)
		}
		if _, err := os.Stat(filepath.Join(dir, "pacer.db")); !os.IsNotExist(err) {
			t.Fatalf("%v created the store (stat: %v)", c.args, err)
		}
	}
}
