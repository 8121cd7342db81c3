package store_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/store"
)

func mustAcquire(t *testing.T, dsn string) *store.Lock {
	t.Helper()
	l, err := store.AcquireLock(dsn)
	if err != nil {
		t.Fatalf("AcquireLock: %v", err)
	}
	t.Cleanup(func() {
		if err := l.Release(); err != nil {
			t.Error(err)
		}
	})
	return l
}

func checkLocked(t *testing.T, dsn string, pid int) {
	t.Helper()
	l, err := store.AcquireLock(dsn)
	var le *store.LockedError
	if !errors.As(err, &le) {
		if l != nil {
			_ = l.Release()
		}
		t.Fatalf("AcquireLock on a held store = %v; want a *LockedError", err)
	}
	if le.Store != dsn || le.PID != pid {
		t.Errorf("LockedError = %+v, want store %s, pid %d", le, dsn, pid)
	}
	if want := fmt.Sprintf("store %s is in use by a running pacer (pid %d)", dsn, pid); err.Error() != want {
		t.Errorf("message %q, want %q", err.Error(), want)
	}
	if hp, held, err := store.Holder(dsn); err != nil || !held || hp != pid {
		t.Errorf("Holder = %d, %v, %v; want %d, true", hp, held, err, pid)
	}
}

func TestLockSameProcess(t *testing.T) {
	dsn := filepath.Join(t.TempDir(), "pacer.db")
	if pid, held, err := store.Holder(dsn); err != nil || held || pid != 0 {
		t.Fatalf("Holder without a lock file = %d, %v, %v", pid, held, err)
	}
	if _, err := os.Stat(store.LockPath(dsn)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Holder created the lock file: %v", err)
	}

	l := mustAcquire(t, dsn)
	// flock locks belong to the open file description: a second open in the
	// same process conflicts.
	checkLocked(t, dsn, os.Getpid())
	if _, err := os.Stat(dsn); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("AcquireLock touched the database file: %v", err)
	}
	b, err := os.ReadFile(store.LockPath(dsn))
	if err != nil || strings.TrimSpace(string(b)) != fmt.Sprint(os.Getpid()) {
		t.Errorf("lock file holds %q, %v; want our pid", b, err)
	}

	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(); err != nil {
		t.Errorf("second Release: %v", err)
	}
	if pid, held, err := store.Holder(dsn); err != nil || held {
		t.Errorf("Holder after Release = %d, %v, %v; want not held", pid, held, err)
	}
	mustAcquire(t, dsn)
}

func TestLockKilledHolderDoesNotBlock(t *testing.T) {
	dsn := filepath.Join(t.TempDir(), "pacer.db")
	child := startChild(t, "lock", dsn)
	checkLocked(t, dsn, child.Process.Pid)

	kill9(t, child)
	if pid, held, err := store.Holder(dsn); err != nil || held {
		t.Errorf("Holder after kill -9 = %d, %v, %v; want not held", pid, held, err)
	}
	mustAcquire(t, dsn)
	checkLocked(t, dsn, os.Getpid())
}

// TestLockSymlinkAlias (hardening item 3): a second name for the store's
// file, through a symbolic link to the file or to its directory, or a
// relative path, shares the lock: rule 3.13 holds whatever name a config
// uses, also for a link made before the database exists. Before, the lock
// file was the name plus ".lock", so alias.db.lock was a lock of its own.
func TestLockSymlinkAlias(t *testing.T) {
	dir := t.TempDir()
	dsn := filepath.Join(dir, "pacer.db")
	link := filepath.Join(dir, "alias.db")
	if err := os.Symlink("pacer.db", link); err != nil {
		t.Fatal(err)
	}
	linkedDir := filepath.Join(t.TempDir(), "state")
	if err := os.Symlink(dir, linkedDir); err != nil {
		t.Fatal(err)
	}
	// Before the database exists: the link dangles.
	l := mustAcquire(t, link)
	checkLockedAs(t, dsn, os.Getpid())
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	// A daemon's start: the store exists from now on.
	child := startChild(t, "daemon", dsn)
	for _, alias := range []string{link, filepath.Join(linkedDir, "pacer.db"), filepath.Join(linkedDir, "alias.db")} {
		checkLockedAs(t, alias, child.Process.Pid)
	}
	kill9(t, child)
	mustAcquire(t, link)
}

// checkLockedAs checks that AcquireLock(name) is refused with a message
// that names the store as given and the holder's pid.
func checkLockedAs(t *testing.T, name string, pid int) {
	t.Helper()
	l, err := store.AcquireLock(name)
	var le *store.LockedError
	if !errors.As(err, &le) {
		if l != nil {
			_ = l.Release()
		}
		t.Fatalf("AcquireLock(%s) on a held store = %v; want a *LockedError", name, err)
	}
	if le.PID != pid || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", pid)) {
		t.Errorf("AcquireLock(%s): %q; want it to name %s and pid %d", name, err, name, pid)
	}
	if hp, held, err := store.Holder(name); err != nil || !held || hp != pid {
		t.Errorf("Holder(%s) = %d, %v, %v; want %d, true", name, hp, held, err, pid)
	}
}

// TestLockFileDeletedUnderDaemon (hardening item 3): deleting a running
// daemon's lock file does not free the store: the daemon also holds a
// flock on the database file, so a second AcquireLock is refused naming the
// daemon's pid (found in /proc/locks); once the daemon is killed, the next
// one starts. Before, the second daemon created a new lock file and ran.
func TestLockFileDeletedUnderDaemon(t *testing.T) {
	dsn := filepath.Join(t.TempDir(), "pacer.db")
	child := startChild(t, "daemon", dsn)
	if err := os.Remove(store.LockPath(dsn)); err != nil {
		t.Fatal(err)
	}
	checkLockedAs(t, dsn, child.Process.Pid)
	// The refused attempt left a lock file nobody holds: still refused.
	checkLockedAs(t, dsn, child.Process.Pid)
	kill9(t, child)
	mustAcquire(t, dsn)
}

// TestLockFileRecreatedByGuard: a daemon whose lock file was deleted
// re-creates it (at its next check of the store), with its pid and the
// database it holds, so that the CLI and the next start find them there.
func TestLockFileRecreatedByGuard(t *testing.T) {
	dsn := filepath.Join(t.TempDir(), "pacer.db")
	s, _ := daemonStore(t, dsn, store.Options{})
	if err := os.Remove(store.LockPath(dsn)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the lock file re-created", func() error {
		if err := s.Writable(t.Context()); err != nil {
			return err
		}
		b, err := os.ReadFile(store.LockPath(dsn))
		if err != nil || !strings.HasPrefix(string(b), fmt.Sprintf("%d\ndb ", os.Getpid())) {
			return fmt.Errorf("lock file %q, %v", b, err)
		}
		return nil
	})
	if hp, held, err := store.Holder(dsn); err != nil || !held || hp != os.Getpid() {
		t.Errorf("Holder = %d, %v, %v; want our pid, held", hp, held, err)
	}
}
