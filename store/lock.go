package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/pacer-dev/pacer/internal/backend"
)

// LockedError reports that another live process holds the daemon lock of a
// store (contract 3.13). PID is 0 when the holder had not yet written it.
type LockedError struct {
	Store string
	PID   int
	// Host is the holder's host name (PostgreSQL stores; "" for SQLite).
	Host string
}

// Error names the store and the holder's pid, for the operator.
func (e *LockedError) Error() string {
	pid := "pid unknown"
	if e.PID > 0 {
		pid = "pid " + strconv.Itoa(e.PID)
	}
	if e.Host != "" {
		pid += " on host " + e.Host
	}
	return fmt.Sprintf("store %s is in use by a running pacer (%s)", e.Store, pid)
}

// Lock is the daemon lock of one SQLite store, held from AcquireLock until
// Release or the end of the process (the kernel drops it even on kill -9).
type Lock struct {
	mu   sync.Mutex
	f    *os.File // nil once released, and for stores that need no lock
	path string
	pg   *pgLock // a PostgreSQL store's advisory lock (postgres_lock.go)
}

// LockPath is the file that AcquireLock locks for the store at dsn. It sits
// next to the database so that the lock never touches the database itself.
func LockPath(dsn string) string { return dsn + ".lock" }

// AcquireLock takes the daemon lock of the store at dsn: an exclusive flock
// on LockPath(dsn), into which it then writes our pid. When a live process
// holds it, the error is a *LockedError with that process's pid. A
// PostgreSQL store is locked with an advisory lock instead (until the
// cluster of contract section 8 lets several daemons share it).
func AcquireLock(dsn string) (*Lock, error) {
	if backend.IsPostgres(dsn) {
		return acquirePostgresLock(dsn)
	}
	path := LockPath(dsn)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("store: lock: %w", err)
	}
	// A Holder call elsewhere holds a shared lock for a few microseconds: a
	// few spaced attempts keep such a probe (pacer status) from failing a
	// daemon's start-up.
	for _, wait := range [...]time.Duration{0, 10 * time.Millisecond, 20 * time.Millisecond, 40 * time.Millisecond} {
		time.Sleep(wait)
		if err = flock(f, lockExclusive); !errors.Is(err, errWouldBlock) {
			break
		}
	}
	if errors.Is(err, errWouldBlock) {
		// The daemon that wrote its pid may be dead while a child it was
		// forking (for an exec source) still shares the locked file until
		// its exec closes it: a killed daemon's lock must never block the
		// next start (rule 3.13), so wait that out.
		deadline := time.Now().Add(deadHolderWait)
		for errors.Is(err, errWouldBlock) && !alive(readPID(path)) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
			err = flock(f, lockExclusive)
		}
	}
	if errors.Is(err, errWouldBlock) {
		pid := readPID(path)
		if cerr := f.Close(); cerr != nil {
			return nil, fmt.Errorf("store: lock: %w", cerr)
		}
		return nil, &LockedError{Store: dsn, PID: pid}
	}
	if err != nil {
		return nil, errors.Join(fmt.Errorf("store: lock %s: %w", path, err), f.Close())
	}
	if err := writePID(f); err != nil {
		return nil, errors.Join(fmt.Errorf("store: lock %s: write pid: %w", path, err), funlock(f), f.Close())
	}
	return &Lock{f: f, path: path}, nil
}

// deadHolderWait is how long AcquireLock waits for a lock whose recorded
// holder is dead to be let go by the holder's half-forked children.
const deadHolderWait = 3 * time.Second

// alive reports whether a process with that pid exists (0: unknown, taken
// as alive: the holder has not written its pid yet).
func alive(pid int) bool {
	if pid <= 0 {
		return true
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// writePID replaces the content of the lock file by our pid.
func writePID(f *os.File) error {
	if err := f.Truncate(0); err != nil {
		return err
	}
	if _, err := f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0); err != nil {
		return err
	}
	return f.Sync()
}

// readPID returns the pid written in a lock file, 0 if there is none yet
// (its holder is between taking the lock and writing the pid).
func readPID(path string) int {
	for _, wait := range [...]time.Duration{0, 5 * time.Millisecond, 20 * time.Millisecond} {
		time.Sleep(wait)
		b, err := os.ReadFile(path)
		if err != nil {
			return 0
		}
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 {
			return pid
		}
	}
	return 0
}

// Release gives the lock up. The lock file stays (removing it would let two
// processes lock two different files); its pid is meaningful only while it
// is locked. Release is idempotent.
func (l *Lock) Release() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.pg != nil {
		pg := l.pg
		l.pg = nil
		return pg.release()
	}
	if l.f == nil {
		return nil
	}
	f := l.f
	l.f = nil
	if err := errors.Join(funlock(f), f.Close()); err != nil {
		return fmt.Errorf("store: release lock %s: %w", l.path, err)
	}
	return nil
}

// Holder reports whether a live process holds the daemon lock of the store
// at dsn, and its pid (0 if not yet written). It takes no lock that
// outlasts the call and does not create the lock file. The CLI uses it to
// know whether a daemon runs. On a PostgreSQL store it asks the server.
func Holder(dsn string) (pid int, held bool, err error) {
	if backend.IsPostgres(dsn) {
		return postgresHolder(dsn)
	}
	path := LockPath(dsn)
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("store: lock holder: %w", err)
	}
	err = flock(f, lockShared)
	switch {
	case err == nil:
		if err := errors.Join(funlock(f), f.Close()); err != nil {
			return 0, false, fmt.Errorf("store: lock holder: %w", err)
		}
		return 0, false, nil
	case errors.Is(err, errWouldBlock):
		if err := f.Close(); err != nil {
			return 0, false, fmt.Errorf("store: lock holder: %w", err)
		}
		return readPID(path), true, nil
	default:
		return 0, false, errors.Join(fmt.Errorf("store: lock holder %s: %w", path, err), f.Close())
	}
}
