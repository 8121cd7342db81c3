package scheduler

import (
	"context"
	"errors"
	"github.com/pacer-dev/pacer/internal/clock"
	"time"

	"github.com/pacer-dev/pacer/breaker"
	"github.com/pacer-dev/pacer/domain"
	"github.com/pacer-dev/pacer/scheduler/flush"
	"github.com/pacer-dev/pacer/scheduler/policy"
	"github.com/pacer-dev/pacer/scheduler/shards"
)

// A scheduler that is a member of a cluster (contract section 8) polls only
// the sources of the shards its member holds and may start. Each entry has
// its shard (domain.ShardOf with its limits group); the entries of the
// shards it may not start are dormant: out of the heap, their polls in
// flight left to finish. A shard gained is taken over from the store: its
// sources' states are read again (LoadStatesOf) before they enter the
// heap, so that the new owner starts from what the previous one committed.
// Its commits are fenced (CommitFenced); a source whose rows are
// rejected has lost its shard.

// Ownership is the member of a cluster the scheduler polls for
// (Options.Ownership); see shards.Ownership.
type Ownership = shards.Ownership

// ClusterStore is what a member's scheduler needs of its store besides
// Store; see shards.ClusterStore.
type ClusterStore = shards.ClusterStore

// ownershipEvery is how often the scheduler looks at its member's shards.
// MayStart turns false a quarter lease (>= 500 ms) before a claim ends, and
// the dispatch loop asks it again before every start.
const ownershipEvery = 100 * time.Millisecond

// ownersEvery is how often the owners of the shards are read for the
// source objects.
const ownersEvery = time.Second

// membership is a member's side of the table: it follows the member's shards
// (take-over, loss), and reaches the sources it does not own through the
// store (cluster_remote.go). On a single daemon it does nothing.
type membership struct {
	*table
	wk *workers
}

// setupCluster makes the cluster room, d.shards, the member own's (nil: a
// single daemon, which polls every shard), and returns the flusher's
// fenced committer: the room (nil on a single daemon).
func setupCluster(d *deps, own Ownership) (flush.Committer, error) {
	opt := shards.Options{
		Now:      d.clock.Now,
		Sleep:    func(ctx context.Context, dur time.Duration) bool { return clock.Sleep(ctx, d.clock, dur) },
		Refusals: map[string]error{"not_found": ErrNotFound, "conflict": ErrConflict},
		Settle:   resultWait,
	}
	if own != nil {
		cst, ok := d.store.(ClusterStore)
		if !ok {
			return nil, errors.New("scheduler: a cluster member needs a store with fenced commits (PostgreSQL)")
		}
		opt.Ownership, opt.Store = own, cst
	}
	d.shards = shards.New(opt)
	if own == nil {
		return nil, nil
	}
	return d.shards, nil
}

// The room is the flusher's committer on a member of a cluster.
var _ flush.Committer = (*shards.Room)(nil)

// watchOwnership follows the member's shards until ctx is done.
func (g *membership) watchOwnership(ctx context.Context) {
	var ownersAt time.Time
	for {
		g.syncShards(ctx)
		if now := g.clock.Now(); now.Sub(ownersAt) >= ownersEvery {
			ownersAt = now
			g.shards.ReadOwners(ctx)
		}
		if !clock.Sleep(ctx, g.clock, ownershipEvery) {
			return
		}
	}
}

// syncShards makes dormant the shards the member may no longer start and
// takes over those it gained, from their stored states.
func (g *membership) syncShards(ctx context.Context) {
	may := g.shards.Claims()
	g.mu.Lock()
	if g.stopped {
		g.unlock()
		return
	}
	g.indexShards()
	lost, gained := g.shards.Sync(may, g.drainedLocked)
	for _, sh := range lost {
		g.unheapShard(sh)
	}
	var names []string
	for _, sh := range gained {
		for _, e := range g.byShard[sh] {
			names = append(names, e.name)
		}
	}
	if len(lost) > 0 {
		g.wk.resizeWorkers(g.limitOf(g.cfg))
		g.up().shareHosts()
	}
	g.unlock()
	if len(lost) > 0 {
		g.log.Info("cluster: shards given up", "shards", len(lost), "polled_shards", g.shards.Count())
	}
	if len(gained) == 0 {
		return
	}
	lctx, cancel := g.shards.Bound(ctx)
	stored, err := g.shards.ReadStates(lctx, names)
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			g.m.storeErrors.Inc()
			g.log.Warn("cluster: cannot read the states of the shards gained; retrying", "shards", len(gained), "err", err)
		}
		return
	}
	g.mu.Lock()
	n := g.takeOver(gained, stored)
	g.unlock()
	if n > 0 {
		g.log.Info("cluster: shards taken over", "shards", n, "polled_shards", g.shards.Count())
	}
}

// takeOver activates the shards gained that the member may still start,
// with their sources' stored states; it returns the number taken over.
// mu held.
func (g *membership) takeOver(gained []int, stored map[string]domain.SourceState) int {
	if g.stopped {
		return 0
	}
	now := g.clock.Now()
	g.indexShards()
	took := g.shards.TakeOver(gained, g.drainedLocked)
	for _, sh := range took {
		for _, e := range g.byShard[sh] {
			if !e.slot.Busy() {
				if st, ok := stored[e.name]; ok {
					g.adopt(e, st, now)
				}
				if e.st.NextRunAt == nil && neverPolled(&e.st) {
					missedTick(e, now)
				}
				catchUp(e, now)
			}
			g.reschedule(e, now)
		}
	}
	g.wk.resizeWorkers(g.limitOf(g.cfg))
	g.up().shareHosts()
	return len(took)
}

// adopt gives e the state its previous owner committed: backoff, breaker,
// error and pause (rule 8.4). A state written under another sources config
// starts clean, as after a reload (rule 3.7). mu held.
func (g *membership) adopt(e *entry, st domain.SourceState, now time.Time) {
	st.Name = e.name
	e.st, e.brk, e.localErrs, e.resetPending = st, nil, 0, false
	if b := policy.SnapshotOf(&st); st.ConsecutiveFailures > 0 || b.State != breaker.Closed {
		e.brk = newBreaker(e.src, st)
	}
	switch {
	case st.Fingerprint != "" && st.Fingerprint != e.src.Fingerprint:
		g.configChanged(e, now)
	case st.Fingerprint == "":
		e.st.Fingerprint = e.src.Fingerprint
	}
}

// neverPolled reports a state without a poll, a pause or an error: one a
// member starting commits for its sources before it owns them (no due
// time), or none at all.
func neverPolled(st *domain.SourceState) bool {
	return st.LastRunAt == nil && !st.Paused && st.ErrorReason == ""
}

// missedTick gives e, taken over with no due time (never polled, and its
// stored state, if any, without one: its previous owner died before its
// first tick, or this member never owned it), the last tick it owes: the latest since this
// member configured it, if any. Without one its first tick after now would
// be next, and a tick due while its shard had no live owner would be
// skipped (found at 100,000 sources on "@every 5m" by BenchmarkClusterScale:
// 366 ticks missed at a kill -9 in the cluster's first period). mu held.
func missedTick(e *entry, now time.Time) {
	if last, ok := e.timing.LastTick(time.Unix(0, e.added), now); ok {
		e.st.NextRunAt = policy.UTCPtr(policy.CeilMicro(last))
	}
}

// catchUpWindow bounds how close the next tick of "@every" must be for a
// missed one to give way to it (catchUp): at most half the period, and at
// most a second, so that a source handed over at a member's exit is still
// polled within 2 s of it (rule 8.3).
const catchUpWindow = time.Second

// catchUp handles a tick missed while e's shard changed owner (its stored
// due time passed before this member took it over). It is polled at once,
// as late as the take-over made it, unless the schedule's next tick is
// near: then that tick takes its place, instead of two polls in a row
// within a fraction of the period (the double run users see at a
// fail-over). Moving a due time later keeps every "not before" rule
// (backoff, Retry-After, an open breaker). mu held.
func catchUp(e *entry, now time.Time) {
	due := e.st.NextRunAt
	if due == nil || !due.Before(now) || e.timing.Every <= 0 {
		return
	}
	if next := e.timing.Next(now); next.Sub(now) < min(e.timing.Every/2, catchUpWindow) {
		e.st.NextRunAt = policy.UTCPtr(policy.CeilMicro(next))
	}
}

// rejected makes dormant the shards of the sources whose rows a fenced
// commit left out: the member no longer holds them with that fence. The
// shard is taken over again from the store if the member still may. The
// polls whose records were dropped with the rows are named in the log
// (droppedList), also when their shards were given up already.
func (g *membership) rejected(refused []flush.Refused) {
	g.mu.Lock()
	n := 0
	for _, r := range refused {
		if e := g.entries[r.Name]; e != nil && g.loseShard(e.shard) {
			n++
		}
	}
	g.unlock()
	list, more, polls := droppedList(refused)
	if n > 0 || polls > 0 {
		g.log.Warn("cluster: commits refused for shards no longer held; their sources wait for the store's owner",
			"sources", len(refused), "shards", n, "polls_dropped", polls, "dropped", list, "dropped_more", more)
	}
}

// drained is Scheduler.Drained.
func (g *membership) drained(shard int) bool {
	g.mu.Lock()
	defer g.unlock()
	return g.drainedLocked(shard)
}

// drainedLocked is Drained with mu held.
func (g *membership) drainedLocked(shard int) bool {
	g.indexShards()
	for _, e := range g.byShard[shard] {
		if e.slot.Busy() || !g.flush.Clean(e.sl) {
			return false
		}
	}
	return true
}

// stats is Scheduler.ClusterStats.
func (g *membership) stats() (owned, inflight int) {
	g.mu.Lock()
	g.indexShards()
	for sh := range g.byShard {
		if g.shards.Polls(sh) {
			owned += len(g.byShard[sh])
		}
	}
	g.unlock()
	return owned, int(g.wk.inflightN.Load())
}
