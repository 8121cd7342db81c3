package scheduler

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/pacer-dev/pacer/breaker"
	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/domain"
	"github.com/pacer-dev/pacer/scheduler/policy"
	"github.com/pacer-dev/pacer/sources"
)

// addEntry builds the runtime of src, with its poller (built before mu was
// taken: newPollers), from its stored state and schedules it. mu held.
func (t *table) addEntry(src *config.Source, poller sources.Poller, st domain.SourceState, found bool, now time.Time) error {
	if poller == nil {
		return fmt.Errorf("scheduler: source %s: no poller built", src.Name)
	}
	e := &entry{name: src.Name, sl: t.flush.Slot(src.Name), added: now.UnixNano()}
	e.slot.Init(e)
	changed := found && st.Fingerprint != "" && st.Fingerprint != src.Fingerprint
	if !found {
		st = domain.SourceState{Name: src.Name}
	}
	t.configure(e, src, poller, st, now)
	if changed {
		t.configChanged(e, now)
	} else {
		policy.ClampLoaded(&e.st, e.timing, now)
		// Equal or unknown: either way the config's string, so that the
		// entry holds no second copy of the same 64 bytes read from the store.
		e.st.Fingerprint = src.Fingerprint
	}
	t.entries[src.Name] = e
	t.reschedule(e, now)
	if !found {
		// Persist the new source with its first tick, so that status read
		// from the store shows when it will run. No poll has happened, so
		// its first poll need not wait for this commit (rule 3.8).
		t.flush.Submit(e.sl, e.st, nil)
	}
	return nil
}

// configure gives e the settings src, its poller and state st, and
// rebuilds its breaker and timing. mu held.
func (t *table) configure(e *entry, src *config.Source, poller sources.Poller, st domain.SourceState, now time.Time) {
	e.src, e.poller, e.brk = src, poller, nil
	if b := policy.SnapshotOf(&st); st.ConsecutiveFailures > 0 || b.State != breaker.Closed {
		e.brk = newBreaker(src, st)
	}
	e.timing = policy.NewTiming(src.Name, src.Schedule)
	e.group = t.q.Group(src.Limit)
	e.shard = domain.ShardOf(src.Name, src.Limit)
	t.shardDirty = true
	e.gen++
	e.st = st
	e.st.Name = src.Name
}

// newPollers builds, without mu, the pollers of the sources of srcs that
// need one: the sources without an entry (or whose entry is being
// removed), and those whose configuration value is not their entry's
// (parsed again: the poller holds its source). built[i] is srcs[i]'s, nil
// when its entry keeps its poller. A poller's build may read files and
// resolve settings: it must not stall the loop and the workers under mu.
// Reload and StartFrom call it before they take mu, one at a time (the
// entries it looks at change only under them).
func (t *table) newPollers(srcs []*config.Source, redact *config.Redactor) (built []sources.Poller, err error) {
	need := make([]bool, len(srcs))
	t.mu.Lock()
	for i, src := range srcs {
		e := t.entries[src.Name]
		need[i] = e == nil || e.removed || e.src != src
	}
	t.unlock()
	built = make([]sources.Poller, len(srcs))
	for i, src := range srcs {
		if need[i] {
			if built[i], err = t.pollerOf(src, redact); err != nil {
				return nil, err
			}
		}
	}
	return built, nil
}

// pollerOf builds the poller of src, whose errors redact redacts.
func (t *table) pollerOf(src *config.Source, redact *config.Redactor) (sources.Poller, error) {
	var poller sources.Poller
	var err error
	if t.newPoller != nil {
		poller, err = t.newPoller(src)
	} else {
		poller, err = sources.New(src, t.clients, redact.Redact)
	}
	if err != nil {
		return nil, fmt.Errorf("scheduler: source %s: %w", src.Name, err)
	}
	return poller, nil
}

// newBreaker returns src's breaker restored to the state in st. A source
// whose breaker is closed with no failure counted has none (entry.brk is
// nil): at 100,000 sources the healthy majority costs no breaker at all.
func newBreaker(src *config.Source, st domain.SourceState) *breaker.Breaker {
	return breaker.New(src.Breaker, policy.SnapshotOf(&st), st.ConsecutiveFailures)
}

// configChanged clears the error state, failures and breaker of a source
// whose effective configuration changed (rule 3.7) and persists that.
func (t *table) configChanged(e *entry, now time.Time) {
	prev := policy.StateOf(&e.st, now)
	e.st = policy.Reset(e.st, e.timing, now)
	e.st.Fingerprint = e.src.Fingerprint
	e.brk = nil
	t.flushFlap(e, now, prev)
	t.logChange(e, prev, now, "configuration changed")
	t.save(e, nil)
}

// reschedule puts an idle, schedulable entry in the heap at its next run
// time (now if that is past, or if it has none yet: its first tick).
func (t *table) reschedule(e *entry, now time.Time) {
	if e.slot.Busy() || e.removed || e.st.Paused || policy.Silent(&e.st, e.src) || t.dormant(e) {
		t.q.Due.Remove(&e.slot)
		return
	}
	if e.st.NextRunAt == nil {
		e.st.NextRunAt = policy.UTCPtr(policy.NextRun(now, e.timing, time.Time{}, policy.SnapshotOf(&e.st)))
	}
	t.q.Schedule(&e.slot, policy.NanoKey(*e.st.NextRunAt)) // saturates: a due time past 2262 never wraps into the past
}

// dropEntry forgets a source removed from the configuration once its last
// poll is over. mu held.
func (t *table) dropEntry(e *entry) {
	delete(t.hs.blocks, e)
	if t.entries[e.name] == e {
		delete(t.entries, e.name)
		t.flush.Release(e.sl, e.st)
		t.shardDirty = true
	}
}

// save hands e's state (and a record, and the notification events of the
// change) to the flusher, which commits them together. mu held.
func (t *table) save(e *entry, rec *domain.PollRecord, evs ...domain.Event) {
	if rec != nil {
		e.st.HistorySeq++
		rec.Seq = e.st.HistorySeq
	}
	e.savedSeq = t.flush.Submit(e.sl, e.st, rec, evs...)
}

// logChange logs one line if e's state differs from prev (rule 3.12).
func (t *table) logChange(e *entry, prev string, now time.Time, reason string) {
	cur := policy.StateOf(&e.st, now)
	if cur == prev {
		return
	}
	switch cur {
	case policy.StateError:
		reason = e.st.ErrorReason
	case policy.StatePaused:
		reason = e.st.PausedReason
	}
	lvl := slog.LevelInfo
	if cur == policy.StateError || cur == policy.StateOpen {
		lvl = slog.LevelWarn
	}
	t.logLocked(lvl, "source state changed", "source", e.name, "from", prev, "to", cur,
		"reason", t.redact.Redact(reason), "consecutive_failures", e.st.ConsecutiveFailures)
	if e.flap != nil {
		e.flap.logged = cur // what the source's last line reported (flaplog.go)
	}
}
