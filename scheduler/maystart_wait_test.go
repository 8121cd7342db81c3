package scheduler

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/domain"
	"github.com/pacer-dev/pacer/store"
)

// slowCommits is the real store whose fenced commits, while blocking is
// set, wait for release (a loaded database): a commit that is slow, not
// failed, so that a poll waits for its source's previous state (rule 3.8).
type slowCommits struct {
	*store.Store
	blocking atomic.Bool
	entered  chan struct{}
	release  chan struct{}
}

func (c *slowCommits) CommitFenced(ctx context.Context, f domain.Fence, b domain.Batch, keep int) ([]string, error) {
	if c.blocking.Load() {
		select {
		case c.entered <- struct{}{}:
		default:
		}
		select {
		case <-c.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return c.Store.CommitFenced(ctx, f, b, keep)
}

// claimedNow reports whether a poll of name is claimed (past its last
// check, about to start or running).
func (s *Scheduler) claimedNow(name string) bool {
	s.tab.mu.Lock()
	defer s.tab.mu.Unlock()
	found := false
	s.wk.q.EachClaimed(func(e *entry) { found = found || e.name == name })
	return found
}

// TestMayStartCheckedAfterCommitWait: a poll that passed its member's
// check (MayStart) and then waited for its source's previous state to be
// committed (rule 3.8; seconds on a loaded database) does not start once
// the member may no longer start polls of its shard (its claim ending
// meanwhile): it is asked again after the wait. Else the poll started
// after the claim's margin, when another member may own the source.
func TestMayStartCheckedAfterCommitWait(t *testing.T) {
	ctx := t.Context()
	pg := openPG(t)
	st := &slowCommits{Store: pg, entered: make(chan struct{}, 1), release: make(chan struct{})}
	a := newClusterMember(t, pg, "a")
	if err := a.Round(ctx); err != nil {
		t.Fatal(err)
	}
	own := gate(a)
	ps := map[string]*testPoller{"x": newTestPoller(false)}
	dir := t.TempDir()
	cfg := writeConfig(t, dir, "sources:\n  - {name: x, type: exec, command: [\"true\"], "+yearly+"}\n")
	s := startMemberScheduler(t, cfg, st, own, pollersOf(ps))
	sh := domain.ShardOf("x", "")
	waitUntil(t, "x's shard taken over", 10*time.Second, func() bool { return s.polls(sh) && s.Drained(sh) })

	st.blocking.Store(true)
	if err := s.Trigger("x"); err != nil {
		t.Fatal(err)
	}
	<-st.entered // the first poll's state is in a slow commit
	waitUntil(t, "the first poll over", 10*time.Second, func() bool { return ps["x"].n.Load() == 1 && !s.busyNow("x") })
	if err := s.Trigger("x"); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the second poll claimed, waiting for the commit", 10*time.Second, func() bool { return s.claimedNow("x") })
	own.deny(sh, true) // the claim ends while the poll waits
	st.blocking.Store(false)
	close(st.release)
	waitUntil(t, "the second poll's job over", 10*time.Second, func() bool { return !s.busyNow("x") })
	if n := ps["x"].n.Load(); n != 1 {
		t.Errorf("x polled %d times; the second poll started after its member stopped being allowed to start its polls", n)
	}
}
