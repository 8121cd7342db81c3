package sqlcore

import (
	"fmt"
	"slices"
	"time"

	"gorm.io/gorm"

	"github.com/pacer-dev/pacer/domain"
)

// The models below are the store's tables, created through gorm's
// Migrator with the types each dialect gives a Go type (integer or
// bigint, text, blob or bytea): nothing in them is specific to SQLite.
// What is, the clustering of three tables by row key (WITHOUT ROWID, see
// schema.go), is a table option that the SQLite backend passes when it
// creates them (the CreateTables of store/sqlite's dialect).
//
// Times of states and records are integers, microseconds since the Unix
// epoch (read.go says why), so that the models hold int64 where
// SourceState holds time.Time; stateModel.state converts. Columns have the
// defaults of the first schema-3 stores; a string's is written ('') as
// gorm's SQLite dialect would quote '' as "", which SQLite reads as a
// string only while it accepts double-quoted strings.

// tableStates is the table of stateModel.
const tableStates = "source_states"

// stateModel is a row of source_states: a SourceState and its row key,
// Skey(Name), first in the primary key.
type stateModel struct {
	SKey                 int64  `gorm:"column:skey;primaryKey;autoIncrement:false;not null"`
	Name                 string `gorm:"primaryKey;not null"`
	Fingerprint          string `gorm:"not null;default:('')"`
	ConsecutiveFailures  int64  `gorm:"not null;default:0"`
	ConsecutiveThrottles int64  `gorm:"not null;default:0"`
	NextRunAt            *int64
	LastRunAt            *int64
	LastSuccessAt        *int64
	LastError            string `gorm:"not null;default:('')"`
	LastOutcome          string `gorm:"not null;default:('')"`
	BreakerState         string `gorm:"not null;default:('')"`
	BreakerUntil         *int64
	ErrorReason          string `gorm:"not null;default:('')"`
	Paused               bool   `gorm:"not null;default:false"`
	PausedReason         string `gorm:"not null;default:('')"`
	PollsTotal           int64  `gorm:"not null;default:0"`
	FailuresTotal        int64  `gorm:"not null;default:0"`
	ThrottledTotal       int64  `gorm:"not null;default:0"`
	HistorySeq           int64  `gorm:"not null;default:0"`
	UpdatedAt            int64  `gorm:"not null;default:0;autoUpdateTime:false"`
	// LastErrorAt came after the first schema-3 stores: an additive column
	// (addedColumns), NULL in the rows written before it.
	LastErrorAt *int64
	// The last delivered result's validators and digest, when it changed
	// and how often (contract 9.1, 9.2): additive columns, NULL before.
	ETag          *string `gorm:"column:etag"`
	LastModified  *string
	Digest        *string
	LastChangedAt *int64
	ChangesTotal  *int64
	// IncidentOpen (SourceState.IncidentOpen): an additive column, NULL
	// (no incident) before it.
	IncidentOpen *bool
	// RemindAt and HeldEvent (SourceState's): additive columns, NULL
	// (no reminder due, nothing held) before them.
	RemindAt  *int64
	HeldEvent *string
}

// TableName pins the table of stateModel.
func (stateModel) TableName() string { return tableStates }

// state is the SourceState of a row, its times in UTC.
func (m *stateModel) state() domain.SourceState {
	t := func(us *int64) *time.Time {
		if us == nil {
			return nil
		}
		v := fromMicros(*us)
		return &v
	}
	return domain.SourceState{
		Name: m.Name, Fingerprint: m.Fingerprint,
		ConsecutiveFailures: int(m.ConsecutiveFailures), ConsecutiveThrottles: int(m.ConsecutiveThrottles),
		NextRunAt: t(m.NextRunAt), LastRunAt: t(m.LastRunAt), LastSuccessAt: t(m.LastSuccessAt),
		LastError: m.LastError, LastOutcome: m.LastOutcome, BreakerState: m.BreakerState,
		BreakerUntil: t(m.BreakerUntil), ErrorReason: m.ErrorReason, Paused: m.Paused, PausedReason: m.PausedReason,
		PollsTotal: m.PollsTotal, FailuresTotal: m.FailuresTotal, ThrottledTotal: m.ThrottledTotal,
		HistorySeq: m.HistorySeq, UpdatedAt: fromMicros(m.UpdatedAt), LastErrorAt: t(m.LastErrorAt),
		ETag: deref(m.ETag), LastModified: deref(m.LastModified), Digest: deref(m.Digest),
		LastChangedAt: t(m.LastChangedAt), ChangesTotal: deref(m.ChangesTotal), IncidentOpen: deref(m.IncidentOpen),
		RemindAt: t(m.RemindAt), HeldEvent: deref(m.HeldEvent),
	}
}

// deref is *p, or the zero value for nil (a NULL column).
func deref[T any](p *T) T {
	var v T
	if p != nil {
		v = *p
	}
	return v
}

// tailModel is a row of history_tail: a source's newest records, packed
// (history.go), the Seq of its newest record and of the oldest to keep.
type tailModel struct {
	SKey     int64  `gorm:"column:skey;primaryKey;autoIncrement:false;not null"`
	Source   string `gorm:"primaryKey;not null"`
	Data     []byte `gorm:"not null"`
	LastSeq  int64  `gorm:"not null;default:0"`
	KeepFrom int64  `gorm:"not null;default:0"`
}

// TableName pins the table of tailModel.
func (tailModel) TableName() string { return tableTail }

// blockModel is a row of history_blocks: older records of a source,
// packed, keyed by the Seq of the newest of them.
type blockModel struct {
	SKey    int64  `gorm:"column:skey;primaryKey;autoIncrement:false;not null"`
	Source  string `gorm:"primaryKey;not null"`
	LastSeq int64  `gorm:"primaryKey;autoIncrement:false;not null"`
	Data    []byte `gorm:"not null"`
}

// TableName pins the table of blockModel.
func (blockModel) TableName() string { return tableBlocks }

// Model is a table of the store: its model, and whether its rows are
// clustered by their primary key (the backend's table option).
type Model struct {
	Value     any
	Clustered bool
}

// Models is every table the store owns, in creation order.
func Models() []Model {
	return []Model{{&stateModel{}, true}, {&tailModel{}, true}, {&blockModel{}, true}, {&commandModel{}, false}, {&metaRow{}, false}, {&eventModel{}, false}, {&hostModel{}, false}}
}

// CreateTables creates, within tx, the tables of models that do not exist.
// clustered is the table option of the clustered tables ("" for none).
func CreateTables(tx *gorm.DB, clustered string) error {
	for _, m := range Models() {
		if tx.Migrator().HasTable(m.Value) {
			continue
		}
		db := tx
		if m.Clustered && clustered != "" {
			db = tx.Set("gorm:table_options", " "+clustered)
		}
		if err := db.Migrator().CreateTable(m.Value); err != nil {
			return fmt.Errorf("create table of %T: %w", m.Value, err)
		}
	}
	return nil
}

// addedColumn is a column that schema 3 gained after its first stores: it
// is nullable or has a default, so that rows written before it read as
// they did, and an older pacer, which names its columns, still reads and
// writes the table. Open adds the column to a store that lacks it (ALTER
// TABLE ADD COLUMN), with fill run in the same transaction to give the old
// rows their value, instead of a new schema version that the older
// pacer would refuse.
type addedColumn struct {
	model any
	field string // the Go field
	fill  string // SQL run after adding it; "" for none
}

// addedColumns are schema 3's additive columns, in the order they came.
func addedColumns() []addedColumn {
	return []addedColumn{
		{&stateModel{}, "LastErrorAt", ""},
		{&stateModel{}, "ETag", ""},
		{&stateModel{}, "LastModified", ""},
		{&stateModel{}, "Digest", ""},
		{&stateModel{}, "LastChangedAt", ""},
		{&stateModel{}, "ChangesTotal", ""},
		{&stateModel{}, "IncidentOpen", ""},
		{&eventModel{}, "Reminder", ""},
		{&stateModel{}, "RemindAt", ""},
		{&stateModel{}, "HeldEvent", ""},
		// A command done before the column existed is done.
		{&commandModel{}, "Status", "UPDATE " + tableCommands + " SET status = '" + domain.CommandDone + "' WHERE done_at IS NOT NULL"},
	}
}

// isAdded reports whether column of the model's table is an additive one.
func isAdded(table, column string, db *gorm.DB) bool {
	for _, a := range addedColumns() {
		stmt := &gorm.Statement{DB: db}
		if stmt.Parse(a.model) != nil {
			continue
		}
		if f := stmt.Schema.LookUpField(a.field); f != nil && stmt.Schema.Table == table && f.DBName == column {
			return true
		}
	}
	return false
}

// addColumns adds the additive columns a store lacks, in one write
// transaction that checks again, so that two processes opening the store
// at once do not both add one. A store that has them all is not written
// (a read-only one opens).
func addColumns(db *gorm.DB) error {
	missing := false
	for _, a := range addedColumns() {
		missing = missing || !db.Migrator().HasColumn(a.model, a.field)
	}
	if !missing {
		return nil
	}
	return db.Transaction(func(tx *gorm.DB) error {
		for _, a := range addedColumns() {
			if tx.Migrator().HasColumn(a.model, a.field) {
				continue
			}
			if err := tx.Migrator().AddColumn(a.model, a.field); err != nil {
				return fmt.Errorf("add column %s of %T: %w", a.field, a.model, err)
			}
			if a.fill != "" {
				if err := tx.Exec(a.fill).Error; err != nil {
					return fmt.Errorf("fill column %s of %T: %w", a.field, a.model, err)
				}
			}
		}
		return nil
	})
}

// checkTables adds the additive columns a store lacks (addColumns), then
// reports the first table that lacks another column of its model. Those
// are not added: within one schema version the other columns are those of
// the models, and a store of the version that does not have them was not
// written by pacer (or a model changed without a new version).
func checkTables(db *gorm.DB) error {
	for _, m := range Models() {
		stmt := &gorm.Statement{DB: db}
		if err := stmt.Parse(m.Value); err != nil {
			return fmt.Errorf("parse schema: %w", err)
		}
		cols, err := db.Migrator().ColumnTypes(m.Value)
		if err != nil {
			return fmt.Errorf("columns of %s: %w", stmt.Schema.Table, err)
		}
		have := make([]string, 0, len(cols))
		for _, c := range cols {
			have = append(have, c.Name())
		}
		for _, name := range stmt.Schema.DBNames {
			if !slices.Contains(have, name) && !isAdded(stmt.Schema.Table, name, db) {
				return fmt.Errorf("table %s has no column %s (it has %v)", stmt.Schema.Table, name, have)
			}
		}
	}
	return addColumns(db)
}
