package scheduler

import (
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/pacer-dev/pacer/scheduler/policy"
)

// TestDependencyChainBlocksAndResumes: a -> b -> c, c failing blocks b and
// a (not polled, counting nothing, "blocked" naming c, a trigger refused);
// once c recovers both are polled again at their next ticks.
func TestDependencyChainBlocksAndResumes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		body := lifecycleDefaults + flakySource("c", "") +
			"  - {name: b, type: exec, command: [\"true\"], depends_on: [c]}\n" +
			"  - {name: a, type: exec, command: [\"true\"], depends_on: [b]}\n"
		setFail(t, dir, true)
		h := start(t, dir, writeConfig(t, dir, body))
		defer h.stop()
		h.waitFor("a and b blocked", 30*time.Second, func() bool {
			return h.source("a").State == policy.StateBlocked && h.source("b").State == policy.StateBlocked
		})
		pa, pb := h.source("a").PollsTotal, h.source("b").PollsTotal
		time.Sleep(5 * time.Second) // fake time: five ticks of each
		for _, name := range []string{"a", "b"} {
			x, err := h.s.ExplainSource(name)
			if err != nil {
				t.Fatal(err)
			}
			if x.State != policy.StateBlocked || !strings.Contains(x.Why, "dependency c is") || x.ConsecutiveFailures != 0 {
				t.Fatalf("%s: state %q why %q failures %d; want blocked by c, nothing counted", name, x.State, x.Why, x.ConsecutiveFailures)
			}
		}
		if a, b := h.source("a").PollsTotal, h.source("b").PollsTotal; a != pa || b != pb {
			t.Fatalf("polls while blocked: a %d -> %d, b %d -> %d", pa, a, pb, b)
		}
		if err := h.s.Trigger("a"); !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "blocked") {
			t.Fatalf("trigger of a blocked source: %v; want a conflict saying it is blocked", err)
		}
		if n := h.metric("pacer_blocked_polls_total", "reason", "dependency"); n < 4 {
			t.Fatalf("pacer_blocked_polls_total{reason=dependency} = %v, want >= 4", n)
		}
		setFail(t, dir, false)
		h.waitFor("c recovered", 30*time.Second, func() bool { return h.source("c").State == policy.StateOK })
		recovered := time.Now()
		h.waitFor("a and b polled again", 30*time.Second, func() bool {
			return h.source("a").PollsTotal > pa && h.source("b").PollsTotal > pb
		})
		if d := time.Since(recovered); d > 3*time.Second {
			t.Fatalf("a and b resumed %v after c recovered, want within their next ticks", d)
		}
		if s := h.source("a").State; s != policy.StateOK {
			t.Fatalf("a is %q after resuming", s)
		}
	})
}
