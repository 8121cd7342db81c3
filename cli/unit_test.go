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
// as written (byte for byte, in a root directory where its executables
// exist), that it keeps the settings the service relies on, and that its
// install steps give the service a config it can read: a pacer system
// user, and the config root-owned but group pacer (issue 10 item 15: with
// DynamicUser the 0640 root:root config was unreadable).
func TestServiceUnit(t *testing.T) {
	data, err := os.ReadFile("../deploy/pacer.service")
	if err != nil {
		t.Fatal(err)
	}
	unit := string(data)
	for _, want := range []string{
		"Type=notify", "ExecReload=/bin/kill -HUP $MAINPID", "WatchdogSec=", "Restart=on-failure",
		"\nUser=pacer\n", "\nGroup=pacer\n", "StateDirectory=pacer", "ConfigurationDirectory=pacer", "LimitNOFILE=",
		"NoNewPrivileges=yes", "ProtectSystem=strict", "ProtectHome=yes", "PrivateTmp=yes", "PrivateDevices=yes",
		"RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6", "SystemCallFilter=@system-service", "CapabilityBoundingSet=\n",
		// The install steps in the header.
		"#   useradd --system --user-group", " pacer\n",
		"#   install -m 0640 -o root -g pacer config.yaml /etc/pacer/config.yaml\n",
		// Issue 11: the admin token and a source secret as credentials.
		"\n#LoadCredential=admin-token:/etc/pacer/credentials/admin-token\n",
		"\n#LoadCredential=partner.key:/etc/pacer/credentials/partner.key\n",
		`token_file: "${CREDENTIALS_DIRECTORY}/admin-token"`, `"${file:partner.key}"`,
	} {
		if !strings.Contains(unit, want) {
			t.Errorf("unit lacks %q", want)
		}
	}
	if strings.Contains(unit, "\nDynamicUser=") {
		t.Errorf("unit sets DynamicUser: the service could not read a config that root owns (systemd does not chown ConfigurationDirectory)")
	}
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Fatalf("systemd-analyze is needed (.ci/run installs it): %v", err)
	}
	root := unitRoot(t, data)
	out, err := exec.Command(analyze, "verify", "--root="+root, "pacer.service").CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Fatalf("systemd-analyze verify (unit as written, in %s): %v\n%s", root, err, out)
	}
	// The commented LoadCredential= lines are valid once enabled.
	enabled := strings.ReplaceAll(unit, "\n#LoadCredential=", "\nLoadCredential=")
	root = unitRoot(t, []byte(enabled))
	out, err = exec.Command(analyze, "verify", "--root="+root, "pacer.service").CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Fatalf("systemd-analyze verify (LoadCredential= enabled, in %s): %v\n%s", root, err, out)
	}
}

// unitRoot builds a root directory for systemd-analyze verify --root: the
// unit as written in /etc/systemd/system, the system's own units (for the
// targets it names), and executables where the unit expects pacer and
// kill.
func unitRoot(t *testing.T, unit []byte) string {
	t.Helper()
	root := t.TempDir()
	write := func(rel string, data []byte, mode os.FileMode) {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, mode); err != nil {
			t.Fatal(err)
		}
	}
	write("etc/systemd/system/pacer.service", unit, 0o644)
	write("usr/local/bin/pacer", []byte("#!/bin/sh\n"), 0o755)
	write("bin/kill", []byte("#!/bin/sh\n"), 0o755)
	const units = "/usr/lib/systemd/system"
	if err := os.MkdirAll(filepath.Join(root, units), 0o755); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(units)
	if err != nil {
		t.Fatalf("the system's units (for the targets the unit names): %v", err)
	}
	for _, e := range ents {
		src := filepath.Join(units, e.Name())
		dst := filepath.Join(root, units, e.Name())
		switch {
		case e.Type()&os.ModeSymlink != 0:
			target, err := os.Readlink(src)
			if err == nil {
				err = os.Symlink(target, dst)
			}
			if err != nil {
				t.Fatal(err)
			}
		case e.Type().IsRegular():
			data, err := os.ReadFile(src)
			if err != nil {
				t.Fatal(err)
			}
			write(filepath.Join(units[1:], e.Name()), data, 0o644)
		}
	}
	return root
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
