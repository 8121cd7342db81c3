package scheduler

import (
	"log/slog"
	"time"

	"github.com/pacer-dev/pacer/scheduler/maintenance"
	"github.com/pacer-dev/pacer/scheduler/policy"
	"github.com/pacer-dev/pacer/scheduler/view"
)

// Blocks (contract section 13): a source due while its host is open or
// throttled, or while a source on its dependency path fails, is not
// polled. It is "blocked" with the reason, counts nothing, and is looked
// at again at its next tick. A block lives in memory only (the table's
// blocks map, guarded by mu): it is a fact about now, computed again at
// every due time, so a restart loses nothing by forgetting it.

// Kinds of block, the reason label of pacer_blocked_polls_total.
const (
	blockHost       = "host"
	blockDependency = "dependency"
)

// block is why a due source was not polled.
type block struct {
	kind   string    // blockHost or blockDependency
	reason string    // the why sentence ("host api.x throttled until 10:42:03")
	until  time.Time // when it ends, if known (zero: at the next look)
}

// blocking is a verdict on a poll about to be dispatched or started.
func (b block) blocking() bool { return b.kind != "" }

// dependencyBlock is the block of e by the first failing source on its
// dependency path (view.DependencyBlock), or the zero block. mu held.
func (t hostsRoom) dependencyBlock(e *entry, now time.Time) block {
	if len(e.src.DependsOn) == 0 {
		return block{}
	}
	why := view.DependencyBlock(e.name, e.src.DependsOn, func(name string) (view.Dep, bool) {
		d := t.entries[name]
		if d == nil || d.removed {
			return view.Dep{}, false
		}
		dep := view.Dep{State: policy.StateOf(&d.st, now), DependsOn: d.src.DependsOn}
		if b, ok := t.hs.blocks[d]; ok && b.kind == blockHost {
			dep.HostBlock = b.reason
		}
		return dep, true
	})
	if why == "" {
		return block{}
	}
	return block{kind: blockDependency, reason: why}
}

// setBlock records that e, idle, was not polled at now because of b
// (noteBlock) and puts it back in the due heap at its next tick. mu held.
func (t hostsRoom) setBlock(e *entry, b block, now time.Time) {
	t.noteBlock(e, b, now)
	t.reschedule(e, now)
}

// noteBlock records that e was not polled at now because of b: it counts
// in pacer_blocked_polls_total, its next run is its next tick, and a log
// line says so when the reason changed. mu held.
func (t hostsRoom) noteBlock(e *entry, b block, now time.Time) {
	if t.hs.blocks == nil {
		t.hs.blocks = map[*entry]block{}
	}
	prev, had := t.hs.blocks[e]
	t.hs.blocks[e] = b
	t.m.blocked(b.kind)
	if !had || prev.reason != b.reason {
		t.logLocked(slog.LevelInfo, "source blocked", "source", e.name, "reason", b.reason)
	}
	e.st.NextRunAt = policy.UTCPtr(policy.Tick(now, e.timing))
}

// gate is the block of e at now, or the zero block: a failing dependency
// (dependencyBlock), then its host (hostBlock; start says the poll is
// about to start, which the host room counts). mu held.
func (t hostsRoom) gate(e *entry, now time.Time, start bool) block {
	if b := t.dependencyBlock(e, now); b.blocking() {
		return b
	}
	return t.hostBlock(e, now, start)
}

// clearBlock forgets e's block once it starts a poll (or leaves). mu held.
func (t hostsRoom) clearBlock(e *entry) {
	if _, ok := t.hs.blocks[e]; ok {
		delete(t.hs.blocks, e)
		t.logLocked(slog.LevelInfo, "source unblocked", "source", e.name)
	}
}

// shownState is e's state as shown: blocked while a block holds it and
// its own state would poll it, else its own. mu held.
func (t hostsRoom) shownState(e *entry, now time.Time) string {
	shown, _ := maintenance.Overlay(t.cfg, e.name, &e.st, now)
	s := policy.StateOf(shown, now)
	if _, ok := t.hs.blocks[e]; ok && s != policy.StatePaused && s != policy.StateError {
		return policy.StateBlocked
	}
	return s
}
