package scheduler

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/domain"
	"github.com/pacer-dev/pacer/scheduler/policy"
	"github.com/pacer-dev/pacer/store"
)

// pendingHook is the real store with a hook that runs right after
// PendingCommands answered: another process acting between the daemon's
// read of its queue and its applying of the commands.
type pendingHook struct {
	*store.Store
	after func([]domain.Command)
}

func (p *pendingHook) PendingCommands(ctx context.Context) ([]domain.Command, error) {
	cmds, err := p.Store.PendingCommands(ctx)
	if err == nil && len(cmds) > 0 {
		p.after(cmds)
	}
	return cmds, err
}

// startCommandReader starts a scheduler on cfg and st that reads its
// command queue every 50 ms, shut down when t ends.
func startCommandReader(t *testing.T, cfg *config.Config, st Store) *Scheduler {
	t.Helper()
	s, err := New(cfg, Options{Store: st, Registry: prometheus.NewRegistry(), CommandInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Shutdown(5 * time.Second); err != nil {
			t.Error(err)
		}
	})
	return s
}

// TestExpiredCommandNeverApplied (hardening item 4): the CLI withdraws a
// command (its wait ran out; it reports "not applied") after the daemon
// read it as pending but before it applied it. The daemon applies only
// what it claimed, so the withdrawn pause is never applied, while one the
// CLI did not withdraw is applied and reported done. Before, the daemon
// applied every command it had read.
func TestExpiredCommandNeverApplied(t *testing.T) {
	dir := t.TempDir()
	cfg := writeConfig(t, dir, `sources:
  - {name: withdrawn, type: exec, command: ["true"], schedule: "0 0 1 1 *"}
  - {name: kept, type: exec, command: ["true"], schedule: "0 0 1 1 *"}
`)
	path := filepath.Join(dir, "pacer.db")
	daemonStore, err := store.Open(path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = daemonStore.Close() }) // after the scheduler's shutdown (cleanups run last first)
	cli, err := store.Open(path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	withdrawn := &domain.Command{Source: "withdrawn", Action: policy.ActionPause}
	kept := &domain.Command{Source: "kept", Action: policy.ActionPause}
	for _, c := range []*domain.Command{withdrawn, kept} {
		if err := cli.EnqueueCommand(t.Context(), c); err != nil {
			t.Fatal(err)
		}
	}
	expired := make(chan bool, 1)
	hook := &pendingHook{Store: daemonStore, after: func([]domain.Command) {
		select {
		case <-expired:
			return // once
		default:
		}
		ok, err := cli.ExpireCommand(context.Background(), withdrawn.ID, "expired: test")
		if err != nil {
			t.Error(err)
		}
		expired <- ok
	}}
	s := startCommandReader(t, cfg, hook)
	status := func(c *domain.Command) domain.Command {
		got, err := cli.GetCommand(t.Context(), c.ID)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	waitUntil(t, "the kept command done", 10*time.Second, func() bool { return status(kept).Status == domain.CommandDone })
	if !<-expired {
		t.Fatal("the CLI could not withdraw the command it had queued")
	}
	if got := status(kept); got.Result != "" {
		t.Errorf("kept command = %+v; want done without error", got)
	}
	if o, _ := s.Source("kept"); o.State != policy.StatePaused {
		t.Errorf("kept: %s, want paused", o.State)
	}
	// A later command done: the loop made passes after the withdrawal.
	marker := &domain.Command{Source: "kept", Action: policy.ActionReset}
	if err := cli.EnqueueCommand(t.Context(), marker); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "a later command done", 10*time.Second, func() bool { return status(marker).Status == domain.CommandDone })
	if o, _ := s.Source("withdrawn"); o.State == policy.StatePaused {
		t.Errorf("the withdrawn pause was applied: %+v", o)
	}
	if got := status(withdrawn); got.Status != domain.CommandExpired || got.Result != "expired: test" {
		t.Errorf("withdrawn command = %+v; want it expired with the CLI's reason", got)
	}
}

// TestOrphanedCommandsSettled: a daemon killed between its claim of a
// command and its result leaves the command claimed, and the CLI that
// queued it waited 35 s for nothing. The next daemon on the store completes
// such commands from the committed states: applied when the state shows
// the command's effect, else "not applied" (a trigger: cannot be told).
// A command still pending is applied as usual.
func TestOrphanedCommandsSettled(t *testing.T) {
	dir := t.TempDir()
	cfg := writeConfig(t, dir, `sources:
  - {name: paused, type: exec, command: ["true"], schedule: "0 0 1 1 *"}
  - {name: notpaused, type: exec, command: ["true"], schedule: "0 0 1 1 *"}
  - {name: failing, type: exec, command: ["true"], schedule: "0 0 1 1 *"}
  - {name: healthy, type: exec, command: ["true"], schedule: "0 0 1 1 *"}
  - {name: pending, type: exec, command: ["true"], schedule: "0 0 1 1 *"}
`)
	path := filepath.Join(dir, "pacer.db")
	st, err := store.Open(path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() }) // after the scheduler's shutdown (cleanups run last first)
	// What the killed daemon committed before it died.
	if err := st.SaveBatch(t.Context(), []domain.SourceState{
		{Name: "paused", Paused: true, PausedReason: "kept"},
		{Name: "failing", ConsecutiveFailures: 2, LastError: "boom"},
	}, nil, 10); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		cmd     domain.Command
		claimed bool
		want    string
	}{
		{domain.Command{Source: "paused", Action: policy.ActionPause, Reason: "kept"}, true, ""},
		{domain.Command{Source: "notpaused", Action: policy.ActionPause, Reason: "lost"}, true, orphanLost},
		{domain.Command{Source: "paused", Action: policy.ActionResume}, true, orphanLost},
		{domain.Command{Source: "notpaused", Action: policy.ActionResume}, true, ""},
		{domain.Command{Source: "failing", Action: policy.ActionReset}, true, orphanLost},
		{domain.Command{Source: "healthy", Action: policy.ActionReset}, true, ""},
		{domain.Command{Source: "healthy", Action: policy.ActionTrigger}, true, orphanTrigger},
		{domain.Command{Source: "gone", Action: policy.ActionPause}, true, orphanLost},
		{domain.Command{Source: "pending", Action: policy.ActionPause, Reason: "now"}, false, ""},
	}
	for i := range cases {
		c := &cases[i].cmd
		if err := st.EnqueueCommand(t.Context(), c); err != nil {
			t.Fatal(err)
		}
		if cases[i].claimed {
			if ok, err := st.ClaimCommand(t.Context(), c.ID); err != nil || !ok {
				t.Fatalf("claim %d: %v %v", c.ID, ok, err)
			}
		}
	}
	s := startCommandReader(t, cfg, st)
	for _, tc := range cases {
		var got domain.Command
		waitUntil(t, "command "+tc.cmd.Action+" "+tc.cmd.Source+" done", 10*time.Second, func() bool {
			got, err = st.GetCommand(t.Context(), tc.cmd.ID)
			return err == nil && got.Status == domain.CommandDone
		})
		if got.Result != tc.want {
			t.Errorf("%s %s (claimed %v): result %q, want %q", tc.cmd.Action, tc.cmd.Source, tc.claimed, got.Result, tc.want)
		}
	}
	if o, _ := s.Source("pending"); o.State != policy.StatePaused {
		t.Errorf("pending: %s, want paused by its command", o.State)
	}
	if o, _ := s.Source("notpaused"); o.State == policy.StatePaused {
		t.Errorf("notpaused: paused by a command settled as not applied")
	}
}
