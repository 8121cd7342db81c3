package sqlcore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// Core is what the two backends share: the connections, the prepared
// statements of the write path, and every method whose SQL is the same in
// both dialects. What differs is asked of its Dialect. The backends
// (store/sqlite, store/postgres) embed Core and add their own methods (the
// SQLite one ErrNoCluster to the cluster's calls, the PostgreSQL one the
// cluster).
//
// The connections: SQLite has one (one writer per process, and
// per-connection settings that never change), PostgreSQL a pool, the
// server serialising the writers (row locks taken in the tables' order by
// every batch).
type Core struct {
	DB  *gorm.DB
	SQL *sql.DB
	// Guard, when not nil, is asked before every write whether the
	// database is still the one opened (SQLite's file, see store's guard).
	Guard Guard
	// w holds the prepared statements of Commit.
	w *writer
	// known is what the commits last wrote of each state row, for the
	// narrow upserts (narrow.go); nil where the dialect has no
	// DataVersion.
	known *knownRows
	// dia answers what differs between the dialects.
	dia Dialect
}

// Guard says whether the database is still the one opened: nil while it
// is, else the reason.
type Guard interface {
	Check() error
}

// checkGuard is g.Check(), nil without a guard.
func checkGuard(g Guard) error {
	if g == nil {
		return nil
	}
	return g.Check()
}

// ErrNotFound is returned (wrapped) when a command asked for by id does not
// exist. Test with errors.Is.
var ErrNotFound = errors.New("not found")

// ErrNoCluster is returned by the cluster calls on a SQLite store.
var ErrNoCluster = errors.New("a cluster needs a PostgreSQL store")

// MaxPendingCommands bounds one PendingCommands answer so that a flood of
// CLI commands cannot stall the daemon's command loop.
const MaxPendingCommands = 100

// Dialect is what differs between the backends, as methods of each
// backend's dialect type instead of branches in Core.
type Dialect interface {
	// Bind writes the i-th (from 1) bind variable of a statement.
	Bind(i int) string
	// BlobConcat writes the SQL that concatenates the blobs a and b.
	BlobConcat(a, b string) string
	// StmtContext is the context the statements of the write path run
	// under (see commitBatchChecked).
	StmtContext(ctx context.Context) context.Context
	// DataVersion is the statement that reads a number that changes when
	// another connection commits (SQLite's PRAGMA data_version), or "" for
	// none: the state rows are then always written whole (narrow.go).
	DataVersion() string
	// StatesOrder is the clause that gives LoadStates the table's order.
	StatesOrder() string
	// ClaimLock is the locking clause of ClaimEvents's inner SELECT.
	ClaimLock() string
	// Elsewhere says where else to keep a new store, when an existing one
	// has another schema version.
	Elsewhere() string
	// Tables is every table of the dialect's stores.
	Tables() []Model
	// CreateTables creates, within tx, the tables that are missing.
	CreateTables(tx *gorm.DB) error
	// Upgrade adds, to an existing store, the columns of the dialect's own
	// tables that came after them.
	Upgrade(db *gorm.DB) error
	// LimitWait bounds, on conn, the wait for another process's lock to
	// what ctx leaves; restore undoes it.
	LimitWait(ctx context.Context, conn *gorm.DB) (restore func(), err error)
}

// New readies the store on db (sqlDB underneath) in dialect d: it checks
// the schema version, creates the tables that are missing, checks the
// columns, and prepares the statements of the write path. On error the
// caller closes sqlDB.
func New(db *gorm.DB, sqlDB *sql.DB, d Dialect) (*Core, error) {
	s := &Core{DB: db, SQL: sqlDB, dia: d}
	if err := migrate(db, d); err != nil {
		return nil, fmt.Errorf("create schema: %w", err)
	}
	if err := checkColumns(db); err != nil {
		return nil, err
	}
	w, err := prepareWriter(sqlDB, d)
	if err != nil {
		return nil, fmt.Errorf("prepare statements: %w", err)
	}
	s.w = w
	if d.DataVersion() != "" {
		s.known = newKnownRows()
	}
	return s, nil
}

// Keys of the meta table.
const (
	tableMeta         = "pacer_meta"
	metaSchemaVersion = "schema_version"
	metaHeartbeat     = "heartbeat"
	schemaVersion     = "3"
)

// metaRow is one key of the store's own bookkeeping: the schema version and
// the heartbeat that Writable writes.
type metaRow struct {
	Key       string `gorm:"primaryKey;size:64"`
	Value     string
	UpdatedAt time.Time
}

// TableName pins the table of metaRow.
func (metaRow) TableName() string { return tableMeta }

// Now is the store's clock: UTC at the microsecond precision that every
// backend keeps, so that what is written is exactly what is read back.
func Now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

// NormTime brings a time to the stored form (UTC, microseconds).
func NormTime(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC().Truncate(time.Microsecond)
}

// normTimePtr is normTime for optional times; nil stays nil.
func normTimePtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	v := NormTime(*t)
	return &v
}

// migrate checks the schema version, then creates the tables that are
// missing (a new store). Creating runs in one write transaction, so that
// two processes opening a new store at once do not both create it; an
// existing schema is only inspected, which also works on a read-only
// database.
func migrate(db *gorm.DB, d Dialect) error {
	m := db.Migrator()
	if m.HasTable(&metaRow{}) {
		var rows []metaRow
		if err := db.Where("key = ?", metaSchemaVersion).Limit(1).Find(&rows).Error; err != nil {
			return fmt.Errorf("read schema version: %w", err)
		}
		if len(rows) == 1 && rows[0].Value != schemaVersion {
			return fmt.Errorf("the store has schema version %s; this pacer reads version %s only, and no migration "+
				"from it exists: %s, to start with an empty store", rows[0].Value, schemaVersion, d.Elsewhere())
		}
	}
	missing := false
	for _, t := range d.Tables() {
		missing = missing || !m.HasTable(t.Value)
	}
	if !missing {
		if err := d.Upgrade(db); err != nil {
			return err
		}
		return checkTables(db)
	}
	// A store of an older pacer lacks the tables that came later (the
	// outbox of events): they are created, and its columns checked, as
	// for a new store.
	if err := db.Transaction(func(tx *gorm.DB) error {
		if err := d.CreateTables(tx); err != nil {
			return err
		}
		row := metaRow{Key: metaSchemaVersion, Value: schemaVersion, UpdatedAt: Now()}
		return tx.Clauses(clause.OnConflict{DoNothing: true}).Create(&row).Error
	}); err != nil {
		return err
	}
	return checkTables(db)
}

// Close closes the database. Committed data is durable whether or not Close
// is called; Close lets SQLite checkpoint and remove its -wal and -shm files.
func (s *Core) Close() error {
	var werr error
	if s.w != nil {
		werr = s.w.close()
	}
	if err := errors.Join(werr, s.SQL.Close()); err != nil {
		return fmt.Errorf("store: close: %w", err)
	}
	return nil
}

// Writable checks that the store answers and accepts a write, by upserting
// a heartbeat row. /readyz and the systemd watchdog use it. Note that it
// proves one small write succeeds now; it does not replace checking the
// result of Commit.
//
// It fails when the database file is no longer the one opened (deleted,
// replaced, no longer a database: see guard), which it looks at at most
// once a second.
//
// It gives up when ctx is done, also while another process holds the write
// lock (dialect.limitWait): otherwise a probe would hold SQLite's only
// connection for the whole busy timeout, past its own deadline, while the
// writer of poll results waits behind it.
func (s *Core) Writable(ctx context.Context) error {
	if err := checkGuard(s.Guard); err != nil {
		return fmt.Errorf("store: writable: %w", err)
	}
	ts := Now()
	row := metaRow{Key: metaHeartbeat, Value: ts.Format(time.RFC3339Nano), UpdatedAt: ts}
	err := s.DB.WithContext(ctx).Connection(func(tx *gorm.DB) error {
		restore, err := s.dia.LimitWait(ctx, tx)
		if err != nil {
			return err
		}
		defer restore()
		return tx.Clauses(clause.OnConflict{
			Columns:   []clause.Column{{Name: "key"}},
			DoUpdates: clause.AssignmentColumns([]string{"value", "updated_at"}),
		}).Create(&row).Error
	})
	if err != nil {
		return fmt.Errorf("store: writable: %w", err)
	}
	return nil
}
