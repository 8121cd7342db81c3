// Package scheduler decides when each source is polled and runs the polls
// under the global semaphore and the group limits (contract section 3).
//
// Idle sources wait in a min-heap ordered by the time they are next due:
// max(next schedule tick, backoff, breaker cooldown, Retry-After). One loop
// pops whatever is due and hands it to its group's queue (if it has a
// group) or straight to the global queue, which a fixed pool of
// `concurrency` workers drains. A source is in at most one queue at a time,
// so nothing grows with time, only with the number of sources.
package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"

	"github.com/pacer-dev/pacer/breaker"
	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/sources"
	"github.com/pacer-dev/pacer/store"
)

// Errors of the control methods, matched with errors.Is.
var (
	ErrNotFound = errors.New("unknown source")
	ErrConflict = errors.New("conflict")
)

// Options are a scheduler's collaborators. Store and Registry are required.
type Options struct {
	Store    *store.Store
	Logger   *slog.Logger          // nil: discard
	Clock    Clock                 // nil: RealClock
	Registry prometheus.Registerer // where the metrics go
	// MaxConcurrency, when > 0, caps the configured concurrency (the
	// descriptor-limit clamp).
	MaxConcurrency int
	// CommandInterval is how often the store's command queue is read
	// (default 250ms); the CLI's commands take effect within it.
	CommandInterval time.Duration
	// LoopHook, if set, is called at the start of every pass of the
	// scheduling loop. Tests use it to stall the loop (the watchdog test).
	LoopHook func()
	// NewPoller, if set, builds the pollers instead of sources.New. The
	// scheduler benchmarks use it to measure scheduling alone (a no-op
	// poll); the daemon never sets it.
	NewPoller func(src *config.Source) (sources.Poller, error)
}

// Scheduler runs the polls of one daemon.
type Scheduler struct {
	store     *store.Store
	log       *slog.Logger
	clock     Clock
	m         *metrics
	flush     *flusher
	client    *http.Client
	transport *transport
	maxConc   int
	cmdEvery  time.Duration
	loopHook  func()
	newPoller func(src *config.Source) (sources.Poller, error)

	mu      sync.Mutex
	cfg     *config.Config
	redact  *config.Redactor
	entries map[string]*entry
	due     dueHeap
	groups  map[string]*group
	workers []context.CancelFunc // one per worker goroutine
	ready   *fifo
	wake    chan struct{}
	started bool
	stopped bool

	keep      atomic.Int64
	loopBeat  atomic.Int64 // UnixNano of the loop's last pass (watchdog)
	inflightN atomic.Int64 // polls in flight
	runCtx    context.Context
	stopRun   context.CancelFunc // stops loop, groups, commands, flusher
	workCtx   context.Context
	stopWork  context.CancelFunc // stops workers taking new jobs
	pollCtx   context.Context
	stopPolls context.CancelFunc // cuts off polls in flight
	wg        sync.WaitGroup     // loop, groups, commands
	workWG    sync.WaitGroup     // workers
	flushWG   sync.WaitGroup
}

// entry is one source's runtime: its settings, poller, breaker and state.
// All fields are guarded by Scheduler.mu, except that a worker reads
// src, poller, brk and timing of the generation it was dispatched with.
type entry struct {
	name   string
	src    *config.Source
	timing timing
	poller sources.Poller
	brk    *breaker.Breaker
	group  *group
	gen    uint64

	st    store.SourceState
	idx   int       // position in the due heap, -1 when not in it
	dueAt time.Time // heap key

	sl           *slot // its place in the flusher
	busy         bool  // queued, waiting for permits, or polling
	removed      bool  // dropped from the config while busy
	resetPending bool  // reset while polling: applied when the poll ends
	savedSeq     uint64
}

// group is a named limit: a concurrency cap and a start rate shared by its
// member sources (rule 3.2). A job waiting for its group holds no global
// permit.
type group struct {
	name   string
	limit  config.Limit
	sem    chan struct{} // nil: no concurrency cap
	lim    *rate.Limiter // nil: no rate
	q      *fifo
	cancel context.CancelFunc
}

const (
	// minWake is the shortest sleep of the scheduling loop (it bounds the
	// wake-ups to 500 a second, at the cost of up to 2 ms of start lag).
	minWake = 2 * time.Millisecond
	// commitRecheck is how soon a due source whose last state is not yet
	// committed is looked at again.
	commitRecheck = 5 * time.Millisecond
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
		cmdEvery:  opts.CommandInterval,
		loopHook:  opts.LoopHook,
		newPoller: opts.NewPoller,
		cfg:       cfg,
		redact:    cfg.Redactor(),
		entries:   map[string]*entry{},
		groups:    map[string]*group{},
		ready:     newFIFO(),
		wake:      make(chan struct{}, 1),
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.clock == nil {
		s.clock = RealClock{}
	}
	if s.cmdEvery <= 0 {
		s.cmdEvery = 250 * time.Millisecond
	}
	s.keep.Store(int64(cfg.History.Keep))
	m, err := newMetrics(opts.Registry, s)
	if err != nil {
		return nil, fmt.Errorf("scheduler: metrics: %w", err)
	}
	s.m = m
	s.transport = newTransport(s.limitOf(cfg))
	s.client = sources.NewClient(s.transport, []string{cfg.Admin.Listen})
	s.flush = newFlusher(s.store, s.log, s.clock, m, func() int { return int(s.keep.Load()) })
	return s, nil
}

// limitOf is the effective global cap for cfg.
func (s *Scheduler) limitOf(cfg *config.Config) int {
	n := max(cfg.Concurrency, 1)
	if s.maxConc > 0 && n > s.maxConc {
		n = s.maxConc
	}
	return n
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
// them while its config is being loaded.
func (s *Scheduler) StartFrom(states []store.SourceState) error {
	stored := make(map[string]store.SourceState, len(states))
	for _, st := range states {
		stored[st.Name] = st
	}
	s.runCtx, s.stopRun = context.WithCancel(context.Background())
	s.workCtx, s.stopWork = context.WithCancel(context.Background())
	s.pollCtx, s.stopPolls = context.WithCancel(context.Background())

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return errors.New("scheduler: already started")
	}
	s.started = true
	now := s.clock.Now()
	for name, l := range s.cfg.Limits {
		s.groups[name] = s.startGroup(name, l)
	}
	for i := range s.cfg.Sources {
		src := &s.cfg.Sources[i]
		st, found := stored[src.Name]
		if err := s.addEntry(src, st, found, now); err != nil {
			return err
		}
	}
	s.resizeWorkers(s.limitOf(s.cfg))
	s.flushWG.Add(1)
	go func() {
		defer s.flushWG.Done()
		s.flush.run(s.runCtx)
	}()
	s.wg.Add(2)
	go func() {
		defer s.wg.Done()
		s.loop(s.runCtx)
	}()
	go func() {
		defer s.wg.Done()
		s.commands(s.runCtx)
	}()
	s.loopBeat.Store(now.UnixNano())
	return nil
}

// Shutdown stops starting polls, waits up to timeout for those in flight,
// cancels the rest (they are recorded as interrupted) and commits every
// pending state (rule 3.10).
func (s *Scheduler) Shutdown(timeout time.Duration) error {
	s.mu.Lock()
	if !s.started || s.stopped {
		s.mu.Unlock()
		return nil
	}
	s.stopped = true
	s.mu.Unlock()

	s.stopWork()
	done := make(chan struct{})
	go func() {
		s.workWG.Wait()
		close(done)
	}()
	t := s.clock.NewTimer(timeout)
	select {
	case <-done:
		t.Stop()
	case <-t.C():
		s.log.Warn("shutdown timeout: cancelling polls in flight", "timeout", timeout)
		s.stopPolls()
		<-done
	}
	s.stopPolls()
	s.stopRun()
	s.wg.Wait()
	s.flushWG.Wait()
	err := s.flush.flushFinal(10 * time.Second)
	s.transport.close()
	if err != nil {
		return fmt.Errorf("scheduler: final flush: %w", err)
	}
	return nil
}

// addEntry builds the runtime of src from its stored state and schedules it.
// Called with mu held.
func (s *Scheduler) addEntry(src *config.Source, st store.SourceState, found bool, now time.Time) error {
	e := &entry{name: src.Name, idx: -1, sl: s.flush.slot(src.Name)}
	changed := found && st.Fingerprint != "" && st.Fingerprint != src.Fingerprint
	if !found {
		st = store.SourceState{Name: src.Name}
	}
	if err := s.configure(e, src, st, now); err != nil {
		return err
	}
	if changed {
		s.configChanged(e, now)
	} else if e.st.Fingerprint != src.Fingerprint {
		e.st.Fingerprint = src.Fingerprint
	}
	s.entries[src.Name] = e
	s.reschedule(e, now)
	if !found {
		// Persist the new source with its first tick, so that status read
		// from the store shows when it will run. No poll has happened, so
		// its first poll need not wait for this commit (rule 3.8).
		s.flush.submit(e.sl, e.st, nil)
	}
	return nil
}

// configure (re)builds e's poller, breaker and timing for src, with state st.
func (s *Scheduler) configure(e *entry, src *config.Source, st store.SourceState, now time.Time) error {
	var poller sources.Poller
	var err error
	if s.newPoller != nil {
		poller, err = s.newPoller(src)
	} else {
		poller, err = sources.New(src, s.client, s.redact.Redact)
	}
	if err != nil {
		return fmt.Errorf("scheduler: source %s: %w", src.Name, err)
	}
	e.src, e.poller, e.brk = src, poller, nil
	if st.ConsecutiveFailures > 0 || (st.BreakerState != "" && st.BreakerState != breaker.Closed) {
		if e.brk, err = newBreaker(src, st); err != nil {
			return err
		}
	}
	e.timing = newTiming(src.Name, src.Schedule)
	e.group = s.groups[src.Limit]
	e.gen++
	e.st = st
	e.st.Name = src.Name
	return nil
}

// newBreaker returns src's breaker restored to the state in st. A source
// whose breaker is closed with no failure counted has none (entry.brk is
// nil): at 100,000 sources the healthy majority costs no breaker at all.
func newBreaker(src *config.Source, st store.SourceState) (*breaker.Breaker, error) {
	var until time.Time
	if st.BreakerUntil != nil {
		until = *st.BreakerUntil
	}
	brk, err := breaker.New(src.Name, breaker.Policy{Failures: src.Breaker.Failures, Cooldown: src.Breaker.Cooldown},
		breaker.Snapshot{State: st.BreakerState, Until: until}, st.ConsecutiveFailures)
	if err != nil {
		return nil, fmt.Errorf("scheduler: source %s: %w", src.Name, err)
	}
	return brk, nil
}

// configChanged clears the error state, failures and breaker of a source
// whose effective configuration changed (rule 3.7) and persists that.
func (s *Scheduler) configChanged(e *entry, now time.Time) {
	prev := StateOf(&e.st, now)
	e.st = resetState(e.st, e.timing, now)
	e.st.Fingerprint = e.src.Fingerprint
	e.brk = nil
	s.logChange(e, prev, now, "configuration changed")
	s.save(e, nil)
}

// reschedule puts an idle, schedulable entry in the heap at its next run
// time (now if that is past, or if it has none yet: its first tick).
func (s *Scheduler) reschedule(e *entry, now time.Time) {
	if e.busy || e.removed || e.st.Paused || e.st.ErrorReason != "" {
		s.due.remove(e)
		return
	}
	if e.st.NextRunAt == nil {
		e.st.NextRunAt = ptr(e.timing.next(now))
	}
	at := *e.st.NextRunAt
	s.due.schedule(e, at)
	if e.idx == 0 {
		s.poke()
	}
}

func (s *Scheduler) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// loop dispatches due sources until ctx is done.
func (s *Scheduler) loop(ctx context.Context) {
	t := s.clock.NewTimer(time.Second)
	defer t.Stop()
	for {
		if s.loopHook != nil {
			s.loopHook()
		}
		s.mu.Lock()
		now := s.clock.Now()
		nowNs := now.UnixNano()
		// Once shutdown has begun nothing more is dispatched: the workers
		// take no new job, and a dispatch would log a probe that never runs.
		for !s.stopped {
			e, at, ok := s.due.top()
			if !ok || at > nowNs {
				break
			}
			if s.flush.pending(e.sl, e.savedSeq) {
				// Rule 3.8: its last state is not committed yet. Look again
				// shortly rather than hold a permit while waiting.
				s.due.schedule(e, now.Add(commitRecheck))
				continue
			}
			s.due.remove(e)
			s.dispatch(e, now, false)
		}
		// Wake at least once a second so that the watchdog sees progress.
		wait := time.Second
		if _, at, ok := s.due.top(); ok && !s.stopped {
			// Sources due within minWake are dispatched together (cron
			// schedules and backoff put due times anywhere, off the
			// grid of "@every" phases). Once shutdown has begun nothing
			// is dispatched, so the due ones do not shorten the wait.
			wait = min(wait, max(time.Duration(at-nowNs), minWake))
		}
		s.mu.Unlock()
		s.loopBeat.Store(now.UnixNano())
		t.Reset(wait) // since Go 1.23 a Reset timer never delivers a stale tick
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
		case <-t.C():
		}
	}
}

// dispatch hands e to its group's queue or the global queue. mu held.
func (s *Scheduler) dispatch(e *entry, now time.Time, trigger bool) {
	e.busy = true
	due := e.dueAt
	if trigger || due.IsZero() {
		due = now
	}
	j := &job{e: e, gen: e.gen, due: due, queuedAt: now, trigger: trigger, group: e.group}
	if e.st.BreakerState == breaker.Open && breakerOf(&e.st, now) == breaker.HalfOpen {
		s.logChange(e, StateOpen, now, "cooldown over; probing")
	}
	if j.group != nil {
		j.group.q.push(j)
		return
	}
	j.readyAt = now
	s.ready.push(j)
}

// startGroup starts the goroutine that admits a group's jobs. mu held.
func (s *Scheduler) startGroup(name string, l config.Limit) *group {
	g := &group{name: name, limit: l, q: newFIFO()}
	if l.Concurrency > 0 {
		g.sem = make(chan struct{}, l.Concurrency)
	}
	if l.Rate > 0 {
		g.lim = rate.NewLimiter(rate.Limit(l.Rate), max(l.Burst, 1))
	}
	ctx, cancel := context.WithCancel(s.runCtx)
	g.cancel = cancel
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.admit(ctx, g)
	}()
	return g
}

// admit moves a group's jobs to the global queue as its concurrency cap and
// token bucket allow. When the group is retired (reload) its waiting jobs
// go back to their sources' schedules.
func (s *Scheduler) admit(ctx context.Context, g *group) {
	defer s.requeueAll(g.q)
	for {
		j := g.q.pop(ctx)
		if j == nil {
			return
		}
		// Rule 3.8 before the token: a poll that took its token then
		// waited for the commit would start later than its rate allows.
		s.mu.Lock()
		seq := j.e.savedSeq
		s.mu.Unlock()
		s.flush.waitAt(ctx, j.e.sl, seq)
		if g.sem != nil {
			select {
			case g.sem <- struct{}{}:
			case <-ctx.Done():
				s.requeue(j)
				return
			}
		}
		if g.lim != nil {
			now := s.clock.Now()
			if d := g.lim.ReserveN(now, 1).DelayFrom(now); d > 0 {
				t := s.clock.NewTimer(d)
				select {
				case <-t.C():
				case <-ctx.Done():
					t.Stop()
					s.releaseGroup(j)
					s.requeue(j)
					return
				}
			}
		}
		j.readyAt = s.clock.Now()
		s.ready.push(j)
	}
}

func (s *Scheduler) releaseGroup(j *job) {
	if j.group != nil && j.group.sem != nil {
		<-j.group.sem
	}
}

// requeue returns a job that never started to its source's schedule.
func (s *Scheduler) requeue(j *job) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := j.e
	e.busy = false
	if s.stopped {
		return
	}
	if e.removed {
		s.dropEntry(e)
		return
	}
	if j.trigger && j.gen == e.gen && !e.st.Paused && e.st.ErrorReason == "" {
		// A trigger survives a change of group: it goes through the new one.
		s.due.remove(e)
		s.dispatch(e, s.clock.Now(), true)
		return
	}
	s.reschedule(e, s.clock.Now())
}

func (s *Scheduler) requeueAll(q *fifo) {
	for j := q.tryPop(); j != nil; j = q.tryPop() {
		s.requeue(j)
	}
}

// resizeWorkers runs exactly n workers. mu held.
func (s *Scheduler) resizeWorkers(n int) {
	for len(s.workers) > n {
		last := len(s.workers) - 1
		s.workers[last]()
		s.workers = s.workers[:last]
	}
	for len(s.workers) < n {
		ctx, cancel := context.WithCancel(s.workCtx)
		s.workers = append(s.workers, cancel)
		s.workWG.Add(1)
		go func() {
			defer s.workWG.Done()
			s.work(ctx)
		}()
	}
	s.m.limit.Set(float64(n))
	s.transport.resize(n)
}

// work is one worker: a global permit. It takes jobs until ctx is done.
func (s *Scheduler) work(ctx context.Context) {
	// The worker's polls derive from its own child of pollCtx, so that a
	// poll's timeout context registers with this worker's context instead
	// of with pollCtx, which every worker shares (a contended lock and map
	// insertion per poll); stopping the polls still reaches every poll.
	pollCtx, cancel := context.WithCancel(s.pollCtx)
	defer cancel()
	for ctx.Err() == nil {
		j := s.ready.pop(ctx)
		if j == nil {
			return
		}
		if ctx.Err() != nil {
			s.releaseGroup(j)
			s.requeue(j)
			return
		}
		s.run(pollCtx, j)
	}
}

// run performs one poll and applies its outcome.
func (s *Scheduler) run(pollCtx context.Context, j *job) {
	e := j.e
	start := s.clock.Now()
	s.m.semaphoreWait.Observe(start.Sub(j.readyAt).Seconds())

	s.mu.Lock()
	if e.gen != j.gen || e.removed || e.st.Paused || e.st.ErrorReason != "" || e.group != j.group {
		// It changed while it waited for permits: it goes back to its
		// schedule (through its new group, if that changed).
		s.mu.Unlock()
		s.releaseGroup(j)
		s.requeue(j)
		return
	}
	src, poller, brk, seq := e.src, e.poller, e.brk, e.savedSeq
	s.mu.Unlock()

	// Rule 3.8: the previous poll's state is committed before this one.
	s.flush.waitAt(pollCtx, e.sl, seq)
	if j.trigger && brk != nil {
		brk.ForceProbe()
	}
	start = s.clock.Now()
	if !j.trigger {
		s.m.lag.Observe(max(start.Sub(j.due), 0).Seconds())
	}
	s.m.inflight.Inc()
	s.inflightN.Add(1)
	ctx, cancel := context.WithTimeout(pollCtx, src.Timeout)
	var res sources.Result
	call := func() error {
		res = poller.Poll(ctx)
		switch {
		case res.Err == nil:
			return nil
		case res.Throttled, errors.Is(res.Err, context.Canceled):
			return breaker.Exclude(res.Err)
		}
		return res.Err
	}
	var err error
	if brk != nil {
		err = brk.Do(call)
	} else if err = call(); err != nil && res.Err == err {
		// The first failure of a healthy source: from now on it has a
		// breaker, which counts this failure (and may open at once).
		if brk, err = newBreaker(src, store.SourceState{}); err == nil {
			err = brk.Do(func() error { return res.Err })
		} else {
			s.log.Error("breaker", "source", e.name, "err", err)
		}
	}
	cancel()
	end := s.clock.Now()
	s.m.inflight.Dec()
	s.inflightN.Add(-1)
	s.releaseGroup(j)
	if !errors.Is(err, breaker.ErrOpen) {
		s.m.duration.Observe(end.Sub(start).Seconds())
	}
	s.finish(j, src, brk, res, err, start, end)
}

// finish applies a poll's outcome to its source's state, persists it and
// schedules the next poll.
func (s *Scheduler) finish(j *job, src *config.Source, brk *breaker.Breaker, res sources.Result, err error, start, end time.Time) {
	e := j.e
	// The store keeps times to the microsecond: so do the state and record
	// in memory, or a record read before its commit would show a later
	// start than the same record read after it.
	dur := end.Sub(start)
	start, end = start.Truncate(time.Microsecond), end.Truncate(time.Microsecond)
	o := outcome{start: start, end: end, brk: breaker.Snapshot{State: breaker.Closed}, jitter: rand.Float64(), retryAfter: res.RetryAfter}
	if brk != nil {
		o.brk = brk.Snapshot()
		o.brk.Until = o.brk.Until.Truncate(time.Microsecond)
	}
	switch {
	case errors.Is(err, breaker.ErrOpen):
		s.m.poll(countRejected).Inc()
		s.mu.Lock()
		defer s.mu.Unlock()
		e.busy = false
		s.countSkipped(j, end)
		if j.gen == e.gen && !e.removed {
			next := e.timing.next(end)
			if o.brk.State == breaker.Open {
				next = later(next, o.brk.Until.Add(time.Millisecond))
				e.st.BreakerState, e.st.BreakerUntil = breaker.Open, ptr(o.brk.Until)
			}
			next = ceilMicro(next)
			e.st.NextRunAt = &next
			s.reschedule(e, end)
		}
		return
	case res.Err != nil && errors.Is(res.Err, context.Canceled) && s.pollCtx.Err() != nil:
		o.kind = store.OutcomeInterrupted
	case res.Throttled:
		o.kind = store.OutcomeThrottled
	case res.Err != nil:
		o.kind = store.OutcomeFailure
	default:
		o.kind = store.OutcomeSuccess
	}
	if res.Err != nil {
		o.err = s.redact.Redact(res.Err.Error())
	}
	s.m.poll(o.kind).Inc()
	rec := store.PollRecord{
		Source:     e.name,
		StartedAt:  start.UTC(),
		DurationMs: dur.Milliseconds(),
		Outcome:    o.kind,
		Error:      o.err,
		Bytes:      res.Bytes,
	}
	if res.StatusCode > 0 {
		rec.StatusCode = &res.StatusCode
	}
	// src is the configuration the poll ran with: e.src may change under
	// mu (reload) and is not read here.
	if src.Type == "exec" && res.ExitCode >= 0 {
		rec.ExitCode = &res.ExitCode
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	e.busy = false
	s.countSkipped(j, end)
	if j.gen != e.gen {
		// The configuration changed during the poll: the new settings
		// start from a clean state; only the record is kept.
		s.save(e, &rec)
		s.reschedule(e, end)
		return
	}
	prev := StateOf(&e.st, start)
	e.st = applyOutcome(e.st, e.src, e.timing, o)
	e.brk = brk
	if o.brk.State == breaker.Closed && e.st.ConsecutiveFailures == 0 {
		e.brk = nil // healthy again: a fresh breaker is equivalent
	}
	reason := o.err
	if e.resetPending {
		e.resetPending = false
		e.st = resetState(e.st, e.timing, end)
		e.brk = nil
		reason = "reset"
	}
	e.st.UpdatedAt = end.UTC()
	s.logChange(e, prev, end, reason)
	s.save(e, &rec)
	if e.removed {
		s.dropEntry(e)
		return
	}
	s.reschedule(e, end)
}

// countSkipped counts the ticks of j's source that passed between its
// dispatch and end, while it was busy. mu held.
func (s *Scheduler) countSkipped(j *job, end time.Time) {
	if skipped := j.e.timing.ticksBetween(j.queuedAt, end, 1000); skipped > 0 {
		s.m.poll(countSkipped).Add(float64(skipped))
	}
}

// dropEntry forgets a source removed from the configuration once its last
// poll is over. mu held.
func (s *Scheduler) dropEntry(e *entry) {
	if s.entries[e.name] == e {
		delete(s.entries, e.name)
		s.flush.release(e.sl)
	}
}

// save hands e's state (and a record) to the flusher. mu held.
func (s *Scheduler) save(e *entry, rec *store.PollRecord) {
	if rec != nil {
		e.st.HistorySeq++
		rec.Seq = e.st.HistorySeq
	}
	e.savedSeq = s.flush.submit(e.sl, e.st, rec)
}

// logChange logs one line if e's state differs from prev (rule 3.12).
func (s *Scheduler) logChange(e *entry, prev string, now time.Time, reason string) {
	cur := StateOf(&e.st, now)
	if cur == prev {
		return
	}
	switch cur {
	case StateError:
		reason = e.st.ErrorReason
	case StatePaused:
		reason = e.st.PausedReason
	}
	lvl := slog.LevelInfo
	if cur == StateError || cur == StateOpen {
		lvl = slog.LevelWarn
	}
	s.log.Log(context.Background(), lvl, "source state changed", "source", e.name, "from", prev, "to", cur,
		"reason", s.redact.Redact(reason), "consecutive_failures", e.st.ConsecutiveFailures)
}

// sourceFailures is one source's consecutive failures, for the metrics.
type sourceFailures struct {
	name string
	n    int
}

// stateCounts returns the number of sources per state and, with
// perSource, each source's consecutive failures. It holds mu for one pass
// over the entries that only reads and appends to a presized slice: with
// 100,000 sources a scrape must not stall the loop for long.
func (s *Scheduler) stateCounts(perSource bool) (map[string]int, []sourceFailures) {
	var byState [len(AllStates)]int
	var failures []sourceFailures
	s.mu.Lock()
	if perSource {
		failures = make([]sourceFailures, 0, len(s.entries))
	}
	now := s.clock.Now()
	for name, e := range s.entries {
		if e.removed {
			continue
		}
		byState[stateIndex(StateOf(&e.st, now))]++
		if perSource {
			failures = append(failures, sourceFailures{name, e.st.ConsecutiveFailures})
		}
	}
	s.mu.Unlock()
	counts := make(map[string]int, len(AllStates))
	for i, st := range AllStates {
		counts[st] = byState[i]
	}
	return counts, failures
}

// stateIndex is the index of st in AllStates.
func stateIndex(st string) int {
	for i, s := range AllStates {
		if s == st {
			return i
		}
	}
	return 0
}

// Healthy returns nil when the scheduling loop made a pass within maxAge
// (it makes one at least every second) and the store accepts a write; it
// is what a service watchdog should check.
func (s *Scheduler) Healthy(ctx context.Context, maxAge time.Duration) error {
	if age := s.clock.Now().Sub(time.Unix(0, s.loopBeat.Load())); age > maxAge {
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
	return sources, int(s.inflightN.Load()), counts[StateError]
}
