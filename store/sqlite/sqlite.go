// Package sqlite is the SQLite backend of the store: the shared core
// (store/internal/sqlcore) on one connection to a file, its tables of
// states and history clustered by their key (WITHOUT ROWID), and no
// cluster. Package store opens it (store.Open) and binds it to the daemon
// lock and the guard of its file.
package sqlite

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"time"

	gormsqlite "gorm.io/driver/sqlite"
	"gorm.io/gorm"

	"github.com/pacer-dev/pacer/store/internal/sqlcore"
)

// Store is the SQLite backend: the core on one connection to a file, and
// no cluster (every cluster call answers sqlcore.ErrNoCluster).
type Store struct {
	*sqlcore.Core
	noCluster
}

// dialect is SQLite's SQL and its one connection's settings.
type dialect struct {
	// busy is the connection's busy timeout.
	busy time.Duration
}

func (dialect) Bind(int) string { return "?" }

// BlobConcat: SQLite's || yields TEXT, whose length() stops at a NUL
// byte: it is cast back to BLOB.
func (dialect) BlobConcat(a, b string) string { return "CAST(" + a + " || " + b + " AS BLOB)" }

// StmtContext is ctx without its cancellation: mattn/go-sqlite3 runs each
// statement given a cancellable context on a goroutine of its own, on the
// path of every poll (see sqlcore's commitBatchChecked).
func (dialect) StmtContext(ctx context.Context) context.Context {
	return context.WithoutCancel(ctx)
}

// DataVersion is SQLite's counter of the commits of other connections:
// while it stands still, the store's connection is the file's only writer
// and its state rows may be written narrow (sqlcore's narrow.go).
func (dialect) DataVersion() string { return "PRAGMA data_version" }

// StatesOrder is none: SQLite reads a WITHOUT ROWID table in key order.
func (dialect) StatesOrder() string { return "" }

// ClaimLock is none: SQLite's writers take the whole database's lock.
func (dialect) ClaimLock() string { return "" }

func (dialect) Elsewhere() string { return "move the file aside, or set store: to another path" }

func (dialect) Tables() []sqlcore.Model { return sqlcore.Models() }

// CreateTables creates the missing tables, those of the states and of the
// history clustered by their primary key (WITHOUT ROWID). SQLite's write
// lock, taken at BEGIN, keeps a second creator out.
func (dialect) CreateTables(tx *gorm.DB) error { return sqlcore.CreateTables(tx, "WITHOUT ROWID") }

func (dialect) Upgrade(*gorm.DB) error { return nil }

// LimitWait lowers the busy timeout of conn to what ctx leaves (at least
// 1 ms, at most the store's): SQLite's busy wait does not heed a
// cancelled context.
func (d dialect) LimitWait(ctx context.Context, conn *gorm.DB) (func(), error) {
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

// Config tunes Open.
type Config struct {
	// Logger receives the store's warnings; nil discards them.
	Logger *slog.Logger
	// Busy is the connection's busy timeout (> 0).
	Busy time.Duration
	// ReadOnly opens the file with SQLite's mode=ro, as SQLite itself
	// does for a file it may not write (tests use it to get a read-only
	// store even when running as root).
	ReadOnly bool
}

// Open opens the SQLite file at path, creating it and its tables if
// needed. Its errors name the store as path.
func Open(path string, cfg Config) (*Store, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	db, err := gorm.Open(gormsqlite.Open(sqliteDSN(path, cfg.Busy, cfg.ReadOnly)), &gorm.Config{
		Logger:                 sqlcore.NewGormLogger(log),
		NowFunc:                sqlcore.Now,
		SkipDefaultTransaction: true, // single statements are atomic; Commit uses its own transaction
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
	fail := func(err error) (*Store, error) {
		return nil, errors.Join(fmt.Errorf("store: open %s: %w", path, err), sqlDB.Close())
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
	core, err := sqlcore.New(db, sqlDB, dialect{busy: cfg.Busy})
	if err != nil {
		return fail(err)
	}
	return &Store{Core: core}, nil
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
