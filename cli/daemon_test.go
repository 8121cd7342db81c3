package cli

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// child is a pacer run in a child process (the test binary, see TestMain).
type child struct {
	cmd    *exec.Cmd
	mu     sync.Mutex
	stderr bytes.Buffer
	admin  string
	done   chan error
}

func (d *child) Write(p []byte) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stderr.Write(p)
}

func (d *child) log() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stderr.String()
}

func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// startDaemon writes a config with body (sources etc.) and runs the daemon.
func startDaemon(t *testing.T, body string, env ...string) *child {
	t.Helper()
	dir := t.TempDir()
	d := &child{admin: freeAddr(t), done: make(chan error, 1)}
	cfg := fmt.Sprintf("store: pacer.db\nadmin: {listen: %q}\nshutdown_timeout: 2s\n%s", d.admin, body)
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	d.cmd = exec.Command(os.Args[0], "-test.run=^$", "--", "run", "-config", path)
	d.cmd.Env = append(append(os.Environ(), "PACER_TEST_MAIN=1"), env...)
	d.cmd.Stderr = d
	d.cmd.Stdout = io.Discard
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { d.done <- d.cmd.Wait() }()
	t.Cleanup(func() {
		_ = d.cmd.Process.Kill()
		<-d.done
	})
	return d
}

// waitFor polls cond every 20ms until it returns nil, failing the test
// with its last error (and the daemon's log) after limit.
func (d *child) waitFor(t *testing.T, limit time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%v\nlog:\n%s", err, d.log())
		}
		time.Sleep(20 * time.Millisecond) // poll interval while the daemon works
	}
}

// get fetches path from the admin API, waiting up to 10s for it to serve.
func (d *child) get(t *testing.T, path string) string {
	t.Helper()
	var body string
	d.waitFor(t, 10*time.Second, func() error {
		resp, err := http.Get("http://" + d.admin + path)
		if err != nil {
			return fmt.Errorf("GET %s: %w", path, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("GET %s: %s", path, resp.Status)
		}
		body = string(b)
		return nil
	})
	return body
}

// TestNotifySequence runs the daemon with NOTIFY_SOCKET on a real unixgram
// socket: READY=1 once loaded, RELOADING=1 (with MONOTONIC_USEC) then
// READY=1 around SIGHUP, STOPPING=1 on SIGTERM, and a clean exit.
func TestNotifySequence(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	msgs := make(chan string, 64)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				close(msgs)
				return
			}
			msgs <- string(buf[:n])
		}
	}()
	next := func(want string) string {
		t.Helper()
		timeout := time.After(10 * time.Second)
		for {
			select {
			case m, ok := <-msgs:
				if !ok {
					t.Fatalf("socket closed waiting for %s", want)
				}
				if strings.HasPrefix(m, "STATUS=") || m == "WATCHDOG=1" {
					continue
				}
				if !strings.HasPrefix(m, want) {
					t.Fatalf("got %q, want %s", m, want)
				}
				return m
			case <-timeout:
				t.Fatalf("no %s within 10s", want)
			}
		}
	}
	d := startDaemon(t, "sources:\n  - {name: a, type: exec, command: [\"true\"], schedule: \"@every 1s\"}\n", "NOTIFY_SOCKET="+sock)
	ready := next("READY=1")
	if !strings.Contains(ready, "STATUS=polling 1 sources") {
		t.Errorf("READY without status: %q", ready)
	}
	d.get(t, "/readyz")
	if err := d.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	if m := next("RELOADING=1"); !strings.Contains(m, "MONOTONIC_USEC=") {
		t.Errorf("RELOADING without MONOTONIC_USEC: %q", m)
	}
	next("READY=1")
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	next("STOPPING=1")
	select {
	case err := <-d.done:
		d.done <- err
		if err != nil {
			t.Fatalf("exit: %v\n%s", err, d.log())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no exit within 10s of SIGTERM")
	}
}

// TestDescriptorClamp runs the daemon under a soft and hard descriptor
// limit of 256 with concurrency 500: it logs both numbers and runs with the
// lower cap, which pacer_concurrency_limit shows.
func TestDescriptorClamp(t *testing.T) {
	d := startDaemon(t, "concurrency: 500\nsources: []\n", "PACER_TEST_NOFILE=256")
	metrics := d.get(t, "/metrics")
	want := fmt.Sprintf("pacer_concurrency_limit %d", fdCap(256, fdsPerPoll))
	if !strings.Contains(metrics, want+"\n") {
		t.Errorf("metrics lack %q", want)
	}
	log := d.log()
	if !strings.Contains(log, "concurrency lowered") || !strings.Contains(log, "configured=500") || !strings.Contains(log, "rlimit_nofile=256") {
		t.Errorf("log does not explain the clamp:\n%s", log)
	}
}

// TestReloadNamesRestartOnlyKeys changes the store, the admin listener and
// the log level, then sends SIGHUP: the daemon keeps serving on its first
// listener and logs one warning naming each key, and no value.
func TestReloadNamesRestartOnlyKeys(t *testing.T) {
	d := startDaemon(t, "sources:\n  - {name: a, type: exec, command: [\"true\"], schedule: \"@every 1s\"}\n")
	d.get(t, "/readyz")
	path := d.cmd.Args[len(d.cmd.Args)-1]
	other := freeAddr(t)
	cfg := fmt.Sprintf("store: other.db\nadmin: {listen: %q}\nlog: {level: debug}\nshutdown_timeout: 2s\n"+
		"sources:\n  - {name: a, type: exec, command: [\"true\"], schedule: \"@every 1s\"}\n", other)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := d.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	d.waitFor(t, 10*time.Second, func() error {
		for _, w := range []string{"key=store", "key=admin.listen", "key=log.level"} {
			if !strings.Contains(d.log(), w) {
				return fmt.Errorf("no warning with %s after SIGHUP", w)
			}
		}
		return nil
	})
	if log := d.log(); strings.Contains(log, "key=log.format") || strings.Contains(log, "other.db") || strings.Contains(log, other) {
		t.Errorf("reload log names an unchanged key or a value:\n%s", log)
	}
	d.get(t, "/readyz") // still on the first listener
}
