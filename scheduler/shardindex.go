package scheduler

// The shard index of the table: each entry's shard (domain.ShardOf with
// its limits group), the entries of each shard, rebuilt when an entry
// came, went or changed group, and the entries of the shards the member
// does not poll (dormant) kept out of the due heap.

// indexShards rebuilds the shard index when entries changed. mu held.
func (t *table) indexShards() {
	if !t.shardDirty {
		return
	}
	t.shardDirty = false
	clear(t.byShard[:])
	names := make(map[string]int, len(t.entries))
	for _, e := range t.entries {
		t.byShard[e.shard] = append(t.byShard[e.shard], e)
		names[e.name] = e.shard
	}
	t.shards.Index(names)
}

// dormant reports whether e's shard is not this member's to poll. mu held.
func (t *table) dormant(e *entry) bool {
	return !t.shards.Polls(e.shard)
}

// loseShard makes the entries of sh dormant; it reports whether sh was
// polled. mu held.
func (t *table) loseShard(sh int) bool {
	if !t.shards.Lose(sh) {
		return false
	}
	t.unheapShard(sh)
	return true
}

// unheapShard takes the entries of sh, which the room no longer polls,
// out of the heap. mu held.
func (t *table) unheapShard(sh int) {
	t.indexShards()
	for _, e := range t.byShard[sh] {
		t.q.Due.Remove(&e.slot)
	}
}
