package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/pacer-dev/pacer/internal/backend"
)

// LockedError reports that another live process holds the daemon lock of a
// store (contract 3.13). PID is 0 when the holder is not known (it had not
// yet written it, or the platform does not tell).
type LockedError struct {
	Store string
	// Resolved is the file the store names, when that is not Store (a
	// symbolic link, a relative path).
	Resolved string
	PID      int
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
	name := e.Store
	if e.Resolved != "" {
		name += " (" + e.Resolved + ")"
	}
	return fmt.Sprintf("store %s is in use by a running pacer (%s)", name, pid)
}

// Lock is the daemon lock of one SQLite store, held from AcquireLock until
// Release or the end of the process (the kernel drops it even on kill -9).
//
// It is two flocks: one on the lock file next to the database (named after
// the resolved path, so that every name of the file, through a symbolic
// link or a relative path, shares it; it exists before the database does,
// and holds the holder's pid), and one on the database file itself, once
// it exists, which deleting the lock file does not free. flock locks are
// apart from the POSIX locks SQLite takes on the same file (on local file
// systems; NFS emulates flock with POSIX locks, and SQLite on NFS is unsafe
// anyway).
type Lock struct {
	mu   sync.Mutex
	f    *os.File // the lock file; nil once released, and for stores that need no lock
	db   *os.File // the database file, once it exists and is locked
	path string   // the lock file
	dsn  string   // the store as named
	file string   // the database file, symbolic links resolved
	// prev is what the lock file recorded before this holder took it: a
	// database that existed (Open refuses to create a new one in its
	// place unless told to).
	prev lockRecord
	pg   *pgLock // a PostgreSQL store's advisory lock (postgres_lock.go)
}

// LockPath is the file that AcquireLock locks for the store at dsn: next to
// the database, symbolic links resolved, so that the lock never touches
// the database itself and every name of one file has the same lock.
func LockPath(dsn string) string { return resolvePath(dsn) + ".lock" }

// resolvePath is the absolute path of the file dsn names, with every
// symbolic link resolved, also a link to a file that does not exist yet
// (SQLite would create the link's target) and links in its directory.
func resolvePath(dsn string) string {
	p, err := filepath.Abs(dsn)
	if err != nil {
		return dsn
	}
	for range 40 { // as the kernel's limit on nested links
		fi, err := os.Lstat(p)
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			break
		}
		target, err := os.Readlink(p)
		if err != nil {
			break
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(filepath.Dir(p), target)
		}
		p = filepath.Clean(target)
	}
	if dir, err := filepath.EvalSymlinks(filepath.Dir(p)); err == nil {
		p = filepath.Join(dir, filepath.Base(p))
	}
	return p
}

// AcquireLock takes the daemon lock of the store at dsn: an exclusive flock
// on LockPath(dsn), into which it then writes our pid, and one on the
// database file if it exists (Open takes that one once it has created the
// file). When a live process holds either, the error is a *LockedError
// with that process's pid. A PostgreSQL store is locked with an advisory
// lock instead (until the cluster of contract section 8 lets several
// daemons share it).
func AcquireLock(dsn string) (*Lock, error) {
	if backend.IsPostgres(dsn) {
		return acquirePostgresLock(dsn)
	}
	file := resolvePath(dsn)
	l := &Lock{path: file + ".lock", dsn: dsn, file: file}
	f, err := os.OpenFile(l.path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("store: lock: %w", err)
	}
	err = lockWaitingOutDead(f, func() int { return readLockFile(l.path).pid })
	if errors.Is(err, errWouldBlock) {
		pid := readLockFile(l.path).pid
		if cerr := f.Close(); cerr != nil {
			return nil, fmt.Errorf("store: lock: %w", cerr)
		}
		return nil, l.lockedError(pid)
	}
	if err != nil {
		return nil, errors.Join(fmt.Errorf("store: lock %s: %w", l.path, err), f.Close())
	}
	l.f = f
	l.prev = readLockFileOnce(l.path) // we hold it: nobody is writing it
	if err := l.lockDatabase(); err != nil {
		return nil, errors.Join(err, funlock(f), f.Close())
	}
	if err := l.record(); err != nil {
		return nil, errors.Join(fmt.Errorf("store: lock %s: write pid: %w", l.path, err), l.releaseFiles())
	}
	return l, nil
}

// lockWaitingOutDead takes an exclusive flock on f. A Holder call elsewhere
// holds a shared lock for a few microseconds: a few spaced attempts keep
// such a probe (pacer status) from failing a daemon's start-up. And the
// daemon that holds it may be dead while a child it was forking (for an
// exec source) still shares the locked file until its exec closes it: a
// killed daemon's lock must never block the next start (rule 3.13), so
// that is waited out (holder says who holds it).
func lockWaitingOutDead(f *os.File, holder func() int) error {
	var err error
	for _, wait := range [...]time.Duration{0, 10 * time.Millisecond, 20 * time.Millisecond, 40 * time.Millisecond} {
		time.Sleep(wait)
		if err = flock(f, lockExclusive); !errors.Is(err, errWouldBlock) {
			return err
		}
	}
	deadline := time.Now().Add(deadHolderWait)
	for errors.Is(err, errWouldBlock) && !alive(holder()) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		err = flock(f, lockExclusive)
	}
	return err
}

// lockDatabase takes the flock of the database file, if it exists and is
// not locked yet. l.mu held or l not shared yet.
func (l *Lock) lockDatabase() error {
	if l.db != nil {
		return nil
	}
	db, err := os.OpenFile(l.file, os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("store: lock %s: %w", l.file, err)
	}
	err = lockWaitingOutDead(db, func() int { return flockHolder(db) })
	if errors.Is(err, errWouldBlock) {
		// Another daemon runs on this file under another lock file (its
		// own was deleted, or it named the file through another path).
		pid := flockHolder(db)
		// No SQLite connection of this process has the file open yet:
		// closing this descriptor drops no POSIX lock of SQLite's.
		if cerr := db.Close(); cerr != nil {
			return fmt.Errorf("store: lock %s: %w", l.file, cerr)
		}
		return l.lockedError(pid)
	}
	if err != nil {
		return errors.Join(fmt.Errorf("store: lock %s: %w", l.file, err), db.Close())
	}
	l.db = db
	return nil
}

// bind locks the database file once Open has created it, and records its
// identity in the lock file (Vanished and the next start read it).
func (l *Lock) bind() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.lockDatabase(); err != nil {
		return err
	}
	if err := l.record(); err != nil {
		return fmt.Errorf("lock %s: record the database: %w", l.path, err)
	}
	return nil
}

func (l *Lock) lockedError(pid int) *LockedError {
	e := &LockedError{Store: l.dsn, PID: pid}
	if abs, err := filepath.Abs(l.dsn); err != nil || abs != l.file {
		e.Resolved = l.file
	}
	return e
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

// lockRecord is what a lock file holds: the holder's pid, and the identity
// of the database file it had open (none before the database exists).
type lockRecord struct {
	pid int
	db  fileID
}

// Lock file format: the pid on the first line (all that older pacers wrote
// and read), then "db DEV INODE" once the database exists.
func (r lockRecord) String() string {
	s := strconv.Itoa(r.pid) + "\n"
	if r.db.valid() {
		s += fmt.Sprintf("db %d %d\n", r.db.dev, r.db.ino)
	}
	return s
}

// record replaces the content of the lock file by our pid and the identity
// of the database file we hold, or, before we hold one, the one the lock
// file recorded (a start refused over a missing store must not erase
// that record). l.mu held or l not shared yet.
func (l *Lock) record() error {
	r := lockRecord{pid: os.Getpid(), db: l.prev.db}
	if l.db != nil {
		id, err := fileIDOf(l.db)
		if err != nil {
			return err
		}
		r.db = id
	}
	if err := l.f.Truncate(0); err != nil {
		return err
	}
	if _, err := l.f.WriteAt([]byte(r.String()), 0); err != nil {
		return err
	}
	return l.f.Sync()
}

// readLockFile returns what a lock file records; its pid is 0 if there is
// none yet (its holder is between taking the lock and writing it: a few
// spaced reads give it the time).
func readLockFile(path string) lockRecord {
	var r lockRecord
	for _, wait := range [...]time.Duration{0, 5 * time.Millisecond, 20 * time.Millisecond} {
		time.Sleep(wait)
		if r = readLockFileOnce(path); r.pid > 0 {
			break
		}
	}
	return r
}

// readLockFileOnce parses the lock file at path; a missing or empty one
// records nothing.
func readLockFileOnce(path string) lockRecord {
	var r lockRecord
	b, err := os.ReadFile(path)
	if err != nil {
		return r
	}
	lines := strings.Split(string(b), "\n")
	if pid, err := strconv.Atoi(strings.TrimSpace(lines[0])); err == nil && pid > 0 {
		r.pid = pid
	}
	for _, line := range lines[1:] {
		var dev, ino uint64
		if n, _ := fmt.Sscanf(line, "db %d %d", &dev, &ino); n == 2 {
			r.db = fileID{dev: dev, ino: ino}
		}
	}
	return r
}

// Release gives the lock up. The lock file stays (removing it would let two
// processes lock two different files), and keeps recording the database
// (so that a store deleted later is noticed at the next start); its pid is
// meaningful only while it is locked. Call it after closing the store:
// closing a descriptor of the database file drops the POSIX locks of every
// SQLite connection of the process on it. Release is idempotent.
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
	if err := l.releaseFiles(); err != nil {
		return fmt.Errorf("store: release lock %s: %w", l.path, err)
	}
	return nil
}

// releaseFiles unlocks and closes both files. l.mu held.
func (l *Lock) releaseFiles() error {
	var errs []error
	if l.db != nil {
		errs = append(errs, funlock(l.db), l.db.Close())
		l.db = nil
	}
	if l.f != nil {
		errs = append(errs, funlock(l.f), l.f.Close())
		l.f = nil
	}
	return errors.Join(errs...)
}

// Holder reports whether a live process holds the daemon lock of the store
// at dsn, and its pid (0 if not known). It takes no lock that outlasts the
// call and creates no file. The CLI uses it to know whether a daemon runs,
// before it opens the store: it opens and closes the database file, which
// would drop the POSIX locks of a SQLite connection of this process on it.
// On a PostgreSQL store it asks the server.
func Holder(dsn string) (pid int, held bool, err error) {
	if backend.IsPostgres(dsn) {
		return postgresHolder(dsn)
	}
	file := resolvePath(dsn)
	path := file + ".lock"
	pid, held, err = probe(path, func(*os.File) int { return readLockFile(path).pid })
	if err != nil || held {
		return pid, held, err
	}
	// The lock file may have been deleted under a running daemon, which
	// still holds the database file.
	return probe(file, flockHolder)
}

// probe tries a shared flock on the file at path: held when another open
// file holds an exclusive one. A missing file is not held.
func probe(path string, holder func(*os.File) int) (pid int, held bool, err error) {
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
		pid := holder(f)
		if err := f.Close(); err != nil {
			return 0, false, fmt.Errorf("store: lock holder: %w", err)
		}
		return pid, true, nil
	default:
		return 0, false, errors.Join(fmt.Errorf("store: lock holder %s: %w", path, err), f.Close())
	}
}
