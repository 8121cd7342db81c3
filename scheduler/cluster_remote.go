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
func (g *membership) owner(e *entry) *string {
	if !g.shards.Member() {
		return nil
	}
	return g.shards.Owner(e.shard, e.slot.Busy() || !g.flush.Clean(e.sl))
}

// ownsCommand reports whether this member applies c: its source is on a
// shard it polls (an unknown source, on the shard of its name, so that one
// member answers not_found). mu held.
func (g *membership) ownsCommand(c domain.Command) bool {
	if e := g.entries[c.Source]; e != nil && !e.removed {
		return g.shards.Polls(e.shard)
	}
	return g.shards.MayStart(domain.ShardOf(c.Source, ""))
}

// remote applies an operator's action on a source this member does not
// own, through its owner (shards.Room's Remote). It returns the source as
// the store shows it once the owner applied it, or why it was not.
func (g *membership) remote(action, name, reason string) (view.SourceObject, error) {
	w := g.shards.Waits()
	ctx, cancel := context.WithTimeout(context.Background(), w.Bound())
	defer cancel()
	if err := g.shards.Remote(ctx, w, action, name, reason); err != nil {
		return view.SourceObject{}, err
	}
	return g.storedView(ctx, name)
}

// storedView is the source object of name from its stored state.
func (g *membership) storedView(ctx context.Context, name string) (view.SourceObject, error) {
	st, found, err := g.store.GetState(ctx, name)
	if err != nil {
		return view.SourceObject{}, fmt.Errorf("read %s: %w", name, err)
	}
	g.mu.Lock()
	defer g.unlock()
	e, err := g.entry(name)
	if err != nil {
		return view.SourceObject{}, err
	}
	if !found {
		st = e.st
	}
	o := view.ViewIn(g.cfg, e.src, &st, g.clock.Now(), g.redact.Redact)
	o.Owner = g.owner(e)
	return o, nil
}

// isRemote reports whether name is a configured source this member does
// not poll (an operator's change goes to its owner).
func (g *membership) isRemote(name string) bool {
	if !g.shards.Member() {
		return false
	}
	g.mu.Lock()
	defer g.unlock()
	e := g.entries[name]
	return e != nil && !e.removed && !g.shards.Polls(e.shard)
}

// ownedCommands keeps the commands of cmds this member applies; the others
// stay pending for their owners.
func (g *membership) ownedCommands(cmds []domain.Command) []domain.Command {
	g.mu.Lock()
	defer g.unlock()
	out := cmds[:0]
	for _, c := range cmds {
		if g.ownsCommand(c) {
			out = append(out, c)
		}
	}
	return out
}

// remoteStates reads from the store the states of the sources of names
// (nil: all) that this member does not poll, so that its API shows them
// as their owners committed them; nil on a single daemon, or when the
// store does not answer (the member's own copy is shown then).
func (g *membership) remoteStates(names []string) map[string]domain.SourceState {
	if !g.shards.Member() {
		return nil
	}
	var dormant []string
	g.mu.Lock()
	if names == nil {
		for name, e := range g.entries {
			if g.dormant(e) {
				dormant = append(dormant, name)
			}
		}
	} else {
		for _, name := range names {
			if e := g.entries[name]; e != nil && g.dormant(e) {
				dormant = append(dormant, name)
			}
		}
	}
	g.unlock()
	if len(dormant) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	out, err := g.shards.ReadStates(ctx, dormant)
	if err != nil {
		return nil
	}
	return out
}
