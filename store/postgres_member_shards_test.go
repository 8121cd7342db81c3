package store_test

import (
	"maps"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/domain"
	"github.com/pacer-dev/pacer/store"
)

// TestShardSources: a member's published sources per shard replace what it
// published before (shards without sources have no row), are read back
// for the members asked, and those of a member the cluster forgot (it
// left) are dropped at the next publication.
func TestShardSources(t *testing.T) {
	ctx := t.Context()
	s, err := store.Open(newPostgresDSN(t), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	for _, name := range []string{"a", "b"} {
		if _, err := s.Heartbeat(ctx, domain.Member{Name: name, StartedAt: time.Now()}, 10*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	publish := func(member string, counts map[int]int) {
		t.Helper()
		if err := s.PublishShardSources(ctx, member, counts); err != nil {
			t.Fatal(err)
		}
	}
	read := func(members ...string) map[string]map[int]int {
		t.Helper()
		got, err := s.ShardSources(ctx, members)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	publish("a", map[int]int{1: 2, 7: 1})
	publish("b", map[int]int{7: 3})
	publish("a", map[int]int{1: 1, 255: 4, 9: 0})
	got := read("a", "b")
	if want := map[int]int{1: 1, 255: 4}; !maps.Equal(got["a"], want) {
		t.Errorf("a: %v, want %v (the second publication only, no row for 0)", got["a"], want)
	}
	if want := map[int]int{7: 3}; !maps.Equal(got["b"], want) {
		t.Errorf("b: %v, want %v", got["b"], want)
	}
	if got := read("b"); len(got) != 1 {
		t.Errorf("read for b only: %v", got)
	}
	if err := s.LeaveCluster(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	publish("a", map[int]int{1: 1})
	if got := read("a", "b"); got["b"] != nil {
		t.Errorf("b left the cluster; its counts are still there: %v", got["b"])
	}
}
