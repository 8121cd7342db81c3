package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// core is what the two backends share: the connections, the prepared
// statements of the write path, and every method whose SQL is the same in
// both dialects. What differs is asked of dia (sqliteDialect, pgDialect).
// The backends embed core and add their own methods (sqliteStore:
// ErrNoCluster to the cluster's calls; pgStore: the cluster).
//
// The connections: SQLite has one (one writer per process, and
// per-connection pragmas that never change), PostgreSQL a pool of
// pgMaxConns, the server serialising the writers (row locks taken in the
// tables' order by every batch).
type core struct {
	db  *gorm.DB
	sql *sql.DB
	// w holds the prepared statements of Commit.
	w *writer
	// guard watches that the database file is still the one opened
	// (SQLite; nil otherwise).
	guard *guard
	// dia answers what differs between the dialects.
	dia dialect
}

// dialect is what differs between the backends, as methods of
// sqliteDialect and pgDialect instead of branches in core.
type dialect interface {
	// bind writes the i-th (from 1) bind variable of a statement.
	bind(i int) string
	// blobConcat writes the SQL that concatenates the blobs a and b.
	blobConcat(a, b string) string
	// stmtContext is the context the statements of the write path run
	// under (see commitBatchChecked).
	stmtContext(ctx context.Context) context.Context
	// statesOrder is the clause that gives LoadStates the table's order.
	statesOrder() string
	// claimLock is the locking clause of ClaimEvents's inner SELECT.
	claimLock() string
	// elsewhere says where else to keep a new store, when an existing one
	// has another schema version.
	elsewhere() string
	// tables is every table of the dialect's stores.
	tables() []model
	// createTables creates, within tx, the tables that are missing.
	createTables(tx *gorm.DB) error
	// upgrade adds, to an existing store, the columns of the dialect's own
	// tables that came after them.
	upgrade(db *gorm.DB) error
	// limitWait bounds, on conn, the wait for another process's lock to
	// what ctx leaves; restore undoes it.
	limitWait(ctx context.Context, conn *gorm.DB) (restore func(), err error)
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

// now is the store's clock: UTC at the microsecond precision that every
// backend keeps, so that what is written is exactly what is read back.
func now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

// normTime brings a time to the stored form (UTC, microseconds).
func normTime(t time.Time) time.Time {
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
	v := normTime(*t)
	return &v
}

// setup readies a freshly opened store: schema, then prepared statements.
func (s *core) setup() error {
	if err := s.migrate(); err != nil {
		return fmt.Errorf("create schema: %w", err)
	}
	if err := checkColumns(s.db); err != nil {
		return err
	}
	w, err := prepareWriter(s.sql, s.dia)
	if err != nil {
		return fmt.Errorf("prepare statements: %w", err)
	}
	s.w = w
	return nil
}

// migrate checks the schema version, then creates the tables that are
// missing (a new store). Creating runs in one write transaction, so that
// two processes opening a new store at once do not both create it; an
// existing schema is only inspected, which also works on a read-only
// database.
func (s *core) migrate() error {
	m := s.db.Migrator()
	if m.HasTable(&metaRow{}) {
		var rows []metaRow
		if err := s.db.Where("key = ?", metaSchemaVersion).Limit(1).Find(&rows).Error; err != nil {
			return fmt.Errorf("read schema version: %w", err)
		}
		if len(rows) == 1 && rows[0].Value != schemaVersion {
			return fmt.Errorf("the store has schema version %s; this pacer reads version %s only, and no migration "+
				"from it exists: %s, to start with an empty store", rows[0].Value, schemaVersion, s.dia.elsewhere())
		}
	}
	missing := false
	for _, t := range s.dia.tables() {
		missing = missing || !m.HasTable(t.value)
	}
	if !missing {
		if err := s.dia.upgrade(s.db); err != nil {
			return err
		}
		return checkTables(s.db)
	}
	// A store of an older pacer lacks the tables that came later (the
	// outbox of events): they are created, and its columns checked, as
	// for a new store.
	if err := s.db.Transaction(func(tx *gorm.DB) error {
		if err := s.dia.createTables(tx); err != nil {
			return err
		}
		row := metaRow{Key: metaSchemaVersion, Value: schemaVersion, UpdatedAt: now()}
		return tx.Clauses(clause.OnConflict{DoNothing: true}).Create(&row).Error
	}); err != nil {
		return err
	}
	return checkTables(s.db)
}

// Close closes the database. Committed data is durable whether or not Close
// is called; Close lets SQLite checkpoint and remove its -wal and -shm files.
func (s *core) Close() error {
	var werr error
	if s.w != nil {
		werr = s.w.close()
	}
	if err := errors.Join(werr, s.sql.Close()); err != nil {
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
func (s *core) Writable(ctx context.Context) error {
	if err := s.guard.check(); err != nil {
		return fmt.Errorf("store: writable: %w", err)
	}
	ts := now()
	row := metaRow{Key: metaHeartbeat, Value: ts.Format(time.RFC3339Nano), UpdatedAt: ts}
	err := s.db.WithContext(ctx).Connection(func(tx *gorm.DB) error {
		restore, err := s.dia.limitWait(ctx, tx)
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
