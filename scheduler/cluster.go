package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"time"

	"github.com/pacer-dev/pacer/breaker"
	"github.com/pacer-dev/pacer/scheduler/flush"
	"github.com/pacer-dev/pacer/scheduler/policy"
	"github.com/pacer-dev/pacer/store"
)

// A scheduler that is a member of a cluster (contract section 8) polls only
// the sources of the shards its member holds and may start. Each entry has
// its shard (store.ShardOf with its limits group); the entries of the
// shards it may not start are dormant: out of the heap, their polls in
// flight left to finish. A shard gained is taken over from the store: its
// sources' states are read again (LoadStatesOf) before they enter the
// heap, so that the new owner starts from what the previous one committed.
// Its commits are fenced (CommitFenced); a source whose rows are
// rejected has lost its shard.

// Ownership says which shards the scheduler may start polls of: a member
// of a cluster (*cluster.Member). The scheduler of a single daemon has
// none (Options.Ownership nil), and polls everything.
type Ownership interface {
	// MayStart reports whether a poll of a source of shard may start now.
	MayStart(shard int) bool
	// Fence is what the commits are conditional on.
	Fence(shardOf func(source string) int) store.Fence
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

// ClusterStore is what a member's scheduler needs of its store besides
// Store: fenced commits, the states of the shards it takes over, the
// owners of the others, and the command queue to reach them.
type ClusterStore interface {
	CommitFenced(ctx context.Context, f store.Fence, b store.Batch, keep int) ([]string, error)
	LoadStatesOf(ctx context.Context, names []string) ([]store.SourceState, error)
	ShardOwners(ctx context.Context) (map[int]string, error)
	EnqueueCommand(ctx context.Context, c *store.Command) error
	GetCommand(ctx context.Context, id uint64) (store.Command, error)
	ExpireCommand(ctx context.Context, id uint64, reason string) (bool, error)
}

var _ ClusterStore = (*store.Store)(nil)

// ownershipEvery is how often the scheduler looks at its member's shards.
// MayStart turns false a quarter lease (>= 500 ms) before a claim ends, and
// the dispatch loop asks it again before every start.
const ownershipEvery = 100 * time.Millisecond

// ownersEvery is how often the owners of the shards are read for the
// source objects.
const ownersEvery = time.Second

// setupCluster wires the scheduler to own (nil: a single daemon), and
// returns the flusher's fenced committer (nil on a single daemon).
func (s *Scheduler) setupCluster(own Ownership) (flush.Committer, error) {
	if own == nil {
		return nil, nil
	}
	cst, ok := s.store.(ClusterStore)
	if !ok {
		return nil, errors.New("scheduler: a cluster member needs a store with fenced commits (PostgreSQL)")
	}
	s.own, s.cst = own, cst
	s.shardDirty = true
	return flush.CommitFunc(func(ctx context.Context, b store.Batch, keep int) ([]string, error) {
		if err := own.Renewed(); err != nil {
			// Which claims still hold is known again after the next round:
			// a commit now could be refused for a claim that lapsed while
			// the database was away and that comes back with its fence.
			// The flusher keeps the rows and retries (rule 8.7).
			return nil, fmt.Errorf("scheduler: commit held: %w", err)
		}
		ctx, cancel := context.WithTimeout(ctx, own.StatementTimeout())
		defer cancel()
		return cst.CommitFenced(ctx, s.commitFence(), b, keep)
	}), nil
}

// commitFence is what a commit is conditional on: for each shard, the
// fence it was taken over with, so that rows written under one claim are
// refused once the shard has been another member's, even if this member
// holds it again by the time they are committed (a new claim comes with a
// new fence, and the shard is taken over again only once those rows are
// committed or refused). A shard never taken over has the member's
// current fence. Called by the flusher outside mu.
func (s *Scheduler) commitFence() store.Fence {
	f := s.own.Fence(s.shardOfName)
	if taken := s.takenFences.Load(); taken != nil {
		for sh, fe := range *taken {
			f.Fences[sh] = fe
		}
	}
	return f
}

// shardOfName is the shard of a configured source (ShardOf with its
// group), read by the flusher outside mu.
func (s *Scheduler) shardOfName(name string) int {
	if m := s.shardNames.Load(); m != nil {
		if sh, ok := (*m)[name]; ok {
			return sh
		}
	}
	return store.ShardOf(name, "")
}

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
	s.shardNames.Store(&names)
}

// dormant reports whether e's shard is not this member's to poll. mu held.
func (s *Scheduler) dormant(e *entry) bool {
	return s.own != nil && !s.active[e.shard]
}

// loseShard makes the entries of sh dormant. mu held.
func (s *Scheduler) loseShard(sh int) {
	if !s.active[sh] {
		return
	}
	s.active[sh] = false
	s.activeN--
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
			if owners, err := s.shardOwners(ctx); err == nil {
				s.mu.Lock()
				s.owners = owners
				s.unlock()
			}
		}
		if !sleep(ctx, s.clock, ownershipEvery) {
			return
		}
	}
}

// shardOwners reads the owners of the shards, within the statement bound.
func (s *Scheduler) shardOwners(ctx context.Context) (map[int]string, error) {
	ctx, cancel := context.WithTimeout(ctx, s.own.StatementTimeout())
	defer cancel()
	return s.cst.ShardOwners(ctx)
}

// syncShards makes dormant the shards the member may no longer start and
// takes over those it gained, from their stored states.
func (s *Scheduler) syncShards(ctx context.Context) {
	var may [store.Shards]bool
	for sh := range may {
		may[sh] = s.own.MayStart(sh)
	}
	s.mu.Lock()
	if s.stopped {
		s.unlock()
		return
	}
	s.indexShards()
	var gained []int
	var names []string
	lost, lostN := false, 0
	for sh := range may {
		switch {
		case s.active[sh] && !may[sh]:
			s.loseShard(sh)
			lost = true
			lostN++
		case !s.active[sh] && may[sh] && s.drainedLocked(sh):
			// Only once what this member wrote of the shard is committed
			// (or refused): the store then has the latest state, its own
			// or that of an owner in between.
			gained = append(gained, sh)
			for _, e := range s.byShard[sh] {
				names = append(names, e.name)
			}
		}
	}
	if lost {
		s.resizeWorkers(s.limitOf(s.cfg))
	}
	s.unlock()
	if lostN > 0 {
		s.log.Info("cluster: shards given up", "shards", lostN, "polled_shards", s.activeCount())
	}
	if len(gained) == 0 {
		return
	}
	lctx, cancel := context.WithTimeout(ctx, s.own.StatementTimeout())
	states, err := s.cst.LoadStatesOf(lctx, names)
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			s.m.storeErrors.Inc()
			s.log.Warn("cluster: cannot read the states of the shards gained; retrying", "shards", len(gained), "err", err)
		}
		return
	}
	stored := make(map[string]store.SourceState, len(states))
	for _, st := range states {
		stored[st.Name] = st
	}
	s.mu.Lock()
	defer s.unlock()
	s.takeOver(gained, stored)
}

// takeOver activates the shards gained that the member may still start,
// with their sources' stored states. mu held.
func (s *Scheduler) takeOver(gained []int, stored map[string]store.SourceState) {
	if s.stopped {
		return
	}
	now := s.clock.Now()
	s.indexShards()
	n := 0
	fences := s.own.Fence(s.shardOfName).Fences
	taken := map[int]int64{}
	if old := s.takenFences.Load(); old != nil {
		maps.Copy(taken, *old)
	}
	defer func() {
		if n > 0 {
			s.takenFences.Store(&taken)
			s.logLocked(slog.LevelInfo, "cluster: shards taken over", "shards", n, "polled_shards", s.activeN)
		}
	}()
	for _, sh := range gained {
		fe, held := fences[sh]
		if s.active[sh] || !held || !s.own.MayStart(sh) || !s.drainedLocked(sh) {
			continue
		}
		taken[sh] = fe
		s.active[sh] = true
		s.activeN++
		n++
		for _, e := range s.byShard[sh] {
			if st, ok := stored[e.name]; ok && !e.slot.Busy() {
				s.adopt(e, st, now)
				catchUp(e, now)
			}
			s.reschedule(e, now)
		}
	}
	s.resizeWorkers(s.limitOf(s.cfg))
}

// adopt gives e the state its previous owner committed: backoff, breaker,
// error and pause (rule 8.4). A state written under another sources config
// starts clean, as after a reload (rule 3.7). mu held.
func (s *Scheduler) adopt(e *entry, st store.SourceState, now time.Time) {
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
	defer s.unlock()
	n := 0
	for _, name := range names {
		if e := s.entries[name]; e != nil && s.active[e.shard] {
			s.loseShard(e.shard)
			n++
		}
	}
	if n > 0 {
		s.logLocked(slog.LevelWarn, "cluster: commits refused for shards no longer held; their sources wait for the store's owner", "sources", len(names), "shards", n)
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
		if s.own == nil || s.active[sh] {
			owned += len(s.byShard[sh])
		}
	}
	s.unlock()
	return owned, int(s.inflightN.Load())
}
