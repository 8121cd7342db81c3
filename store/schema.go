package store

import "hash/fnv"

// The primary key of the tables of states and history (models.go) starts
// with the hash of the source's name (NameHash, as skey), and SQLite keeps
// them clustered on that key (WITHOUT ROWID, the table option the SQLite
// backend creates them with). Sources whose names hash close together are then
// stored together, and the scheduler phases "@every" sources by the same
// hash, so the sources polled in one 50 ms window, whose states and records
// one commit writes, are neighbours in the tables: the commit dirties a
// few pages instead of one or two per source. (100,000 sources polled once
// a minute: 0.37x the CPU of the same rows scattered; see BENCHMARKS.md.)

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
