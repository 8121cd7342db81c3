package e2e

// Hardening of the store (issue 10, items 3 and 5), against the binary:
// one daemon per store whatever name the config uses for the file or
// whatever happens to its lock file (rule 3.13), and a store deleted or
// replaced under a running daemon is noticed (/readyz 503 with the reason,
// pacer_store_errors_total, one loud log line), not re-created empty by
// the CLI, and not silently started over at the next start.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// secondDaemon starts "pacer run" with a config naming storeName, whose
// source polls /second, and checks rule 3.13: it exits 1 at once naming
// the store as written and the running daemon's pid, and polls nothing.
func secondDaemon(t *testing.T, in *inst, u *upstream, storeName string, holder int) {
	t.Helper()
	cfg := filepath.Join(in.dir, "second.yaml")
	writeFile(t, cfg, "store: "+storeName+"\nadmin: {listen: \""+freeAddr(t)+"\"}\nsources:\n"+
		"  - {name: ok, type: http, url: \""+u.URL("/second")+"\", schedule: \"@every 1s\"}\n")
	d2 := in.launch(cfg, false)
	code, exited := d2.wait(5 * time.Second)
	if !exited {
		t.Fatalf("a second pacer run on store %s still runs after 5s: two daemons on one store; stderr:\n%s", storeName, d2.logs())
	}
	if code != 1 || d2.exitAt.Sub(d2.started) > 3*time.Second {
		t.Errorf("second pacer run: exit %d after %s, want 1 at once; stderr:\n%s", code, d2.exitAt.Sub(d2.started), d2.logs())
	}
	if msg := d2.logs(); !strings.Contains(msg, storeName) || !strings.Contains(msg, "pid "+strconv.Itoa(holder)) {
		t.Errorf("second pacer run: the message must name store %s and the running daemon's pid %d:\n%s", storeName, holder, msg)
	}
	if n := u.Count("/second"); n != 0 {
		t.Errorf("the refused daemon polled its source %d times", n)
	}
	t.Logf("second pacer run on %s: exit %d after %s: %s", storeName, code, d2.exitAt.Sub(d2.started).Round(time.Millisecond), strings.TrimSpace(d2.logs()))
}

// TestSecondDaemonThroughSymlink (item 3): a second config that names the
// store through a symbolic link (ln -s pacer.db alias.db, or a link to its
// directory) is refused like one naming the file itself. Before: the
// second daemon ran, both polled, history rows were overwritten.
func TestSecondDaemonThroughSymlink(t *testing.T) {
	t.Parallel()
	u := newUpstream(t)
	in := newInst(t)
	in.writeConfig(`sources:
  - {name: ok, type: http, url: "` + u.URL("/ok") + `", schedule: "@every 1s"}
`)
	d1 := in.start()
	u.waitArrivals(t, "/ok", 1, 3*time.Second)
	if err := os.Symlink("pacer.db", filepath.Join(in.dir, "alias.db")); err != nil {
		t.Fatal(err)
	}
	linkedDir := filepath.Join(t.TempDir(), "state")
	if err := os.Symlink(in.dir, linkedDir); err != nil {
		t.Fatal(err)
	}
	secondDaemon(t, in, u, "alias.db", d1.pid())
	secondDaemon(t, in, u, filepath.Join(linkedDir, "pacer.db"), d1.pid())
	n := u.Count("/ok")
	u.waitArrivals(t, "/ok", n+1, 3*time.Second)
	if d1.exited() {
		t.Fatal("the first daemon exited")
	}
	d1.stop(10 * time.Second)
}

// TestSecondDaemonAfterLockFileDeleted (item 3): deleting a running
// daemon's pacer.db.lock does not free the store (the daemon holds a lock
// on the database file too); the daemon re-creates its lock file; a
// daemon killed with kill -9 still never blocks the next start. Before:
// the second daemon took a new lock file and ran.
func TestSecondDaemonAfterLockFileDeleted(t *testing.T) {
	t.Parallel()
	u := newUpstream(t)
	in := newInst(t)
	in.writeConfig(`sources:
  - {name: ok, type: http, url: "` + u.URL("/ok") + `", schedule: "@every 1s"}
`)
	d1 := in.start()
	u.waitArrivals(t, "/ok", 1, 3*time.Second)
	lockFile := in.storePath() + ".lock"
	if err := os.Remove(lockFile); err != nil {
		t.Fatal(err)
	}
	secondDaemon(t, in, u, "pacer.db", d1.pid())
	eventually(t, 5*time.Second, "the daemon to re-create its lock file with its pid", func() error {
		b, err := os.ReadFile(lockFile)
		if err != nil || !strings.HasPrefix(string(b), strconv.Itoa(d1.pid())+"\n") {
			return errf("lock file %q, %v", b, err)
		}
		return nil
	})
	if err := os.Remove(lockFile); err != nil {
		t.Fatal(err)
	}
	// The CLI finds the daemon without its lock file, and steers it.
	in.mustCLI("pause", "ok")
	if o := in.statusJSON("ok"); o.State != "paused" {
		t.Errorf("after pause through the daemon: %s", o)
	}
	d1.kill()
	d3 := in.start()
	d3.stop(10 * time.Second)
}

// storeGoneInst is a daemon with a source that keeps polling (so that
// the flusher has something to commit) and one paused, whose state the
// store must not lose.
func storeGoneInst(t *testing.T, u *upstream) (*inst, *daemon) {
	t.Helper()
	in := newInst(t)
	in.writeConfig(`shutdown_timeout: 2s
sources:
  - {name: busy, type: http, url: "` + u.URL("/busy") + `", schedule: "@every 1s"}
  - {name: held, type: http, url: "` + u.URL("/held") + `", schedule: "@every 1s"}
`)
	d := in.start()
	in.mustCLI("pause", "held", "-reason", "kept")
	u.waitArrivals(t, "/busy", 2, 5*time.Second)
	return in, d
}

// waitNotReady waits for /readyz to answer 503 with a reason holding want.
func waitNotReady(t *testing.T, d *daemon, want string) time.Duration {
	t.Helper()
	t0 := time.Now()
	eventually(t, 5*time.Second, "/readyz 503 naming the store problem", func() error {
		if code, reason := readyz(t, d); code != 503 || !strings.Contains(reason, want) {
			return errf("/readyz %d %q, want 503 with %q", code, reason, want)
		}
		return nil
	})
	return time.Since(t0)
}

// TestStoreDeletedUnderDaemon (item 5): rm pacer.db pacer.db-wal
// pacer.db-shm under a running daemon: /readyz 503 with the reason within
// seconds, pacer_store_errors_total counts, one loud log line; the CLI does
// not create a new, empty store; a restart refuses to start over the
// missing store (exit 1, saying what happened and how to proceed) unless
// run with -new-store. Before: /readyz stayed 200, errors 0, pause created
// an empty store, and a restart lost every error and pause state.
//
// "rm pacer.db*" deletes the lock file too: the daemon re-creates it, with
// the record of the database, within a second.
func TestStoreDeletedUnderDaemon(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name     string
		suffixes []string
	}{
		{"db wal shm", []string{"", "-wal", "-shm"}},
		{"and the lock file", []string{"", "-wal", "-shm", ".lock"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			testStoreDeleted(t, c.suffixes)
		})
	}
}

func testStoreDeleted(t *testing.T, suffixes []string) {
	u := newUpstream(t)
	in, d := storeGoneInst(t, u)
	for _, suffix := range suffixes {
		if err := os.Remove(in.storePath() + suffix); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	took := waitNotReady(t, d, "deleted")
	eventually(t, 5*time.Second, "the lock file to record the database", func() error {
		if b, err := os.ReadFile(in.storePath() + ".lock"); err != nil || !strings.Contains(string(b), "\ndb ") {
			return errf("lock file %q, %v", b, err)
		}
		return nil
	})
	t.Logf("/readyz 503 %s after the store was deleted", took.Round(10*time.Millisecond))
	eventually(t, 5*time.Second, "pacer_store_errors_total > 0", func() error {
		if n := d.metric("pacer_store_errors_total"); n < 1 {
			return errf("pacer_store_errors_total %v", n)
		}
		return nil
	})
	for _, args := range [][]string{{"pause", "busy"}, {"status"}} {
		r := in.cli(args...)
		if r.code != 1 || !strings.Contains(r.stderr, "missing") {
			t.Errorf("pacer %v on a deleted store: want exit 1 saying the store is missing, got %s", args, r)
		}
	}
	if fileExists(in.storePath()) {
		t.Fatal("the CLI created a new store in place of the deleted one")
	}
	// One line per incident, however often /readyz and the flusher look
	// (the store is checked at most once a second: 1.5 s of them).
	never(t, 1500*time.Millisecond, "a second log line for the deleted store", func() error {
		readyz(t, d)
		if n := strings.Count(d.logs(), "THE DATABASE FILE IS GONE"); n != 1 {
			return errf("%d log lines for the deleted store, want 1:\n%s", n, d.logs())
		}
		return nil
	})
	// The final flush retries for 10 s (the file may come back), then the
	// daemon exits 1: its last changes could not be kept.
	d.signal(os.Interrupt)
	if _, ok := d.wait(20 * time.Second); !ok {
		t.Fatal("the daemon did not stop")
	}

	// Refused, and refused again: a refusal keeps the record of the store.
	var again *daemon
	for range 2 {
		again = in.launch(in.cfgPath, false)
		code, exited := again.wait(10 * time.Second)
		if !exited || code != 1 {
			t.Fatalf("a restart over the deleted store: exited %v, code %d; want exit 1; stderr:\n%s", exited, code, again.logs())
		}
	}
	for _, want := range []string{"pacer.db", "missing", "-new-store"} {
		if !strings.Contains(again.logs(), want) {
			t.Errorf("the refusal does not say %q:\n%s", want, again.logs())
		}
	}
	if fileExists(in.storePath()) {
		t.Fatal("the refused restart created a new store")
	}
	if u.CountSince("/busy", again.started) != 0 {
		t.Error("the refused restart polled")
	}
	// Told to (PACER_NEW_STORE=1, or pacer run -new-store), it starts empty.
	in.env = append(in.env, "PACER_NEW_STORE=1")
	d2 := in.start()
	if !strings.Contains(d2.logs(), "new, empty one is created") {
		t.Errorf("-new-store did not say it starts empty:\n%s", d2.logs())
	}
	d2.stop(10 * time.Second)
}

// TestStoreReplacedUnderDaemon (item 5): the store's file overwritten with
// garbage in place, or replaced by another file: /readyz 503 with the
// reason. Before: /readyz 200 while the CLI said "file is not a database".
func TestStoreReplacedUnderDaemon(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		do   func(t *testing.T, path string)
		want string
	}{
		{"garbage in place", func(t *testing.T, path string) {
			writeFile(t, path, strings.Repeat("garbage ", 512))
		}, "no longer a SQLite database"},
		{"renamed over", func(t *testing.T, path string) {
			writeFile(t, path+".tmp", strings.Repeat("garbage ", 512))
			if err := os.Rename(path+".tmp", path); err != nil {
				t.Fatal(err)
			}
		}, "replaced by another file"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			u := newUpstream(t)
			in, d := storeGoneInst(t, u)
			c.do(t, in.storePath())
			took := waitNotReady(t, d, c.want)
			t.Logf("/readyz 503 %s after the store was %s", took.Round(10*time.Millisecond), c.name)
			eventually(t, 5*time.Second, "pacer_store_errors_total > 0", func() error {
				if n := d.metric("pacer_store_errors_total"); n < 1 {
					return errf("pacer_store_errors_total %v", n)
				}
				return nil
			})
			d.kill()
		})
	}
}

// TestStatusLastErrorAfterReset (item 15, in part): after reset a source
// shows ok beside its old last error; status -json has last_error_at (when
// that poll ended, kept across a restart) and the table says how long ago
// it was. Before: "ok ... GET ...: 500" with nothing saying it was old.
func TestStatusLastErrorAfterReset(t *testing.T) {
	t.Parallel()
	u := newUpstream(t)
	u.Set("/e", behavior{Status: 500})
	in := newInst(t)
	in.writeConfig(`shutdown_timeout: 2s
sources:
  - {name: e, type: http, url: "` + u.URL("/e") + `", schedule: "@every 1s", error_after: 1}
`)
	d := in.start()
	eventually(t, 5*time.Second, "e in error", func() error {
		if o := in.statusJSON("e"); o.State != "error" {
			return errf("%s", o)
		}
		return nil
	})
	failedBy := time.Now()
	u.Set("/e", behavior{})
	in.mustCLI("reset", "e")
	eventually(t, 5*time.Second, "e ok after reset", func() error {
		if o := in.statusJSON("e"); o.State != "ok" {
			return errf("%s", o)
		}
		return nil
	})
	d.stop(10 * time.Second)
	var o struct {
		State       string     `json:"state"`
		LastError   string     `json:"last_error"`
		LastErrorAt *time.Time `json:"last_error_at"`
	}
	r := in.mustCLI("status", "-json", "e")
	if err := json.Unmarshal([]byte(r.stdout), &o); err != nil {
		t.Fatal(err)
	}
	if o.State != "ok" || o.LastError == "" || o.LastErrorAt == nil || o.LastErrorAt.After(failedBy) || o.LastErrorAt.Before(d.started) {
		t.Errorf("status -json after reset: %s; want ok, the old last_error and its last_error_at (between %s and %s)", r.stdout, d.started, failedBy)
	}
	table := in.mustCLI("status", "e").stdout
	if !strings.Contains(table, "s ago) ") || !strings.Contains(table, "500") {
		t.Errorf("status table does not say how long ago the last error was:\n%s", table)
	}
}
