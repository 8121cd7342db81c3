package scheduler

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/pacer-dev/pacer/domain"
	"github.com/pacer-dev/pacer/scheduler/policy"
	"github.com/pacer-dev/pacer/scheduler/view"
)

// Sources returns every configured source, in configuration order.
func (s *Scheduler) Sources() []view.SourceObject {
	s.mu.Lock()
	defer s.unlock()
	now := s.now()
	out := make([]view.SourceObject, 0, len(s.cfg.Sources))
	for i := range s.cfg.Sources {
		if e := s.entries[s.cfg.Sources[i].Name]; e != nil {
			o := view.View(e.src, &e.st, now, s.redact.Redact)
			o.Owner = s.owner(e)
			out = append(out, o)
		}
	}
	return out
}

// Source returns one source, or ErrNotFound.
func (s *Scheduler) Source(name string) (view.SourceObject, error) {
	s.mu.Lock()
	defer s.unlock()
	e, err := s.entry(name)
	if err != nil {
		return view.SourceObject{}, err
	}
	o := view.View(e.src, &e.st, s.now(), s.redact.Redact)
	o.Owner = s.owner(e)
	return o, nil
}

// entry returns the live entry of name. mu held.
func (s *Scheduler) entry(name string) (*entry, error) {
	e := s.entries[name]
	if e == nil || e.removed {
		return nil, fmt.Errorf("%w: %q", ErrNotFound, name)
	}
	return e, nil
}

// Reset clears a source's failures, breaker and error state; it is next
// polled at its next tick. A poll in flight finishes first and the reset
// is applied over its outcome. Like Pause and Resume, it returns once the
// change is committed (or the store is failing), so that status read from
// the store right after shows it.
func (s *Scheduler) Reset(name string) (view.SourceObject, error) {
	return s.mutate(name, policy.ActionReset, "")
}

// Pause stops polling a source until Resume; it survives restarts.
func (s *Scheduler) Pause(name, reason string) (view.SourceObject, error) {
	return s.mutate(name, policy.ActionPause, reason)
}

// Resume undoes Pause. The source is next polled at its next tick (or when
// its breaker lets a probe through, if later).
func (s *Scheduler) Resume(name string) (view.SourceObject, error) {
	return s.mutate(name, policy.ActionResume, "")
}

// commitWait bounds how long an operator's change waits for its commit.
const commitWait = 2 * time.Second

// Trigger polls a source now, past its backoff and an open breaker, under
// the global and group limits (rule 3.9). It returns ErrConflict for a
// paused source or one in error, and once shutdown has begun. A source
// already polling is left alone.
func (s *Scheduler) Trigger(name string) error {
	if s.isRemote(name) {
		_, err := s.remote(policy.ActionTrigger, name, "")
		return err
	}
	return s.trigger(name)
}

// trigger is Trigger on this member.
func (s *Scheduler) trigger(name string) error {
	s.mu.Lock()
	defer s.unlock()
	e, err := s.entry(name)
	if err != nil {
		return err
	}
	switch {
	case s.stopped:
		return fmt.Errorf("%w: the daemon is shutting down", ErrConflict)
	case e.st.Paused:
		return fmt.Errorf("%w: source %q is paused; resume it first", ErrConflict, name)
	case e.st.ErrorReason != "":
		return fmt.Errorf("%w: source %q is in error; reset it first", ErrConflict, name)
	case e.slot.Busy():
		return nil
	}
	s.dispatch(e, s.now(), time.Time{})
	return nil
}

// mutate applies an operator's action to a source, logs the state change,
// persists it and reschedules the source. It returns once the change is
// committed (or after commitWait), so that the store shows it.
func (s *Scheduler) mutate(name, action, reason string) (view.SourceObject, error) {
	if s.isRemote(name) {
		return s.remote(action, name, reason)
	}
	o, seq, err := s.mutateAsync(name, action, reason)
	if err != nil {
		return view.SourceObject{}, err
	}
	s.waitCommitted(name, seq)
	return o, nil
}

// waitCommitted waits, at most commitWait, for the state of name submitted
// as seq to be committed: an operator's change is done when the store shows
// it.
func (s *Scheduler) waitCommitted(name string, seq uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), commitWait)
	defer cancel()
	s.flush.WaitSaved(ctx, name, seq)
}

// mutateAsync is mutate without the wait: it returns the flusher's sequence
// number of the change, for flush.Flusher.WaitSaved.
func (s *Scheduler) mutateAsync(name, action, reason string) (view.SourceObject, uint64, error) {
	s.mu.Lock()
	e, err := s.entry(name)
	if err != nil {
		s.unlock()
		return view.SourceObject{}, 0, err
	}
	now := s.now()
	prev := policy.StateOf(&e.st, now)
	st, err := policy.Act(action, e.st, e.timing, reason, now)
	if err != nil {
		s.unlock()
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
	s.flushFlap(e, now, prev)
	s.logChange(e, prev, now, action)
	s.save(e, nil)
	s.reschedule(e, now)
	o, seq := view.View(e.src, &e.st, now, s.redact.Redact), e.savedSeq
	s.unlock()
	return o, seq, nil
}

// History returns up to n poll records of a source, newest first,
// including those not yet committed.
func (s *Scheduler) History(ctx context.Context, name string, n int) ([]domain.PollRecord, error) {
	s.mu.Lock()
	_, err := s.entry(name)
	s.unlock()
	if err != nil {
		return nil, err
	}
	// A source never has more than history.keep records.
	n = max(min(n, int(s.keep.Load())), 0)
	out := s.flush.PendingRecords(name)
	if len(out) >= n {
		return out[:n], nil
	}
	stored, err := s.store.History(ctx, name, n)
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

// Ready returns nil when the configuration is loaded and the store accepts
// writes, else the reason.
func (s *Scheduler) Ready(ctx context.Context) error {
	s.mu.Lock()
	started, stopped := s.started, s.stopped
	s.unlock()
	switch {
	case !started:
		return fmt.Errorf("not started")
	case stopped:
		return fmt.Errorf("shutting down")
	}
	if err := s.shards.Ready(); err != nil {
		return err
	}
	// Store errors name the store already ("store: ...").
	if err := s.flush.Err(); err != nil {
		return err
	}
	if err := s.store.Writable(ctx); err != nil {
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
func (s *Scheduler) commands(ctx context.Context) {
	if !s.shards.Member() {
		s.settleOrphans(ctx)
	}
	for {
		if !sleep(ctx, s.clock, s.cmdEvery) {
			return
		}
		cmds, err := s.store.PendingCommands(ctx)
		if err != nil {
			if ctx.Err() == nil {
				s.m.storeErrors.Inc()
			}
			continue
		}
		if s.shards.Member() {
			cmds = s.ownedCommands(cmds)
		}
		s.applyCommands(ctx, s.claimCommands(ctx, cmds))
	}
}

// claimCommands returns the commands of cmds this daemon claimed, in
// order. It stops at the first store error (the rest stay pending for the
// next pass).
func (s *Scheduler) claimCommands(ctx context.Context, cmds []domain.Command) []domain.Command {
	out := cmds[:0]
	for _, c := range cmds {
		ok, err := s.store.ClaimCommand(ctx, c.ID)
		if err != nil {
			if ctx.Err() == nil {
				s.m.storeErrors.Inc()
				s.log.Error("claim command", "id", c.ID, "err", err)
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
func (s *Scheduler) applyCommands(ctx context.Context, cmds []domain.Command) {
	errs := make([]error, len(cmds))
	seqs := make([]uint64, len(cmds))
	for i, c := range cmds {
		seqs[i], errs[i] = s.applyAsync(c.Action, c.Source, c.Reason)
	}
	waitCtx, cancel := context.WithTimeout(ctx, commitWait)
	for i, c := range cmds {
		if errs[i] == nil && seqs[i] > 0 {
			s.flush.WaitSaved(waitCtx, c.Source, seqs[i])
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
			err := s.store.CompleteCommand(retryCtx, c.ID, result, code)
			if err == nil {
				break
			}
			s.m.storeErrors.Inc()
			s.log.Error("complete command", "id", c.ID, "err", err)
			if !sleep(retryCtx, s.clock, s.cmdEvery) {
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
func (s *Scheduler) applyAsync(action, name, reason string) (uint64, error) {
	switch action {
	case policy.ActionReset, policy.ActionPause, policy.ActionResume:
		if action != policy.ActionPause {
			reason = ""
		}
		_, seq, err := s.mutateAsync(name, action, reason)
		return seq, err
	case policy.ActionTrigger:
		return 0, s.trigger(name)
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
