package shards

// The operator's commands on the sources a member does not own (contract
// 8.5): they reach the owner through the store's command queue.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/pacer-dev/pacer/domain"
)

// Waits bound an operator's change made on one member for a source
// another member owns: Apply for the owner to take (claim) the command,
// then Settle for the result of one it took, as the CLI waits (cli:
// commandWait, settleWait). Zero fields take the defaults.
type Waits struct{ Apply, Settle time.Duration }

// remoteApply is the default of Waits.Apply: rule 8.5 is within 2 s, plus
// the commit.
const remoteApply = 5 * time.Second

// remotePoll is how often a command sent to an owner is read again.
const remotePoll = 50 * time.Millisecond

// Bound is the longest a command sent with w takes, its reads included:
// the context of Remote and of the read of the source it changed.
func (w Waits) Bound() time.Duration { return w.Apply + w.Settle + time.Second }

// SetWaits sets the waits of the commands sent from now on.
func (r *Room) SetWaits(w Waits) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.waits = w
}

// Waits are the waits of a command sent now, with their defaults.
func (r *Room) Waits() Waits {
	r.mu.Lock()
	w := r.waits
	r.mu.Unlock()
	if w.Apply <= 0 {
		w.Apply = remoteApply
	}
	if w.Settle <= 0 {
		w.Settle = r.opt.Settle
	}
	return w
}

// Remote applies an operator's action on a source this member does not
// own, through the store's command queue, to its owner, within w (from
// Waits; ctx within w.Bound()). It returns nil once the owner applied it,
// else the owner's refusal or why it was not applied. A command ends in
// exactly one of two ways, as the CLI's do: applied by an owner that
// claimed it, or withdrawn (store.ExpireCommand) once no owner took it
// within w.Apply. A withdrawal that finds the command claimed means the
// owner is applying it: its result is awaited (within w.Settle), never
// reported as applied before it is.
func (r *Room) Remote(ctx context.Context, w Waits, action, name, reason string) error {
	c := &domain.Command{Source: name, Action: action, Reason: reason}
	if err := r.opt.Store.EnqueueCommand(ctx, c); err != nil {
		return fmt.Errorf("%s %s: %w", action, name, err)
	}
	start := r.opt.Now()
	var expireErr error
	for {
		got, err := r.opt.Store.GetCommand(ctx, c.ID)
		now := r.opt.Now()
		if err == nil {
			if done, err := r.remoteDone(got); done {
				return err
			}
			if got.Status == domain.CommandPending && now.Sub(start) > w.Apply {
				ok, err := r.opt.Store.ExpireCommand(ctx, c.ID, fmt.Sprintf("expired: no owner took it within %v", w.Apply))
				if err == nil && ok {
					return fmt.Errorf("%s %s: the source's owner did not take it within %v: it was withdrawn and will not be applied",
						action, name, w.Apply)
				}
				// Claimed meanwhile (its result is awaited), or the store
				// failed: a command still pending may yet be applied.
				expireErr = err
			}
		}
		if now.Sub(start) > w.Apply+w.Settle || !r.opt.Sleep(ctx, remotePoll) {
			break
		}
	}
	if expireErr != nil {
		return fmt.Errorf("%s %s: could not withdraw it from the store (%w): the source's owner may still apply it",
			action, name, expireErr)
	}
	return fmt.Errorf("%s %s: the source's owner took it but did not report its result within %v",
		action, name, w.Apply+w.Settle)
}

// remoteDone reports whether command c has ended, and then nil if its
// owner applied it, else the error to report.
func (r *Room) remoteDone(c domain.Command) (bool, error) {
	switch {
	case c.Status == domain.CommandExpired:
		return true, fmt.Errorf("%s %s was withdrawn (%s): it was not applied", c.Action, c.Source, c.Result)
	case c.Status != domain.CommandDone:
		return false, nil
	case c.Result != "":
		return true, r.commandError(c)
	}
	return true, nil
}

// commandError is the error of a command its owner answered with one: it
// wraps the error of its code (Options.Refusals), if any.
func (r *Room) commandError(c domain.Command) error {
	if base, ok := r.opt.Refusals[c.Code]; ok {
		return fmt.Errorf("%w: %s", base, c.Result)
	}
	return errors.New(c.Result)
}
