package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/deliver"
	"github.com/pacer-dev/pacer/domain"
	"github.com/pacer-dev/pacer/internal/lifecycle"
	"github.com/pacer-dev/pacer/scheduler/flush"
	"github.com/pacer-dev/pacer/scheduler/policy"
	"github.com/pacer-dev/pacer/scheduler/queue"
	"github.com/pacer-dev/pacer/sources"
)

// New returns a scheduler for cfg. Call Start to load the store and begin.
func New(cfg *config.Config, opts Options) (*Scheduler, error) {
	if opts.Store == nil || opts.Registry == nil {
		return nil, errors.New("scheduler: Store and Registry are required")
	}
	s := &Scheduler{
		store:     opts.Store,
		log:       opts.Logger,
		clock:     opts.Clock,
		maxConc:   opts.MaxConcurrency,
		descCap:   opts.DescriptorCap,
		cmdEvery:  opts.CommandInterval,
		loopHook:  opts.LoopHook,
		newPoller: opts.NewPoller,
		cfg:       cfg,
		redact:    cfg.Redactor(),
		entries:   map[string]*entry{},
	}
	s.q = queue.New[*entry](admission{s})
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.clock == nil {
		s.clock = RealClock{}
	}
	s.origin = time.Now() // carries the system's monotonic clock
	if s.cmdEvery <= 0 {
		s.cmdEvery = 250 * time.Millisecond
	}
	s.keep.Store(int64(cfg.History.Keep))
	s.applyDescCap(cfg)
	m, err := newMetrics(opts.Registry, s.stateCounts)
	if err != nil {
		return nil, fmt.Errorf("scheduler: metrics: %w", err)
	}
	s.m = m
	s.transport = newTransport(s.limitOf(cfg))
	s.clients = sources.NewClients(sources.NewClient(s.transport, []string{cfg.Admin.Listen}))
	s.deliverer = deliver.New(s.transport)
	commit, err := s.setupCluster(opts.Ownership)
	if err != nil {
		return nil, err
	}
	s.flush = flush.New(flushOptions(commit, s.store, s.log, s.clock, m, opts, &s.keep, s.rejected))
	return s, nil
}

// limitOf is the effective global cap for cfg: concurrency within the
// descriptor limit, and on a member of a cluster with cluster.concurrency
// set, at most its share of that by the shards it polls (rounded down, so
// that the members' caps add up to no more than cluster.concurrency; at
// least 1). mu held once started.
func (s *Scheduler) limitOf(cfg *config.Config) int {
	n := s.descLimit(cfg)
	if s.shards.Member() && cfg.Cluster.Concurrency > 0 {
		n = min(n, clusterShare(cfg.Cluster.Concurrency, s.shards.Count()))
	}
	return n
}

// clusterShare is a member's share of the cluster-wide cap cc when it
// polls shards of the domain.Shards: cc × shards / Shards rounded down, so
// that the shares of members holding disjoint shards add up to at most cc,
// but at least 1, so that a member that owns shards can poll them (with
// cc below the number of members the shares then add up to more).
func clusterShare(cc, shards int) int {
	return max(cc*shards/domain.Shards, 1)
}

// descLimit is concurrency within the descriptor limit (cfgCap is that of
// cfg: see applyDescCap).
func (s *Scheduler) descLimit(cfg *config.Config) int {
	n := max(cfg.Concurrency, 1)
	if s.maxConc > 0 && n > s.maxConc {
		n = s.maxConc
	}
	if s.cfgCap > 0 && n > s.cfgCap {
		n = s.cfgCap
	}
	return n
}

// applyDescCap computes the descriptor cap of cfg, about to be s.cfg (once
// per configuration: it looks at every source). mu held once started.
func (s *Scheduler) applyDescCap(cfg *config.Config) {
	if s.descCap != nil {
		s.cfgCap = max(s.descCap(cfg), 1)
	}
}

// Start loads every source's stored state and starts polling. It returns
// once every source is loaded (the daemon is then ready).
func (s *Scheduler) Start(ctx context.Context) error {
	states, err := s.store.LoadStates(ctx)
	if err != nil {
		return fmt.Errorf("scheduler: load states: %w", err)
	}
	return s.StartFrom(states)
}

// StartFrom is Start with the stored states already read (by
// store.LoadStates on the same store, under its lock): the daemon reads
// them while its config is being loaded. A second call returns an error and
// changes nothing.
func (s *Scheduler) StartFrom(states []domain.SourceState) error {
	// An index into states, not a copy of each (296 bytes): at 100,000
	// sources this start-up map holds ~3 MB instead of ~35 MB, which
	// counts in the start-up's peak. As before, the last state of a name
	// wins.
	stored := make(map[string]int, len(states))
	for i := range states {
		stored[states[i].Name] = i
	}
	// The pollers are built before mu is taken (newPollers); s.cfg changes
	// only under reloading too.
	s.reloading.Lock()
	defer s.reloading.Unlock()
	built, berr := s.newPollers(s.cfg.Sources, s.redact)
	s.mu.Lock()
	defer s.unlock()
	// Check and set started first: the stages below belong to this start.
	if s.started {
		return errors.New("scheduler: already started")
	}
	s.started = true
	for _, g := range []*stage{&s.dispatching, &s.working, &s.polling, &s.flushing} {
		g.begin()
	}
	now, skew, _ := s.readClocks()
	s.skew = skew
	s.q.SetLimits(s.dispatching.ctx, s.cfg.Limits, s.dispatching.spawn)
	for i := range s.cfg.Sources {
		src := s.cfg.Sources[i]
		var st domain.SourceState
		j, found := stored[src.Name]
		if found {
			st = states[j]
		}
		err := berr
		if err == nil {
			err = s.addEntry(src, built[i], st, found, now)
		}
		if err != nil {
			// Nothing runs but the group admitters: they end once mu is
			// released, and Shutdown has nothing left to do.
			s.stopped = true
			s.dispatching.cancel()
			return err
		}
	}
	s.resizeWorkers(s.limitOf(s.cfg))
	s.flushing.spawn(s.flushing.ctx, s.flush.Run)
	s.dispatching.spawn(s.dispatching.ctx, s.loop)
	s.dispatching.spawn(s.dispatching.ctx, s.commands)
	if s.shards.Member() {
		s.dispatching.spawn(s.dispatching.ctx, s.watchOwnership)
	}
	s.loopBeat.Store(int64(s.sinceOrigin()))
	return nil
}

// Shutdown stops the scheduler (rule 3.10) and returns within timeout
// (at least 100 ms; plus a few milliseconds of work), whatever its polls
// and its store do.
// Each stage is stopped as prometheus stops a scrape loop, by cancelling
// its context and then waiting for its goroutines, in this order:
//
//  1. stop dispatching: nothing more is dispatched or triggered (stopped),
//     and the loop, the group admitters and the command reader end;
//  2. drain or cut the polls: the workers take no new job; the polls in
//     flight get up to timeout minus a grace (shutdownGrace: a tenth of
//     it, 100 ms to 1 s), then their context is cancelled, and they have
//     half the grace to end (they are recorded as interrupted);
//  3. flush: the flusher ends, and every pending state is committed in
//     what is left of timeout;
//  4. close the HTTP transport's idle connections.
//
// A stage that does not end in its share of the time (a poll that ignores
// its cancellation, a store call stuck in its busy timeout) is left behind
// and logged: the process is about to exit, and a poll cut off without a
// record counts as nothing, as after a crash. The error reports a final
// flush that failed or did not end in time (the states it held are lost;
// the store keeps the previous ones). It does nothing before Start or
// after a first Shutdown.
func (s *Scheduler) Shutdown(timeout time.Duration) error {
	s.mu.Lock()
	if !s.started || s.stopped {
		s.unlock()
		return nil
	}
	s.stopped = true
	s.unlock()

	timeout = max(timeout, 0)
	grace := shutdownGrace(timeout)
	now := s.clock.Now()
	deadline := now.Add(max(timeout, grace))
	cut, polled := deadline.Add(-grace), deadline.Add(-grace/2)
	if !s.dispatching.stopBy(s.clock, policy.MaxOf(cut, now.Add(grace/4))) {
		s.log.Warn("shutdown: the scheduling loop or the command reader did not stop in time; leaving them")
	}
	s.drainPolls(timeout, cut, polled)
	s.mu.Lock()
	s.sweepFlaps(s.clock.Now(), true) // report what is coalesced
	s.unlock()
	var err error
	if !s.flushing.stopBy(s.clock, deadline.Add(-grace/4)) {
		// The flusher is stuck in a commit: a final flush would run
		// beside it (flush is not reentrant).
		err = errors.New("the store did not answer in time")
	} else {
		err = s.finalFlush(policy.MaxOf(deadline, s.clock.Now().Add(grace/4)))
	}
	s.transport.close()
	if err != nil {
		return fmt.Errorf("scheduler: final flush: %w", err)
	}
	return nil
}

// finalFlush commits what is pending, retrying until the clock reaches
// until. The commit runs in a goroutine of the flushing stage, and
// finalFlush returns at until even if it has not returned: a SQLite call
// waits out its busy timeout (5 s by default) whatever its context says.
func (s *Scheduler) finalFlush(until time.Time) error {
	done := make(chan struct{})
	var err error
	s.flushing.spawn(s.flushing.ctx, func(context.Context) {
		defer close(done)
		err = s.flush.FlushFinal(max(until.Sub(s.clock.Now()), 0))
	})
	if !awaitBy(s.clock, done, until) {
		return errors.New("the store did not answer in time")
	}
	return err
}

// shutdownGrace is the part of a shutdown timeout kept to cut off the polls
// in flight and commit their records: a tenth, at least 100 ms (a timeout
// of 0 cancels at once and still flushes), at most 1 s.
func shutdownGrace(timeout time.Duration) time.Duration {
	return min(max(timeout/10, 100*time.Millisecond), time.Second)
}

// drainPolls stops the workers and waits for the polls in flight until cut,
// then cancels those left and waits for them until polled; those still
// running then are recorded as interrupted without them (abandonPolls),
// and logged.
func (s *Scheduler) drainPolls(timeout time.Duration, cut, polled time.Time) {
	s.working.cancel()
	done := make(chan struct{})
	go func() {
		s.working.wg.Wait()
		close(done)
	}()
	if !awaitBy(s.clock, done, cut) {
		s.log.Warn("shutdown timeout: cancelling polls in flight", "timeout", timeout)
		s.polling.cancel()
		if !awaitBy(s.clock, done, polled) {
			s.mu.Lock()
			n := s.abandonPolls(s.clock.Now())
			s.unlock()
			s.log.Error("shutdown: polls in flight did not end after their cancellation; recorded as interrupted without waiting for them", "polls", n)
			return
		}
	}
	s.polling.cancel()
}

// awaitBy waits for done until the clock reaches t; it reports whether
// done was closed.
func awaitBy(c Clock, done <-chan struct{}, t time.Time) bool {
	return lifecycle.AwaitBy(c, done, t)
}

// stage is a set of goroutines that stop together: stopBy cancels their
// context, then waits for them.
type stage struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// begin gives the stage its context. Called once, by StartFrom.
func (g *stage) begin() {
	g.ctx, g.cancel = context.WithCancel(context.Background())
}

// spawn runs f(ctx) in a goroutine of the stage; ctx is the stage's
// context or a child of it.
func (g *stage) spawn(ctx context.Context, f func(context.Context)) {
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		f(ctx)
	}()
}

// stopBy cancels the stage's context and waits for its goroutines until c
// reaches t; it reports whether every goroutine ended.
func (g *stage) stopBy(c Clock, t time.Time) bool {
	g.cancel()
	return lifecycle.WaitBy(c, &g.wg, t)
}

// Healthy returns nil when the scheduling loop made a pass within maxAge
// (it makes one at least every second) and the store accepts a write; it
// is what a service watchdog should check.
func (s *Scheduler) Healthy(ctx context.Context, maxAge time.Duration) error {
	if age := s.sinceOrigin() - time.Duration(s.loopBeat.Load()); age > maxAge {
		return fmt.Errorf("scheduler loop stalled for %v", age.Round(time.Millisecond))
	}
	if err := s.store.Writable(ctx); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	return nil
}

// Summary counts the sources, the polls in flight and the sources in error,
// for a one-line service status.
func (s *Scheduler) Summary() (sources, inflight, errored int) {
	counts, _ := s.stateCounts(false)
	for _, n := range counts {
		sources += n
	}
	return sources, int(s.inflightN.Load()), counts[policy.StateError]
}
