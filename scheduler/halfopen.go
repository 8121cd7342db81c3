package scheduler

import (
	"github.com/pacer-dev/pacer/breaker"
	"github.com/pacer-dev/pacer/scheduler/policy"
)

// forceProbe lets an operator's trigger through e's open breaker brk as
// its probe (breaker.ForceProbe) and records that in e's state: half-open
// from now until the probe's result, as the breaker is, so that the source
// object says so while the probe runs (and not "open until" a cooldown
// that no longer holds). A breaker that was not open is left as it was.
func (w *workers) forceProbe(e *entry, brk *breaker.Breaker) {
	brk.ForceProbe()
	snap := brk.Snapshot()
	w.mu.Lock()
	defer w.unlock()
	if e.brk != brk || snap.State != breaker.HalfOpen || policy.SnapshotOf(&e.st).State == breaker.HalfOpen {
		return // replaced by a reload meanwhile, or nothing to show
	}
	now := w.clock.Now()
	prev := policy.StateOf(&e.st, now)
	policy.SetBreaker(&e.st, snap)
	w.logChange(e, prev, now, "triggered; probing")
}
