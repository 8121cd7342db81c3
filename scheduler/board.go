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
func (t *table) configured() []*config.Source {
	t.mu.Lock()
	defer t.unlock()
	return t.cfg.Sources
}

// board builds the read-only views of the table: the dashboard's rows,
// the API's explained sources and histories, the metrics' state counts.
type board struct {
	*table
	cl *membership
}

// rows is Scheduler.Rows.
func (b *board) rows() []view.Row {
	srcs := b.configured()
	out := make([]view.Row, 0, len(srcs))
	for lo := 0; lo < len(srcs); lo += viewChunk {
		b.mu.Lock()
		now := b.clock.Now()
		for i := lo; i < min(lo+viewChunk, len(srcs)); i++ {
			e := b.entries[srcs[i].Name]
			if e == nil || e.removed {
				continue
			}
			r := view.Row{Name: e.name, Type: e.src.Type, State: b.up().shownState(e, now), Failures: e.st.ConsecutiveFailures}
			if t := e.st.LastSuccessAt; t != nil && !t.IsZero() {
				r.LastSuccess = t.UnixNano()
			}
			if t := e.st.NextRunAt; t != nil && !t.IsZero() && r.State != policy.StateError && r.State != policy.StatePaused {
				r.NextRun = t.UnixNano()
			}
			out = append(out, r)
		}
		b.unlock()
		b.betweenChunks()
	}
	return out
}

// betweenChunks runs the tests' hook between two chunks of a pass.
func (b *board) betweenChunks() {
	if b.viewHook != nil {
		b.viewHook()
	}
}

// explainSources is Scheduler.ExplainSources.
func (b *board) explainSources(names []string) []view.Explained {
	if names == nil {
		var out []view.Explained
		_ = b.explainAll(func(xs []view.Explained) error { // fn never fails
			out = append(out, xs...)
			return nil
		})
		if out == nil {
			out = []view.Explained{}
		}
		return out
	}
	remote := b.cl.remoteStates(names)
	b.mu.Lock()
	defer b.unlock()
	es := make([]*entry, 0, len(names))
	for _, n := range names {
		if e, err := b.entry(n); err == nil {
			es = append(es, e)
		}
	}
	return b.explain(es, remote, nil)
}

// explainAll is Scheduler.ExplainAll.
func (b *board) explainAll(fn func([]view.Explained) error) error {
	remote := b.cl.remoteStates(nil)
	srcs := b.configured()
	es := make([]*entry, 0, min(len(srcs), viewChunk))
	out := make([]view.Explained, 0, min(len(srcs), viewChunk))
	for lo := 0; lo < len(srcs); lo += viewChunk {
		b.mu.Lock()
		es = es[:0]
		for i := lo; i < min(lo+viewChunk, len(srcs)); i++ {
			if e := b.entries[srcs[i].Name]; e != nil && !e.removed {
				es = append(es, e)
			}
		}
		out = b.explain(es, remote, out[:0])
		b.unlock()
		b.betweenChunks()
		if err := fn(out); err != nil {
			return err
		}
	}
	return nil
}

// explain appends the source objects of es, with their explanations, to
// out. mu held.
func (b *board) explain(es []*entry, remote map[string]domain.SourceState, out []view.Explained) []view.Explained {
	now := b.clock.Now()
	qs := b.queueInfo(es)
	for _, e := range es {
		st := &e.st
		if r, ok := remote[e.name]; ok && b.dormant(e) {
			st = &r // another member's source: as its owner committed it
		}
		q := qs[e]
		if blk, ok := b.hs.blocks[e]; ok && !q.Busy {
			q.Blocked = blk.reason
		}
		x := view.Explained{
			SourceObject: view.ViewIn(b.cfg, e.src, st, now, b.redact.Redact),
			Why:          view.ExplainIn(b.cfg, e.src, st, now, q, b.redact.Redact),
		}
		if q.Blocked != "" && st == &e.st {
			x.State = b.up().shownState(e, now)
		}
		x.Owner = b.cl.owner(e)
		out = append(out, x)
	}
	return out
}

// explainSource is Scheduler.ExplainSource.
func (b *board) explainSource(name string) (view.Explained, error) {
	b.mu.Lock()
	_, err := b.entry(name)
	b.unlock()
	if err != nil {
		return view.Explained{}, err
	}
	out := b.explainSources([]string{name})
	if len(out) == 0 { // removed by a reload in between
		return view.Explained{}, ErrNotFound
	}
	return out[0], nil
}

// histories is Scheduler.Histories.
func (b *board) histories(ctx context.Context, names []string, n int) (map[string][]domain.PollRecord, error) {
	known := make([]string, 0, len(names))
	b.mu.Lock()
	for _, name := range names {
		if _, err := b.entry(name); err == nil {
			known = append(known, name)
		}
	}
	b.unlock()
	n = max(min(n, int(b.keep.Load())), 0)
	out := make(map[string][]domain.PollRecord, len(known))
	var read []string // those with fewer than n records pending
	for _, name := range known {
		out[name] = b.flush.PendingRecords(name)
		if len(out[name]) >= n {
			out[name] = out[name][:n]
		} else {
			read = append(read, name)
		}
	}
	if len(read) == 0 {
		return out, nil
	}
	stored, err := b.store.Histories(ctx, read, n)
	if err != nil {
		return nil, fmt.Errorf("histories: %w", err)
	}
	for _, name := range read {
		out[name] = mergeHistory(out[name], stored[name], n)
	}
	return out, nil
}

// sourceConfig is Scheduler.SourceConfig.
func (b *board) sourceConfig(name string) (config.Source, *config.Redactor, error) {
	b.mu.Lock()
	defer b.unlock()
	e, err := b.entry(name)
	if err != nil {
		return config.Source{}, nil, err
	}
	return *e.src, b.redact, nil
}

// queueInfo finds where the busy ones of es wait: one pass over the global
// queue and over the queue of each group one of them belongs to. The idle
// ones get the zero QueueInfo. mu held (the order mu, then a queue's lock,
// is dispatch's).
func (b *board) queueInfo(es []*entry) map[*entry]view.QueueInfo {
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
	b.q.Where(want, groups, view.QueueGlobal, func(e *entry, queue string, ahead int) {
		out[e] = view.QueueInfo{Busy: true, Queue: queue, Ahead: ahead}
	})
	return out
}
