package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/pacer-dev/pacer/internal/backend"
)

// DefaultBusyTimeout is how long a write waits for another connection's
// write transaction (for example a CLI command) before it fails.
const DefaultBusyTimeout = 5 * time.Second

// MaxPendingCommands bounds one PendingCommands answer so that a flood of
// CLI commands cannot stall the daemon's command loop.
const MaxPendingCommands = 100

// Table names, pinned so that the hand-written SQL below cannot drift from
// what gorm creates.
const (
	tableStates   = "source_states"
	tableCommands = "commands"
	tableMeta     = "pacer_meta"
)

// Keys of the meta table.
const (
	metaSchemaVersion = "schema_version"
	metaHeartbeat     = "heartbeat"
	schemaVersion     = "3"
)

// ErrNotFound is returned (wrapped) when a command asked for by id does not
// exist. Test with errors.Is.
var ErrNotFound = errors.New("not found")

// TableName pins the table of Command.
func (Command) TableName() string { return tableCommands }

// metaRow is one key of the store's own bookkeeping: the schema version and
// the heartbeat that Writable writes.
type metaRow struct {
	Key       string `gorm:"primaryKey;size:64"`
	Value     string
	UpdatedAt time.Time
}

// TableName pins the table of metaRow.
func (metaRow) TableName() string { return tableMeta }

// Options tune Open. The zero value is ready to use.
type Options struct {
	// Logger receives the store's own warnings (slow queries, a journal
	// mode other than WAL). nil discards them.
	Logger *slog.Logger
	// BusyTimeout is how long a statement waits for a lock held by another
	// connection before it fails; <= 0 means DefaultBusyTimeout.
	BusyTimeout time.Duration
	// Lock is the daemon lock of this store, held by the caller (SQLite):
	// Open then locks the database file it creates, records it in the lock
	// file, refuses to create a store that the lock file says existed
	// (*MissingError) unless NewStore, and watches that the file stays the
	// one opened (identity.go).
	Lock *Lock
	// NewStore lets Open create a new, empty store where the lock file
	// records one that is now missing (pacer run -new-store).
	NewStore bool
}

// Store persists source state, poll history and CLI commands. It is safe
// for concurrent use; all access goes through one database connection, so
// there is exactly one writer per process.
type Store struct {
	db  *gorm.DB
	sql *sql.DB
	// w holds the prepared statements of SaveBatch.
	w *writer
	// bind writes bind variables in the database's syntax.
	bind bindFunc
	// clustered is the table option that keeps a table's rows in the
	// order of its primary key ("WITHOUT ROWID" on SQLite).
	clustered string
	// busy is the connection's busy timeout (SQLite).
	busy time.Duration
	// guard watches that the database file is still the one opened
	// (SQLite; nil otherwise).
	guard *guard
	// dialect selects the SQL variants of the backend.
	dialect dialect
}

// dialect is the backend a Store talks to; the zero value is SQLite.
type dialect int

const (
	dialectSQLite dialect = iota
	dialectPostgres
)

// Open opens the store at dsn, creating the database and its schema if
// needed. dsn is a SQLite file path, or a postgres:// (postgresql://) URL.
// Open does not take the daemon lock: see AcquireLock.
func Open(dsn string, opts Options) (*Store, error) {
	switch {
	case dsn == "":
		return nil, errors.New("store: open: empty store path")
	case backend.IsPostgres(dsn):
		// The DSN may hold a password: errors show it as ***.
		return openPostgres(dsn, opts)
	}
	return openSQLite(dsn, opts, false)
}

// Missing reports whether dsn names a SQLite file that does not exist yet:
// no daemon has created the store. Read-only commands then have nothing to
// read, and must not create it (Open would). A PostgreSQL DSN is never
// missing: its server is asked.
func Missing(dsn string) bool {
	if backend.IsPostgres(dsn) {
		return false
	}
	_, err := os.Stat(dsn)
	return errors.Is(err, fs.ErrNotExist)
}

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

func (c *Command) normalize() {
	c.CreatedAt = normTime(c.CreatedAt)
	c.DoneAt = normTimePtr(c.DoneAt)
}

// setup readies a freshly opened store: schema, then prepared clauses.
func (s *Store) setup() error {
	if err := s.migrate(); err != nil {
		return fmt.Errorf("create schema: %w", err)
	}
	if err := checkColumns(s.db); err != nil {
		return err
	}
	w, err := prepareWriter(s.sql, s.bind, s.dialect)
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
func (s *Store) migrate() error {
	m := s.db.Migrator()
	if m.HasTable(&metaRow{}) {
		var rows []metaRow
		if err := s.db.Where("key = ?", metaSchemaVersion).Limit(1).Find(&rows).Error; err != nil {
			return fmt.Errorf("read schema version: %w", err)
		}
		if len(rows) == 1 && rows[0].Value != schemaVersion {
			aside := "move the file aside, or set store: to another path"
			if s.dialect == dialectPostgres {
				aside = "set store: to another database, or another schema (search_path=)"
			}
			return fmt.Errorf("the store has schema version %s; this pacer reads version %s only, and no migration "+
				"from it exists: %s, to start with an empty store", rows[0].Value, schemaVersion, aside)
		}
	}
	missing := false
	tables := models()
	if s.dialect == dialectPostgres {
		tables = append(tables, clusterModels()...)
	}
	for _, t := range tables {
		missing = missing || !m.HasTable(t.value)
	}
	if !missing {
		if s.dialect == dialectPostgres {
			if err := addClusterColumns(s.db); err != nil {
				return err
			}
		}
		return checkTables(s.db)
	}
	// A store of an older pacer lacks the tables that came later (the
	// outbox of events): they are created, and its columns checked, as
	// for a new store.
	if err := s.db.Transaction(func(tx *gorm.DB) error {
		if s.dialect == dialectPostgres {
			// SQLite's write lock is taken at BEGIN; PostgreSQL's DDL
			// takes none that would keep a second creator out.
			if err := tx.Exec("SELECT pg_advisory_xact_lock(?, hashtext(current_schema()))", pgCreateLock).Error; err != nil {
				return fmt.Errorf("lock schema creation: %w", err)
			}
		}
		if err := createTables(tx, s.clustered); err != nil {
			return err
		}
		if s.dialect == dialectPostgres {
			if err := createClusterTables(tx); err != nil {
				return err
			}
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
func (s *Store) Close() error {
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
// result of SaveBatch.
//
// It fails when the database file is no longer the one opened (deleted,
// replaced, no longer a database: see guard), which it looks at at most
// once a second.
//
// It gives up when ctx is done, also while another process holds the write
// lock: SQLite's busy wait does not heed a cancelled context, so the busy
// timeout of the (only) connection is lowered to what ctx leaves for this
// one statement. Otherwise a probe would hold the connection for the whole
// busy timeout, past its own deadline, while the writer of poll results
// waits behind it.
func (s *Store) Writable(ctx context.Context) error {
	if err := s.guard.check(); err != nil {
		return fmt.Errorf("store: writable: %w", err)
	}
	ts := now()
	row := metaRow{Key: metaHeartbeat, Value: ts.Format(time.RFC3339Nano), UpdatedAt: ts}
	err := s.db.WithContext(ctx).Connection(func(tx *gorm.DB) error {
		if dl, ok := ctx.Deadline(); ok && s.busy > 0 {
			ms := min(max(time.Until(dl).Milliseconds(), 1), s.busy.Milliseconds())
			if err := tx.Exec(fmt.Sprintf("PRAGMA busy_timeout = %d", ms)).Error; err != nil {
				return err
			}
			defer tx.WithContext(context.Background()).Exec(fmt.Sprintf("PRAGMA busy_timeout = %d", s.busy.Milliseconds()))
		}
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

// EnqueueCommand stores a command for the running daemon. It sets c.ID,
// c.CreatedAt (now, UTC) and c.Status (CommandPending); the other fields
// are stored as given.
func (s *Store) EnqueueCommand(ctx context.Context, c *Command) error {
	if c == nil {
		return errors.New("store: enqueue command: nil command")
	}
	row := *c
	row.normalize()
	row.CreatedAt = now()
	row.Status = CommandPending
	if err := s.db.WithContext(ctx).Create(&row).Error; err != nil {
		return fmt.Errorf("store: enqueue command: %w", err)
	}
	*c = row
	return nil
}

// PendingCommands returns the commands neither claimed nor done, oldest
// first, at most MaxPendingCommands of them. The daemon applies one only
// after ClaimCommand succeeds on it.
//
// The daemon asks every 250 ms and there is almost never one: a prepared
// look-up of the index on done_at answers that first, and gorm's query
// (its statement built and parsed anew each time, ~0.2 % of a core at
// that rate) runs only when there is one.
func (s *Store) PendingCommands(ctx context.Context) ([]Command, error) {
	out := make([]Command, 0)
	var one int
	switch err := s.w.anyCommand.QueryRowContext(s.stmtContext(ctx), CommandPending).Scan(&one); {
	case errors.Is(err, sql.ErrNoRows):
		return out, nil
	case err != nil:
		return nil, fmt.Errorf("store: pending commands: %w", err)
	}
	return s.openCommands(ctx, CommandPending)
}

// openCommands returns the commands not done with status, oldest first, at
// most MaxPendingCommands of them, their times normalized.
func (s *Store) openCommands(ctx context.Context, status string) ([]Command, error) {
	out := make([]Command, 0)
	err := s.db.WithContext(ctx).
		Where("done_at IS NULL AND status = ?", status).
		Order("id").
		Limit(MaxPendingCommands).
		Find(&out).Error
	if err != nil {
		return nil, fmt.Errorf("store: %s commands: %w", status, err)
	}
	for i := range out {
		out[i].normalize()
	}
	return out, nil
}

// ClaimCommand moves a pending command to CommandApplying, in one
// conditional update, and reports whether it did: false means the CLI
// withdrew it (ExpireCommand) or another claim won, and the command must
// not be applied. With ExpireCommand's update it makes "applied" and
// "reported as not applied" exclusive.
func (s *Store) ClaimCommand(ctx context.Context, id uint64) (bool, error) {
	res := s.db.WithContext(ctx).Model(&Command{}).
		Where("id = ? AND done_at IS NULL AND status = ?", id, CommandPending).
		Update("status", CommandApplying)
	if res.Error != nil {
		return false, fmt.Errorf("store: claim command %d: %w", id, res.Error)
	}
	return res.RowsAffected == 1, nil
}

// ExpireCommand withdraws a command that no daemon has claimed: it is done,
// with status CommandExpired and result reason, and no daemon applies it
// afterwards. It reports whether it did; false means a daemon claimed it
// (or it is done): its result is then the daemon's, to be waited for.
func (s *Store) ExpireCommand(ctx context.Context, id uint64, reason string) (bool, error) {
	res := s.db.WithContext(ctx).Model(&Command{}).
		Where("id = ? AND done_at IS NULL AND status = ?", id, CommandPending).
		Updates(map[string]any{"status": CommandExpired, "done_at": now(), "result": reason})
	if res.Error != nil {
		return false, fmt.Errorf("store: expire command %d: %w", id, res.Error)
	}
	return res.RowsAffected == 1, nil
}

// OrphanedCommands returns the commands claimed (CommandApplying) and not
// done, oldest first, at most MaxPendingCommands of them. On a store one
// daemon holds, these were claimed by a daemon that stopped before it
// recorded their results (a crash between the two): the daemon that holds
// the store next completes them, so that a CLI waiting for one gets an
// answer.
func (s *Store) OrphanedCommands(ctx context.Context) ([]Command, error) {
	return s.openCommands(ctx, CommandApplying)
}

// CompleteCommand marks a command done with its result ("" = success) and
// code ("not_found", "conflict" or ""). Completing a command that is already
// done (or expired) keeps the first result and is not an error; an unknown
// id is ErrNotFound.
func (s *Store) CompleteCommand(ctx context.Context, id uint64, result, code string) error {
	db := s.db.WithContext(ctx)
	res := db.Model(&Command{}).
		Where("id = ? AND done_at IS NULL", id).
		Updates(map[string]any{"done_at": now(), "result": result, "code": code, "status": CommandDone})
	if res.Error != nil {
		return fmt.Errorf("store: complete command %d: %w", id, res.Error)
	}
	if res.RowsAffected > 0 {
		return nil
	}
	var n int64
	if err := db.Model(&Command{}).Where("id = ?", id).Count(&n).Error; err != nil {
		return fmt.Errorf("store: complete command %d: %w", id, err)
	}
	if n == 0 {
		return fmt.Errorf("store: complete command %d: %w", id, ErrNotFound)
	}
	return nil
}

// GetCommand returns one command, so that the CLI can wait for its result.
// An unknown id is ErrNotFound.
func (s *Store) GetCommand(ctx context.Context, id uint64) (Command, error) {
	var rows []Command
	if err := s.db.WithContext(ctx).Where("id = ?", id).Limit(1).Find(&rows).Error; err != nil {
		return Command{}, fmt.Errorf("store: get command %d: %w", id, err)
	}
	if len(rows) == 0 {
		return Command{}, fmt.Errorf("store: get command %d: %w", id, ErrNotFound)
	}
	rows[0].normalize()
	return rows[0], nil
}
