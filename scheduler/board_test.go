package scheduler

import (
	"fmt"
	"strings"
	"testing"
)

// Rows and ExplainSources(nil) read every source: at 100,000 sources the
// pass held the scheduler's lock for tens of milliseconds (hundreds on a
// loaded machine) while the dispatcher, the workers' ends of polls and the
// actions waited (issue 20, item 4). They release it after each chunk of
// viewChunk sources: between two chunks the lock is free.
func TestViewsReleaseTheLock(t *testing.T) {
	const n = 5*viewChunk + 7
	var b strings.Builder
	b.WriteString("defaults: {schedule: \"0 0 1 1 *\"}\nsources:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - {name: s%06d, type: exec, command: [\"true\"]}\n", i)
	}
	h := start(t, t.TempDir(), writeConfig(t, t.TempDir(), b.String()))
	defer h.stop()
	free, held := 0, 0
	h.s.deps.viewHook = func() {
		if h.s.tab.mu.TryLock() {
			h.s.tab.mu.Unlock()
			free++
		} else {
			held++ // another goroutine took it meanwhile: not a failure
		}
	}
	for _, v := range []struct {
		name string
		pass func() int
	}{
		{"Rows", func() int { return len(h.s.Rows()) }},
		{"ExplainSources(nil)", func() int { return len(h.s.ExplainSources(nil)) }},
	} {
		free, held = 0, 0
		if got := v.pass(); got != n {
			t.Fatalf("%s: %d sources, want %d", v.name, got, n)
		}
		if want := (n + viewChunk - 1) / viewChunk; free+held != want || free == 0 {
			t.Errorf("%s over %d sources: the lock free between chunks %d times (taken by another %d), want %d pauses",
				v.name, n, free, held, want)
		}
	}
}
