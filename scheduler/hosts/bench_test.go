package hosts

import (
	"strconv"
	"testing"
	"time"
)

// BenchmarkAdmitFinish is one poll's cost in the table: Admit, Limits and
// Finish of an adaptive host with a breaker, over 2,000 hosts.
func BenchmarkAdmitFinish(b *testing.B) {
	const n = 2000
	names := make([]string, n)
	counts, settings := make(map[string]int, n), make(map[string]Settings, n)
	for i := range names {
		names[i] = "api" + strconv.Itoa(i) + ".example"
		counts[names[i]] = 50
		settings[names[i]] = Settings{Concurrency: 16, Breaker: brk, Adaptive: true}
	}
	tb := New()
	tb.Configure(settings, counts)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		h := names[i%n]
		now := t0.Add(time.Duration(i) * time.Millisecond)
		tb.Admit(h, "a", now)
		tb.Limits(h)
		tb.Finish(h, Outcome{Source: "a", Success: true, Latency: 40 * time.Millisecond, Inflight: 3, Waited: i%2 == 0}, now)
	}
}
