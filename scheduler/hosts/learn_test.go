package hosts

import (
	"math"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"
)

// near reports whether a and b differ by less than a millionth.
func near(a, b float64) bool { return math.Abs(a-b) < 1e-6 }

func TestLearnedRateAIMD(t *testing.T) {
	tb := table(Settings{Concurrency: 4, Adaptive: true}, 3)
	for sec := range 10 { // 3 starts a second for 10 s
		for range 3 {
			tb.Admit("api.x", "a", at(time.Duration(sec)*time.Second))
		}
	}
	if _, r, _ := tb.Limits("api.x"); r != 0 {
		t.Fatalf("rate %g before any throttling answer, want none", r)
	}
	throttled := Outcome{Source: "a", Throttled: true, Latency: time.Millisecond}
	tb.Finish("api.x", throttled, at(9500*time.Millisecond))
	if _, r, b := tb.Limits("api.x"); !near(r, 3) || b != 1 {
		t.Fatalf("after the first throttling answer rate %g burst %d, want the 3/s seen, 1", r, b)
	}
	tb.Finish("api.x", throttled, at(10*time.Second)) // within a second: no halving
	if _, r, _ := tb.Limits("api.x"); !near(r, 3) {
		t.Fatalf("a second throttling answer within 1 s halved: %g", r)
	}
	tb.Finish("api.x", throttled, at(10600*time.Millisecond))
	if _, r, _ := tb.Limits("api.x"); !near(r, 1.5) {
		t.Fatalf("after 1.1 s of throttling answers rate %g, want 1.5", r)
	}
	for sec := 11; sec <= 20; sec++ { // the rate binds: 1 start a second
		tb.Admit("api.x", "a", at(time.Duration(sec)*time.Second))
	}
	tb.Admit("api.x", "a", at(20600*time.Millisecond))
	if _, r, _ := tb.Limits("api.x"); !near(r, 1.65) {
		t.Fatalf("after 10 s without throttling rate %g, want 1.65", r)
	}
	// Nobody presses on it: no growth.
	tb.Admit("api.x", "a", at(60*time.Second))
	if _, r, _ := tb.Limits("api.x"); !near(r, 1.65) {
		t.Fatalf("idle: rate %g grew", r)
	}
	// Halving never goes below 1/m.
	for i := range 20 {
		tb.Finish("api.x", throttled, at(time.Duration(100+2*i)*time.Second))
	}
	if _, r, _ := tb.Limits("api.x"); !near(r, minRate) {
		t.Fatalf("after 20 halvings rate %g, want 1/60", r)
	}
	// The configured rate bounds it; without adaptive the configured values hold.
	capped := table(Settings{Rate: 2, Burst: 3, Adaptive: true}, 1)
	for range 50 {
		capped.Admit("api.x", "a", t0)
	}
	capped.Finish("api.x", throttled, t0)
	if c, r, b := capped.Limits("api.x"); r != 2 || b != 3 || c != startConcurrency {
		t.Fatalf("capped: %d, %g, %d", c, r, b)
	}
	plain := table(Settings{Concurrency: 5, Rate: 2, Burst: 3}, 1)
	plain.Finish("api.x", throttled, t0)
	if c, r, b := plain.Limits("api.x"); c != 5 || r != 2 || b != 3 {
		t.Fatalf("not adaptive: %d, %g, %d", c, r, b)
	}
	if c, r, b := New().Limits("nowhere"); c != 0 || r != 0 || b != 0 {
		t.Fatalf("unknown host: %d, %g, %d", c, r, b)
	}
}

// drive feeds n finishes of latency lat, waited, at low or high in-flight.
func drive(tb *Table, n int, lat time.Duration, waited bool, inflight int, now time.Time) {
	for i := range n {
		tb.Finish("api.x", Outcome{Source: "a", Success: true, Latency: lat, Waited: waited, Inflight: inflight},
			now.Add(time.Duration(i)*time.Millisecond))
	}
}

func TestLearnedConcurrencyBounds(t *testing.T) {
	tb := table(Settings{Adaptive: true}, 2) // concurrency 0: bound 16
	if o, _ := tb.Object("api.x", t0); o.LearnedConcurrency != nil {
		t.Fatalf("learned before any poll: %d", *o.LearnedConcurrency)
	}
	drive(tb, 5, 100*time.Millisecond, true, 1, t0) // the baseline
	drive(tb, 1000, 100*time.Millisecond, true, 8, t0)
	if c, _, _ := tb.Limits("api.x"); c != defaultCap {
		t.Fatalf("waiting at baseline latency: concurrency %d, want %d", c, defaultCap)
	}
	drive(tb, 1000, 100*time.Millisecond, false, 8, t0) // nobody waits: no growth, no fall
	if c, _, _ := tb.Limits("api.x"); c != defaultCap {
		t.Fatalf("concurrency %d moved without waiting", c)
	}
	drive(tb, 1000, 400*time.Millisecond, true, 16, t0) // slow at load: falls to 1, never below
	if c, _, _ := tb.Limits("api.x"); c != 1 {
		t.Fatalf("4x the baseline: concurrency %d, want 1", c)
	}
	o, _ := tb.Object("api.x", t0)
	if o.LearnedConcurrency == nil || *o.LearnedConcurrency != 1 || o.BaselineMs == nil || !near(*o.BaselineMs, 100) {
		t.Fatalf("object %+v", o)
	}
	// Slow at low concurrency too, for good: the baseline is re-measured and the limit grows again.
	drive(tb, 2000, 400*time.Millisecond, true, 1, t0)
	if c, _, _ := tb.Limits("api.x"); c < 8 {
		t.Fatalf("after the host became slower for good: concurrency %d, want it to grow back", c)
	}
}

func TestConfigureForgets(t *testing.T) {
	s := Settings{Concurrency: 8, Adaptive: true}
	tb := table(s, 2)
	drive(tb, 200, 50*time.Millisecond, true, 1, t0)
	tb.Finish("api.x", Outcome{Source: "a", Throttled: true, ThrottledUntil: at(time.Hour)}, t0)
	c0, r0, _ := tb.Limits("api.x")
	if c0 != 8 || r0 == 0 {
		t.Fatalf("learned %d, %g", c0, r0)
	}
	tb.Configure(map[string]Settings{"api.x": s}, map[string]int{"api.x": 5}) // the same settings: kept
	if c, r, _ := tb.Limits("api.x"); c != c0 || r != r0 {
		t.Fatalf("same settings forgot: %d, %g", c, r)
	}
	if o, _ := tb.Object("api.x", t0); o.Sources != 5 {
		t.Fatalf("sources %d, want 5", o.Sources)
	}
	s.Concurrency = 12
	tb.Configure(map[string]Settings{"api.x": s}, map[string]int{"api.x": 5})
	o, _ := tb.Object("api.x", at(time.Minute))
	if c, r, _ := tb.Limits("api.x"); c != startConcurrency || r != 0 || o.LearnedRate != nil || o.State != StateThrottled {
		t.Fatalf("changed settings: limits %d, %g, object %+v (learned forgotten, throttle kept)", c, r, o)
	}
	tb.Configure(nil, map[string]int{"b.x": 1}) // api.x dropped, b.x with no settings
	if _, found := tb.Object("api.x", t0); found {
		t.Fatal("a host absent from counts was kept")
	}
	if o, found := tb.Object("b.x", t0); !found || o.Why != "closed; no limits" {
		t.Fatalf("b.x: %+v", o)
	}
	if hs := tb.Hosts(); len(hs) != 1 || hs[0] != "b.x" {
		t.Fatalf("hosts %v", hs)
	}
}

// TestMemoryPerHost measures a host's memory with a full latency ring, a
// breaker counting failures and learned limits: at most 1 KiB.
func TestMemoryPerHost(t *testing.T) {
	const n = 2000
	names := make([]string, n)
	counts, settings := make(map[string]int, n), make(map[string]Settings, n)
	s := Settings{Concurrency: 16, Breaker: brk, Adaptive: true}
	for i := range names {
		names[i] = "api" + strconv.Itoa(i) + ".partner.example:8443"
		counts[names[i]], settings[names[i]] = 50, s
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	tb := New()
	tb.Configure(settings, counts)
	for _, h := range names {
		for i := range 40 {
			tb.Admit(h, "a", at(time.Duration(i)*time.Second))
			tb.Finish(h, Outcome{Source: "a", Success: true, Latency: 50 * time.Millisecond, Inflight: 2, Waited: true}, at(time.Duration(i)*time.Second))
		}
		for i := range 4 {
			tb.Finish(h, Outcome{Source: []string{"a", "b"}[i%2], ConnFailure: true}, at(50*time.Second))
		}
		tb.Finish(h, Outcome{Source: "a", Throttled: true}, at(51*time.Second))
	}
	tb.Snapshot() // the dirty list is transient
	runtime.GC()
	runtime.ReadMemStats(&after)
	per := float64(after.HeapAlloc-before.HeapAlloc) / n
	t.Logf("%.0f bytes per host (%d hosts)", per, n)
	if per > 1024 {
		t.Fatalf("%.0f bytes per host, want at most 1024", per)
	}
	runtime.KeepAlive(tb)
}

// TestConcurrentUse runs the table's methods from a few goroutines at once
// (for -race): its mutex guards everything.
func TestConcurrentUse(t *testing.T) {
	tb := table(Settings{Concurrency: 4, Breaker: brk, Adaptive: true}, 4)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			src := strconv.Itoa(w)
			for i := range 300 {
				now := at(time.Duration(i) * time.Second)
				if g := tb.Admit("api.x", src, now); !g.Blocked {
					tb.Finish("api.x", Outcome{Source: src, ConnFailure: i%3 == 0, Success: i%3 != 0, Latency: time.Millisecond}, now)
				}
				tb.Limits("api.x")
				tb.Objects(now)
				tb.Snapshot()
			}
		}()
	}
	wg.Wait()
	if o, found := tb.Object("api.x", at(time.Hour)); !found || o.Sources != 4 {
		t.Fatalf("object %+v", o)
	}
}
