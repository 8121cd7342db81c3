package scheduler

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/pacer-dev/pacer/breaker"
	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/sources"
	"github.com/pacer-dev/pacer/store"
)

// addEntry builds the runtime of src from its stored state and schedules it.
// Called with mu held.
func (s *Scheduler) addEntry(src *config.Source, st store.SourceState, found bool, now time.Time) error {
	e := &entry{name: src.Name, idx: -1, sl: s.flush.Slot(src.Name)}
	changed := found && st.Fingerprint != "" && st.Fingerprint != src.Fingerprint
	if !found {
		st = store.SourceState{Name: src.Name}
	}
	if err := s.configure(e, src, st, now); err != nil {
		return err
	}
	if changed {
		s.configChanged(e, now)
	} else {
		clampLoaded(&e.st, e.timing, now)
		// Equal or unknown: either way the config's string, so that the
		// entry holds no second copy of the same 64 bytes read from the store.
		e.st.Fingerprint = src.Fingerprint
	}
	s.entries[src.Name] = e
	s.reschedule(e, now)
	if !found {
		// Persist the new source with its first tick, so that status read
		// from the store shows when it will run. No poll has happened, so
		// its first poll need not wait for this commit (rule 3.8).
		s.flush.Submit(e.sl, e.st, nil)
	}
	return nil
}

// configure (re)builds e's poller, breaker and timing for src, with state st.
func (s *Scheduler) configure(e *entry, src *config.Source, st store.SourceState, now time.Time) error {
	poller, err := s.pollerOf(src)
	if err != nil {
		return err
	}
	e.src, e.poller, e.brk = src, poller, nil
	if b := breakerSnapshot(&st); st.ConsecutiveFailures > 0 || b.State != breaker.Closed {
		e.brk = s.restoreBreaker(src, st)
	}
	e.timing = newTiming(src.Name, src.Schedule)
	e.group = s.groups[src.Limit]
	e.shard = store.ShardOf(src.Name, src.Limit)
	s.shardDirty = true
	e.gen++
	e.st = st
	e.st.Name = src.Name
	return nil
}

// pollerOf builds the poller of src.
func (s *Scheduler) pollerOf(src *config.Source) (sources.Poller, error) {
	var poller sources.Poller
	var err error
	if s.newPoller != nil {
		poller, err = s.newPoller(src)
	} else {
		poller, err = sources.New(src, s.clients, s.redact.Redact)
	}
	if err != nil {
		return nil, fmt.Errorf("scheduler: source %s: %w", src.Name, err)
	}
	return poller, nil
}

// newBreaker returns src's breaker restored to the state in st. A source
// whose breaker is closed with no failure counted has none (entry.brk is
// nil): at 100,000 sources the healthy majority costs no breaker at all.
func newBreaker(src *config.Source, st store.SourceState) *breaker.Breaker {
	return breaker.New(src.Breaker, breakerSnapshot(&st), st.ConsecutiveFailures)
}

// configChanged clears the error state, failures and breaker of a source
// whose effective configuration changed (rule 3.7) and persists that.
func (s *Scheduler) configChanged(e *entry, now time.Time) {
	prev := StateOf(&e.st, now)
	e.st = resetState(e.st, e.timing, now)
	e.st.Fingerprint = e.src.Fingerprint
	e.brk = nil
	s.flushFlap(e, now, prev)
	s.logChange(e, prev, now, "configuration changed")
	s.save(e, nil)
}

// reschedule puts an idle, schedulable entry in the heap at its next run
// time (now if that is past, or if it has none yet: its first tick).
func (s *Scheduler) reschedule(e *entry, now time.Time) {
	if e.busy || e.removed || e.st.Paused || silent(&e.st, e.src) || s.dormant(e) {
		s.due.remove(e)
		return
	}
	if e.st.NextRunAt == nil {
		e.st.NextRunAt = ptr(nextRun(now, e.timing, time.Time{}, breakerSnapshot(&e.st)))
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

// dropEntry forgets a source removed from the configuration once its last
// poll is over. mu held.
func (s *Scheduler) dropEntry(e *entry) {
	if s.entries[e.name] == e {
		delete(s.entries, e.name)
		s.flush.Release(e.sl, e.st)
		s.shardDirty = true
	}
}

// save hands e's state (and a record, and the notification events of the
// change) to the flusher, which commits them together. mu held.
func (s *Scheduler) save(e *entry, rec *store.PollRecord, evs ...store.Event) {
	if rec != nil {
		e.st.HistorySeq++
		rec.Seq = e.st.HistorySeq
	}
	e.savedSeq = s.flush.Submit(e.sl, e.st, rec, evs...)
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
	if e.flap != nil {
		e.flap.logged = cur // what the source's last line reported (flaplog.go)
	}
}
