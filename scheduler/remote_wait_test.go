package scheduler

import (
	"context"
	"errors"
	"github.com/pacer-dev/pacer/internal/clock"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/domain"
	"github.com/pacer-dev/pacer/scheduler/policy"
	"github.com/pacer-dev/pacer/scheduler/shards"
	"github.com/pacer-dev/pacer/store"
)

// expireHook is the real store that tells when a withdrawal
// (ExpireCommand) found its command claimed by another member.
type expireHook struct {
	*store.Store
	refused chan uint64
}

func (e *expireHook) ExpireCommand(ctx context.Context, id uint64, reason string) (bool, error) {
	ok, err := e.Store.ExpireCommand(ctx, id, reason)
	if err == nil && !ok {
		select {
		case e.refused <- id:
		default:
		}
	}
	return ok, err
}

// errNoResult, from slowOwner's apply: the owner never records a result
// (it died after its claim).
var errNoResult = errors.New("no result")

// slowOwner is the owner of sources this member does not poll, at the
// store's level: it claims the command queued for source, waits until the
// member's wait for an owner to take it ran out (late after the claim, or
// once the member tried to withdraw it, as the member did before it waited
// for a claimed command), then applies it with apply and records result
// and code.
func slowOwner(t *testing.T, st *store.Store, refused <-chan uint64, source string, late time.Duration,
	apply func(ctx context.Context) error, result, code string) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		var id uint64
		for id == 0 {
			cmds, err := st.PendingCommands(ctx)
			if err != nil {
				t.Errorf("owner: %v", err)
				return
			}
			for _, c := range cmds {
				if c.Source == source {
					if ok, err := st.ClaimCommand(ctx, c.ID); err == nil && ok {
						id = c.ID
					}
				}
			}
			if !clock.Sleep(ctx, clock.Real{}, 20*time.Millisecond) {
				return
			}
		}
		select {
		case got := <-refused:
			if got != id {
				t.Errorf("owner: the withdrawal of command %d refused, want %d", got, id)
			}
		case <-time.After(late):
		case <-ctx.Done():
			return
		}
		if apply != nil {
			switch err := apply(ctx); {
			case errors.Is(err, errNoResult):
				return
			case err != nil:
				t.Errorf("owner: apply: %v", err)
			}
		}
		if err := st.CompleteCommand(ctx, id, result, code); err != nil {
			t.Errorf("owner: complete: %v", err)
		}
	}()
}

// TestRemoteCommandWaitsForClaimedResult (hardening item 6): an operator's
// pause on a member, for a source another member owns, that the owner took
// (claimed) but whose result comes after the member's wait for an owner
// ran out. The member cannot withdraw it any more (ExpireCommand: false):
// it waits for the owner's result, as the CLI does, and reports it: the
// source paused, or the owner's refusal. Before, it answered at once with
// the state stored then, unpaused, as if the pause were applied.
func TestRemoteCommandWaitsForClaimedResult(t *testing.T) {
	st := openPG(t)
	a := newClusterMember(t, st, "a")
	runMember(t, a)
	own := gate(a)
	names := []string{"applied", "refused", "unreported", "untaken"}
	shardsApart(t, names...)
	for _, name := range names {
		own.deny(domain.ShardOf(name, ""), true) // another member's
	}
	hook := &expireHook{Store: st, refused: make(chan uint64, 1)}
	dir := t.TempDir()
	cfg := writeConfig(t, dir, "sources:\n"+
		"  - {name: applied, type: exec, command: [\"true\"], "+yearly+"}\n"+
		"  - {name: refused, type: exec, command: [\"true\"], "+yearly+"}\n"+
		"  - {name: unreported, type: exec, command: [\"true\"], "+yearly+"}\n"+
		"  - {name: untaken, type: exec, command: [\"true\"], "+yearly+"}\n")
	s := startMemberScheduler(t, cfg, hook, own, nil)
	// The stand-in owner looks for the command every 20 ms: 2 s to take it
	// holds on a loaded machine (300 ms did not, once).
	s.deps.shards.SetWaits(shards.Waits{Apply: 2 * time.Second, Settle: 20 * time.Second})
	late := 3500 * time.Millisecond // the owner's result, after the member's apply bound

	slowOwner(t, st, hook.refused, "applied", late, func(ctx context.Context) error {
		return st.Commit(ctx, domain.Batch{States: []domain.SourceState{{Name: "applied", Paused: true, PausedReason: "maintenance"}}}, 10)
	}, "", "")
	o, err := s.Pause("applied", "maintenance")
	if err != nil || o.State != policy.StatePaused {
		t.Errorf("pause of a source whose owner applied it late: %s, %v; want paused", o.State, err)
	}

	slowOwner(t, st, hook.refused, "refused", late, nil, `source "refused" is in error; reset it first`, "conflict")
	o, err = s.Pause("refused", "maintenance")
	if !errors.Is(err, ErrConflict) {
		t.Errorf("pause of a source whose owner refused it late: %s, %v; want the owner's conflict", o.State, err)
	}

	// Taken and never reported: an error that says so once settle ran out.
	s.deps.shards.SetWaits(shards.Waits{Apply: 2 * time.Second, Settle: time.Second})
	slowOwner(t, st, hook.refused, "unreported", late, func(context.Context) error { return errNoResult }, "", "")
	if _, err := s.Resume("unreported"); err == nil || !strings.Contains(err.Error(), "did not report its result") {
		t.Errorf("resume never reported by its owner: %v; want an error saying so", err)
	}

	// Taken by nobody: withdrawn, never applied, and reported so.
	if _, err := s.Pause("untaken", "maintenance"); err == nil || !strings.Contains(err.Error(), "withdrawn") {
		t.Errorf("pause no owner took: %v; want it reported withdrawn", err)
	}
}

// staleClaim is the real store whose reads of a command show it pending
// while its owner applies it, until a withdrawal of it was refused: reads
// that raced the owner's claim, so that the member's withdrawal finds the
// command claimed (ExpireCommand false). It tells the owner (refused) only
// when the member reads the command again after that, as one that waits
// for its result does: a member that took the refusal for "applied" is
// never shown the owner's result.
type staleClaim struct {
	*store.Store
	refused   chan uint64
	refusedID atomic.Uint64 // the command whose withdrawal was refused (0: none)
}

func (s *staleClaim) GetCommand(ctx context.Context, id uint64) (domain.Command, error) {
	if s.refusedID.Load() == id {
		select {
		case s.refused <- id:
		default:
		}
	}
	c, err := s.Store.GetCommand(ctx, id)
	if err == nil && c.Status == domain.CommandApplying && s.refusedID.Load() == 0 {
		c.Status = domain.CommandPending
	}
	return c, err
}

func (s *staleClaim) ExpireCommand(ctx context.Context, id uint64, reason string) (bool, error) {
	ok, err := s.Store.ExpireCommand(ctx, id, reason)
	if err == nil && !ok {
		s.refusedID.Store(id)
	}
	return ok, err
}

// TestRemoteCommandWaitsAfterRefusedWithdrawal: the member's withdrawal
// of a command it saw pending after its wait for an owner finds it
// claimed (the owner took it in between): the member waits for the
// owner's result and reports it, never the source as stored before it.
func TestRemoteCommandWaitsAfterRefusedWithdrawal(t *testing.T) {
	st := openPG(t)
	a := newClusterMember(t, st, "a")
	runMember(t, a)
	own := gate(a)
	own.deny(domain.ShardOf("x", ""), true) // another member's
	hook := &staleClaim{Store: st, refused: make(chan uint64, 1)}
	dir := t.TempDir()
	cfg := writeConfig(t, dir, "sources:\n  - {name: x, type: exec, command: [\"true\"], "+yearly+"}\n")
	s := startMemberScheduler(t, cfg, hook, own, nil)
	s.deps.shards.SetWaits(shards.Waits{Apply: 2 * time.Second, Settle: 20 * time.Second})
	slowOwner(t, st, hook.refused, "x", 20*time.Second, func(ctx context.Context) error {
		return st.Commit(ctx, domain.Batch{States: []domain.SourceState{{Name: "x", Paused: true, PausedReason: "maintenance"}}}, 10)
	}, "", "")
	o, err := s.Pause("x", "maintenance")
	if err != nil || o.State != policy.StatePaused {
		t.Errorf("pause whose withdrawal found it claimed: %s, %v; want paused", o.State, err)
	}
}
