package e2e

import (
	"syscall"
	"testing"
	"time"
)

// Rule 3.10 with a store that does not answer: SIGTERM with
// shutdown_timeout 2s while another process holds SQLite's write lock and a
// poll hangs. The scheduler's Shutdown returns within the timeout instead
// of retrying its final flush for a fixed 10 s, each try waiting out
// SQLite's 5 s busy timeout (15.3 s from SIGTERM to exit in round 1), and
// the daemon waits at most 1 s for the store's Close, which would wait out
// the statement still in its busy timeout (6.8 s before that bound).
func TestShutdownBoundedWithStoreLocked(t *testing.T) {
	t.Parallel()
	u := newUpstream(t)
	in := newInst(t)
	u.Set("/hang", behavior{Hang: true})
	in.writeConfig(`concurrency: 2
shutdown_timeout: 2s
sources:
  - {name: hang, type: http, url: "` + u.URL("/hang") + `", schedule: "@every 1s", timeout: 30s}
  - {name: ok, type: http, url: "` + u.URL("/ok") + `", schedule: "@every 200ms"}
`)
	d := in.start()
	eventually(t, 5*time.Second, "hang in flight", func() error {
		if u.Inflight("/hang") != 1 {
			return errf("not yet")
		}
		return nil
	})
	startHelper(t, nil, []string{helperEnv + "=" + helperLock, "PACER_E2E_DB=" + in.storePath(), "PACER_E2E_HOLD=30s"}, "locked")
	// The hanging poll's interrupted record must be committed: the final
	// flush waits for the lock.
	sigAt := time.Now()
	d.signal(syscall.SIGTERM)
	if _, ok := d.wait(20 * time.Second); !ok {
		t.Fatalf("pacer run still running 20 s after SIGTERM")
	}
	// The timeout, the 1 s the store's Close is given, and 1.5 s for a
	// loaded machine.
	took := d.exitAt.Sub(sigAt)
	t.Logf("pacer run exited %s after SIGTERM", took.Round(time.Millisecond))
	if took > 4500*time.Millisecond {
		t.Errorf("pacer run exited %s after SIGTERM with shutdown_timeout 2s and the store locked", took.Round(time.Millisecond))
	}
	if u.Cancelled("/hang") != 1 {
		t.Errorf("the hanging poll was not cut off: cancelled %d", u.Cancelled("/hang"))
	}
}
