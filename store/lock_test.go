package store_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
