package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestErrorReprobe (contract 10.4) against the binary: a source in error
// with error_reprobe: 2s shows its re-probe as next_run_at, is polled
// again (a failure keeps it in error with the count updated), and comes
// back to ok by itself once the upstream answers; a source in error
// without error_reprobe stays silent.
func TestErrorReprobe(t *testing.T) {
	t.Parallel()
	u := newUpstream(t)
	u.Set("/re", behavior{Status: 500})
	u.Set("/quiet", behavior{Status: 500})
	in := newInst(t)
	in.writeConfig(`defaults:
  schedule: "@every 1s"
  breaker: {failures: 0}
  error_after: 1
sources:
  - {name: re, type: http, url: "` + u.URL("/re") + `", error_reprobe: 2s}
  - {name: quiet, type: http, url: "` + u.URL("/quiet") + `"}
`)
	d := in.start()
	eventually(t, 10*time.Second, "re in error with a re-probe time", func() error {
		o := d.source("re")
		if o.State != "error" || o.NextRunAt == nil {
			return errf("%s", o)
		}
		return nil
	})
	eventually(t, 10*time.Second, "a failed re-probe", func() error {
		o := d.source("re")
		if o.State != "error" || o.ConsecutiveFailures < 2 || o.NextRunAt == nil ||
			!strings.HasPrefix(o.ErrorReason, fmt.Sprintf("%d consecutive failures; last: ", o.ConsecutiveFailures)) {
			return errf("%s", o)
		}
		return nil
	})
	u.Set("/re", behavior{})
	eventually(t, 10*time.Second, "re back to ok", func() error {
		if o := d.source("re"); o.State != "ok" || o.ConsecutiveFailures != 0 || o.ErrorReason != "" {
			return errf("%s", o)
		}
		return nil
	})
	if o := d.source("quiet"); o.State != "error" || o.PollsTotal != 1 || o.NextRunAt != nil {
		t.Errorf("quiet: %s; want still in error after its one poll, next_run_at null", o)
	}
}
