package scheduler

import (
	"context"
	"fmt"
	"github.com/pacer-dev/pacer/scheduler/queue"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/domain"
	"github.com/pacer-dev/pacer/scheduler/policy"
	"github.com/pacer-dev/pacer/scheduler/view"
)

// This file holds the read-only views of the running scheduler that the
// dashboard and the API's "why" field need. None of them changes anything.

// viewChunk is how many sources Rows and ExplainSources(nil) read per
// hold of the scheduler's lock. A pass over 100,000 sources under one hold
// kept the dispatcher, the workers' ends of polls and the actions waiting
// for tens of milliseconds, and for hundreds on a loaded machine, once per
// page of the dashboard (BenchmarkDashboardPagePolling); by chunks each
// hold is about 1/50 of that, and the others get the lock in between.
const viewChunk = 2048

// configured returns the sources of the configuration in force, in order,
// for a pass by chunks. A reload replaces the slice and never changes it,
// so it may be read without the lock; a source the reload removed is found
// missing from the entries and left out, one it added is in the next pass.
func (s *Scheduler) configured() []*config.Source {
	s.mu.Lock()
	defer s.unlock()
	return s.cfg.Sources
}

// Rows returns every configured source as a Row, in configuration order.
// Each row is read under the scheduler's lock, consistent on its own; the
// lock is released between chunks of viewChunk sources, so two rows may
// be read a moment apart.
func (s *Scheduler) Rows() []view.Row {
	srcs := s.configured()
	out := make([]view.Row, 0, len(srcs))
	for lo := 0; lo < len(srcs); lo += viewChunk {
		s.mu.Lock()
		now := s.clock.Now()
		for i := lo; i < min(lo+viewChunk, len(srcs)); i++ {
			e := s.entries[srcs[i].Name]
			if e == nil || e.removed {
				continue
			}
			r := view.Row{Name: e.name, Type: e.src.Type, State: policy.StateOf(&e.st, now), Failures: e.st.ConsecutiveFailures}
			if t := e.st.LastSuccessAt; t != nil && !t.IsZero() {
				r.LastSuccess = t.UnixNano()
			}
			if t := e.st.NextRunAt; t != nil && !t.IsZero() && r.State != policy.StateError && r.State != policy.StatePaused {
				r.NextRun = t.UnixNano()
			}
			out = append(out, r)
		}
		s.unlock()
		s.betweenChunks()
	}
	return out
}

// betweenChunks runs the tests' hook between two chunks of a pass.
func (s *Scheduler) betweenChunks() {
	if s.viewHook != nil {
		s.viewHook()
	}
}

// ExplainSources returns the named sources (unknown names are left out),
// in the order given, or every source in configuration order when names is
// nil (ExplainAll), each with the explanation of its wait.
func (s *Scheduler) ExplainSources(names []string) []view.Explained {
	if names == nil {
		var out []view.Explained
		_ = s.ExplainAll(func(xs []view.Explained) error { // fn never fails
			out = append(out, xs...)
			return nil
		})
		if out == nil {
			out = []view.Explained{}
		}
		return out
	}
	remote := s.remoteStates(names)
	s.mu.Lock()
	defer s.unlock()
	es := make([]*entry, 0, len(names))
	for _, n := range names {
		if e, err := s.entry(n); err == nil {
			es = append(es, e)
		}
	}
	return s.explain(es, remote, nil)
}

// ExplainAll calls fn with every source, in configuration order, by chunks
// of viewChunk, each read under the scheduler's lock and handed to fn
// outside it (the slice is reused: fn must not keep it). It returns fn's
// first error, which ends the pass. GET /api/sources streams them: at
// 100,000 sources the whole list held about 126 MiB while it was built
// and written.
func (s *Scheduler) ExplainAll(fn func([]view.Explained) error) error {
	remote := s.remoteStates(nil)
	srcs := s.configured()
	es := make([]*entry, 0, min(len(srcs), viewChunk))
	out := make([]view.Explained, 0, min(len(srcs), viewChunk))
	for lo := 0; lo < len(srcs); lo += viewChunk {
		s.mu.Lock()
		es = es[:0]
		for i := lo; i < min(lo+viewChunk, len(srcs)); i++ {
			if e := s.entries[srcs[i].Name]; e != nil && !e.removed {
				es = append(es, e)
			}
		}
		out = s.explain(es, remote, out[:0])
		s.unlock()
		s.betweenChunks()
		if err := fn(out); err != nil {
			return err
		}
	}
	return nil
}

// explain appends the source objects of es, with their explanations, to
// out. mu held.
func (s *Scheduler) explain(es []*entry, remote map[string]domain.SourceState, out []view.Explained) []view.Explained {
	now := s.clock.Now()
	qs := s.queueInfo(es)
	for _, e := range es {
		st := &e.st
		if r, ok := remote[e.name]; ok && s.dormant(e) {
			st = &r // another member's source: as its owner committed it
		}
		x := view.Explained{
			SourceObject: view.View(e.src, st, now, s.redact.Redact),
			Why:          view.Explain(e.src, st, now, qs[e], s.redact.Redact),
		}
		x.Owner = s.owner(e)
		out = append(out, x)
	}
	return out
}

// ExplainSource returns one source with its explanation, or ErrNotFound.
func (s *Scheduler) ExplainSource(name string) (view.Explained, error) {
	s.mu.Lock()
	_, err := s.entry(name)
	s.unlock()
	if err != nil {
		return view.Explained{}, err
	}
	out := s.ExplainSources([]string{name})
	if len(out) == 0 { // removed by a reload in between
		return view.Explained{}, ErrNotFound
	}
	return out[0], nil
}

// Histories returns History(name, n) of each of names that is configured
// (the others are left out), the stored records read over one connection
// of the store (store.Histories): the dashboard's table shows the last
// polls of each of its rows.
func (s *Scheduler) Histories(ctx context.Context, names []string, n int) (map[string][]domain.PollRecord, error) {
	known := make([]string, 0, len(names))
	s.mu.Lock()
	for _, name := range names {
		if _, err := s.entry(name); err == nil {
			known = append(known, name)
		}
	}
	s.unlock()
	n = max(min(n, int(s.keep.Load())), 0)
	out := make(map[string][]domain.PollRecord, len(known))
	var read []string // those with fewer than n records pending
	for _, name := range known {
		out[name] = s.flush.PendingRecords(name)
		if len(out[name]) >= n {
			out[name] = out[name][:n]
		} else {
			read = append(read, name)
		}
	}
	if len(read) == 0 {
		return out, nil
	}
	stored, err := s.store.Histories(ctx, read, n)
	if err != nil {
		return nil, fmt.Errorf("histories: %w", err)
	}
	for _, name := range read {
		out[name] = mergeHistory(out[name], stored[name], n)
	}
	return out, nil
}

// Load returns the polls in flight and the effective global cap.
func (s *Scheduler) Load() (inflight, limit int) {
	s.mu.Lock()
	limit = s.limitOf(s.cfg)
	s.unlock()
	return int(s.inflightN.Load()), limit
}

// SourceConfig returns a copy of a source's effective settings and the
// redactor of the configuration in force (to show them with the secrets
// masked), or ErrNotFound.
func (s *Scheduler) SourceConfig(name string) (config.Source, *config.Redactor, error) {
	s.mu.Lock()
	defer s.unlock()
	e, err := s.entry(name)
	if err != nil {
		return config.Source{}, nil, err
	}
	return *e.src, s.redact, nil
}

// queueInfo finds where the busy ones of es wait: one pass over the global
// queue and over the queue of each group one of them belongs to. The idle
// ones get the zero QueueInfo. mu held (the order mu, then a queue's lock,
// is dispatch's).
func (s *Scheduler) queueInfo(es []*entry) map[*entry]view.QueueInfo {
	want := make(map[*entry]bool)
	groups := make(map[*queue.Group[*entry]]bool)
	for _, e := range es {
		if e.slot.Busy() {
			want[e] = true
			if e.group != nil {
				groups[e.group] = true
			}
		}
	}
	out := make(map[*entry]view.QueueInfo, len(want))
	if len(want) == 0 {
		return out
	}
	for e := range want {
		out[e] = view.QueueInfo{Busy: true}
	}
	s.q.Where(want, groups, view.QueueGlobal, func(e *entry, queue string, ahead int) {
		out[e] = view.QueueInfo{Busy: true, Queue: queue, Ahead: ahead}
	})
	return out
}
