package scheduler

import (
	"context"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/scheduler/shards"
	"github.com/pacer-dev/pacer/store"
)

// nameOnly is an Ownership of which owner uses the name, and which holds
// shard 0 (fence 1) when holds is set.
type nameOnly struct {
	Ownership
	holds bool
}

func (nameOnly) Name() string                    { return "me" }
func (o nameOnly) MayStart(sh int) bool          { return o.holds && sh == 0 }
func (nameOnly) StatementTimeout() time.Duration { return time.Second }
func (o nameOnly) Fence(shardOf func(string) int) store.Fence {
	f := store.Fence{Member: "me", Fences: map[int]int64{}, ShardOf: shardOf}
	if o.holds {
		f.Fences[0] = 1
	}
	return f
}

// ownersOnly is a ClusterStore that answers only the owners of the shards.
type ownersOnly struct {
	ClusterStore
	owners map[int]string
}

func (o ownersOnly) ShardOwners(context.Context) (map[int]string, error) { return o.owners, nil }

// roomOf is a member's room that polls shard 0 if active, with owners as
// the store's owners of the shards.
func roomOf(t *testing.T, active bool, owners map[int]string) *shards.Room {
	t.Helper()
	r := shards.New(shards.Options{Ownership: nameOnly{holds: active}, Store: ownersOnly{owners: owners}})
	r.ReadOwners(t.Context())
	drained := func(int) bool { return true }
	if _, gained := r.Sync(r.Claims(), drained); active {
		if took := r.TakeOver(gained, drained); len(took) != 1 {
			t.Fatalf("shard 0 not taken over: %v", took)
		}
	}
	return r
}

// TestOwnerWhileGivingUp is the owner a member shows (contract 8.6): itself
// for a shard it polls, and for a shard it gave up while its poll of the
// source runs or its state waits for the commit (the store holds its claim
// until then, and the store's owners it read may still name a member
// before it); else the store's owner, or none.
func TestOwnerWhileGivingUp(t *testing.T) {
	tests := []struct {
		name    string
		active  bool
		busy    bool
		pending bool // a write waits in the flusher
		flying  bool // a write is in the commit in progress
		owners  map[int]string
		want    string // "" for nil
	}{
		{name: "polled shard", active: true, owners: map[int]string{0: "old"}, want: "me"},
		{name: "given up, idle", owners: map[int]string{0: "next"}, want: "next"},
		{name: "given up, no owner known", want: ""},
		{name: "given up, poll in flight", busy: true, owners: map[int]string{0: "old"}, want: "me"},
		{name: "given up, state queued", pending: true, owners: map[int]string{0: "old"}, want: "me"},
		{name: "given up, state in the commit", flying: true, want: "me"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFlusher(nil, nil, nil, nil, nil)
			s := &Scheduler{shards: roomOf(t, tt.active, tt.owners), flush: f}
			e := &entry{name: "src", shard: 0, busy: tt.busy, sl: f.slot("src")}
			if tt.pending {
				f.queue = append(f.queue, write{sl: e.sl, st: store.SourceState{Name: "src"}})
				e.sl.pend = 0
			}
			e.sl.inFlight = tt.flying
			got := ""
			if o := s.owner(e); o != nil {
				got = *o
			}
			if got != tt.want {
				t.Errorf("owner = %q, want %q", got, tt.want)
			}
		})
	}
}
