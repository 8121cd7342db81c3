package store

import "hash/fnv"

// The tables of states and history (history.go) are created by hand rather than by
// gorm: their primary key starts with a column that is in no struct, the
// hash of the source's name (NameHash), and SQLite keeps them clustered on
// that key (WITHOUT ROWID). Sources whose names hash close together are then
// stored together, and the scheduler phases "@every" sources by the same
// hash, so the sources polled in one 50 ms window, whose states and records
// one commit writes, are neighbours in the tables: the commit dirties a
// few pages instead of one or two per source. (100,000 sources polled once
// a minute: 0.37x the CPU of the same rows scattered; see BENCHMARKS.md.)

const stateDDL = `CREATE TABLE IF NOT EXISTS ` + tableStates + ` (
	skey INTEGER NOT NULL,
	name TEXT NOT NULL,
	fingerprint TEXT NOT NULL DEFAULT '',
	consecutive_failures INTEGER NOT NULL DEFAULT 0,
	consecutive_throttles INTEGER NOT NULL DEFAULT 0,
	next_run_at INTEGER,
	last_run_at INTEGER,
	last_success_at INTEGER,
	last_error TEXT NOT NULL DEFAULT '',
	last_outcome TEXT NOT NULL DEFAULT '',
	breaker_state TEXT NOT NULL DEFAULT '',
	breaker_until INTEGER,
	error_reason TEXT NOT NULL DEFAULT '',
	paused INTEGER NOT NULL DEFAULT 0,
	paused_reason TEXT NOT NULL DEFAULT '',
	polls_total INTEGER NOT NULL DEFAULT 0,
	failures_total INTEGER NOT NULL DEFAULT 0,
	throttled_total INTEGER NOT NULL DEFAULT 0,
	history_seq INTEGER NOT NULL DEFAULT 0,
	updated_at INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (skey, name)
) WITHOUT ROWID`

// NameHash is a 64-bit hash of a source's name: FNV-1a, then the MurmurHash3
// finaliser, without which the high bits of FNV differ little between names
// such as "api-1" and "api-2". The store orders its rows by it, and the
// scheduler derives a source's phase from it (scaled, so from its high
// bits), so that sources polled at nearby times are stored near each other.
func NameHash(name string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	x := h.Sum64()
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x
}

// skey is the stored form of NameHash: shifted into int64's range so that
// SQLite's signed order is the hash's unsigned order.
func skey(name string) int64 { return int64(NameHash(name) ^ 1<<63) }
