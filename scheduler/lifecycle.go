package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/sources"
	"github.com/pacer-dev/pacer/store"
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
	s.client = sources.NewClient(s.transport)
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
