package hosts

import (
	"testing"
	"time"
)

// FuzzTable drives a table with a sequence of operations read from the
// input and checks its invariants after each: nothing panics, the learned
// limits stay in their bounds, a host is never both blocked and the probe,
// and a snapshot restores into a table that answers the same gates.
func FuzzTable(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11})
	f.Add([]byte{1, 1, 1, 1, 1, 1, 0, 0, 0, 200, 0, 9, 0})
	f.Add([]byte{3, 3, 3, 3, 3, 3, 7, 0, 7, 0, 7, 255, 8})
	f.Fuzz(func(t *testing.T, ops []byte) {
		s := Settings{Concurrency: 6, Rate: 20, Burst: 2, Adaptive: true,
			Breaker: BreakerPolicy{Sources: 2, Failures: 3, Window: 30 * time.Second, Cooldown: 20 * time.Second}}
		tb := table(s, 3)
		now := t0
		srcs := []string{"a", "b", "c"}
		for i, op := range ops {
			src := srcs[i%3]
			now = now.Add(time.Duration(op%16) * 700 * time.Millisecond)
			switch op % 8 {
			case 0:
				if g := tb.Admit("api.x", src, now); g.Blocked && g.Probe {
					t.Fatalf("blocked and probe: %+v", g)
				}
			case 1:
				tb.Finish("api.x", fail(src), now)
			case 2:
				tb.Finish("api.x", Outcome{Source: src, Success: true, Latency: time.Duration(op) * time.Millisecond,
					Waited: op%3 == 0, Inflight: int(op % 9)}, now)
			case 3:
				tb.Finish("api.x", Outcome{Source: src, Throttled: true, ThrottledUntil: now.Add(time.Duration(op) * time.Second)}, now)
			case 4:
				tb.Abandon("api.x", src, now)
			case 5:
				tb.Reset("api.x", now)
			case 6:
				s.Concurrency = int(op%5) + 1
				tb.Configure(map[string]Settings{"api.x": s}, map[string]int{"api.x": 3})
			case 7:
				b := table(s, 3)
				b.Restore(tb.Snapshot(), now)
			}
			c, r, _ := tb.Limits("api.x")
			if c < 1 || c > s.Concurrency || r < 0 || r > s.Rate {
				t.Fatalf("limits %d, %g out of bounds (concurrency %d, rate %g)", c, r, s.Concurrency, s.Rate)
			}
			if _, found := tb.Object("api.x", now); !found {
				t.Fatal("the host vanished")
			}
		}
	})
}
