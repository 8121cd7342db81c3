package scheduler

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"github.com/pacer-dev/pacer/internal/clock"
	"slices"
	"time"

	"github.com/pacer-dev/pacer/domain"
	"github.com/pacer-dev/pacer/scheduler/policy"
	"github.com/pacer-dev/pacer/scheduler/view"
)

// control is the operator's side of the scheduler: the API's actions on a
// source (reset, pause, resume, trigger), the CLI's commands read from the
// store's queue (and those an earlier daemon left: orphans.go), each
// applied to the table, or through its owner for another member's source.
type control struct {
	*table
	wk *workers
	cl *membership
}

// sources is Scheduler.Sources.
func (op *control) sources() []view.SourceObject {
	op.mu.Lock()
	defer op.unlock()
	now := op.now()
	out := make([]view.SourceObject, 0, len(op.cfg.Sources))
	for i := range op.cfg.Sources {
		if e := op.entries[op.cfg.Sources[i].Name]; e != nil {
			o := view.ViewIn(op.cfg, e.src, &e.st, now, op.redact.Redact)
			o.Owner = op.cl.owner(e)
			out = append(out, o)
		}
	}
	return out
}

// source is Scheduler.Source.
func (op *control) source(name string) (view.SourceObject, error) {
	op.mu.Lock()
	defer op.unlock()
	e, err := op.entry(name)
	if err != nil {
		return view.SourceObject{}, err
	}
	now := op.now()
	o := view.ViewIn(op.cfg, e.src, &e.st, now, op.redact.Redact)
	o.State = op.up().shownState(e, now)
	o.Owner = op.cl.owner(e)
	return o, nil
}

// entry returns the live entry of name. mu held.
func (t *table) entry(name string) (*entry, error) {
	e := t.entries[name]
	if e == nil || e.removed {
		return nil, fmt.Errorf("%w: %q", ErrNotFound, name)
	}
	return e, nil
}

// commitWait bounds how long an operator's change waits for its commit.
const commitWait = 2 * time.Second

// trigger is Scheduler.Trigger.
func (op *control) trigger(name string) error {
	if op.cl.isRemote(name) {
		_, err := op.cl.remote(policy.ActionTrigger, name, "")
		return err
	}
	return op.triggerHere(name)
}

// triggerHere is Trigger on this member.
func (op *control) triggerHere(name string) error {
	op.mu.Lock()
	defer op.unlock()
	e, err := op.entry(name)
	if err != nil {
		return err
	}
	switch {
	case op.stopped:
		return fmt.Errorf("%w: the daemon is shutting down", ErrConflict)
	case e.st.Paused:
		return fmt.Errorf("%w: source %q is paused; resume it first", ErrConflict, name)
	case e.st.ErrorReason != "":
		return fmt.Errorf("%w: source %q is in error; reset it first", ErrConflict, name)
	case e.slot.Busy():
		return nil
	}
	now := op.now()
	if b := op.up().gate(e, now, false); b.blocking() {
		return fmt.Errorf("%w: source %q is blocked: %s", ErrConflict, name, b.reason)
	}
	op.wk.dispatch(e, now, time.Time{})
	return nil
}

// mutate applies an operator's action to a source, logs the state change,
// persists it and reschedules the source. It returns once the change is
// committed (or after commitWait), so that the store shows it.
func (op *control) mutate(name, action, reason string) (view.SourceObject, error) {
	if op.cl.isRemote(name) {
		return op.cl.remote(action, name, reason)
	}
	o, seq, err := op.mutateAsync(name, action, reason)
	if err != nil {
		return view.SourceObject{}, err
	}
	op.waitCommitted(name, seq)
	return o, nil
}

// waitCommitted waits, at most commitWait, for the state of name submitted
// as seq to be committed: an operator's change is done when the store shows
// it.
func (op *control) waitCommitted(name string, seq uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), commitWait)
	defer cancel()
	op.flush.WaitSaved(ctx, name, seq)
}

// mutateAsync is mutate without the wait: it returns the flusher's sequence
// number of the change, for flush.Flusher.WaitSaved.
func (op *control) mutateAsync(name, action, reason string) (view.SourceObject, uint64, error) {
	op.mu.Lock()
	e, err := op.entry(name)
	if err != nil {
		op.unlock()
		return view.SourceObject{}, 0, err
	}
	now := op.now()
	prev := policy.StateOf(&e.st, now)
	st, err := policy.Act(action, e.st, e.timing, reason, now)
	if err != nil {
		op.unlock()
		return view.SourceObject{}, 0, err
	}
	e.st = st
	if action == policy.ActionReset {
		if e.slot.Busy() {
			e.resetPending = true
		} else {
			e.brk = nil
		}
	}
	op.flushFlap(e, now, prev)
	op.logChange(e, prev, now, action)
	op.save(e, nil)
	op.reschedule(e, now)
	o, seq := view.ViewIn(op.cfg, e.src, &e.st, now, op.redact.Redact), e.savedSeq
	op.unlock()
	return o, seq, nil
}

// history is Scheduler.History.
func (op *control) history(ctx context.Context, name string, n int) ([]domain.PollRecord, error) {
	op.mu.Lock()
	_, err := op.entry(name)
	op.unlock()
	if err != nil {
		return nil, err
	}
	// A source never has more than history.keep records.
	n = max(min(n, int(op.keep.Load())), 0)
	out := op.flush.PendingRecords(name)
	if len(out) >= n {
		return out[:n], nil
	}
	stored, err := op.store.History(ctx, name, n)
	if err != nil {
		return nil, fmt.Errorf("history of %s: %w", name, err)
	}
	return mergeHistory(out, stored, n), nil
}

// mergeHistory returns the newest n of the records pending in the flusher
// and those read from the store. Commits may land between the two reads
// (even several, with newer records than those still pending): records are
// numbered, so the union by number, newest first, is the history.
func mergeHistory(pending, stored []domain.PollRecord, n int) []domain.PollRecord {
	seen := make(map[int64]bool, len(pending))
	out := slices.Clone(pending)
	for _, r := range pending {
		seen[r.Seq] = true
	}
	for _, r := range stored {
		if !seen[r.Seq] {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b domain.PollRecord) int { return cmp.Compare(b.Seq, a.Seq) })
	return out[:min(n, len(out))]
}

// ready is Scheduler.Ready.
func (op *control) ready(ctx context.Context) error {
	op.mu.Lock()
	started, stopped := op.started, op.stopped
	op.unlock()
	switch {
	case !started:
		return fmt.Errorf("not started")
	case stopped:
		return fmt.Errorf("shutting down")
	}
	if err := op.shards.Ready(); err != nil {
		return err
	}
	// Store errors name the store already ("store: ...").
	if err := op.flush.Err(); err != nil {
		return err
	}
	if err := op.store.Writable(ctx); err != nil {
		return err
	}
	return nil
}

// commands applies the CLI's commands queued in the store, so that they take
// effect in the running daemon (and are not overwritten by it). A command
// is applied only once this daemon has claimed it (store.ClaimCommand): the
// CLI withdraws one it stopped waiting for with the converse conditional
// update, so a command is either applied and reported so or withdrawn and
// never applied, and a trigger runs at most once.
func (op *control) commands(ctx context.Context) {
	if !op.shards.Member() {
		op.settleOrphans(ctx)
	}
	for {
		if !clock.Sleep(ctx, op.clock, op.cmdEvery) {
			return
		}
		cmds, err := op.store.PendingCommands(ctx)
		if err != nil {
			if ctx.Err() == nil {
				op.m.storeErrors.Inc()
			}
			continue
		}
		if op.shards.Member() {
			cmds = op.cl.ownedCommands(cmds)
		}
		op.applyCommands(ctx, op.claimCommands(ctx, cmds))
	}
}

// claimCommands returns the commands of cmds this daemon claimed, in
// order. It stops at the first store error (the rest stay pending for the
// next pass).
func (op *control) claimCommands(ctx context.Context, cmds []domain.Command) []domain.Command {
	out := cmds[:0]
	for _, c := range cmds {
		ok, err := op.store.ClaimCommand(ctx, c.ID)
		if err != nil {
			if ctx.Err() == nil {
				op.m.storeErrors.Inc()
				op.log.Error("claim command", "id", c.ID, "err", err)
			}
			break
		}
		if ok {
			out = append(out, c)
		}
	}
	return out
}

// applyCommands applies claimed commands, waits once for their commits (a
// CLI command is done when the store shows its effect), then records their
// results.
func (op *control) applyCommands(ctx context.Context, cmds []domain.Command) {
	errs := make([]error, len(cmds))
	seqs := make([]uint64, len(cmds))
	for i, c := range cmds {
		seqs[i], errs[i] = op.applyAsync(c.Action, c.Source, c.Reason)
	}
	waitCtx, cancel := context.WithTimeout(ctx, commitWait)
	for i, c := range cmds {
		if errs[i] == nil && seqs[i] > 0 {
			op.flush.WaitSaved(waitCtx, c.Source, seqs[i])
		}
	}
	cancel()
	for i, c := range cmds {
		result, code := "", ""
		if err := errs[i]; err != nil {
			result, code = err.Error(), ErrorCode(err)
		}
		// The command is applied: its result must reach the CLI, which
		// waits for it. A busy store is retried within the bound.
		retryCtx, cancel := context.WithTimeout(ctx, resultWait)
		for {
			err := op.store.CompleteCommand(retryCtx, c.ID, result, code)
			if err == nil {
				break
			}
			op.m.storeErrors.Inc()
			op.log.Error("complete command", "id", c.ID, "err", err)
			if !clock.Sleep(retryCtx, op.clock, op.cmdEvery) {
				break
			}
		}
		cancel()
	}
}

// resultWait bounds how long the daemon retries recording the result of a
// command it applied.
const resultWait = 30 * time.Second

// applyAsync performs a named operator action (reset, pause, resume or
// trigger, from the CLI's command queue) without waiting for its commit; it
// returns the flusher's sequence number of the change (0 for a trigger,
// which changes no stored state).
func (op *control) applyAsync(action, name, reason string) (uint64, error) {
	switch action {
	case policy.ActionReset, policy.ActionPause, policy.ActionResume:
		if action != policy.ActionPause {
			reason = ""
		}
		_, seq, err := op.mutateAsync(name, action, reason)
		return seq, err
	case policy.ActionTrigger:
		return 0, op.triggerHere(name)
	}
	return 0, fmt.Errorf("unknown action %q", action)
}

// ErrorCode classifies an error of the control methods for the store's
// command queue and the API: "not_found", "conflict" or "".
func ErrorCode(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, ErrNotFound):
		return "not_found"
	case errors.Is(err, ErrConflict):
		return "conflict"
	}
	return ""
}
