package store

import "gorm.io/gorm"

// GormDB exposes the store's connection to the tests, which set
// per-connection pragmas on it (max_page_count) and inspect others.
func GormDB(s *Store) *gorm.DB { return s.db }

// OpenReadOnly opens a SQLite store with mode=ro: SQLite then refuses every
// write exactly as for a file it may not write. Tests run as root, where
// chmod does not stop writes, so this is how they get a read-only store.
func OpenReadOnly(path string, opts Options) (*Store, error) {
	return openSQLite(path, opts, true)
}
