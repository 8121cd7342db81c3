package scheduler

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/domain"
	"github.com/pacer-dev/pacer/sources"
)

// Reload switches to cfg (rule 3.11): added sources start, removed ones stop
// being polled (their stored state is kept), changed ones take their new
// settings and leave any error state. Unchanged sources keep running.
func (s *Scheduler) Reload(ctx context.Context, cfg *config.Config) error {
	t, life := s.tab, s.life
	s.reloading.Lock()
	defer s.reloading.Unlock()
	stored, err := t.storedOfAdded(ctx, cfg)
	if err != nil {
		return fmt.Errorf("reload: %w", err)
	}
	redact := cfg.Redactor()
	built, err := t.newPollers(cfg.Sources, redact)
	if err != nil {
		return fmt.Errorf("reload: %w", err)
	}
	t.mu.Lock()
	defer t.unlock()
	if t.stopped {
		return fmt.Errorf("reload: shutting down")
	}
	now := t.now()
	t.applyDescCap(cfg)
	t.cfg = cfg
	t.redact = redact
	t.keep.Store(int64(cfg.History.Keep))
	t.q.SetLimits(life.dispatching.ctx, cfg.Limits, life.dispatching.spawn)
	t.up().configureHosts(cfg, t.hs.ctx)
	if err := t.reloadSources(cfg.Sources, built, stored, now); err != nil {
		return fmt.Errorf("reload: %w", err)
	}
	if t.descLimit(cfg) < cfg.Concurrency {
		t.logLocked(slog.LevelWarn, "concurrency lowered to fit the descriptor limit", "configured", cfg.Concurrency, "effective", t.descLimit(cfg))
	}
	s.wk.resizeWorkers(t.limitOf(cfg))
	t.logLocked(slog.LevelInfo, "configuration reloaded", "sources", len(cfg.Sources), "concurrency", t.limitOf(cfg))
	return nil
}

// storedOfAdded reads the stored states of the sources cfg adds, before
// Reload takes the lock (a store read must not stall the loop). A source
// removed by a reload so recently that its last state is not yet
// committed takes that state from the flusher, not the store's older one
// (which, for a source polled since, says it is due at once): re-added
// unchanged, it keeps its due time, as rule 3.11 says. The flusher is
// asked first: once it has dropped the source's slot, the store holds its
// final state.
func (t *table) storedOfAdded(ctx context.Context, cfg *config.Config) (map[string]domain.SourceState, error) {
	t.mu.Lock()
	var added []string
	for i := range cfg.Sources {
		if e := t.entries[cfg.Sources[i].Name]; e == nil {
			added = append(added, cfg.Sources[i].Name)
		}
	}
	t.unlock()
	stored := make(map[string]domain.SourceState, len(added))
	for _, name := range added {
		if st, ok := t.flush.Released(name); ok {
			stored[name] = st
			continue
		}
		st, ok, err := t.store.GetState(ctx, name)
		if err != nil {
			return nil, err
		}
		if ok {
			stored[name] = st
		}
	}
	return stored, nil
}

// reloadSources adds the new sources (from their stored states), gives the
// changed ones their new settings and a clean state, and drops the removed
// ones (once their poll in flight ends). mu held.
//
// An unchanged source (same fingerprint) keeps everything and costs a map
// look-up and a string comparison: the sources present are told from the
// removed ones by a mark flipped at each reload, not by a set of 100,000
// names (and without a pass over the entries when none is removed), and
// its shard is computed again only when its limits group changed (the
// shard is a function of the name and the group).
func (t *table) reloadSources(srcs []*config.Source, built []sources.Poller, stored map[string]domain.SourceState, now time.Time) error {
	t.reloadMark = !t.reloadMark
	mark := t.reloadMark
	kept := 0 // entries of the sources present, old and new
	for i := range srcs {
		src := srcs[i]
		e := t.entries[src.Name]
		if e == nil {
			st, found := stored[src.Name]
			if err := t.addEntry(src, built[i], st, found, now); err != nil {
				return err
			}
			t.entries[src.Name].mark = mark
			kept++
			continue
		}
		e.mark, e.removed = mark, false
		kept++
		if e.src.Fingerprint == src.Fingerprint {
			if err := t.keepSource(e, src, built[i], now); err != nil {
				return err
			}
			continue
		}
		if built[i] == nil {
			return fmt.Errorf("source %s: no poller built", src.Name)
		}
		t.configure(e, src, built[i], e.st, now)
		t.configChanged(e, now)
		t.reschedule(e, now)
	}
	if kept == len(t.entries) {
		return nil // nothing removed: no pass over every entry
	}
	for _, e := range t.entries {
		if e.mark == mark {
			continue
		}
		t.q.Due.Remove(&e.slot)
		if e.slot.Busy() {
			e.removed = true
		} else {
			t.dropEntry(e)
		}
	}
	return nil
}

// keepSource points e, whose source is unchanged in effect, at src, the
// reloaded config's value of it, with poller if one was built for it
// (newPollers). mu held.
func (t *table) keepSource(e *entry, src *config.Source, poller sources.Poller, now time.Time) error {
	limit := e.src.Limit
	if e.src != src {
		// Parsed again, equal in effect: the poller holds its source, so
		// it is built on the new one, and the old config does not stay
		// live through it.
		if poller == nil {
			return fmt.Errorf("source %s: no poller built", src.Name)
		}
		e.poller = poller
	}
	e.src = src
	e.group = t.q.Group(src.Limit)
	if src.Limit == limit {
		return nil
	}
	if sh := domain.ShardOf(src.Name, src.Limit); sh != e.shard {
		t.q.Due.Remove(&e.slot)
		e.shard, t.shardDirty = sh, true
		t.reschedule(e, now)
	}
	return nil
}
