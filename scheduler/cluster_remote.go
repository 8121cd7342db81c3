package scheduler

// The sources a member does not own (contract 8.5, 8.6): their owner in the
// source object, their state read from the store, and the operator's
// commands, which reach the owner through the store's command queue.

import (
	"context"
	"errors"
	"fmt"
	"time"

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
	if s.active[e.shard] || e.busy || !s.flush.clean(e.sl) {
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

// remoteWait bounds how long an operator's change made on one member waits
// for the source's owner to apply it (rule 8.5: within 2 s, plus the commit).
const remoteWait = 5 * time.Second

// remote applies an operator's action on a source this member does not
// own: through the store's command queue, to its owner. It returns the
// source as the store shows it afterwards.
func (s *Scheduler) remote(action, name, reason string) (SourceObject, error) {
	ctx, cancel := context.WithTimeout(context.Background(), remoteWait)
	defer cancel()
	c := &store.Command{Source: name, Action: action, Reason: reason}
	if err := s.cst.EnqueueCommand(ctx, c); err != nil {
		return SourceObject{}, fmt.Errorf("%s %s: %w", action, name, err)
	}
	for {
		got, err := s.cst.GetCommand(ctx, c.ID)
		if err == nil && got.Status == store.CommandDone {
			if got.Result != "" {
				return SourceObject{}, commandError(got)
			}
			return s.storedView(ctx, name)
		}
		if !sleep(ctx, s.clock, 50*time.Millisecond) {
			break
		}
	}
	wctx, wcancel := context.WithTimeout(context.Background(), time.Second)
	defer wcancel()
	if ok, err := s.cst.ExpireCommand(wctx, c.ID, "no owner applied it in time"); err == nil && !ok {
		return s.storedView(wctx, name) // applied at the last moment
	}
	return SourceObject{}, fmt.Errorf("%s %s: the source's owner did not apply it within %v", action, name, remoteWait)
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
func (s *Scheduler) storedView(ctx context.Context, name string) (SourceObject, error) {
	st, found, err := s.store.GetState(ctx, name)
	if err != nil {
		return SourceObject{}, fmt.Errorf("read %s: %w", name, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e, err := s.entry(name)
	if err != nil {
		return SourceObject{}, err
	}
	if !found {
		st = e.st
	}
	o := View(e.src, &st, s.clock.Now(), s.redact.Redact)
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
	defer s.mu.Unlock()
	e := s.entries[name]
	return e != nil && !e.removed && !s.active[e.shard]
}

// ownedCommands keeps the commands of cmds this member applies; the others
// stay pending for their owners.
func (s *Scheduler) ownedCommands(cmds []store.Command) []store.Command {
	s.mu.Lock()
	defer s.mu.Unlock()
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
	defer s.mu.Unlock()
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
	s.mu.Unlock()
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
