package shards_test

import (
	"context"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/cluster"
	"github.com/pacer-dev/pacer/domain"
	"github.com/pacer-dev/pacer/internal/pgtest"
	"github.com/pacer-dev/pacer/scheduler/shards"
	"github.com/pacer-dev/pacer/store"
)

// member is a real cluster member named name on st, its first round done.
func member(t *testing.T, st *store.Store, name string) *cluster.Member {
	t.Helper()
	m, err := cluster.New(st, cluster.Options{Name: name, Lease: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Round(t.Context()); err != nil {
		t.Fatal(err)
	}
	return m
}

// room is the room of member m on st.
func room(m *cluster.Member, st *store.Store) *shards.Room {
	return shards.New(shards.Options{Ownership: m, Store: st, Now: time.Now,
		Sleep: func(ctx context.Context, d time.Duration) bool {
			select {
			case <-time.After(d):
				return true
			case <-ctx.Done():
				return false
			}
		}})
}

// TestRoomTakeOverAndFence: a member's room takes over only the shards
// whose writes drained (at its look, Sync, and again at the take-over), and its commits stay conditional on the fence it
// took a shard over with after the member held the shard again with a new
// one (until the shard is taken over again).
func TestRoomTakeOverAndFence(t *testing.T) {
	ctx := t.Context()
	st, err := store.Open(pgtest.Schema(t, "shards_"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	a := member(t, st, "a")
	r := room(a, st)
	const sh = 7
	undrained := func(s int) bool { return s != sh }
	lost, gained := r.Sync(r.Claims(), undrained)
	if len(lost) != 0 || len(gained) != domain.Shards-1 {
		t.Fatalf("first look: lost %d, gained %d; want 0 and every shard but the undrained one", len(lost), len(gained))
	}
	// TakeOver asks again: a shard drained at the look and written since
	// (here: one Sync did not return) is not taken.
	r.TakeOver(append(gained, sh), undrained)
	if r.Polls(sh) || r.Count() != domain.Shards-1 {
		t.Fatalf("shard %d polled before its writes drained (%d shards polled)", sh, r.Count())
	}
	drained := func(int) bool { return true }
	_, gained = r.Sync(r.Claims(), drained)
	if took := r.TakeOver(gained, drained); len(took) != 1 || took[0] != sh || !r.Polls(sh) {
		t.Fatalf("once drained: took %v; want [%d]", took, sh)
	}
	taken := r.Fence().Fences[sh]

	// The shard is b's meanwhile, then a's again with a new fence.
	if err := st.LeaveCluster(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	member(t, st, "b")
	if err := st.LeaveCluster(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if err := a.Round(ctx); err != nil {
		t.Fatal(err)
	}
	now := a.Fence(r.ShardOf).Fences[sh]
	if now == taken {
		t.Fatalf("a's fence of shard %d did not change (%d): the test needs a new claim", sh, now)
	}
	if got := r.Fence().Fences[sh]; got != taken {
		t.Errorf("commit fence of shard %d: %d, want the take-over fence %d (the member's is %d)", sh, got, taken, now)
	}
	if !r.Lose(sh) || r.Polls(sh) || r.Lose(sh) {
		t.Error("Lose: the shard is still polled, or lost twice")
	}
	_, gained = r.Sync(r.Claims(), drained)
	r.TakeOver(gained, drained)
	if got := r.Fence().Fences[sh]; got != now {
		t.Errorf("commit fence after the second take-over: %d, want the new claim's %d", got, now)
	}
}
