package scheduler

// The sources a member does not own (contract 8.5, 8.6): their owner in the
// source object, their state read from the store, and the operator's
// commands, which reach the owner through the store's command queue.

import (
	"context"
	"fmt"
	"time"

	"github.com/pacer-dev/pacer/domain"
	"github.com/pacer-dev/pacer/scheduler/view"
)

// owner is the owner of e's shard for the source object (shards.Room's
// Owner): this member while a poll of e runs or e's state waits for its
// commit, even on a shard it gave up. mu held.
func (s *Scheduler) owner(e *entry) *string {
	if !s.shards.Member() {
		return nil
	}
	return s.shards.Owner(e.shard, e.slot.Busy() || !s.flush.Clean(e.sl))
}

// ownsCommand reports whether this member applies c: its source is on a
// shard it polls (an unknown source, on the shard of its name, so that one
// member answers not_found). mu held.
func (s *Scheduler) ownsCommand(c domain.Command) bool {
	if e := s.entries[c.Source]; e != nil && !e.removed {
		return s.shards.Polls(e.shard)
	}
	return s.shards.MayStart(domain.ShardOf(c.Source, ""))
}

// remote applies an operator's action on a source this member does not
// own, through its owner (shards.Room's Remote). It returns the source as
// the store shows it once the owner applied it, or why it was not.
func (s *Scheduler) remote(action, name, reason string) (view.SourceObject, error) {
	w := s.shards.Waits()
	ctx, cancel := context.WithTimeout(context.Background(), w.Bound())
	defer cancel()
	if err := s.shards.Remote(ctx, w, action, name, reason); err != nil {
		return view.SourceObject{}, err
	}
	return s.storedView(ctx, name)
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
	if !s.shards.Member() {
		return false
	}
	s.mu.Lock()
	defer s.unlock()
	e := s.entries[name]
	return e != nil && !e.removed && !s.shards.Polls(e.shard)
}

// ownedCommands keeps the commands of cmds this member applies; the others
// stay pending for their owners.
func (s *Scheduler) ownedCommands(cmds []domain.Command) []domain.Command {
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

// remoteStates reads from the store the states of the sources of names
// (nil: all) that this member does not poll, so that its API shows them
// as their owners committed them; nil on a single daemon, or when the
// store does not answer (the member's own copy is shown then).
func (s *Scheduler) remoteStates(names []string) map[string]domain.SourceState {
	if !s.shards.Member() {
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
	out, err := s.shards.ReadStates(ctx, dormant)
	if err != nil {
		return nil
	}
	return out
}
