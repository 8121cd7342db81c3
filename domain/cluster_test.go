package domain

import "testing"

// ShardOf puts a limits group's sources on the group's shard, and a source
// without a group on the shard of its name, within [0, Shards).
func TestShardOf(t *testing.T) {
	if a, b := ShardOf("a", "g"), ShardOf("b", "g"); a != b {
		t.Fatalf("sources of one group on shards %d and %d", a, b)
	}
	if got, want := ShardOf("api-1", ""), int(NameHash("api-1")%Shards); got != want {
		t.Fatalf("ShardOf(api-1) = %d, want %d", got, want)
	}
	for _, n := range []string{"", "x", "api-2", "limits:g"} {
		if sh := ShardOf(n, ""); sh < 0 || sh >= Shards {
			t.Fatalf("ShardOf(%q) = %d, out of range", n, sh)
		}
	}
}

// An empty batch is one with no state, record or event.
func TestBatchEmpty(t *testing.T) {
	var b Batch
	if !b.Empty() {
		t.Fatal("zero batch not empty")
	}
	b.Events = []Event{{Source: "a", Event: "error"}}
	if b.Empty() {
		t.Fatal("batch with an event empty")
	}
}
