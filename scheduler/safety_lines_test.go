package scheduler

import (
	"context"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/domain"
	"github.com/pacer-dev/pacer/internal/waitfor"
	"github.com/pacer-dev/pacer/scheduler/policy"
	"github.com/pacer-dev/pacer/store"
)

// The safety lines of the cluster and of the permits (hardening item 7):
// each test below fails when the line it names is removed.

// yearly is a schedule that never comes due during a test: the tests poll
// by trigger only.
const yearly = `schedule: "0 0 1 1 *"`

// TestCommitFenceHonoursTakeOver: rows written under a claim are refused
// once the shard was another member's, even if this member holds it again
// (with a new fence) by the time they are committed. The member here loses
// its shard without its scheduler noticing (between two of its looks at
// the member's shards), another member takes the shard and commits, and
// the first one claims it back, all while a pause waits in the flusher.
// The commit fence is the take-over fence (shards.Room.Fence), not the member's
// current one: the pause is refused and the other member's state stays.
func TestCommitFenceHonoursTakeOver(t *testing.T) {
	ctx := t.Context()
	st := openPG(t)
	a, b := newClusterMember(t, st, "a"), newClusterMember(t, st, "b")
	if err := a.Round(ctx); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg := writeConfig(t, dir, "sources:\n  - {name: x, type: exec, command: [\"true\"], "+yearly+"}\n")
	own := gate(a)
	s := startMemberScheduler(t, cfg, st, own, nil)
	sh := domain.ShardOf("x", "")
	waitUntil(t, "x's shard taken over", 10*time.Second, func() bool { return s.polls(sh) && s.Drained(sh) })

	own.held.Store(true) // the pause waits in the flusher
	if _, _, err := s.ctl.mutateAsync("x", policy.ActionPause, "stale"); err != nil {
		t.Fatal(err)
	}
	// a's shards are another's meanwhile: b claims them and commits.
	if err := st.LeaveCluster(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if err := b.Round(ctx); err != nil {
		t.Fatal(err)
	}
	shardOf := func(string) int { return sh }
	rejected, err := st.CommitFenced(ctx, b.Fence(shardOf),
		domain.Batch{States: []domain.SourceState{{Name: "x", LastError: "b's state"}}}, 10)
	if err != nil || len(rejected) > 0 {
		t.Fatalf("b's commit: rejected %v, err %v", rejected, err)
	}
	if err := st.LeaveCluster(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if err := a.Round(ctx); err != nil { // a holds the shard again, with a new fence
		t.Fatal(err)
	}
	if !a.MayStart(sh) {
		t.Fatal("a did not claim the shard back")
	}
	own.held.Store(false)
	waitUntil(t, "the pause committed or refused", 15*time.Second, func() bool { return s.Drained(sh) })
	got, _, err := st.GetState(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	if got.Paused || got.LastError != "b's state" {
		t.Errorf("stored x: paused %v, last error %q; want b's state (a's pause, written under its first claim, refused)",
			got.Paused, got.LastError)
	}
}

// loadHook is the real store with a hook that runs when LoadStatesOf has
// read its states and before it returns them (the states a member reads of
// the shards it takes over).
type loadHook struct {
	*store.Store
	after func(names []string)
}

func (l *loadHook) LoadStatesOf(ctx context.Context, names []string) ([]domain.SourceState, error) {
	states, err := l.Store.LoadStatesOf(ctx, names)
	if err == nil {
		l.after(names)
	}
	return states, err
}

// TestNoTakeOverBeforeDrained: a member takes a shard over (reads its
// sources' states from the store and adopts them) only once what it wrote
// of the shard is committed. Here a pause is still in the flusher when the
// member may poll the shard again; had it read the states then, the pause
// committed meanwhile would be lost from its memory (adopted over by the
// state read before it) and overwritten by its next write.
func TestNoTakeOverBeforeDrained(t *testing.T) {
	ctx := t.Context()
	st := openPG(t)
	// x's stored state before the pause: what a read before the commit finds.
	if err := st.Commit(ctx, domain.Batch{States: []domain.SourceState{{Name: "x"}}}, 10); err != nil {
		t.Fatal(err)
	}
	a := newClusterMember(t, st, "a")
	runMember(t, a)
	own := gate(a)
	sh := domain.ShardOf("x", "")
	var s *Scheduler
	hooked := &loadHook{Store: st, after: func(names []string) {
		// The pause gets committed between the read and the take-over.
		if !own.held.Swap(false) {
			return
		}
		deadline := time.Now().Add(15 * time.Second)
		for !s.Drained(sh) {
			if time.Now().After(deadline) {
				t.Error("the pause was not committed within 15s")
				return
			}
			<-time.After(waitfor.Every) // the watcher's goroutine: no t.Fatal here
		}
	}}
	dir := t.TempDir()
	cfg := writeConfig(t, dir, "sources:\n  - {name: x, type: exec, command: [\"true\"], "+yearly+"}\n")
	s = startMemberScheduler(t, cfg, hooked, own, nil)
	waitUntil(t, "x's shard taken over", 10*time.Second, func() bool { return s.polls(sh) && s.Drained(sh) })

	own.held.Store(true)
	if _, _, err := s.ctl.mutateAsync("x", policy.ActionPause, "mine"); err != nil {
		t.Fatal(err)
	}
	own.deny(sh, true)
	waitUntil(t, "x's shard dormant", 10*time.Second, func() bool { return !s.polls(sh) })
	own.deny(sh, false)
	s.cl.syncShards(ctx) // the pause is not committed yet
	own.held.Store(false)
	waitUntil(t, "x's shard taken over again", 15*time.Second, func() bool { return s.polls(sh) && s.Drained(sh) })
	if o, err := s.Source("x"); err != nil || o.State != policy.StatePaused {
		t.Errorf("x after the take-over: %+v, %v; want paused (the member's own pause, committed before it read the store)", o.State, err)
	}
	if got, _, err := st.GetState(ctx, "x"); err != nil || !got.Paused {
		t.Errorf("stored x: paused %v, %v; want paused", got.Paused, err)
	}
}

// TestMayStartCheckedBeforePoll: a poll queued for a permit while its
// shard was the member's does not start once the member may no longer
// start polls of the shard (its claim is ending, or being given back):
// the worker asks the member again when it takes the job (claim). The
// trigger is dropped then, not spun between the worker and the queue.
func TestMayStartCheckedBeforePoll(t *testing.T) {
	st := openPG(t)
	a := newClusterMember(t, st, "a")
	runMember(t, a)
	own := gate(a)
	shardsApart(t, "blocker", "x")
	sh := domain.ShardOf("x", "")
	ps := map[string]*testPoller{"blocker": newTestPoller(true), "x": newTestPoller(false)}
	dir := t.TempDir()
	cfg := writeConfig(t, dir, "concurrency: 1\nsources:\n"+
		"  - {name: blocker, type: exec, command: [\"true\"], "+yearly+"}\n"+
		"  - {name: x, type: exec, command: [\"true\"], "+yearly+"}\n")
	s := startMemberScheduler(t, cfg, st, own, pollersOf(ps))
	waitUntil(t, "the shards taken over", 10*time.Second, func() bool {
		return s.polls(sh) && s.polls(domain.ShardOf("blocker", ""))
	})
	if err := s.Trigger("blocker"); err != nil {
		t.Fatal(err)
	}
	<-ps["blocker"].started // the only worker is busy
	if err := s.Trigger("x"); err != nil {
		t.Fatal(err)
	}
	own.deny(sh, true)
	close(ps["blocker"].hold)
	waitUntil(t, "x's job taken by the worker", 10*time.Second, func() bool { return !s.busyNow("x") })
	if n := ps["x"].n.Load(); n != 0 {
		t.Errorf("x was polled %d times after its member stopped being allowed to start its polls", n)
	}
	if s.polls(sh) {
		t.Error("x's shard is still polled")
	}
}

// TestGroupPermitReleasedWhenClaimFails: a poll that took its group's
// permit and then finds its source changed when a worker takes it (here
// paused while it waited for the global permit) gives the group permit
// back. Else the permit leaks for good: a group of concurrency 1 never
// polls again.
func TestGroupPermitReleasedWhenClaimFails(t *testing.T) {
	ps := map[string]*testPoller{"blocker": newTestPoller(true), "x": newTestPoller(false), "y": newTestPoller(false)}
	dir := t.TempDir()
	cfg := writeConfig(t, dir, "concurrency: 1\nlimits:\n  g: {concurrency: 1}\nsources:\n"+
		"  - {name: blocker, type: exec, command: [\"true\"], "+yearly+"}\n"+
		"  - {name: x, type: exec, command: [\"true\"], limit: g, "+yearly+"}\n"+
		"  - {name: y, type: exec, command: [\"true\"], limit: g, "+yearly+"}\n")
	h := startWith(t, dir, cfg, nil, pollersOf(ps))
	defer h.stop()
	if err := h.s.Trigger("blocker"); err != nil {
		t.Fatal(err)
	}
	<-ps["blocker"].started // the only worker is busy
	if err := h.s.Trigger("x"); err != nil {
		t.Fatal(err)
	}
	h.s.tab.mu.Lock()
	g := h.s.tab.q.Group("g")
	h.s.tab.mu.Unlock()
	h.waitFor("x holding g's permit", 10*time.Second, func() bool { return g.Held() == 1 })
	if _, err := h.s.Pause("x", "while queued"); err != nil {
		t.Fatal(err)
	}
	close(ps["blocker"].hold)
	h.waitFor("x's job taken by the worker", 10*time.Second, func() bool { return !h.s.busyNow("x") })
	if err := h.s.Trigger("y"); err != nil {
		t.Fatal(err)
	}
	h.waitFor("y polled (g's permit free again)", 10*time.Second, func() bool { return ps["y"].n.Load() == 1 })
	if n := ps["x"].n.Load(); n != 0 {
		t.Errorf("x polled %d times while paused", n)
	}
}
