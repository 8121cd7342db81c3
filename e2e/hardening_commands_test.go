package e2e

// Hardening item 4 (issue 10), against the binary: a CLI command reported
// as failed was applied. With the store's write lock held by another
// process past the CLI's wait, "pacer pause" exited 1 ("did not apply
// within 5s") and the daemon applied it later; "pacer trigger" reported
// failure and polled. A command must end in exactly one of: applied and
// reported so, or not applied and reported so.

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// cmdLockHelperEnv selects this file's helper mode of the test binary: wait
// for a pending command in the store $PACER_E2E_DB, then at once take
// SQLite's write lock and hold it for $PACER_E2E_HOLD.
const cmdLockHelperEnv = "PACER_E2E_CMDLOCK_HELPER"

func init() {
	if os.Getenv(cmdLockHelperEnv) == "" {
		return
	}
	os.Exit(cmdLockHelper(os.Getenv("PACER_E2E_DB"), os.Getenv("PACER_E2E_HOLD")))
}

// cmdLockHelper says "ready", polls the commands table every millisecond
// until a command is pending (the CLI just queued it), takes the write lock
// (BEGIN IMMEDIATE) before the daemon can claim it, says "locked", holds it
// for hold, and exits.
func cmdLockHelper(path, hold string) int {
	return holdWriteLock(path, hold, func(ctx context.Context, conn *sql.Conn) int {
		fmt.Println("ready")
		deadline := time.Now().Add(30 * time.Second)
		for {
			var n int
			if err := conn.QueryRowContext(ctx, "SELECT COUNT(*) FROM commands WHERE done_at IS NULL").Scan(&n); err != nil {
				fmt.Fprintln(os.Stderr, "poll:", err)
				return 1
			}
			if n > 0 {
				return 0
			}
			if time.Now().After(deadline) {
				fmt.Fprintln(os.Stderr, "no command queued within 30s")
				return 1
			}
			time.Sleep(time.Millisecond) // the polling interval
		}
	})
}

// TestCLICommandUnderHeldWriteLock: the store's write lock is taken by
// another process right after the CLI queues pause (or trigger), and held
// for 8 s, past the CLI's 5 s wait. Whatever the CLI reports is what
// happened: exit 0 and the source paused (triggered once), or exit 1 saying
// the command was withdrawn and the source never paused (never polled),
// also well after the lock is gone.
func TestCLICommandUnderHeldWriteLock(t *testing.T) {
	t.Parallel()
	for _, action := range []string{"pause", "trigger"} {
		t.Run(action, func(t *testing.T) {
			t.Parallel()
			u := newUpstream(t)
			in := newInst(t)
			in.writeConfig(`shutdown_timeout: 2s
sources:
  - {name: s11, type: http, url: "` + u.URL("/s11") + `", schedule: "0 0 1 1 *"}
`)
			d := in.start()
			h := exec.Command(os.Args[0], "-test.run=^$")
			h.Env = append(os.Environ(), cmdLockHelperEnv+"=1", "PACER_E2E_DB="+in.storePath(), "PACER_E2E_HOLD=8s")
			h.Stderr = os.Stderr
			out, err := h.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := h.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = h.Process.Kill(); _ = h.Wait() })
			lines := bufio.NewReader(out)
			if l, err := lines.ReadString('\n'); strings.TrimSpace(l) != "ready" {
				t.Fatalf("helper said %q, %v", l, err)
			}
			locked := make(chan time.Time, 1)
			go func() {
				if l, _ := lines.ReadString('\n'); strings.TrimSpace(l) == "locked" {
					locked <- time.Now()
				}
				_, _ = io.Copy(io.Discard, out)
			}()
			r := in.cli(action, "s11")
			var lockedAt time.Time
			select {
			case lockedAt = <-locked:
			case <-time.After(5 * time.Second):
				// On a loaded machine the daemon can claim the command
				// before the helper's next look at the table: the lock
				// never comes, and what the CLI said is checked without it.
				_ = h.Process.Kill()
				lockedAt = time.Now().Add(-8 * time.Second)
				t.Logf("the helper never saw the command pending (claimed first): the report is checked without the lock")
			}
			t.Logf("pacer %s s11: %s after %s (write lock taken by the helper %s before the CLI returned)",
				action, map[bool]string{true: "exit 0", false: "exit " + fmt.Sprint(r.code)}[r.code == 0],
				r.took.Round(10*time.Millisecond), time.Since(lockedAt).Round(10*time.Millisecond))
			if r.code != 0 && r.code != 1 {
				t.Fatalf("pacer %s: %s", action, r)
			}
			applied := r.code == 0
			if !applied && !strings.Contains(r.stderr, "will not be applied") {
				t.Errorf("pacer %s failed without saying the command was withdrawn: %s", action, r)
			}
			// Past the lock (8 s) and the daemon's retries: what the CLI
			// said must be what happened, and stay so.
			check := func() error {
				o := d.source("s11")
				switch {
				case action == "pause" && (o.State == "paused") != applied:
					return errf("CLI said applied=%v (%s), source %s", applied, strings.TrimSpace(r.stderr), o)
				case action == "trigger" && u.Count("/s11") != map[bool]int{true: 1, false: 0}[applied]:
					return errf("CLI said applied=%v (%s), the source was polled %d times", applied, strings.TrimSpace(r.stderr), u.Count("/s11"))
				}
				return nil
			}
			eventually(t, 15*time.Second, "the command's fate as reported", check)
			sleepUntil(lockedAt.Add(8*time.Second + 3*time.Second))
			never(t, 2*time.Second, "a withdrawn command applied late, or an applied one undone", check)
			d.stop(15 * time.Second)
		})
	}
}
