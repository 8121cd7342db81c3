package scheduler

// The sources a member does not own (contract 8.5, 8.6): their owner in the
// source object, their state read from the store, and the operator's
// commands, which reach the owner through the store's command queue.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/pacer-dev/pacer/scheduler/view"
	"github.com/pacer-dev/pacer/store"
)

// owner is the owner of e's shard for the source object: this member for
// the shards it polls, else the store's, nil when none or not a cluster.
// A shard this member gave up (handed over, or its lease ran short) is
// still its own while a poll of e runs or e's state waits for its commit:
// the store keeps the claim until then (Drained), and the store's owners,
// read every ownersEvery, may still name the member before this one.
// mu held.
func (s *Scheduler) owner(e *entry) *string {
	if s.own == nil {
		return nil
	}
	if s.active[e.shard] || e.slot.Busy() || !s.flush.Clean(e.sl) {
		name := s.own.Name()
		return &name
	}
	if name, ok := s.owners[e.shard]; ok {
		return &name
	}
	return nil
}

// ownsCommand reports whether this member applies c: its source is on a
// shard it polls (an unknown source, on the shard of its name, so that one
// member answers not_found). mu held.
func (s *Scheduler) ownsCommand(c store.Command) bool {
	if e := s.entries[c.Source]; e != nil && !e.removed {
		return s.active[e.shard]
	}
	return s.own.MayStart(store.ShardOf(c.Source, ""))
}

// remoteWaits bound an operator's change made on one member for a source
// another member owns: apply for the owner to take (claim) the command,
// then settle for the result of one it took, as the CLI waits (cli:
// commandWait, settleWait). The zero value is the defaults.
type remoteWaits struct{ apply, settle time.Duration }

// The defaults of remoteWaits: rule 8.5 is within 2 s, plus the commit;
// the owner retries recording a result for up to resultWait.
const (
	remoteApply  = 5 * time.Second
	remoteSettle = resultWait
)

// remoteWaitsOf is w with its defaults.
func remoteWaitsOf(w remoteWaits) remoteWaits {
	if w.apply <= 0 {
		w.apply = remoteApply
	}
	if w.settle <= 0 {
		w.settle = remoteSettle
	}
	return w
}

// remote applies an operator's action on a source this member does not
// own: through the store's command queue, to its owner. It returns the
// source as the store shows it once the owner applied it, or the owner's
// refusal. A command ends in exactly one of two ways, as the CLI's do:
// applied by an owner that claimed it, or withdrawn (store.ExpireCommand)
// once no owner took it within the apply bound. A withdrawal that finds
// the command claimed means the owner is applying it: its result is
// awaited (within settle), never reported as applied before it is.
func (s *Scheduler) remote(action, name, reason string) (view.SourceObject, error) {
	w := remoteWaitsOf(s.remoteWait)
	ctx, cancel := context.WithTimeout(context.Background(), w.apply+w.settle+time.Second)
	defer cancel()
	c := &store.Command{Source: name, Action: action, Reason: reason}
	if err := s.cst.EnqueueCommand(ctx, c); err != nil {
		return view.SourceObject{}, fmt.Errorf("%s %s: %w", action, name, err)
	}
	start := s.clock.Now()
	var expireErr error
	for {
		got, err := s.cst.GetCommand(ctx, c.ID)
		now := s.clock.Now()
		if err == nil {
			if done, o, err := s.remoteDone(ctx, got); done {
				return o, err
			}
			if got.Status == store.CommandPending && now.Sub(start) > w.apply {
				ok, err := s.cst.ExpireCommand(ctx, c.ID, fmt.Sprintf("expired: no owner took it within %v", w.apply))
				if err == nil && ok {
					return view.SourceObject{}, fmt.Errorf("%s %s: the source's owner did not take it within %v: it was withdrawn and will not be applied",
						action, name, w.apply)
				}
				// Claimed meanwhile (its result is awaited), or the store
				// failed: a command still pending may yet be applied.
				expireErr = err
			}
		}
		if now.Sub(start) > w.apply+w.settle || !sleep(ctx, s.clock, 50*time.Millisecond) {
			break
		}
	}
	if expireErr != nil {
		return view.SourceObject{}, fmt.Errorf("%s %s: could not withdraw it from the store (%w): the source's owner may still apply it",
			action, name, expireErr)
	}
	return view.SourceObject{}, fmt.Errorf("%s %s: the source's owner took it but did not report its result within %v",
		action, name, w.apply+w.settle)
}

// remoteDone reports whether command c has ended, and then the source
// object (from the store, once applied) or the error to report.
func (s *Scheduler) remoteDone(ctx context.Context, c store.Command) (bool, view.SourceObject, error) {
	switch {
	case c.Status == store.CommandExpired:
		return true, view.SourceObject{}, fmt.Errorf("%s %s was withdrawn (%s): it was not applied", c.Action, c.Source, c.Result)
	case c.Status != store.CommandDone:
		return false, view.SourceObject{}, nil
	case c.Result != "":
		return true, view.SourceObject{}, commandError(c)
	}
	o, err := s.storedView(ctx, c.Source)
	return true, o, err
}

// commandError is the error of a command its owner answered with one.
func commandError(c store.Command) error {
	switch c.Code {
	case "not_found":
		return fmt.Errorf("%w: %s", ErrNotFound, c.Result)
	case "conflict":
		return fmt.Errorf("%w: %s", ErrConflict, c.Result)
	}
	return errors.New(c.Result)
}

// storedView is the source object of name from its stored state.
func (s *Scheduler) storedView(ctx context.Context, name string) (view.SourceObject, error) {
	st, found, err := s.store.GetState(ctx, name)
	if err != nil {
		return view.SourceObject{}, fmt.Errorf("read %s: %w", name, err)
	}
	s.mu.Lock()
	defer s.unlock()
	e, err := s.entry(name)
	if err != nil {
		return view.SourceObject{}, err
	}
	if !found {
		st = e.st
	}
	o := view.View(e.src, &st, s.clock.Now(), s.redact.Redact)
	o.Owner = s.owner(e)
	return o, nil
}

// isRemote reports whether name is a configured source this member does
// not poll (an operator's change goes to its owner).
func (s *Scheduler) isRemote(name string) bool {
	if s.own == nil {
		return false
	}
	s.mu.Lock()
	defer s.unlock()
	e := s.entries[name]
	return e != nil && !e.removed && !s.active[e.shard]
}

// ownedCommands keeps the commands of cmds this member applies; the others
// stay pending for their owners.
func (s *Scheduler) ownedCommands(cmds []store.Command) []store.Command {
	s.mu.Lock()
	defer s.unlock()
	out := cmds[:0]
	for _, c := range cmds {
		if s.ownsCommand(c) {
			out = append(out, c)
		}
	}
	return out
}

// activeCount is the number of shards polled.
func (s *Scheduler) activeCount() int {
	s.mu.Lock()
	defer s.unlock()
	return s.activeN
}

// remoteStates reads from the store the states of the sources of names
// (nil: all) that this member does not poll, so that its API shows them
// as their owners committed them; nil on a single daemon, or when the
// store does not answer (the member's own copy is shown then).
func (s *Scheduler) remoteStates(names []string) map[string]store.SourceState {
	if s.own == nil {
		return nil
	}
	var dormant []string
	s.mu.Lock()
	if names == nil {
		for name, e := range s.entries {
			if s.dormant(e) {
				dormant = append(dormant, name)
			}
		}
	} else {
		for _, name := range names {
			if e := s.entries[name]; e != nil && s.dormant(e) {
				dormant = append(dormant, name)
			}
		}
	}
	s.unlock()
	if len(dormant) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	states, err := s.cst.LoadStatesOf(ctx, dormant)
	if err != nil {
		return nil
	}
	out := make(map[string]store.SourceState, len(states))
	for _, st := range states {
		out[st.Name] = st
	}
	return out
}
