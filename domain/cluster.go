package domain

import (
	"hash/fnv"
	"time"
)

// Shards is the number of shards of a cluster (contract section 8): fixed,
// so that every member agrees on the shard of a source.
const Shards = 256

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

// ShardOf is the shard of a source: that of its limits group when it has
// one, so that a group's sources share an owner, else that of its name.
func ShardOf(name, group string) int {
	key := name
	if group != "" {
		key = "limits:" + group
	}
	return int(NameHash(key) % Shards)
}

// Member is what a member shows of itself to the others (GET /api/cluster).
type Member struct {
	Name              string
	StartedAt         time.Time
	LastSeenAt        time.Time
	ConfigFingerprint string
	OwnedSources      int
	Inflight          int
	// ClockOffsetMs is the database's clock minus the member's, as the
	// member measured it at its last round (rule 8.1: a member schedules
	// on the database's clock; one far off is shown).
	ClockOffsetMs int64
}

// Claim is a member's hold on one shard: the fence its commits must carry,
// and how long the lease had left when the database answered.
type Claim struct {
	Shard int
	Fence int64
	// Left is lease_until minus the database's now() of the claim: the
	// claim holds for at least Left after the call started.
	Left time.Duration
}

// Fence is what a member's commits are conditional on: its name, the fence
// of each shard it holds, and the shard of each source (ShardOf with the
// source's limits group).
type Fence struct {
	Member  string
	Fences  map[int]int64
	ShardOf func(source string) int
}
