package sqlcore

import "github.com/pacer-dev/pacer/domain"

// The primary key of the tables of states and history (models.go) starts
// with the hash of the source's name (domain.NameHash, as skey), and SQLite
// keeps them clustered on that key (WITHOUT ROWID, the table option the
// SQLite backend creates them with). Sources whose names hash close
// together are then stored together, and the scheduler phases "@every"
// sources by the same hash, so the sources polled in one 50 ms window,
// whose states and records one commit writes, are neighbours in the
// tables: the commit dirties a few pages instead of one or two per source.
// (100,000 sources polled once a minute: 0.37x the CPU of the same rows
// scattered; see BENCHMARKS.md.)

// Skey is the stored form of domain.NameHash: shifted into int64's range so
// that SQLite's signed order is the hash's unsigned order.
func Skey(name string) int64 { return int64(domain.NameHash(name) ^ 1<<63) }
