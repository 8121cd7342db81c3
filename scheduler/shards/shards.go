// Package shards is the cluster room of a member's scheduler (contract
// section 8): which shards the member polls, the fences it took them over
// with, the store's owners of the others, the fence its commits are
// conditional on, and the operator's commands sent to the owner of a
// source this member does not poll (remote.go).
//
// The room knows shards and source names, not the scheduler's entries: it
// answers which shards are to be given up or taken over, and the scheduler
// moves their entries out of or into its heap. It plugs into the scheduler
// as an ownership filter (MayStart, Polls) and into the flusher as the
// fenced committer (Fence, Commit).
//
// A member (Ownership) that holds a shard may start polls of it until
// shortly before its claim ends. The room polls a shard (its sources are
// in the scheduler's heap) from when it took the shard over, once what the
// member wrote of it was committed and its stored states were read again,
// until the member may no longer start its polls or a fenced commit is
// refused for it.
//
// Lock order: the scheduler's mu, then Room.mu. Room.mu is a leaf: it is
// never held while the room calls the member, the store or a callback
// (the member's own lock is taken by those calls, and the scheduler's
// drained callback takes the flusher's).
package shards

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pacer-dev/pacer/domain"
	"github.com/pacer-dev/pacer/store"
)

// Ownership says which shards the scheduler may start polls of: a member
// of a cluster (*cluster.Member).
type Ownership interface {
	// MayStart reports whether a poll of a source of shard may start now.
	MayStart(shard int) bool
	// Fence is what the commits are conditional on.
	Fence(shardOf func(source string) int) domain.Fence
	// Ready is nil when the member's claims are renewed, else the reason.
	Ready() error
	// Name is the member's name (the source object's owner).
	Name() string
	// Renewed is nil when the member's last round of claims succeeded,
	// else the reason (commits are held until it is nil again).
	Renewed() error
	// StatementTimeout bounds each statement on the cluster's behalf (a
	// commit, the states of the shards taken over): one that hangs is an
	// outage, retried, instead of a wait for as long as the database.
	StatementTimeout() time.Duration
}

// ClusterStore is what the room needs of the member's store: fenced
// commits, the states of the shards it takes over, the owners of the
// others, and the command queue to reach them.
type ClusterStore interface {
	CommitFenced(ctx context.Context, f domain.Fence, b domain.Batch, keep int) ([]string, error)
	LoadStatesOf(ctx context.Context, names []string) ([]domain.SourceState, error)
	ShardOwners(ctx context.Context) (map[int]string, error)
	EnqueueCommand(ctx context.Context, c *domain.Command) error
	GetCommand(ctx context.Context, id uint64) (domain.Command, error)
	ExpireCommand(ctx context.Context, id uint64, reason string) (bool, error)
}

var _ ClusterStore = (*store.Store)(nil)

// Options are a room's collaborators.
type Options struct {
	// Ownership is the member; nil on a single daemon, which polls every
	// shard (then Store is not used).
	Ownership Ownership
	Store     ClusterStore
	// Now and Sleep are the scheduler's clock: Sleep waits d or until ctx
	// is done, and reports whether d passed.
	Now   func() time.Time
	Sleep func(ctx context.Context, d time.Duration) bool
	// Refusals is the error an owner's refusal of a command wraps, by its
	// code (domain.Command.Code): the scheduler's ErrNotFound, ErrConflict.
	Refusals map[string]error
	// Settle is the default wait for the result of a command its owner
	// claimed (Waits.Settle): the owner's own bound on recording it.
	Settle time.Duration
}

// Room is a member's shard state in its scheduler: the shards it polls,
// the fences it took them over with, the store's owners of the others.
// Safe for concurrent use.
type Room struct {
	opt Options
	// names is the shard of each configured source (domain.ShardOf with its
	// limits group), read by the flusher's commits (ShardOf).
	names atomic.Pointer[map[string]int]

	mu      sync.Mutex
	active  [domain.Shards]bool // shards whose sources are in the heap
	activeN int
	owners  map[int]string // the store's owner of each shard
	// taken is, per shard, the fence it was last taken over with: what
	// the commits of its rows are conditional on (Fence).
	taken map[int]int64
	waits Waits // of a command sent to an owner (zero: defaults)
}

// New returns the room of o.
func New(o Options) *Room {
	return &Room{opt: o, taken: map[int]int64{}}
}

// Member reports whether the scheduler is a member of a cluster (false
// for a nil room: a scheduler being set up, before its room is made).
func (r *Room) Member() bool { return r != nil && r.opt.Ownership != nil }

// MayStart reports whether a poll of a source of shard may start now:
// always on a single daemon, else as the member says.
func (r *Room) MayStart(shard int) bool {
	return r.opt.Ownership == nil || r.opt.Ownership.MayStart(shard)
}

// Polls reports whether the sources of shard are this scheduler's to poll
// (in its heap): always on a single daemon.
func (r *Room) Polls(shard int) bool {
	if r.opt.Ownership == nil {
		return true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.active[shard]
}

// Count is the number of shards polled (0 on a single daemon).
func (r *Room) Count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.activeN
}

// Ready is nil on a single daemon, else the member's readiness.
func (r *Room) Ready() error {
	if r.opt.Ownership == nil {
		return nil
	}
	return r.opt.Ownership.Ready()
}

// Claims asks the member, for each shard, whether it may start polls of
// it now (the input of Sync; the scheduler asks without its lock).
func (r *Room) Claims() (may [domain.Shards]bool) {
	for sh := range may {
		may[sh] = r.opt.Ownership.MayStart(sh)
	}
	return may
}

// Sync is a look at the member's shards (may, from Claims): it stops
// polling the shards the member may no longer start, returned in lost,
// and returns in gained the shards to take over, from their stored states
// (TakeOver), those it may start and whose writes drained(shard) says
// are committed. The scheduler calls it with its lock held, and drained
// with it.
func (r *Room) Sync(may [domain.Shards]bool, drained func(shard int) bool) (lost, gained []int) {
	var idle []int
	r.mu.Lock()
	for sh := range may {
		switch {
		case r.active[sh] && !may[sh]:
			r.loseLocked(sh)
			lost = append(lost, sh)
		case !r.active[sh] && may[sh]:
			idle = append(idle, sh)
		}
	}
	r.mu.Unlock()
	for _, sh := range idle {
		// Only once what this member wrote of the shard is committed (or
		// refused): the store then has the latest state, its own or that
		// of an owner in between.
		if drained(sh) {
			gained = append(gained, sh)
		}
	}
	return lost, gained
}

// Lose stops polling shard; it reports whether it was polled.
func (r *Room) Lose(shard int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.loseLocked(shard)
}

// loseLocked is Lose with mu held.
func (r *Room) loseLocked(shard int) bool {
	if !r.active[shard] {
		return false
	}
	r.active[shard] = false
	r.activeN--
	return true
}

// TakeOver starts polling the shards of gained (from Sync) that the member
// still holds and may start, and whose writes are still drained, with
// the fence the member holds each with now; it returns those it took.
// The scheduler calls it with its lock held, its sources' stored states
// read since Sync, and moves their entries into its heap.
func (r *Room) TakeOver(gained []int, drained func(shard int) bool) []int {
	fences := r.opt.Ownership.Fence(r.ShardOf).Fences
	var took []int
	for _, sh := range gained {
		if _, held := fences[sh]; !held || !r.opt.Ownership.MayStart(sh) || !drained(sh) {
			continue
		}
		took = append(took, sh)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	out := took[:0]
	for _, sh := range took {
		if r.active[sh] {
			continue
		}
		r.taken[sh] = fences[sh]
		r.active[sh] = true
		r.activeN++
		out = append(out, sh)
	}
	return out
}

// Fence is what a commit is conditional on: for each shard, the fence it
// was taken over with, so that rows written under one claim are refused
// once the shard has been another member's, even if this member holds it
// again by the time they are committed (a new claim comes with a new
// fence, and the shard is taken over again only once those rows are
// committed or refused). A shard never taken over has the member's
// current fence. Called by the flusher, outside the scheduler's lock.
func (r *Room) Fence() domain.Fence {
	f := r.opt.Ownership.Fence(r.ShardOf)
	r.mu.Lock()
	defer r.mu.Unlock()
	for sh, fe := range r.taken {
		f.Fences[sh] = fe
	}
	return f
}

// Commit commits b under Fence, within the statement bound; it returns the
// sources whose rows were refused (their shards are no longer the
// member's with that fence). While the member's claims are not renewed it
// commits nothing and returns an error: the flusher keeps the rows and
// retries (rule 8.7).
func (r *Room) Commit(ctx context.Context, b domain.Batch, keep int) ([]string, error) {
	if err := r.opt.Ownership.Renewed(); err != nil {
		// Which claims still hold is known again after the next round:
		// a commit now could be refused for a claim that lapsed while
		// the database was away and that comes back with its fence.
		return nil, fmt.Errorf("scheduler: commit held: %w", err)
	}
	ctx, cancel := r.Bound(ctx)
	defer cancel()
	return r.opt.Store.CommitFenced(ctx, r.Fence(), b, keep)
}

// Bound is ctx within the member's statement bound.
func (r *Room) Bound(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, r.opt.Ownership.StatementTimeout())
}

// Index sets the shard of each configured source (after the scheduler's
// entries changed).
func (r *Room) Index(names map[string]int) { r.names.Store(&names) }

// ShardOf is the shard of a configured source (ShardOf with its group;
// of its name alone when not configured).
func (r *Room) ShardOf(name string) int {
	if m := r.names.Load(); m != nil {
		if sh, ok := (*m)[name]; ok {
			return sh
		}
	}
	return domain.ShardOf(name, "")
}

// Owner is the owner of shard for the source object: nil on a single
// daemon; this member for the shards it polls, and for one it gave up
// while writing (a poll of the source runs, or its state waits for its
// commit: the store keeps the claim until then, and the store's owners,
// read every second, may still name the member before this one); else the
// store's, nil when none.
func (r *Room) Owner(shard int, writing bool) *string {
	if r.opt.Ownership == nil {
		return nil
	}
	r.mu.Lock()
	polled := r.active[shard]
	name, known := r.owners[shard]
	r.mu.Unlock()
	if polled || writing {
		name := r.opt.Ownership.Name()
		return &name
	}
	if known {
		return &name
	}
	return nil
}

// ReadOwners reads the owners of the shards from the store, within the
// statement bound; on an error the last ones read stay.
func (r *Room) ReadOwners(ctx context.Context) {
	ctx, cancel := r.Bound(ctx)
	defer cancel()
	owners, err := r.opt.Store.ShardOwners(ctx)
	if err != nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.owners = owners
}

// ReadStates reads the stored states of names, by name.
func (r *Room) ReadStates(ctx context.Context, names []string) (map[string]domain.SourceState, error) {
	states, err := r.opt.Store.LoadStatesOf(ctx, names)
	if err != nil {
		return nil, err
	}
	out := make(map[string]domain.SourceState, len(states))
	for _, st := range states {
		out[st.Name] = st
	}
	return out, nil
}
