package scheduler

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/pacer-dev/pacer/scheduler/policy"
	"github.com/pacer-dev/pacer/scheduler/view"
)

// TestErrorReprobe (contract 10.4), in fake time: a source in error with
// error_reprobe: 20s is polled once per 20 s, its next_run_at showing when
// (and not before, across a restart); a failed re-probe keeps it in error
// with its count and reason updated; a successful one brings it back to ok
// with no failures. Without error_reprobe the source stays silent.
func TestErrorReprobe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		body := lifecycleDefaults +
			flakySource("re", "error_after: 2\nbreaker: {failures: 0}\nerror_reprobe: 20s") +
			flakySource("quiet", "error_after: 2\nbreaker: {failures: 0}")
		setFail(t, dir, true)
		h := start(t, dir, writeConfig(t, dir, body))
		h.waitFor("both in error", 30*time.Second, func() bool {
			return h.source("re").State == policy.StateError && h.source("quiet").State == policy.StateError
		})
		re := h.source("re")
		if re.NextRunAt == nil || re.LastRunAt == nil || re.NextRunAt.Sub(*re.LastRunAt) < 20*time.Second ||
			re.NextRunAt.Sub(*re.LastRunAt) > 21*time.Second {
			t.Fatalf("re in error: next %v after last run %v; want 20 s later", re.NextRunAt, re.LastRunAt)
		}
		if q := h.source("quiet"); q.NextRunAt != nil {
			t.Errorf("quiet in error shows next_run_at %v, want null", q.NextRunAt)
		}
		h.waitFor("re committed", 2*time.Second, func() bool { return h.stored("re").ErrorReason != "" })
		src, _, err := h.s.SourceConfig("re")
		if err != nil {
			t.Fatal(err)
		}
		st := h.stored("re")
		if x := view.Explain(&src, &st, time.Now(), view.QueueInfo{}, nil); !strings.Contains(x, "; re-probe in ") {
			t.Errorf("explanation %q, want the re-probe", x)
		}
		h.stop()

		// Restarted: still in error, not polled before the stored re-probe.
		h = start(t, dir, writeConfig(t, dir, body))
		defer h.stop()
		if a := h.source("re"); a.State != policy.StateError || !sameTime(a.NextRunAt, re.NextRunAt) {
			t.Fatalf("after restart: %+v; want error, next run %v", a, re.NextRunAt)
		}
		time.Sleep(time.Until(*re.NextRunAt) - 10*time.Millisecond)
		if got := h.source("re").PollsTotal; got != re.PollsTotal {
			t.Fatalf("re polled %d times before its re-probe time", got-re.PollsTotal)
		}
		h.waitFor("failed re-probe", 5*time.Second, func() bool { return h.source("re").PollsTotal == re.PollsTotal+1 })
		a := h.source("re")
		if a.State != policy.StateError || a.ConsecutiveFailures != 3 || !strings.HasPrefix(a.ErrorReason, "3 consecutive failures; last: ") ||
			a.NextRunAt == nil || a.NextRunAt.Sub(*a.LastRunAt) < 20*time.Second {
			t.Errorf("after a failed re-probe: %+v; want error, 3 failures, the next re-probe 20 s on", a)
		}
		setFail(t, dir, false)
		h.waitFor("successful re-probe", 25*time.Second, func() bool { return h.source("re").State == policy.StateOK })
		if a := h.source("re"); a.ConsecutiveFailures != 0 || a.ErrorReason != "" || a.PollsTotal != re.PollsTotal+2 {
			t.Errorf("after a successful re-probe: %+v; want ok, no failures, one more poll", a)
		}
		if q := h.source("quiet"); q.State != policy.StateError {
			t.Errorf("quiet: %+v; want still in error (no error_reprobe)", q)
		}
	})
}
