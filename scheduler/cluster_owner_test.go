package scheduler

import (
	"context"
	"github.com/pacer-dev/pacer/scheduler/queue"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/domain"
	"github.com/pacer-dev/pacer/scheduler/flush"
	"github.com/pacer-dev/pacer/scheduler/shards"
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
func (o nameOnly) Fence(shardOf func(string) int) domain.Fence {
	f := domain.Fence{Member: "me", Fences: map[int]int64{}, ShardOf: shardOf}
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

// heldCommit is a committer whose one commit waits until release is
// closed: a commit in progress for as long as a test looks at it.
type heldCommit struct{ started, release chan struct{} }

func (h heldCommit) Commit(context.Context, domain.Batch, int) ([]string, error) {
	close(h.started)
	<-h.release
	return nil, nil
}

var _ flush.Committer = heldCommit{}

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
			held := heldCommit{started: make(chan struct{}), release: make(chan struct{})}
			f := flush.New(flush.Options{Committer: held, Keep: func() int { return 0 }})
			g := &membership{table: &table{deps: &deps{shards: roomOf(t, tt.active, tt.owners), flush: f}}}
			e := &entry{name: "src", shard: 0, sl: f.Slot("src")}
			e.slot.Init(e)
			if tt.busy {
				queue.New[*entry](nil).Take(&e.slot) // a poll in flight
			}
			if tt.pending || tt.flying {
				f.Submit(e.sl, domain.SourceState{Name: "src"}, nil)
			}
			if tt.flying { // the write leaves the queue for a commit that waits
				done := make(chan error, 1)
				go func() { done <- f.FlushAll(context.Background()) }()
				<-held.started
				defer func() { close(held.release); <-done }()
			}
			got := ""
			if o := g.owner(e); o != nil {
				got = *o
			}
			if got != tt.want {
				t.Errorf("owner = %q, want %q", got, tt.want)
			}
		})
	}
}
