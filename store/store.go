package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// DefaultBusyTimeout is how long a write waits for another connection's
// write transaction (for example a CLI command) before it fails.
const DefaultBusyTimeout = 5 * time.Second

// MaxPendingCommands bounds one PendingCommands answer so that a flood of
// CLI commands cannot stall the daemon's command loop.
const MaxPendingCommands = 100

// upsertChunk bounds the rows of one INSERT statement: 500 rows of the
// widest table stay far below the bind-variable limits of SQLite (32766)
// and PostgreSQL (65535).
const upsertChunk = 500

// Table names, pinned so that the hand-written SQL below cannot drift from
// what gorm creates.
const (
	tableStates   = "source_states"
	tableRecords  = "poll_records"
	tableCommands = "commands"
	tableMeta     = "pacer_meta"
)

// Keys of the meta table.
const (
	metaSchemaVersion = "schema_version"
	metaHeartbeat     = "heartbeat"
	schemaVersion     = "1"
)

// ErrNotFound is returned (wrapped) when a command asked for by id does not
// exist. Test with errors.Is.
var ErrNotFound = errors.New("not found")

// trimSQL deletes the records of one source beyond its newest ones. It is
// plain SQL that SQLite and PostgreSQL both accept; gorm writes the bind
// variables in the dialect's syntax. Its arguments are the source, noLimit
// and how many records to keep.
const trimSQL = "DELETE FROM " + tableRecords + " WHERE id IN (SELECT id FROM " + tableRecords +
	" WHERE source = ? ORDER BY started_at DESC, id DESC LIMIT ? OFFSET ?)"

// noLimit is a LIMIT that never limits: SQL has no portable way to write
// OFFSET without LIMIT.
const noLimit = math.MaxInt32

// TableName pins the table of SourceState.
func (SourceState) TableName() string { return tableStates }

// TableName pins the table of PollRecord.
func (PollRecord) TableName() string { return tableRecords }

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

// models is every table the store owns, in creation order.
func models() []any {
	return []any{&SourceState{}, &PollRecord{}, &Command{}, &metaRow{}}
}

// Options tune Open. The zero value is ready to use.
type Options struct {
	// Logger receives the store's own warnings (slow queries, a journal
	// mode other than WAL). nil discards them.
	Logger *slog.Logger
	// BusyTimeout is how long a statement waits for a lock held by another
	// connection before it fails; <= 0 means DefaultBusyTimeout.
	BusyTimeout time.Duration
}

// Store persists source state, poll history and CLI commands. It is safe
// for concurrent use; all access goes through one database connection, so
// there is exactly one writer per process.
type Store struct {
	db  *gorm.DB
	sql *sql.DB
	// upsertStates replaces every column of a stored state but its name.
	upsertStates clause.OnConflict
	// busy is the connection's busy timeout (SQLite).
	busy time.Duration
}

// Open opens the store at dsn, creating the database and its schema if
// needed. dsn is a SQLite file path; postgres:// URLs are recognised but not
// supported yet. Open does not take the daemon lock: see AcquireLock.
func Open(dsn string, opts Options) (*Store, error) {
	switch {
	case dsn == "":
		return nil, errors.New("store: open: empty store path")
	case isPostgresDSN(dsn):
		// The DSN may hold a password: it is not echoed.
		return nil, errors.New("store: open: postgres store not supported yet")
	}
	return openSQLite(dsn, opts, false)
}

// isPostgresDSN reports whether dsn names a PostgreSQL server rather than a
// SQLite file.
func isPostgresDSN(dsn string) bool {
	l := strings.ToLower(dsn)
	return strings.HasPrefix(l, "postgres://") || strings.HasPrefix(l, "postgresql://")
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

func (st *SourceState) normalize() {
	st.NextRunAt = normTimePtr(st.NextRunAt)
	st.LastRunAt = normTimePtr(st.LastRunAt)
	st.LastSuccessAt = normTimePtr(st.LastSuccessAt)
	st.BreakerUntil = normTimePtr(st.BreakerUntil)
	st.UpdatedAt = normTime(st.UpdatedAt)
}

func (r *PollRecord) normalize() {
	r.StartedAt = normTime(r.StartedAt)
}

func (c *Command) normalize() {
	c.CreatedAt = normTime(c.CreatedAt)
	c.DoneAt = normTimePtr(c.DoneAt)
}

// stateUpsert builds the ON CONFLICT clause of SaveBatch from the schema of
// SourceState, so that a field added later is written too. It lists the
// columns itself instead of gorm's UpdateAll, which would set updated_at to
// a clock reading of its own rather than the stored value.
func stateUpsert(db *gorm.DB) (clause.OnConflict, error) {
	stmt := &gorm.Statement{DB: db}
	if err := stmt.Parse(&SourceState{}); err != nil {
		return clause.OnConflict{}, err
	}
	var cols []string
	for _, name := range stmt.Schema.DBNames {
		if f := stmt.Schema.FieldsByDBName[name]; !f.PrimaryKey && f.Creatable && f.Updatable {
			cols = append(cols, name)
		}
	}
	return clause.OnConflict{
		Columns:   []clause.Column{{Name: "name"}},
		DoUpdates: clause.AssignmentColumns(cols),
	}, nil
}

// setup readies a freshly opened store: schema, then prepared clauses.
func (s *Store) setup() error {
	if err := s.migrate(); err != nil {
		return fmt.Errorf("create schema: %w", err)
	}
	var err error
	if s.upsertStates, err = stateUpsert(s.db); err != nil {
		return fmt.Errorf("parse schema: %w", err)
	}
	return nil
}

// migrate creates or updates the schema. When a table is missing (a new
// store) it runs in one write transaction, so that two processes opening a
// new store at once do not both try to create it; an existing schema is only
// inspected, which also works on a read-only database.
func (s *Store) migrate() error {
	m := s.db.Migrator()
	missing := false
	for _, t := range models() {
		if !m.HasTable(t) {
			missing = true
			break
		}
	}
	if !missing {
		return s.db.AutoMigrate(models()...)
	}
	return s.db.Transaction(func(tx *gorm.DB) error {
		if err := tx.AutoMigrate(models()...); err != nil {
			return err
		}
		row := metaRow{Key: metaSchemaVersion, Value: schemaVersion, UpdatedAt: now()}
		return tx.Clauses(clause.OnConflict{DoNothing: true}).Create(&row).Error
	})
}

// Close closes the database. Committed data is durable whether or not Close
// is called; Close lets SQLite checkpoint and remove its -wal and -shm files.
func (s *Store) Close() error {
	if err := s.sql.Close(); err != nil {
		return fmt.Errorf("store: close: %w", err)
	}
	return nil
}

// LoadStates returns the stored state of every source, by name. The daemon
// calls it at start-up to resume where it stopped.
//
// It scans rows directly rather than through gorm's reflection, which
// costs five times as much at 100,000 sources.
func (s *Store) LoadStates(ctx context.Context) ([]SourceState, error) {
	rows, err := s.sql.QueryContext(ctx, "SELECT "+stateColumns+" FROM "+tableStates+" ORDER BY name")
	if err != nil {
		return nil, fmt.Errorf("store: load states: %w", err)
	}
	defer rows.Close()
	out := make([]SourceState, 0)
	for rows.Next() {
		var st SourceState
		var next, last, success, until sql.NullTime
		if err := rows.Scan(&st.Name, &st.Fingerprint, &st.ConsecutiveFailures, &st.ConsecutiveThrottles,
			&next, &last, &success, &st.LastError, &st.LastOutcome, &st.BreakerState, &until,
			&st.ErrorReason, &st.Paused, &st.PausedReason, &st.PollsTotal, &st.FailuresTotal,
			&st.ThrottledTotal, &st.UpdatedAt); err != nil {
			return nil, fmt.Errorf("store: load states: %w", err)
		}
		st.NextRunAt, st.LastRunAt, st.LastSuccessAt, st.BreakerUntil = nullTime(next), nullTime(last), nullTime(success), nullTime(until)
		st.normalize()
		out = append(out, st)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: load states: %w", err)
	}
	return out, nil
}

// stateColumns lists SourceState's columns in the order LoadStates scans.
const stateColumns = "name, fingerprint, consecutive_failures, consecutive_throttles, next_run_at, last_run_at, " +
	"last_success_at, last_error, last_outcome, breaker_state, breaker_until, error_reason, paused, " +
	"paused_reason, polls_total, failures_total, throttled_total, updated_at"

func nullTime(t sql.NullTime) *time.Time {
	if !t.Valid {
		return nil
	}
	return &t.Time
}

// GetState returns the stored state of one source; ok is false when the
// source has none (it was never saved).
func (s *Store) GetState(ctx context.Context, name string) (SourceState, bool, error) {
	var rows []SourceState
	if err := s.db.WithContext(ctx).Where("name = ?", name).Limit(1).Find(&rows).Error; err != nil {
		return SourceState{}, false, fmt.Errorf("store: get state %q: %w", name, err)
	}
	if len(rows) == 0 {
		return SourceState{}, false, nil
	}
	rows[0].normalize()
	return rows[0], true, nil
}

// SaveBatch commits, in one transaction, every state (inserted or replacing
// the stored one, all columns), every record, and the trimming of the
// history of each source that got a record down to its newest keep records
// (keep <= 0 keeps all). Either all of it is committed or none of it.
//
// The arguments are not modified: records get their IDs in the database
// only, so a failed batch can be retried as is. Times are stored in UTC at
// microsecond precision, and UpdatedAt is set to the commit time. When a
// name occurs more than once in states, the last occurrence wins.
func (s *Store) SaveBatch(ctx context.Context, states []SourceState, records []PollRecord, keep int) error {
	return s.saveBatch(ctx, states, records, keep, nil, true)
}

// SaveBatchTrim is SaveBatch, but it trims the history of the sources in
// trim only (to their newest keep records), whether or not they got a
// record. Trimming is the largest part of a batch's cost; the daemon trims a
// source once every few records instead of at each one (readers cap what
// they return at keep).
func (s *Store) SaveBatchTrim(ctx context.Context, states []SourceState, records []PollRecord, keep int, trim []string) error {
	return s.saveBatch(ctx, states, records, keep, trim, false)
}

func (s *Store) saveBatch(ctx context.Context, states []SourceState, records []PollRecord, keep int, trim []string, trimRecorded bool) error {
	if len(states) == 0 && len(records) == 0 && len(trim) == 0 {
		return nil
	}
	ts := now()
	sts, err := prepareStates(states, ts)
	if err != nil {
		return fmt.Errorf("store: save batch: %w", err)
	}
	recs, sources, err := prepareRecords(records)
	if err != nil {
		return fmt.Errorf("store: save batch: %w", err)
	}
	upsert := s.upsertStates
	err = s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		for chunk := range slices.Chunk(sts, upsertChunk) {
			if err := tx.Clauses(upsert).Create(&chunk).Error; err != nil {
				return fmt.Errorf("upsert states: %w", err)
			}
		}
		for chunk := range slices.Chunk(recs, upsertChunk) {
			if err := tx.Create(&chunk).Error; err != nil {
				return fmt.Errorf("insert records: %w", err)
			}
		}
		if keep <= 0 {
			return nil
		}
		if !trimRecorded {
			sources = trim
		}
		return trimHistory(tx, sources, keep)
	})
	if err != nil {
		return fmt.Errorf("store: save batch: %w", err)
	}
	return nil
}

// trimHistory deletes, within tx, the records of each source beyond its
// newest keep. The statement is prepared once for all sources: preparing it
// costs as much as running it.
func trimHistory(tx *gorm.DB, sources []string, keep int) (err error) {
	if len(sources) == 0 {
		return nil
	}
	ctx := tx.Statement.Context
	query := tx.Session(&gorm.Session{DryRun: true}).Exec(trimSQL, "", noLimit, keep).Statement.SQL.String()
	stmt, err := tx.Statement.ConnPool.PrepareContext(ctx, query)
	if err != nil {
		return fmt.Errorf("trim history: %w", err)
	}
	defer func() {
		if cerr := stmt.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("trim history: %w", cerr)
		}
	}()
	for _, src := range sources {
		if _, err := stmt.ExecContext(ctx, src, noLimit, keep); err != nil {
			return fmt.Errorf("trim history of %q: %w", src, err)
		}
	}
	return nil
}

// prepareStates copies states into their stored form, one per name (the
// last one wins: PostgreSQL refuses an upsert that touches a row twice).
func prepareStates(in []SourceState, ts time.Time) ([]SourceState, error) {
	out := make([]SourceState, 0, len(in))
	index := make(map[string]int, len(in))
	for i := range in {
		st := in[i]
		if st.Name == "" {
			return nil, fmt.Errorf("state #%d has no name", i)
		}
		st.normalize()
		st.UpdatedAt = ts
		if j, ok := index[st.Name]; ok {
			out[j] = st
			continue
		}
		index[st.Name] = len(out)
		out = append(out, st)
	}
	return out, nil
}

// prepareRecords copies records into their stored form and lists, sorted,
// the sources they belong to.
func prepareRecords(in []PollRecord) ([]PollRecord, []string, error) {
	out := make([]PollRecord, len(in))
	var sources []string
	seen := make(map[string]bool)
	for i := range in {
		r := in[i]
		if r.Source == "" {
			return nil, nil, fmt.Errorf("record #%d has no source", i)
		}
		r.normalize()
		out[i] = r
		if !seen[r.Source] {
			seen[r.Source] = true
			sources = append(sources, r.Source)
		}
	}
	slices.Sort(sources)
	return out, sources, nil
}

// History returns up to n poll records of a source, newest first (by start
// time, then by insertion order). n <= 0 returns none.
func (s *Store) History(ctx context.Context, name string, n int) ([]PollRecord, error) {
	out := make([]PollRecord, 0)
	if n <= 0 {
		return out, nil
	}
	err := s.db.WithContext(ctx).
		Where("source = ?", name).
		Order("started_at DESC").Order("id DESC").
		Limit(n).
		Find(&out).Error
	if err != nil {
		return nil, fmt.Errorf("store: history of %q: %w", name, err)
	}
	for i := range out {
		out[i].normalize()
	}
	return out, nil
}

// Writable checks that the store answers and accepts a write, by upserting
// a heartbeat row. /readyz and the systemd watchdog use it. Note that it
// proves one small write succeeds now; it does not replace checking the
// result of SaveBatch.
//
// It gives up when ctx is done, also while another process holds the write
// lock: SQLite's busy wait does not heed a cancelled context, so the busy
// timeout of the (only) connection is lowered to what ctx leaves for this
// one statement. Otherwise a probe would hold the connection for the whole
// busy timeout, past its own deadline, while the writer of poll results
// waits behind it.
func (s *Store) Writable(ctx context.Context) error {
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

// EnqueueCommand stores a command for the running daemon. It sets c.ID and
// c.CreatedAt (now, UTC); the other fields are stored as given.
func (s *Store) EnqueueCommand(ctx context.Context, c *Command) error {
	if c == nil {
		return errors.New("store: enqueue command: nil command")
	}
	row := *c
	row.normalize()
	row.CreatedAt = now()
	if err := s.db.WithContext(ctx).Create(&row).Error; err != nil {
		return fmt.Errorf("store: enqueue command: %w", err)
	}
	*c = row
	return nil
}

// PendingCommands returns the commands not yet done, oldest first, at most
// MaxPendingCommands of them.
func (s *Store) PendingCommands(ctx context.Context) ([]Command, error) {
	out := make([]Command, 0)
	err := s.db.WithContext(ctx).
		Where("done_at IS NULL").
		Order("id").
		Limit(MaxPendingCommands).
		Find(&out).Error
	if err != nil {
		return nil, fmt.Errorf("store: pending commands: %w", err)
	}
	for i := range out {
		out[i].normalize()
	}
	return out, nil
}

// CompleteCommand marks a command done with its result ("" = success) and
// code ("not_found", "conflict" or ""). Completing a command that is already
// done keeps the first result and is not an error; an unknown id is
// ErrNotFound.
func (s *Store) CompleteCommand(ctx context.Context, id uint64, result, code string) error {
	db := s.db.WithContext(ctx)
	res := db.Model(&Command{}).
		Where("id = ? AND done_at IS NULL", id).
		Updates(map[string]any{"done_at": now(), "result": result, "code": code})
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
