package store_test

import (
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/store"
)

// checkPgLocked checks that the PostgreSQL store of dsn is locked by pid on
// this host: AcquireLock refuses with a message naming the store (without
// its password), the pid and the host, and Holder agrees.
func checkPgLocked(t *testing.T, dsn string, pid int) {
	t.Helper()
	l, err := store.AcquireLock(dsn)
	var le *store.LockedError
	if !errors.As(err, &le) {
		if l != nil {
			_ = l.Release()
		}
		t.Fatalf("AcquireLock on a held store = %v; want a *LockedError", err)
	}
	host, _ := os.Hostname()
	want := fmt.Sprintf("store %s is in use by a running pacer (pid %d on host %s)", store.ShownDSN(dsn), pid, host)
	if err.Error() != want {
		t.Errorf("message %q, want %q", err.Error(), want)
	}
	if hp, held, err := store.Holder(dsn); err != nil || !held || hp != pid {
		t.Errorf("Holder = %d, %v, %v; want %d, true", hp, held, err, pid)
	}
}

func TestPostgresLockSameProcess(t *testing.T) {
	dsn := newPostgresDSN(t)
	if pid, held, err := store.Holder(dsn); err != nil || held || pid != 0 {
		t.Fatalf("Holder of a free store = %d, %v, %v", pid, held, err)
	}
	l := mustAcquire(t, dsn)
	// A session-level advisory lock belongs to its connection: a second
	// AcquireLock in the same process (another connection) is refused.
	checkPgLocked(t, dsn, os.Getpid())
	// Another schema of the same database is another store.
	mustAcquire(t, newPostgresDSN(t))

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

func TestPostgresLockKilledHolderDoesNotBlock(t *testing.T) {
	dsn := newPostgresDSN(t)
	child := startChild(t, "lock", dsn)
	checkPgLocked(t, dsn, child.Process.Pid)

	kill9(t, child)
	// The server ends the session when it sees the connection close: poll
	// for that, generously.
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, held, err := store.Holder(dsn)
		if err != nil {
			t.Fatal(err)
		}
		if !held {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the lock of a killed holder is still held after 10 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	mustAcquire(t, dsn)
	checkPgLocked(t, dsn, os.Getpid())
}

// TestPostgresLockRetakenAfterLostConnection: the lock's session ends (a
// restart of the server, a cut connection; here pg_terminate_backend): the
// holder connects again and takes the lock back while it is free.
func TestPostgresLockRetakenAfterLostConnection(t *testing.T) {
	dsn := newPostgresDSN(t)
	mustAcquire(t, dsn)
	s := openAt(t, dsn, store.Options{})
	var n int
	// The session that holds this store's lock (s's search_path is the
	// store's schema), and no other test's.
	q := "SELECT COUNT(pg_terminate_backend(pid)) FROM pg_locks WHERE locktype = 'advisory' AND classid = 1885430642::oid " +
		"AND objid = hashtext(current_schema())::oid AND objsubid = 2 " +
		"AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
	if err := store.GormDB(s).Raw(q).Row().Scan(&n); err != nil || n < 1 {
		t.Fatalf("terminate the lock's session: %d, %v", n, err)
	}
	deadline := time.Now().Add(20 * time.Second)
	sawFree := false
	for {
		pid, held, err := store.Holder(dsn)
		if err != nil {
			t.Fatal(err)
		}
		sawFree = sawFree || !held
		if held && pid == os.Getpid() && sawFree {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("lock not taken back within 20 s of its session's end (held %v by %d, seen free %v)", held, pid, sawFree)
		}
		time.Sleep(50 * time.Millisecond)
	}
	checkPgLocked(t, dsn, os.Getpid())
}
