package cli

import (
	"context"
	"github.com/pacer-dev/pacer/internal/sqlitetest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/mattn/go-sqlite3" // the lock holder's own connection

	"github.com/pacer-dev/pacer/domain"
	"github.com/pacer-dev/pacer/store"
)

// TestCommandReportedFailedIsNeverApplied (hardening item 4): with the
// store's write lock held by another connection past the CLI's wait, the
// CLI's withdrawal and the daemon's claim of a command race for the lock
// once it is released. Whatever the order, the CLI reports failure exactly
// when the daemon did not apply the command, and a command is applied at
// most once. Before the fix the CLI marked the command done ("expired")
// while the daemon, which had read it as pending, applied it anyway.
func TestCommandReportedFailedIsNeverApplied(t *testing.T) {
	for i := range 12 {
		path := filepath.Join(t.TempDir(), "pacer.db")
		opts := store.Options{BusyTimeout: 100 * time.Millisecond}
		cliStore, err := store.Open(path, opts)
		if err != nil {
			t.Fatal(err)
		}
		daemon, err := store.Open(path, opts)
		if err != nil {
			t.Fatal(err)
		}
		c := &domain.Command{Source: "s11", Action: "pause"}
		if err := cliStore.EnqueueCommand(t.Context(), c); err != nil {
			t.Fatal(err)
		}
		// The daemon read the command as pending before the lock was taken.
		pending, err := daemon.PendingCommands(t.Context())
		if err != nil || len(pending) != 1 {
			t.Fatalf("PendingCommands = %v, %v", pending, err)
		}
		release := sqlitetest.HoldWriteLock(t, path)
		var applied atomic.Int32
		daemonDone := make(chan struct{})
		go func() {
			defer close(daemonDone)
			// The daemon's loop: claim (retrying while the store is busy),
			// apply only what it claimed, report.
			for range 200 {
				ok, err := daemon.ClaimCommand(context.Background(), c.ID)
				if err != nil {
					time.Sleep(time.Duration(i%4) * 5 * time.Millisecond) // the daemon's next pass
					continue
				}
				if ok {
					applied.Add(1)
					for daemon.CompleteCommand(context.Background(), c.ID, "", "") != nil {
						time.Sleep(10 * time.Millisecond) // the daemon's retry
					}
				}
				return
			}
		}()
		cliDone := make(chan error, 1)
		go func() {
			cliDone <- awaitCommand(context.Background(), cliStore, 4242, c, commandWaits{apply: 150 * time.Millisecond, settle: 20 * time.Second, poll: 10 * time.Millisecond})
		}()
		// Past the CLI's wait, with both sides trying to write.
		time.Sleep(time.Duration(200+(i%3)*100) * time.Millisecond) // the lock held by another process for a while
		if err := release(); err != nil {
			t.Error(err)
		}
		err = <-cliDone
		<-daemonDone
		got, gerr := cliStore.GetCommand(t.Context(), c.ID)
		if gerr != nil {
			t.Fatal(gerr)
		}
		n := applied.Load()
		switch {
		case n > 1:
			t.Errorf("run %d: the command was applied %d times", i, n)
		case err != nil && n != 0:
			t.Errorf("run %d: the CLI reported %q, yet the daemon applied the command (status %s)", i, err, got.Status)
		case err == nil && n != 1:
			t.Errorf("run %d: the CLI reported success, but the daemon did not apply it (status %s)", i, got.Status)
		case err != nil && !strings.Contains(err.Error(), "will not be applied"):
			t.Errorf("run %d: the CLI's failure %q does not say the command was withdrawn", i, err)
		}
		if err != nil && got.Status != domain.CommandExpired || err == nil && got.Status != domain.CommandDone {
			t.Errorf("run %d: CLI said %v, command status %q", i, err, got.Status)
		}
		if err := cliStore.Close(); err != nil {
			t.Error(err)
		}
		if err := daemon.Close(); err != nil {
			t.Error(err)
		}
	}
}
