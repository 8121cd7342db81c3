package store

import (
	"gorm.io/gorm"

	"github.com/pacer-dev/pacer/store/internal/sqlcore"
	"github.com/pacer-dev/pacer/store/postgres"
	"github.com/pacer-dev/pacer/store/sqlite"
)

// GormDB exposes the store's connection to the tests, which set
// per-connection pragmas on it (max_page_count) and inspect others.
func GormDB(s *Store) *gorm.DB { return coreOf(s).DB }

// coreOf is the core of s's backend.
func coreOf(s *Store) *sqlcore.Core {
	switch b := s.Backend.(type) {
	case *sqlite.Store:
		return b.Core
	case *postgres.Store:
		return b.Core
	}
	panic("store: unknown backend")
}

// OpenReadOnly opens a SQLite store with mode=ro: SQLite then refuses every
// write exactly as for a file it may not write. Tests run as root, where
// chmod does not stop writes, so this is how they get a read-only store.
func OpenReadOnly(path string, opts Options) (*Store, error) {
	s, err := openSQLite(path, opts, true)
	if err != nil {
		return nil, err
	}
	return &Store{Backend: s}, nil
}

// BlockSize is blockSize, for the suite.
func BlockSize(keep int) int64 { return sqlcore.BlockSize(keep) }

// StoredRecords counts the records of source in its tail and blocks,
// trimmed or not, and its blocks, through the models (any backend).
func StoredRecords(s *Store, source string) (records, blocks int, err error) {
	return coreOf(s).StoredRecords(source)
}
