package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/domain"
	"github.com/pacer-dev/pacer/store"
)

// runCLI runs the command line in-process with the environment env (and
// nothing else), returning the exit status and what it printed.
func runCLI(env map[string]string, args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := Main(args, Env{Stdout: &out, Stderr: &errb, LookupEnv: func(k string) (string, bool) {
		v, ok := env[k]
		return v, ok
	}})
	return code, out.String(), errb.String()
}

// storedState reads a source's row from the store (t fails on an error).
func storedState(t *testing.T, dsn, name string) (domain.SourceState, bool) {
	t.Helper()
	st, err := store.Open(dsn, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	s, ok, err := st.GetState(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	return s, ok
}

// TestStoreCommandsWithoutPollSecrets: status, history, reset, pause and
// resume work without the variables only the polls need (issue 10 item 9:
// they failed with "environment variable SEKRET is not set"), and what they
// write does not make a daemon with the real environment see a changed
// configuration.
func TestStoreCommandsWithoutPollSecrets(t *testing.T) {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("key") != "the-real-key" {
			w.WriteHeader(http.StatusForbidden)
		}
	}))
	defer upstream.Close()
	dir := t.TempDir()
	admin := freeAddr(t)
	path := filepath.Join(dir, "config.yaml")
	body := fmt.Sprintf(`store: pacer.db
admin: {listen: %q}
shutdown_timeout: 2s
sources:
  - name: api
    type: http
    url: "%s/v1?key=${SEKRET}"
    headers: {Authorization: "Bearer ${SEKRET}"}
    schedule: "@every 1h"
  - name: job
    type: exec
    command: ["true"]
    schedule: "@every 1h"
`, admin, upstream.URL)
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	dsn := filepath.Join(dir, "pacer.db")
	shell := map[string]string{"PATH": os.Getenv("PATH")} // no SEKRET
	if code, _, stderr := runCLI(shell, "validate", "-config", path); code != exitFailure || !strings.Contains(stderr, "SEKRET is not set") {
		t.Fatalf("validate stays strict: %d %s", code, stderr)
	}
	for _, args := range [][]string{
		{"status", "-config", path},
		{"history", "-config", path, "api"},
		{"pause", "-config", path, "api", "-reason", "maintenance"},
		{"reset", "-config", path, "job"},
		{"status", "-config", path, "-json", "api"},
	} {
		if code, stdout, stderr := runCLI(shell, args...); code != exitOK {
			t.Fatalf("%v: exit %d\n%s%s", args, code, stdout, stderr)
		}
	}
	if st, ok := storedState(t, dsn, "api"); !ok || !st.Paused || st.Fingerprint != "" {
		t.Fatalf("api after pause: found %v %+v (a fingerprint from placeholders must not be stored)", ok, st)
	}
	full, err := config.Load(path, func(k string) (string, bool) {
		if k == "SEKRET" {
			return "the-real-key", true
		}
		return os.LookupEnv(k)
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for _, s := range full.Sources {
		want[s.Name] = s.Fingerprint
	}
	// A row the CLI creates has no fingerprint, whatever the source: one
	// computed in the operator's shell (its PATH, its variables) may not
	// be the daemon's.
	if st, ok := storedState(t, dsn, "job"); !ok || st.Fingerprint != "" {
		t.Errorf("job: found %v fingerprint %q, want none", ok, st.Fingerprint)
	}

	// The daemon, with the environment systemd gives it.
	d := &child{admin: admin, done: make(chan error, 1)}
	d.cmd = exec.Command(os.Args[0], "-test.run=^$", "--", "run", "-config", path)
	d.cmd.Env = append(os.Environ(), "PACER_TEST_MAIN=1", "SEKRET=the-real-key")
	d.cmd.Stderr, d.cmd.Stdout = d, io.Discard
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { d.done <- d.cmd.Wait() }()
	t.Cleanup(func() {
		_ = d.cmd.Process.Kill()
		<-d.done
	})
	d.get(t, "/readyz")
	var o struct{ State string }
	if err := json.Unmarshal([]byte(d.get(t, "/api/sources/api")), &o); err != nil || o.State != "paused" {
		t.Fatalf("api in the daemon: %v %+v", err, o)
	}
	if strings.Contains(d.log(), "configuration changed") {
		t.Errorf("the daemon saw a changed configuration:\n%s", d.log())
	}
	// With the daemon running, the commands still need no SEKRET.
	if code, stdout, stderr := runCLI(shell, "resume", "-config", path, "api"); code != exitOK {
		t.Fatalf("resume via the daemon: %d %s%s", code, stdout, stderr)
	}
	code, stdout, stderr := runCLI(shell, "status", "-config", path, "-json", "api")
	if code != exitOK || json.Unmarshal([]byte(stdout), &o) != nil || o.State == "paused" {
		t.Fatalf("status after resume: %d %s %s", code, stdout, stderr)
	}
	if code, stdout, stderr := runCLI(shell, "pause", "-config", path, "job"); code != exitOK {
		t.Fatalf("pause job via the daemon: %d %s%s", code, stdout, stderr)
	}
	// The daemon stores its own fingerprint with the state it saves.
	d.waitFor(t, 10*time.Second, func() error {
		if st, _ := storedState(t, dsn, "api"); st.Fingerprint != want["api"] || st.Paused {
			return fmt.Errorf("api: paused %v fingerprint %q, want %q", st.Paused, st.Fingerprint, want["api"])
		}
		if st, _ := storedState(t, dsn, "job"); st.Fingerprint != want["job"] || !st.Paused {
			return fmt.Errorf("job: paused %v fingerprint %q, want %q", st.Paused, st.Fingerprint, want["job"])
		}
		return nil
	})
}

// TestReloadOfEmptyConfigRejected: a SIGHUP while the config file is empty
// (an editor's save half done) is rejected and every source keeps running
// (issue 10 item 11: it stopped every source). The reload goes through
// config.Load, which checks it.
func TestReloadOfEmptyConfigRejected(t *testing.T) {
	d := startDaemon(t, "sources:\n  - {name: a, type: exec, command: [\"true\"], schedule: \"@every 1h\"}\n")
	d.get(t, "/readyz")
	path := d.cmd.Args[len(d.cmd.Args)-1]
	for i, content := range []string{"", "  \n# saving...\n"} {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := d.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		d.waitFor(t, 10*time.Second, func() error {
			if n := strings.Count(d.log(), "config is empty"); n < i+1 {
				return fmt.Errorf("%d rejections logged after SIGHUP %d", n, i+1)
			}
			return nil
		})
	}
	if body := d.get(t, "/api/sources"); !strings.Contains(body, `"name":"a"`) && !strings.Contains(body, `"name": "a"`) {
		t.Errorf("source a is gone after the rejected reloads: %s", body)
	}
}
