package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"time"

	"gorm.io/driver/sqlite"
	"gorm.io/gorm"
)

// sqliteStore is the SQLite backend: the core on one connection to a
// file, and no cluster (every cluster call answers ErrNoCluster).
type sqliteStore struct {
	*core
	noCluster
}

// sqliteDialect is SQLite's SQL and its one connection's settings.
type sqliteDialect struct {
	// busy is the connection's busy timeout.
	busy time.Duration
}

func (sqliteDialect) bind(int) string { return "?" }

// blobConcat: SQLite's || yields TEXT, whose length() stops at a NUL
// byte: it is cast back to BLOB.
func (sqliteDialect) blobConcat(a, b string) string { return "CAST(" + a + " || " + b + " AS BLOB)" }

// stmtContext is ctx without its cancellation (see commitBatchChecked).
func (sqliteDialect) stmtContext(ctx context.Context) context.Context {
	return context.WithoutCancel(ctx)
}

// statesOrder is none: SQLite reads a WITHOUT ROWID table in key order.
func (sqliteDialect) statesOrder() string { return "" }

// claimLock is none: SQLite's writers take the whole database's lock.
func (sqliteDialect) claimLock() string { return "" }

func (sqliteDialect) elsewhere() string { return "move the file aside, or set store: to another path" }

func (sqliteDialect) tables() []model { return models() }

// createTables creates the missing tables, those of the states and of
// the history clustered by their primary key (WITHOUT ROWID). SQLite's
// write lock, taken at BEGIN, keeps a second creator out.
func (sqliteDialect) createTables(tx *gorm.DB) error { return createTables(tx, "WITHOUT ROWID") }

func (sqliteDialect) upgrade(*gorm.DB) error { return nil }

// limitWait lowers the busy timeout of conn to what ctx leaves (at least
// 1 ms, at most the store's): SQLite's busy wait does not heed a
// cancelled context.
func (d sqliteDialect) limitWait(ctx context.Context, conn *gorm.DB) (func(), error) {
	dl, ok := ctx.Deadline()
	if !ok || d.busy <= 0 {
		return func() {}, nil
	}
	ms := min(max(time.Until(dl).Milliseconds(), 1), d.busy.Milliseconds())
	if err := conn.Exec(fmt.Sprintf("PRAGMA busy_timeout = %d", ms)).Error; err != nil {
		return nil, err
	}
	return func() {
		conn.WithContext(context.Background()).Exec(fmt.Sprintf("PRAGMA busy_timeout = %d", d.busy.Milliseconds()))
	}, nil
}

// openSQLite opens the SQLite file at path. readOnly opens it with SQLite's
// mode=ro, as SQLite itself does for a file it may not write (tests use it
// to get a read-only store even when running as root).
func openSQLite(path string, opts Options, readOnly bool) (*sqliteStore, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
		opts.Logger = log
	}
	busy := opts.BusyTimeout
	if busy <= 0 {
		busy = DefaultBusyTimeout
	}
	if err := checkMissing(path, opts); err != nil {
		return nil, err
	}
	db, err := gorm.Open(sqlite.Open(sqliteDSN(path, busy, readOnly)), &gorm.Config{
		Logger:                 newGormLogger(log),
		NowFunc:                now,
		SkipDefaultTransaction: true, // single statements are atomic; SaveBatch uses its own transaction
	})
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	// One connection: one writer, and per-connection settings (pragmas) that
	// never change under our feet.
	sqlDB.SetMaxOpenConns(1)
	sqlDB.SetMaxIdleConns(1)
	sqlDB.SetConnMaxLifetime(0)
	sqlDB.SetConnMaxIdleTime(0)

	s := &sqliteStore{core: &core{db: db, sql: sqlDB, dia: sqliteDialect{busy: busy}}}
	fail := func(err error) (*sqliteStore, error) {
		return nil, errors.Join(fmt.Errorf("store: open %s: %w", path, err), s.sql.Close())
	}
	var mode string
	if err := sqlDB.QueryRowContext(context.Background(), "PRAGMA journal_mode").Scan(&mode); err != nil {
		return fail(fmt.Errorf("journal mode: %w", err))
	}
	if !strings.EqualFold(mode, "wal") {
		// WAL is unavailable on some file systems (no shared memory); the
		// store still works, with readers and the writer blocking each other.
		log.Warn("store: SQLite is not in WAL mode", "store", path, "journal_mode", mode)
	}
	if err := s.setup(); err != nil {
		return fail(err)
	}
	if opts.Lock != nil && opts.Lock.f != nil {
		if err := opts.Lock.bind(); err != nil {
			return fail(err)
		}
	}
	if s.guard, err = newGuard(path, opts.Lock, log); err != nil {
		return fail(err)
	}
	return s, nil
}

// checkMissing refuses to create a store where the lock file says one
// existed (*MissingError), unless opts.NewStore.
func checkMissing(path string, opts Options) error {
	l := opts.Lock
	if l == nil || !l.prev.db.valid() || !Missing(path) {
		return nil
	}
	if opts.NewStore {
		opts.Logger.Warn("store: the store is missing; a new, empty one is created as asked (-new-store)",
			"store", path, "lock", l.path, "previous_pid", l.prev.pid)
		return nil
	}
	return &MissingError{Store: path, Lock: l.path, PID: l.prev.pid}
}

// sqliteDSN builds the mattn/go-sqlite3 DSN: a SQLite URI for path with the
// connection settings every connection is opened with. _txlock=immediate
// makes every transaction take the write lock at BEGIN, so a transaction
// waits for the busy timeout instead of failing at once when it upgrades
// from reading to writing while another process writes.
func sqliteDSN(path string, busy time.Duration, readOnly bool) string {
	q := url.Values{}
	q.Set("_busy_timeout", strconv.FormatInt(max(busy.Milliseconds(), 1), 10))
	q.Set("_journal_mode", "WAL")
	q.Set("_synchronous", "NORMAL")
	q.Set("_foreign_keys", "1")
	q.Set("_txlock", "immediate")
	q.Set("_loc", "UTC")
	if readOnly {
		q.Set("mode", "ro")
	}
	return sqliteURIPath(path) + "?" + q.Encode()
}

// sqliteURIPath turns a file path into the path part of a SQLite URI: the
// characters that URIs give a meaning to are escaped, and an absolute path
// gets an empty authority so that "//x" is not read as a host.
func sqliteURIPath(path string) string {
	p := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path)
	if strings.HasPrefix(p, "/") {
		return "file://" + p
	}
	return "file:" + p
}
