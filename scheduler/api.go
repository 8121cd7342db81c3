package scheduler

import (
	"context"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/domain"
	"github.com/pacer-dev/pacer/scheduler/hosts"
	"github.com/pacer-dev/pacer/scheduler/policy"
	"github.com/pacer-dev/pacer/scheduler/view"
)

// The scheduler's API: the methods the admin API, the dashboard, the CLI
// and the daemon call, each handed to the part that does it.

// Sources returns every configured source, in configuration order.
func (s *Scheduler) Sources() []view.SourceObject {
	return s.ctl.sources()
}

// Source returns one source, or ErrNotFound.
func (s *Scheduler) Source(name string) (view.SourceObject, error) {
	return s.ctl.source(name)
}

// Trigger polls a source now, past its backoff and an open breaker, under
// the global and group limits (rule 3.9). It returns ErrConflict for a
// paused source or one in error, and once shutdown has begun. A source
// already polling is left alone.
func (s *Scheduler) Trigger(name string) error {
	return s.ctl.trigger(name)
}

// History returns up to n poll records of a source, newest first,
// including those not yet committed.
func (s *Scheduler) History(ctx context.Context, name string, n int) ([]domain.PollRecord, error) {
	return s.ctl.history(ctx, name, n)
}

// Ready returns nil when the configuration is loaded and the store accepts
// writes, else the reason.
func (s *Scheduler) Ready(ctx context.Context) error {
	return s.ctl.ready(ctx)
}

// Rows returns every configured source as a Row, in configuration order.
// Each row is read under the scheduler's lock, consistent on its own; the
// lock is released between chunks of viewChunk sources, so two rows may
// be read a moment apart.
func (s *Scheduler) Rows() []view.Row {
	return s.brd.rows()
}

// ExplainSources returns the named sources (unknown names are left out),
// in the order given, or every source in configuration order when names is
// nil (ExplainAll), each with the explanation of its wait.
func (s *Scheduler) ExplainSources(names []string) []view.Explained {
	return s.brd.explainSources(names)
}

// ExplainAll calls fn with every source, in configuration order, by chunks
// of viewChunk, each read under the scheduler's lock and handed to fn
// outside it (the slice is reused: fn must not keep it). It returns fn's
// first error, which ends the pass. GET /api/sources streams them: at
// 100,000 sources the whole list held about 126 MiB while it was built
// and written.
func (s *Scheduler) ExplainAll(fn func([]view.Explained) error) error {
	return s.brd.explainAll(fn)
}

// ExplainSource returns one source with its explanation, or ErrNotFound.
func (s *Scheduler) ExplainSource(name string) (view.Explained, error) {
	return s.brd.explainSource(name)
}

// Histories returns History(name, n) of each of names that is configured
// (the others are left out), the stored records read over one connection
// of the store (store.Histories): the dashboard's table shows the last
// polls of each of its rows.
func (s *Scheduler) Histories(ctx context.Context, names []string, n int) (map[string][]domain.PollRecord, error) {
	return s.brd.histories(ctx, names, n)
}

// SourceConfig returns a copy of a source's effective settings and the
// redactor of the configuration in force (to show them with the secrets
// masked), or ErrNotFound.
func (s *Scheduler) SourceConfig(name string) (config.Source, *config.Redactor, error) {
	return s.brd.sourceConfig(name)
}

// Drained reports whether no poll of a source of shard is in flight or
// queued and every state of its sources is committed: only then does the
// member give the shard back (cluster.Options.Drained).
func (s *Scheduler) Drained(shard int) bool {
	return s.cl.drained(shard)
}

// ClusterStats are what the member shows the others: the sources it owns
// now and its polls in flight (cluster.Options.Stats).
func (s *Scheduler) ClusterStats() (owned, inflight int) {
	return s.cl.stats()
}

// Reset clears a source's failures, breaker and error state; it is next
// polled at its next tick. A poll in flight finishes first and the reset
// is applied over its outcome. Like Pause and Resume, it returns once the
// change is committed (or the store is failing), so that status read from
// the store right after shows it.
func (s *Scheduler) Reset(name string) (view.SourceObject, error) {
	return s.ctl.mutate(name, policy.ActionReset, "")
}

// Pause stops polling a source until Resume; it survives restarts.
func (s *Scheduler) Pause(name, reason string) (view.SourceObject, error) {
	return s.ctl.mutate(name, policy.ActionPause, reason)
}

// Resume undoes Pause. The source is next polled at its next tick (or when
// its breaker lets a probe through, if later).
func (s *Scheduler) Resume(name string) (view.SourceObject, error) {
	return s.ctl.mutate(name, policy.ActionResume, "")
}

// Load returns the polls in flight and the effective global cap.
func (s *Scheduler) Load() (inflight, limit int) {
	s.tab.mu.Lock()
	limit = s.tab.limitOf(s.tab.cfg)
	s.tab.unlock()
	return int(s.wk.inflightN.Load()), limit
}

// Hosts is every host group's object (contract 13.7), sorted by host; none
// without a hosts section.
func (s *Scheduler) Hosts() []hosts.Object { return s.tab.up().hostObjects() }

// Host is one host group's object, or ErrNotFound.
func (s *Scheduler) Host(name string) (hosts.Object, error) {
	return s.tab.up().hostObject(name, false)
}

// ResetHost closes a host's breaker, ends its throttling and forgets its
// learned limits (contract 13.7), and returns its object, or ErrNotFound.
func (s *Scheduler) ResetHost(name string) (hosts.Object, error) {
	return s.tab.up().hostObject(name, true)
}
