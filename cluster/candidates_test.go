package cluster_test

import (
	"slices"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/cluster"
	"github.com/pacer-dev/pacer/domain"
)

// TestCandidates: while configs differ, a shard may go only to the members
// with the most sources on it; with none anywhere, or counts alike
// (has nil), to any.
func TestCandidates(t *testing.T) {
	live := []string{"a", "b", "c"}
	has := map[string]map[int]int{"a": {1: 2, 2: 1}, "b": {1: 2}, "c": {3: 1}}
	for _, tc := range []struct {
		shard int
		has   map[string]map[int]int
		want  []string
	}{
		{1, has, []string{"a", "b"}},
		{2, has, []string{"a"}},
		{3, has, []string{"c"}},
		{4, has, live},
		{2, nil, live},
	} {
		if got := cluster.Candidates(live, tc.has, tc.shard); !slices.Equal(got, tc.want) {
			t.Errorf("shard %d (has %v): %v, want %v", tc.shard, tc.has != nil, got, tc.want)
		}
	}
}

// plainShard is a shard that cluster.Assign gives to owner among live.
func plainShard(t *testing.T, owner string, live ...string) int {
	t.Helper()
	for sh := range domain.Shards {
		if cluster.Assign(live, sh) == owner {
			return sh
		}
	}
	t.Fatalf("no shard of %s", owner)
	return 0
}

// TestShardGoesToMemberThatHasIt (rule 8.1): members whose configs differ
// publish their sources per shard, and a shard goes to a member that has
// its sources: a's source on a shard of b's plain share is a's, and b's on
// one of a's is b's. Once b's reloaded config has a's source too (and the
// fingerprints agree), the plain share holds again.
func TestShardGoesToMemberThatHasIt(t *testing.T) {
	dsn := newDSN(t)
	toA, toB := plainShard(t, "b", "a", "b"), plainShard(t, "a", "a", "b")
	a, err := cluster.New(openStore(t, dsn), cluster.Options{Name: "a", Lease: 2 * time.Second, Fingerprint: "fa",
		ShardSources: map[int]int{toA: 1}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := cluster.New(openStore(t, dsn), cluster.Options{Name: "b", Lease: 2 * time.Second, Fingerprint: "fb",
		ShardSources: map[int]int{toB: 1}})
	if err != nil {
		t.Fatal(err)
	}
	rounds := func(what string, want map[int]*cluster.Member) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			for _, m := range []*cluster.Member{a, b} {
				if err := m.Round(t.Context()); err != nil {
					t.Fatal(err)
				}
			}
			ok := true
			for sh, m := range want {
				ok = ok && slices.Contains(m.Shards(), sh)
			}
			if ok {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: a holds %v, b holds %v", what, a.Shards(), b.Shards())
			}
			<-time.After(50 * time.Millisecond)
		}
	}
	rounds("each member's own source's shard", map[int]*cluster.Member{toA: a, toB: b})
	b.SetShardSources(map[int]int{toA: 1, toB: 1})
	b.SetFingerprint("fab")
	rounds("b with a's source too", map[int]*cluster.Member{toA: b, toB: b})
	a.SetShardSources(map[int]int{toA: 1, toB: 1})
	a.SetFingerprint("fab")
	rounds("configs alike", map[int]*cluster.Member{toA: b, toB: a})
}
