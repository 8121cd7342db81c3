package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/deliver"
	"github.com/pacer-dev/pacer/domain"
	staged "github.com/pacer-dev/pacer/internal/lifecycle"
	"github.com/pacer-dev/pacer/scheduler/flush"
	"github.com/pacer-dev/pacer/scheduler/hosts"
	"github.com/pacer-dev/pacer/scheduler/policy"
	"github.com/pacer-dev/pacer/scheduler/queue"
	"github.com/pacer-dev/pacer/scheduler/rates"
	"github.com/pacer-dev/pacer/sources"
)

// New returns a scheduler for cfg. Call Start to load the store and begin.
func New(cfg *config.Config, opts Options) (*Scheduler, error) {
	if opts.Store == nil || opts.Registry == nil {
		return nil, errors.New("scheduler: Store and Registry are required")
	}
	d := &deps{
		store:     opts.Store,
		log:       opts.Logger,
		clock:     opts.Clock,
		maxConc:   opts.MaxConcurrency,
		descCap:   opts.DescriptorCap,
		cmdEvery:  opts.CommandInterval,
		loopHook:  opts.LoopHook,
		newPoller: opts.NewPoller,
	}
	if d.log == nil {
		d.log = slog.New(slog.DiscardHandler)
	}
	if d.clock == nil {
		d.clock = RealClock{}
	}
	if d.cmdEvery <= 0 {
		d.cmdEvery = 250 * time.Millisecond
	}
	t := &table{deps: d, cfg: cfg, redact: cfg.Redactor(), entries: map[string]*entry{}, hs: hostState{hosts: hosts.New()}}
	t.clk = clocks{clock: d.clock, origin: time.Now()} // origin carries the system's monotonic clock
	s := &Scheduler{deps: d, tab: t, life: &lifecycle{deps: d}}
	s.wk = &workers{table: t, life: s.life}
	s.cl = &membership{table: t, wk: s.wk}
	s.ctl = &control{table: t, wk: s.wk, cl: s.cl}
	s.brd = &board{table: t, cl: s.cl}
	t.q = queue.New[*entry](admission{s.wk})
	t.keep.Store(int64(cfg.History.Keep))
	t.applyDescCap(cfg)
	m, err := newMetrics(opts.Registry, s.brd.stateCounts)
	if err != nil {
		return nil, fmt.Errorf("scheduler: metrics: %w", err)
	}
	d.m = m
	if err := opts.Registry.Register(newHostsCollector(t.up().hostObjects)); err != nil {
		return nil, fmt.Errorf("scheduler: metrics: %w", err)
	}
	d.rates = rates.NewSampler(d.clock, func() rates.Reading { return rateReading(s) })
	d.transport = newTransport(t.limitOf(cfg))
	d.clients = sources.NewClients(sources.NewClient(d.transport, []string{cfg.Admin.Listen}))
	d.deliverer = deliver.New(d.transport)
	commit, err := setupCluster(d, opts.Ownership)
	if err != nil {
		return nil, err
	}
	t.shardDirty = opts.Ownership != nil
	d.flush = flush.New(flushOptions(commit, d.store, d.log, d.clock, m, opts, &t.keep, s.cl.rejected))
	return s, nil
}

// limitOf is the effective global cap for cfg: concurrency within the
// descriptor limit, and on a member of a cluster with cluster.concurrency
// set, at most its share of that by the shards it polls (rounded down, so
// that the members' caps add up to no more than cluster.concurrency; at
// least 1). mu held once started.
func (t *table) limitOf(cfg *config.Config) int {
	n := t.descLimit(cfg)
	if t.shards.Member() && cfg.Cluster.Concurrency > 0 {
		n = min(n, clusterShare(cfg.Cluster.Concurrency, t.shards.Count()))
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
func (t *table) descLimit(cfg *config.Config) int {
	n := max(cfg.Concurrency, 1)
	if t.maxConc > 0 && n > t.maxConc {
		n = t.maxConc
	}
	if t.cfgCap > 0 && n > t.cfgCap {
		n = t.cfgCap
	}
	return n
}

// applyDescCap computes the descriptor cap of cfg, about to be s.cfg (once
// per configuration: it looks at every source). mu held once started.
func (t *table) applyDescCap(cfg *config.Config) {
	if t.descCap != nil {
		t.cfgCap = max(t.descCap(cfg), 1)
	}
}

// Start loads every source's stored state and starts polling. It returns
// once every source is loaded (the daemon is then ready).
func (s *Scheduler) Start(ctx context.Context) error {
	states, err := s.deps.store.LoadStates(ctx)
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
	t, life := s.tab, s.life
	// An index into states, not a copy of each (296 bytes): at 100,000
	// sources this start-up map holds ~3 MB instead of ~35 MB, which
	// counts in the start-up's peak. As before, the last state of a name
	// wins.
	stored := make(map[string]int, len(states))
	for i := range states {
		stored[states[i].Name] = i
	}
	// The pollers are built before mu is taken (newPollers); t.cfg changes
	// only under reloading too.
	s.reloading.Lock()
	defer s.reloading.Unlock()
	built, berr := t.newPollers(t.cfg.Sources, t.redact)
	storedHosts := t.up().loadHosts()
	t.mu.Lock()
	defer t.unlock()
	// Check and set started first: the stages below belong to this start.
	if t.started {
		return errors.New("scheduler: already started")
	}
	t.started = true
	for _, g := range []*stage{&life.dispatching, &life.working, &life.polling, &life.flushing} {
		g.begin()
	}
	now, skew, _ := t.clk.readClocks()
	t.clk.skew = skew
	t.q.SetLimits(life.dispatching.ctx, t.cfg.Limits, life.dispatching.spawn)
	t.up().start(spawnCtx{ctx: life.dispatching.ctx, spawn: life.dispatching.spawn}, storedHosts, now)
	for i := range t.cfg.Sources {
		src := t.cfg.Sources[i]
		var st domain.SourceState
		j, found := stored[src.Name]
		if found {
			st = states[j]
		}
		err := berr
		if err == nil {
			err = t.addEntry(src, built[i], st, found, now)
		}
		if err != nil {
			// Nothing runs but the group admitters: they end once mu is
			// released, and Shutdown has nothing left to do.
			t.stopped = true
			life.dispatching.cancel()
			return err
		}
	}
	s.wk.resizeWorkers(t.limitOf(t.cfg))
	s.spawnStages()
	return nil
}

// spawnStages starts the goroutines of a started scheduler's stages: the
// flusher and the host keeper, the loop, the command reader, the rates'
// sampler and, on a member, the ownership watcher. mu held.
func (s *Scheduler) spawnStages() {
	t, life, d := s.tab, s.life, s.deps
	life.flushing.spawn(life.flushing.ctx, d.flush.Run)
	life.flushing.spawn(life.flushing.ctx, t.up().keepHosts)
	life.dispatching.spawn(life.dispatching.ctx, s.wk.loop)
	life.dispatching.spawn(life.dispatching.ctx, s.ctl.commands)
	life.dispatching.spawn(life.dispatching.ctx, d.rates.Run)
	if d.shards.Member() {
		life.dispatching.spawn(life.dispatching.ctx, s.cl.watchOwnership)
	}
	life.loopBeat.Store(int64(t.clk.sinceOrigin()))
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
	t, life, d := s.tab, s.life, s.deps
	t.mu.Lock()
	if !t.started || t.stopped {
		t.unlock()
		return nil
	}
	t.stopped = true
	t.unlock()

	timeout = max(timeout, 0)
	grace := shutdownGrace(timeout)
	now := d.clock.Now()
	deadline := now.Add(max(timeout, grace))
	cut, polled := deadline.Add(-grace), deadline.Add(-grace/2)
	if !life.dispatching.stopBy(d.clock, policy.MaxOf(cut, now.Add(grace/4))) {
		d.log.Warn("shutdown: the scheduling loop or the command reader did not stop in time; leaving them")
	}
	s.wk.drainPolls(timeout, cut, polled)
	t.mu.Lock()
	t.sweepFlaps(d.clock.Now(), true) // report what is coalesced
	t.unlock()
	var err error
	if !life.flushing.stopBy(d.clock, deadline.Add(-grace/4)) {
		// The flusher is stuck in a commit: a final flush would run
		// beside it (flush is not reentrant).
		err = errors.New("the store did not answer in time")
	} else {
		err = life.finalFlush(policy.MaxOf(deadline, d.clock.Now().Add(grace/4)))
	}
	d.transport.close()
	if err != nil {
		return fmt.Errorf("scheduler: final flush: %w", err)
	}
	return nil
}

// finalFlush commits what is pending, retrying until the clock reaches
// until. The commit runs in a goroutine of the flushing stage, and
// finalFlush returns at until even if it has not returned: a SQLite call
// waits out its busy timeout (5 s by default) whatever its context says.
func (l *lifecycle) finalFlush(until time.Time) error {
	done := make(chan struct{})
	var err error
	l.flushing.spawn(l.flushing.ctx, func(context.Context) {
		defer close(done)
		err = l.flush.FlushFinal(max(until.Sub(l.clock.Now()), 0))
	})
	if !awaitBy(l.clock, done, until) {
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
func (w *workers) drainPolls(timeout time.Duration, cut, polled time.Time) {
	w.life.working.cancel()
	done := make(chan struct{})
	go func() {
		w.life.working.wg.Wait()
		close(done)
	}()
	if !awaitBy(w.clock, done, cut) {
		w.mu.Lock()
		list, more := nameList(w.claimedNames())
		w.unlock()
		// Named: a poll cut off counts as nothing (rule 3.8), also one
		// its upstream had answered.
		w.log.Warn("shutdown timeout: cancelling polls in flight", "timeout", timeout, "cut_off", list, "cut_off_more", more)
		w.life.polling.cancel()
		if !awaitBy(w.clock, done, polled) {
			w.mu.Lock()
			names := w.claimedNames()
			n := w.abandonPolls(w.clock.Now())
			w.unlock()
			list, more := nameList(names)
			w.log.Error("shutdown: polls in flight did not end after their cancellation; recorded as interrupted without waiting for them",
				"polls", n, "abandoned", list, "abandoned_more", more)
			return
		}
	}
	w.life.polling.cancel()
}

// awaitBy waits for done until the clock reaches t; it reports whether
// done was closed.
func awaitBy(c Clock, done <-chan struct{}, t time.Time) bool {
	return staged.AwaitBy(c, done, t)
}

// lifecycle is the scheduler's goroutines, by stage (Start begins them,
// Shutdown stops them in this order, each by cancelling its context and
// then waiting for its goroutines), and the loop's heartbeat.
type lifecycle struct {
	*deps
	dispatching stage        // the loop, the group admitters, the command reader
	working     stage        // the workers, which take jobs from the ready queue
	polling     stage        // no goroutines: its context cuts off the polls in flight
	flushing    stage        // the flusher
	loopBeat    atomic.Int64 // Monotonic reading of the loop's last pass (watchdog)
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
	return staged.WaitBy(c, &g.wg, t)
}

// Healthy returns nil when the scheduling loop made a pass within maxAge
// (it makes one at least every second) and the store accepts a write; it
// is what a service watchdog should check.
func (s *Scheduler) Healthy(ctx context.Context, maxAge time.Duration) error {
	if age := s.tab.clk.sinceOrigin() - time.Duration(s.life.loopBeat.Load()); age > maxAge {
		return fmt.Errorf("scheduler loop stalled for %v", age.Round(time.Millisecond))
	}
	if err := s.deps.store.Writable(ctx); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	return nil
}

// Summary counts the sources, the polls in flight and the sources in error,
// for a one-line service status.
func (s *Scheduler) Summary() (sources, inflight, errored int) {
	counts, _ := s.brd.stateCounts(false)
	for _, n := range counts {
		sources += n
	}
	return sources, int(s.wk.inflightN.Load()), counts[policy.StateError]
}
