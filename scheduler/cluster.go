package scheduler

import (
	"context"
	"errors"
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

// setupCluster makes the scheduler's cluster room, the member own's (nil:
// a single daemon, which polls every shard), and returns the flusher's
// fenced committer: the room (nil on a single daemon).
func (s *Scheduler) setupCluster(own Ownership) (flush.Committer, error) {
	opt := shards.Options{
		Now:      s.clock.Now,
		Sleep:    func(ctx context.Context, d time.Duration) bool { return sleep(ctx, s.clock, d) },
		Refusals: map[string]error{"not_found": ErrNotFound, "conflict": ErrConflict},
		Settle:   resultWait,
	}
	if own != nil {
		cst, ok := s.store.(ClusterStore)
		if !ok {
			return nil, errors.New("scheduler: a cluster member needs a store with fenced commits (PostgreSQL)")
		}
		opt.Ownership, opt.Store = own, cst
	}
	s.shards = shards.New(opt)
	if own == nil {
		return nil, nil
	}
	s.shardDirty = true
	return s.shards, nil
}

// The room is the flusher's committer on a member of a cluster.
var _ flush.Committer = (*shards.Room)(nil)

// indexShards rebuilds the shard index when entries changed. mu held.
func (s *Scheduler) indexShards() {
	if !s.shardDirty {
		return
	}
	s.shardDirty = false
	clear(s.byShard[:])
	names := make(map[string]int, len(s.entries))
	for _, e := range s.entries {
		s.byShard[e.shard] = append(s.byShard[e.shard], e)
		names[e.name] = e.shard
	}
	s.shards.Index(names)
}

// dormant reports whether e's shard is not this member's to poll. mu held.
func (s *Scheduler) dormant(e *entry) bool {
	return !s.shards.Polls(e.shard)
}

// loseShard makes the entries of sh dormant; it reports whether sh was
// polled. mu held.
func (s *Scheduler) loseShard(sh int) bool {
	if !s.shards.Lose(sh) {
		return false
	}
	s.unheapShard(sh)
	return true
}

// unheapShard takes the entries of sh, which the room no longer polls,
// out of the heap. mu held.
func (s *Scheduler) unheapShard(sh int) {
	s.indexShards()
	for _, e := range s.byShard[sh] {
		s.q.Due.Remove(&e.slot)
	}
}

// watchOwnership follows the member's shards until ctx is done.
func (s *Scheduler) watchOwnership(ctx context.Context) {
	var ownersAt time.Time
	for {
		s.syncShards(ctx)
		if now := s.clock.Now(); now.Sub(ownersAt) >= ownersEvery {
			ownersAt = now
			s.shards.ReadOwners(ctx)
		}
		if !sleep(ctx, s.clock, ownershipEvery) {
			return
		}
	}
}

// syncShards makes dormant the shards the member may no longer start and
// takes over those it gained, from their stored states.
func (s *Scheduler) syncShards(ctx context.Context) {
	may := s.shards.Claims()
	s.mu.Lock()
	if s.stopped {
		s.unlock()
		return
	}
	s.indexShards()
	lost, gained := s.shards.Sync(may, s.drainedLocked)
	for _, sh := range lost {
		s.unheapShard(sh)
	}
	var names []string
	for _, sh := range gained {
		for _, e := range s.byShard[sh] {
			names = append(names, e.name)
		}
	}
	if len(lost) > 0 {
		s.resizeWorkers(s.limitOf(s.cfg))
	}
	s.unlock()
	if len(lost) > 0 {
		s.log.Info("cluster: shards given up", "shards", len(lost), "polled_shards", s.shards.Count())
	}
	if len(gained) == 0 {
		return
	}
	lctx, cancel := s.shards.Bound(ctx)
	stored, err := s.shards.ReadStates(lctx, names)
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			s.m.storeErrors.Inc()
			s.log.Warn("cluster: cannot read the states of the shards gained; retrying", "shards", len(gained), "err", err)
		}
		return
	}
	s.mu.Lock()
	n := s.takeOver(gained, stored)
	s.unlock()
	if n > 0 {
		s.log.Info("cluster: shards taken over", "shards", n, "polled_shards", s.shards.Count())
	}
}

// takeOver activates the shards gained that the member may still start,
// with their sources' stored states; it returns the number taken over.
// mu held.
func (s *Scheduler) takeOver(gained []int, stored map[string]domain.SourceState) int {
	if s.stopped {
		return 0
	}
	now := s.clock.Now()
	s.indexShards()
	took := s.shards.TakeOver(gained, s.drainedLocked)
	for _, sh := range took {
		for _, e := range s.byShard[sh] {
			if st, ok := stored[e.name]; ok && !e.slot.Busy() {
				s.adopt(e, st, now)
				catchUp(e, now)
			}
			s.reschedule(e, now)
		}
	}
	s.resizeWorkers(s.limitOf(s.cfg))
	return len(took)
}

// adopt gives e the state its previous owner committed: backoff, breaker,
// error and pause (rule 8.4). A state written under another sources config
// starts clean, as after a reload (rule 3.7). mu held.
func (s *Scheduler) adopt(e *entry, st domain.SourceState, now time.Time) {
	st.Name = e.name
	e.st, e.brk, e.localErrs, e.resetPending = st, nil, 0, false
	if b := policy.SnapshotOf(&st); st.ConsecutiveFailures > 0 || b.State != breaker.Closed {
		e.brk = newBreaker(e.src, st)
	}
	switch {
	case st.Fingerprint != "" && st.Fingerprint != e.src.Fingerprint:
		s.configChanged(e, now)
	case st.Fingerprint == "":
		e.st.Fingerprint = e.src.Fingerprint
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
// shard is taken over again from the store if the member still may.
func (s *Scheduler) rejected(names []string) {
	s.mu.Lock()
	n := 0
	for _, name := range names {
		if e := s.entries[name]; e != nil && s.loseShard(e.shard) {
			n++
		}
	}
	s.unlock()
	if n > 0 {
		s.log.Warn("cluster: commits refused for shards no longer held; their sources wait for the store's owner", "sources", len(names), "shards", n)
	}
}

// Drained reports whether no poll of a source of shard is in flight or
// queued and every state of its sources is committed: only then does the
// member give the shard back (cluster.Options.Drained).
func (s *Scheduler) Drained(shard int) bool {
	s.mu.Lock()
	defer s.unlock()
	return s.drainedLocked(shard)
}

// drainedLocked is Drained with mu held.
func (s *Scheduler) drainedLocked(shard int) bool {
	s.indexShards()
	for _, e := range s.byShard[shard] {
		if e.slot.Busy() || !s.flush.Clean(e.sl) {
			return false
		}
	}
	return true
}

// ClusterStats are what the member shows the others: the sources it owns
// now and its polls in flight (cluster.Options.Stats).
func (s *Scheduler) ClusterStats() (owned, inflight int) {
	s.mu.Lock()
	s.indexShards()
	for sh := range s.byShard {
		if s.shards.Polls(sh) {
			owned += len(s.byShard[sh])
		}
	}
	s.unlock()
	return owned, int(s.inflightN.Load())
}
