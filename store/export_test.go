package store

import "gorm.io/gorm"

// GormDB exposes the store's connection to the tests, which set
// per-connection pragmas on it (max_page_count) and inspect others.
func GormDB(s *Store) *gorm.DB { return coreOf(s).db }

// coreOf is the core of s's backend.
func coreOf(s *Store) *core {
	switch b := s.Backend.(type) {
	case *sqliteStore:
		return b.core
	case *pgStore:
		return b.core
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
func BlockSize(keep int) int64 { return blockSize(keep) }

// StoredRecords counts the records of source in its tail and blocks,
// trimmed or not, and its blocks, through the models (any backend).
func StoredRecords(st *Store, source string) (records, blocks int, err error) {
	s := coreOf(st)
	var tails []tailModel
	var blks []blockModel
	if err := s.db.Where("skey = ? AND source = ?", skey(source), source).Find(&tails).Error; err != nil {
		return 0, 0, err
	}
	if err := s.db.Where("skey = ? AND source = ?", skey(source), source).Find(&blks).Error; err != nil {
		return 0, 0, err
	}
	blobs := make([][]byte, 0, len(tails)+len(blks))
	for _, t := range tails {
		blobs = append(blobs, t.Data)
	}
	for _, b := range blks {
		blobs = append(blobs, b.Data)
	}
	for _, b := range blobs {
		recs, err := decodeBlob(source, b)
		if err != nil {
			return 0, 0, err
		}
		records += len(recs)
	}
	return records, len(blks), nil
}
