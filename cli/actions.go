package cli

// The operator's actions (reset, pause, resume, trigger): through a running
// daemon's command queue in the store, or on the store directly.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/domain"
	"github.com/pacer-dev/pacer/scheduler/policy"
	"github.com/pacer-dev/pacer/store"
)

// commandWait is how long the CLI waits for a running daemon to apply a
// command it queued in the store.
const commandWait = 5 * time.Second

// cmdAction runs reset, pause, resume and trigger. With a daemon running
// on the store, the command is queued in the store and applied by the
// daemon (so the daemon never overwrites it); otherwise reset, pause and
// resume change the store directly.
func cmdAction(action string, args []string, env Env) (err error) {
	f := newFlags(action, env)
	defer f.redact(&err)
	var allErrored *bool
	var reason *string
	if action == policy.ActionReset {
		allErrored = f.Bool("all-errored", false, "reset every source in the error state")
	}
	if action == policy.ActionPause {
		reason = f.String("reason", "", "why the source is paused")
	}
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	all := allErrored != nil && *allErrored
	if err := checkActionArgs(action, pos, all); err != nil {
		return err
	}
	cfg, err := f.loadForStore(env)
	if err != nil {
		return err
	}
	if done, err := beforeAction(env.Stdout, cfg, action, pos, all); done || err != nil {
		return err
	}
	why := ""
	if reason != nil {
		why = *reason
	}
	st, pid, running, release, err := openForAction(cfg, action)
	if err != nil {
		return err
	}
	defer release()
	ctx := context.Background()
	if all {
		if pos, err = erroredSources(ctx, st, cfg); err != nil {
			return err
		}
		if len(pos) == 0 {
			fmt.Fprintln(env.Stdout, "no source is in error")
			return nil
		}
	}
	for _, name := range pos {
		if running {
			err = viaDaemon(ctx, st, pid, action, name, why)
		} else {
			err = direct(ctx, st, cfg, action, name, why)
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(env.Stdout, "%s: %s\n", name, pastTense(action))
	}
	return nil
}

// checkActionArgs checks the names given to action (all: -all-errored).
func checkActionArgs(action string, pos []string, all bool) error {
	switch {
	case all && len(pos) > 0:
		return usagef("reset takes NAME... or -all-errored, not both")
	case all:
	case action == policy.ActionReset && len(pos) == 0:
		return usagef("reset needs NAME... or -all-errored")
	case action != policy.ActionReset && len(pos) != 1:
		return usagef("%s takes one NAME", action)
	}
	return nil
}

// openForAction opens cfg's store for action and says whether a daemon
// runs on it (and its pid). Without one it holds the daemon's lock while
// the store is changed, so that a daemon starting meanwhile cannot load a
// half-applied change; release closes the store and gives the lock back.
// A store deleted under (or after) a daemon is refused: a command must not
// create a new, empty one, which the running daemon would never read.
func openForAction(cfg *config.Config, action string) (st *store.Store, pid int, running bool, release func(), err error) {
	if err := store.Vanished(cfg.Store); err != nil {
		return nil, 0, false, nil, err
	}
	if pid, running, err = store.Holder(cfg.Store); err != nil {
		return nil, 0, false, nil, err
	}
	if !running && action == policy.ActionTrigger {
		return nil, 0, false, nil, fmt.Errorf("trigger needs a running daemon; none holds store %s", cfg.Redactor().Redact(cfg.Store))
	}
	var lock *store.Lock
	if !running {
		lock, err = store.AcquireLock(cfg.Store)
		var le *store.LockedError
		switch {
		case errors.As(err, &le):
			running, pid, lock = true, le.PID, nil
		case err != nil:
			return nil, 0, false, nil, err
		}
	}
	// The lock (when this command holds it) makes Open lock the database
	// file and refuse to create one where the lock file records a store.
	st, err = openStoreWith(cfg, store.Options{Lock: lock})
	if err != nil {
		if lock != nil {
			_ = lock.Release()
		}
		return nil, 0, false, nil, err
	}
	release = func() {
		_ = st.Close()
		if lock != nil {
			_ = lock.Release()
		}
	}
	return st, pid, running, release, nil
}

// erroredSources lists, sorted, the configured sources in the error state.
func erroredSources(ctx context.Context, st *store.Store, cfg *config.Config) ([]string, error) {
	states, err := st.LoadStates(ctx)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, s := range states {
		if _, ok := cfg.Source(s.Name); ok && s.ErrorReason != "" {
			names = append(names, s.Name)
		}
	}
	slices.Sort(names)
	return names, nil
}

func pastTense(action string) string {
	switch action {
	case policy.ActionReset:
		return "reset"
	case policy.ActionTrigger:
		return "triggered"
	}
	return action + "d"
}

// viaDaemon queues the command for the running daemon and waits for it.
func viaDaemon(ctx context.Context, st *store.Store, pid int, action, name, reason string) error {
	c := &domain.Command{Source: name, Action: action, Reason: reason}
	if err := st.EnqueueCommand(ctx, c); err != nil {
		return err
	}
	return awaitCommand(ctx, st, pid, c, commandWaits{apply: commandWait, settle: settleWait, poll: 50 * time.Millisecond})
}

// settleWait bounds how long the CLI waits, past commandWait, to learn the
// fate of a command: the result of one the daemon claimed, or a withdrawal
// that the store's write lock (held by another process) delays.
const settleWait = 30 * time.Second

// commandWaits are awaitCommand's bounds: apply for the daemon to take the
// command, settle beyond it, poll between reads.
type commandWaits struct{ apply, settle, poll time.Duration }

// awaitCommand waits for the daemon's result of the queued command c. A
// command ends in exactly one of two ways, and is reported so: applied
// (nil, or the daemon's refusal), or not applied. Past w.apply a command no
// daemon has claimed is withdrawn (store.ExpireCommand), and a daemon
// applies only what it claimed (store.ClaimCommand); the two conditional
// updates exclude each other, so when the withdrawal finds the command
// claimed, the daemon's result is awaited instead of reporting a failure.
func awaitCommand(ctx context.Context, st *store.Store, pid int, c *domain.Command, w commandWaits) error {
	start := time.Now()
	deadline, hard := start.Add(w.apply), start.Add(w.apply+w.settle)
	var expireErr error
	for {
		got, err := st.GetCommand(ctx, c.ID)
		if err != nil {
			return err
		}
		now := time.Now()
		switch {
		case got.DoneAt != nil && got.Status == domain.CommandExpired:
			return fmt.Errorf("%s %s was withdrawn (%s): it was not applied", c.Action, c.Source, got.Result)
		case got.DoneAt != nil && got.Result != "":
			return errors.New(got.Result)
		case got.DoneAt != nil:
			return nil
		case got.Status == domain.CommandPending && now.After(deadline):
			ok, err := st.ExpireCommand(ctx, c.ID, fmt.Sprintf("expired: no daemon took it within %s", w.apply))
			if err == nil && ok {
				return fmt.Errorf("the running daemon (pid %d) did not take %s %s within %s: it was withdrawn and will not be applied",
					pid, c.Action, c.Source, w.apply)
			}
			// Claimed meanwhile (its result is awaited), or the store is
			// busy: a command still pending may yet be applied, so it is
			// not reported as failed.
			expireErr = err
		}
		if now.After(hard) {
			if expireErr != nil {
				return fmt.Errorf("%s %s: could not withdraw it from the store (%w): the daemon (pid %d) may still apply it; see pacer status %s",
					c.Action, c.Source, expireErr, pid, c.Source)
			}
			return fmt.Errorf("the running daemon (pid %d) took %s %s but did not report its result within %s; see pacer status %s",
				pid, c.Action, c.Source, w.apply+w.settle, c.Source)
		}
		t := time.NewTimer(w.poll)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// direct applies the command to the store of a stopped daemon.
func direct(ctx context.Context, st *store.Store, cfg *config.Config, action, name, reason string) error {
	src, _ := cfg.Source(name)
	cur, ok, err := st.GetState(ctx, name)
	if err != nil {
		return err
	}
	if !ok {
		// No fingerprint: the one computed here may differ from the
		// daemon's (a variable or a PATH only the daemon has, see
		// config.Options.ForStore); the daemon takes its own for a row
		// without one rather than see a changed configuration.
		cur = domain.SourceState{Name: name}
	}
	next, err := policy.ApplyAction(action, src, cur, reason, time.Now())
	if err != nil {
		return err
	}
	return st.SaveBatch(ctx, []domain.SourceState{next}, nil, cfg.History.Keep)
}
