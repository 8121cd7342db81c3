package deploy

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestDebianPackage builds the package with scripts/package.sh, checks its
// metadata and contents with dpkg-deb, installs it into a temporary root
// with `dpkg --root --force-script-chrootless` (its maintainer scripts run,
// with $DPKG_ROOT set: the user pacer, the state directory, the config's
// group), runs systemd-analyze verify on the installed unit and pacer
// validate on the installed config, then checks that a reinstall, a removal
// and a purge keep /var/lib/pacer and that a reinstall and a removal keep an
// edited config (issue 24 item 4, contract 15.5).
func TestDebianPackage(t *testing.T) {
	// The programs the test runs, each from Debian's dpkg or systemd
	// package: the test fails (never skips) without one.
	for _, tool := range []string{"dpkg-deb", "dpkg", "systemd-analyze"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not found (%v): install Debian's dpkg and systemd (apt-get install dpkg systemd)", tool, err)
		}
	}
	if os.Geteuid() != 0 {
		t.Fatalf("the package test installs into a temporary root, whose maintainer scripts chown the state directory: run it as root (scripts/test.sh does on CI)")
	}
	deb := buildPackage(t)
	checkMetadata(t, deb)
	checkContents(t, deb)

	root := dpkgRoot(t)
	dpkgIn(t, root, "-i", deb)
	checkInstalled(t, root)
	verifyUnit(t, root)
	out, err := exec.Command(filepath.Join(root, "usr/bin/pacer"), "validate", "-config", filepath.Join(root, "etc/pacer/config.yaml")).CombinedOutput()
	if err != nil || !strings.Contains(string(out), ": ok (1 sources") {
		t.Fatalf("pacer validate on the installed config: %v\n%s", err, out)
	}
	checkRemoval(t, root, deb)
}

// buildPackage runs scripts/package.sh into a temporary directory and
// returns the package's path, checking its name. With $PACER_E2E_BIN set
// it packages that binary instead of building one.
func buildPackage(t *testing.T) string {
	t.Helper()
	dist := t.TempDir()
	cmd := exec.Command("scripts/package.sh")
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "PACER_DIST="+dist)
	if bin := os.Getenv("PACER_E2E_BIN"); bin != "" {
		// A binary built elsewhere, as the e2e tests take it: packaged
		// as it is instead of built again.
		cmd.Env = append(cmd.Env, "PACER_BIN="+bin)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("scripts/package.sh: %v\n%s", err, stderr.Bytes())
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	deb := lines[len(lines)-1]
	if !filepath.IsAbs(deb) {
		deb = filepath.Join("..", deb)
	}
	st, err := os.Stat(deb)
	if err != nil {
		t.Fatalf("scripts/package.sh printed %q: %v", deb, err)
	}
	if filepath.Dir(deb) != dist {
		t.Errorf("package written to %s, want PACER_DIST %s", deb, dist)
	}
	if !regexp.MustCompile(`^pacer_[0-9][A-Za-z0-9.+~]*_amd64\.deb$`).MatchString(filepath.Base(deb)) {
		t.Errorf("package name %q: want pacer_VERSION_amd64.deb, VERSION starting with a digit", filepath.Base(deb))
	}
	t.Logf("built %s (%.1f MiB) in %s", filepath.Base(deb), float64(st.Size())/(1<<20), time.Since(start).Round(time.Millisecond))
	return deb
}

// run runs a command and returns its standard output, failing the test
// with its standard error when it fails.
func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, out, stderr.Bytes())
	}
	return string(out)
}

// checkMetadata reads the control fields and the conffiles with dpkg-deb.
func checkMetadata(t *testing.T, deb string) {
	t.Helper()
	fields := map[string]string{}
	for _, f := range []string{"Package", "Version", "Architecture", "Depends", "Maintainer", "Description"} {
		fields[f] = strings.TrimSpace(run(t, "dpkg-deb", "-f", deb, f))
	}
	if fields["Package"] != "pacer" || fields["Architecture"] != "amd64" {
		t.Errorf("Package %q Architecture %q: want pacer, amd64", fields["Package"], fields["Architecture"])
	}
	if want := "pacer_" + fields["Version"] + "_amd64.deb"; filepath.Base(deb) != want {
		t.Errorf("file %s does not carry the package's Version %q (want %s)", filepath.Base(deb), fields["Version"], want)
	}
	if !regexp.MustCompile(`^libc6 \(>= 2\.[0-9]+\)$`).MatchString(fields["Depends"]) {
		t.Errorf("Depends %q: want libc6 (>= 2.N), the glibc the cgo binary needs", fields["Depends"])
	}
	if fields["Maintainer"] == "" || fields["Description"] == "" {
		t.Errorf("Maintainer %q or Description %q empty", fields["Maintainer"], fields["Description"])
	}
	if got := strings.TrimSpace(run(t, "dpkg-deb", "-I", deb, "conffiles")); got != "/etc/pacer/config.yaml" {
		t.Errorf("conffiles %q: want /etc/pacer/config.yaml alone", got)
	}
	info := run(t, "dpkg-deb", "-I", deb)
	for _, script := range []string{"postinst", "prerm", "postrm"} {
		if !regexp.MustCompile(`(?m)^\s+\d+ bytes,\s+\d+ lines\s+\*\s+` + script + `\s`).MatchString(info) {
			t.Errorf("no executable %s in the control archive:\n%s", script, info)
		}
	}
}

// checkContents lists the package's files with dpkg-deb -c: each path with
// its mode, and no /var/lib/pacer (the state is never the package's, so
// dpkg never removes it).
func checkContents(t *testing.T, deb string) {
	t.Helper()
	modes := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(run(t, "dpkg-deb", "-c", deb)), "\n") {
		f := strings.Fields(line)
		if len(f) < 6 {
			t.Fatalf("dpkg-deb -c line %q", line)
		}
		modes[f[5]] = f[0] + " " + f[1]
	}
	for path, want := range map[string]string{
		"./usr/bin/pacer":                        "-rwxr-xr-x root/root",
		"./usr/lib/systemd/system/pacer.service": "-rw-r--r-- root/root",
		"./usr/lib/sysusers.d/pacer.conf":        "-rw-r--r-- root/root",
		"./etc/pacer/config.yaml":                "-rw-r----- root/root",
		"./usr/share/doc/pacer/README.md":        "-rw-r--r-- root/root",
	} {
		if got := modes[path]; got != want {
			t.Errorf("%s: %q, want %q", path, got, want)
		}
	}
	for path := range modes {
		if strings.HasPrefix(path, "./var/") {
			t.Errorf("the package holds %s: the state directory must not be the package's", path)
		}
	}
}

// dpkgRoot makes an empty root with dpkg's database.
func dpkgRoot(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	for _, d := range []string{"info", "updates", "triggers"} {
		if err := os.MkdirAll(filepath.Join(root, "var/lib/dpkg", d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"status", "available"} {
		if err := os.WriteFile(filepath.Join(root, "var/lib/dpkg", f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// dpkgIn runs dpkg on root with the maintainer scripts run outside it
// ($DPKG_ROOT set) and the dependencies ignored (libc6 is not in root).
func dpkgIn(t *testing.T, root string, args ...string) string {
	t.Helper()
	base := []string{"--root=" + root, "--force-not-root", "--force-script-chrootless", "--force-depends", "--force-confold"}
	return run(t, "dpkg", append(base, args...)...)
}

// idIn reads pacer's numeric id from root's etc/passwd or etc/group.
func idIn(t *testing.T, root, file string) uint32 {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "etc", file))
	if err != nil {
		t.Fatalf("the postinst made no %s: %v", file, err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Split(line, ":"); len(f) > 3 && f[0] == "pacer" {
			id, err := strconv.ParseUint(f[2], 10, 32)
			if err != nil {
				t.Fatalf("etc/%s: %q", file, line)
			}
			return uint32(id)
		}
	}
	t.Fatalf("no pacer in the root's etc/%s:\n%s", file, data)
	return 0
}

// checkInstalled checks what the postinst made: a system user pacer, the
// state directory owned by it (0700), the config root's and group pacer's
// (0640), and the unit for the package's paths.
func checkInstalled(t *testing.T, root string) {
	t.Helper()
	uid, gid := idIn(t, root, "passwd"), idIn(t, root, "group")
	if uid == 0 || uid >= 1000 {
		t.Errorf("pacer's uid %d: want a system uid (1-999)", uid)
	}
	for _, c := range []struct {
		rel      string
		uid, gid uint32
		mode     os.FileMode
	}{
		{"var/lib/pacer", uid, gid, os.ModeDir | 0o700},
		{"etc/pacer/config.yaml", 0, gid, 0o640},
	} {
		st, err := os.Stat(filepath.Join(root, c.rel))
		if err != nil {
			t.Fatalf("after install: %v", err)
		}
		sys := st.Sys().(*syscall.Stat_t)
		if sys.Uid != c.uid || sys.Gid != c.gid || st.Mode() != c.mode {
			t.Errorf("%s: %d:%d %v, want %d:%d %v", c.rel, sys.Uid, sys.Gid, st.Mode(), c.uid, c.gid, c.mode)
		}
	}
	unit, err := os.ReadFile(filepath.Join(root, "usr/lib/systemd/system/pacer.service"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"\nExecStart=/usr/bin/pacer run -config /etc/pacer/config.yaml\n", "\nUser=pacer\n",
		"\nStateDirectory=pacer\n", "\nProtectSystem=strict\n", "\nWatchdogSec=30s\n",
	} {
		if !strings.Contains(string(unit), want) {
			t.Errorf("installed unit lacks %q", strings.TrimSpace(want))
		}
	}
	if strings.Contains(string(unit), "/usr/local/") {
		t.Errorf("installed unit names /usr/local/, not the package's paths")
	}
}

// verifyUnit runs systemd-analyze verify on the installed unit, with the
// system's own units copied in (for the targets it names) and /bin/kill
// (ExecReload=) stubbed; the installed /usr/bin/pacer is the real binary.
func verifyUnit(t *testing.T, root string) {
	t.Helper()
	const units = "/usr/lib/systemd/system"
	ents, err := os.ReadDir(units)
	if err != nil {
		t.Fatalf("the system's units (for the targets the unit names): %v", err)
	}
	for _, e := range ents {
		dst := filepath.Join(root, units, e.Name())
		if _, err := os.Lstat(dst); err == nil || !(e.Type().IsRegular() || e.Type()&os.ModeSymlink != 0) {
			continue
		}
		if err := exec.Command("cp", "-a", filepath.Join(units, e.Name()), dst).Run(); err != nil {
			t.Fatalf("copy %s: %v", e.Name(), err)
		}
	}
	if err := os.MkdirAll(filepath.Join(root, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "bin/kill"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("systemd-analyze", "verify", "--root="+root, "pacer.service").CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Fatalf("systemd-analyze verify on the installed unit: %v\n%s", err, out)
	}
}

// checkRemoval edits the config and puts a store in the state directory,
// then: a reinstall keeps both; a removal takes the binary and the unit and
// keeps both; a purge takes the config and keeps the state.
func checkRemoval(t *testing.T, root, deb string) {
	t.Helper()
	conf := filepath.Join(root, "etc/pacer/config.yaml")
	store := filepath.Join(root, "var/lib/pacer/pacer.db")
	orig, err := os.ReadFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	edited := append(orig, "# edited by the operator\n"...)
	if err := os.WriteFile(conf, edited, 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(store, []byte("state"), 0o600); err != nil {
		t.Fatal(err)
	}
	kept := func(stage string, wantConf bool) {
		t.Helper()
		if got, err := os.ReadFile(store); err != nil || string(got) != "state" {
			t.Errorf("after %s: the store %q, %v; want it kept", stage, got, err)
		}
		got, err := os.ReadFile(conf)
		switch {
		case wantConf && (err != nil || !bytes.Equal(got, edited)):
			t.Errorf("after %s: the edited config was not kept (%v):\n%s", stage, err, got)
		case !wantConf && !os.IsNotExist(err):
			t.Errorf("after %s: the config is still there (%v)", stage, err)
		}
	}
	dpkgIn(t, root, "-i", deb)
	kept("a reinstall", true)
	dpkgIn(t, root, "--remove", "pacer")
	kept("removal", true)
	for _, gone := range []string{"usr/bin/pacer", "usr/lib/systemd/system/pacer.service", "usr/lib/sysusers.d/pacer.conf"} {
		if _, err := os.Stat(filepath.Join(root, gone)); !os.IsNotExist(err) {
			t.Errorf("after removal %s is still there (%v)", gone, err)
		}
	}
	dpkgIn(t, root, "--purge", "pacer")
	kept("purge", false)
	status, err := os.ReadFile(filepath.Join(root, "var/lib/dpkg/status"))
	if err != nil || bytes.Contains(status, []byte("Package: pacer\n")) {
		t.Errorf("after purge dpkg still knows pacer (%v):\n%s", err, status)
	}
}
