package store

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"sync"
	"time"
)

// A running daemon's SQLite file can be deleted, moved, or replaced under
// it (rm pacer.db*, a restore that renames over it, a garbage write): its
// connection then keeps writing into a file nobody will read again, and
// every write "succeeds". The store watches for that (guard), and a
// restart refuses to start over a store that is missing when the lock file
// says one existed (MissingError), rather than starting empty and losing
// every error and pause state.

// ErrStoreGone is wrapped by the errors of a store whose database file is
// no longer the one it opened: deleted, replaced, or no longer a database.
var ErrStoreGone = errors.New("the store's database file is no longer the one pacer opened")

// MissingError reports a store whose database file does not exist while
// its lock file records that a pacer ran on one: it was deleted or moved.
// Open refuses to create a new, empty store in its place unless
// Options.NewStore is set.
type MissingError struct {
	Store string
	// Lock is the lock file that recorded the database, PID the pacer that
	// wrote it, and Running whether that pacer still holds the lock.
	Lock    string
	PID     int
	Running bool
}

// Error says what happened and how to proceed.
func (e *MissingError) Error() string {
	who := fmt.Sprintf("its lock file %s records that a pacer ran on it (last holder: pid %d)", e.Lock, e.PID)
	if e.Running {
		who = fmt.Sprintf("the running pacer (pid %d) had it open (its lock file %s records the database)", e.PID, e.Lock)
	}
	return fmt.Sprintf("store %s is missing, but %s: the file was deleted or moved, "+
		"and a new, empty store would lose every source's error, pause and backoff state. Put the file back (with its -wal file), "+
		"or start with an empty store: pacer run -new-store (or PACER_NEW_STORE=1)", e.Store, who)
}

// Vanished returns a *MissingError when the SQLite file of dsn is missing
// while its lock file records that a pacer ran on one (the CLI then must
// not create a new store, nor read an absent one as empty), else nil. It
// takes no lock.
func Vanished(dsn string) error {
	if dsn == "" || !Missing(dsn) {
		return nil
	}
	file := resolvePath(dsn)
	r := readLockFileOnce(file + ".lock")
	if !r.db.valid() {
		return nil // the first start: no store yet
	}
	pid, held, _ := probe(file+".lock", func(*os.File) int { return r.pid })
	if !held {
		pid = r.pid
	}
	return &MissingError{Store: dsn, Lock: file + ".lock", PID: pid, Running: held}
}

// guardInterval is how often, at most, the store looks at its file again:
// a stat (and a read of 16 bytes) per second.
const guardInterval = time.Second

// guard watches that the file at path is still the database the store
// opened: same device and inode, still a SQLite database; and, for a store
// opened with its daemon lock, that the lock file is still there (deleted,
// it is re-created). Its error is what SaveBatch and Writable return while
// the file is gone, so that /readyz answers 503 with it and the failed
// writes count in pacer_store_errors_total; it is logged once per
// incident.
type guard struct {
	path   string
	lock   *Lock  // nil: no daemon lock (the CLI, tests)
	id     fileID // of the file opened
	header bool   // it had a SQLite header at open (a read through lock.db)
	log    *slog.Logger

	mu      sync.Mutex
	checked time.Time
	err     error
}

// sqliteHeader is how every SQLite database file starts.
const sqliteHeader = "SQLite format 3\x00"

// newGuard records the identity of the file just opened at path.
func newGuard(path string, lock *Lock, log *slog.Logger) (*guard, error) {
	g := &guard{path: path, lock: lock, log: log}
	var err error
	if lock != nil && lock.db != nil {
		g.id, err = fileIDOf(lock.db)
		g.header = g.readHeader() == nil
	} else {
		g.id, err = statID(path)
	}
	if err != nil {
		return nil, fmt.Errorf("identity of %s: %w", path, err)
	}
	g.checked = time.Now()
	return g, nil
}

// Check returns nil while the file is the one opened, else the reason; it
// looks again at most once per guardInterval.
func (g *guard) Check() error {
	if g == nil {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if time.Since(g.checked) < guardInterval {
		return g.err
	}
	g.checked = time.Now()
	err := g.probe()
	switch {
	case err != nil && g.err == nil:
		g.log.Error("store: THE DATABASE FILE IS GONE; nothing the daemon commits from now on is kept; /readyz answers 503 until it is back",
			"store", g.path, "err", err)
	case err == nil && g.err != nil:
		g.log.Info("store: the database file is back; commits resume", "store", g.path)
	}
	g.err = err
	if g.lock != nil {
		g.lock.repair(g.log)
	}
	return err
}

// probe compares the file at path with the one opened.
func (g *guard) probe() error {
	id, err := statID(g.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%w: %s was deleted or moved while pacer had it open: put it back (the daemon resumes "+
			"committing), or stop the daemon and start it with -new-store", ErrStoreGone, g.path)
	case err != nil:
		return fmt.Errorf("%w: %s: %w", ErrStoreGone, g.path, err)
	case id.valid() && id != g.id:
		return fmt.Errorf("%w: %s was replaced by another file (device %d inode %d; pacer opened device %d inode %d): "+
			"stop the daemon and check the file before starting it again", ErrStoreGone, g.path, id.dev, id.ino, g.id.dev, g.id.ino)
	}
	if g.header {
		return g.readHeader()
	}
	return nil
}

// readHeader checks, through the lock's descriptor of the database (never
// one opened and closed here: closing it would drop SQLite's POSIX locks),
// that the file still starts with SQLite's header.
func (g *guard) readHeader() error {
	var b [len(sqliteHeader)]byte
	n, err := g.lock.db.ReadAt(b[:], 0)
	if n == len(b) && string(b[:]) == sqliteHeader {
		return nil
	}
	if err != nil && n < len(b) {
		return fmt.Errorf("%w: %s is no longer a SQLite database (%d bytes of its header: %v)", ErrStoreGone, g.path, n, err)
	}
	return fmt.Errorf("%w: %s is no longer a SQLite database (it starts with %q)", ErrStoreGone, g.path, b[:n])
}

// repair re-creates the lock file if it was deleted (or replaced) under
// the daemon: the flock on the database file kept a second daemon out
// meanwhile, but the CLI finds the daemon's pid, and the next start the
// record of the database, in the lock file.
func (l *Lock) repair(log *slog.Logger) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return
	}
	have, err1 := fileIDOf(l.f)
	now, err2 := statID(l.path)
	if err1 != nil || (err2 == nil && now == have) || (err2 != nil && !errors.Is(err2, fs.ErrNotExist)) {
		return
	}
	f, err := os.OpenFile(l.path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return // retried at the next check
	}
	if err := flock(f, lockExclusive); err != nil {
		_ = f.Close() // another process has it for now (and cannot have the database): retried
		return
	}
	old := l.f
	l.f = f
	if err := l.record(); err != nil {
		log.Warn("store: re-creating the deleted lock file", "lock", l.path, "err", err)
	}
	_ = errors.Join(funlock(old), old.Close()) // a deleted file's lock: nothing to do if it fails
	log.Warn("store: the lock file was deleted under the daemon; it is re-created", "lock", l.path)
}
