package scheduler

import (
	"context"

	"github.com/pacer-dev/pacer/breaker"
	"github.com/pacer-dev/pacer/domain"
	"github.com/pacer-dev/pacer/scheduler/policy"
)

// Results of the commands an earlier daemon claimed and did not complete.
const (
	orphanLost    = "the daemon that took it stopped before committing it: it was not applied"
	orphanTrigger = "the daemon that took it stopped before reporting it: the poll may or may not have run"
)

// settleOrphans completes the commands that an earlier daemon claimed and
// did not complete (it stopped between the two, a crash): on a store this
// daemon alone holds nobody else will, and the CLI that queued one waits
// for its result. The state this daemon loaded, the last committed one,
// tells whether each took effect (orphanResult). A member of a cluster
// does not: the queue is shared with members that are alive.
func (op *control) settleOrphans(ctx context.Context) {
	cmds, err := op.store.OrphanedCommands(ctx)
	if err != nil {
		if ctx.Err() == nil {
			op.m.storeErrors.Inc()
			op.log.Warn("cannot read the commands an earlier daemon left unfinished", "err", err)
		}
		return
	}
	for _, c := range cmds {
		op.mu.Lock()
		var st domain.SourceState
		e := op.entries[c.Source]
		if e != nil {
			st = e.st
		}
		op.unlock()
		result := orphanResult(c, st, e != nil)
		if err := op.store.CompleteCommand(ctx, c.ID, result, ""); err != nil {
			op.m.storeErrors.Inc()
			op.log.Warn("cannot complete a command an earlier daemon left unfinished", "id", c.ID, "err", err)
			continue
		}
		op.log.Info("completed a command an earlier daemon took and did not finish", "id", c.ID, "action", c.Action,
			"source", c.Source, "applied", result == "")
	}
}

// orphanResult is the result of command c, claimed by a daemon that
// stopped before it recorded one, from st, the source's last committed
// state (found false: the source is not configured). A pause took effect
// when the source is paused with its reason, a resume when it is not
// paused, a reset when it is neither failing nor in error and its breaker
// is closed; a trigger leaves no state to tell.
func orphanResult(c domain.Command, st domain.SourceState, found bool) string {
	if !found {
		return orphanLost
	}
	applied := false
	switch c.Action {
	case policy.ActionPause:
		applied = st.Paused && st.PausedReason == c.Reason
	case policy.ActionResume:
		applied = !st.Paused
	case policy.ActionReset:
		applied = st.ErrorReason == "" && st.ConsecutiveFailures == 0 && policy.SnapshotOf(&st).State == breaker.Closed
	case policy.ActionTrigger:
		return orphanTrigger
	}
	if applied {
		return ""
	}
	return orphanLost
}
