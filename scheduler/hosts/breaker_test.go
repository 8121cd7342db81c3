package hosts

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 7, 10, 40, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

var brk = BreakerPolicy{Sources: 2, Failures: 5, Window: time.Minute, Cooldown: time.Minute}

// table returns a table with one host "api.x" of n sources under s.
func table(s Settings, n int) *Table {
	t := New()
	t.Configure(map[string]Settings{"api.x": s}, map[string]int{"api.x": n})
	return t
}

func fail(src string) Outcome {
	return Outcome{Source: src, ConnFailure: true, Latency: time.Millisecond, Detail: "connection refused"}
}

func ok(src string) Outcome {
	return Outcome{Source: src, Success: true, Latency: 10 * time.Millisecond, Inflight: 1}
}

func TestBreakerTransitions(t *testing.T) {
	tb := table(Settings{Breaker: brk}, 3)
	// 4 failures from 2 sources, then a success: nothing opens.
	for i, src := range []string{"a", "b", "a", "b"} {
		if ev := tb.Finish("api.x", fail(src), at(time.Duration(i)*time.Second)); ev != nil {
			t.Fatalf("failure %d: events %v", i, ev)
		}
	}
	tb.Finish("api.x", ok("c"), at(5*time.Second))
	// 4 more failures: the success in between reset the count.
	for i := range 4 {
		if ev := tb.Finish("api.x", fail("a"), at(time.Duration(6+i)*time.Second)); ev != nil {
			t.Fatalf("after the success, failure %d opened: %v", i, ev)
		}
	}
	// The 5th failure comes from one source only so far: a 2nd source opens it.
	ev := tb.Finish("api.x", fail("a"), at(10*time.Second))
	if ev != nil {
		t.Fatalf("5 failures from 1 source opened it: %v", ev)
	}
	ev = tb.Finish("api.x", fail("b"), at(11*time.Second))
	if len(ev) != 1 || ev[0].Kind != EventOpen || ev[0].Sources != 3 || ev[0].Host != "api.x" ||
		ev[0].Reason != "connection refused from 2 sources" {
		t.Fatalf("events %+v, want one host_open for 3 sources from 2 failing", ev)
	}
	g := tb.Admit("api.x", "c", at(12*time.Second))
	if !g.Blocked || !g.Until.Equal(at(71*time.Second)) ||
		g.Reason != "host api.x open until 10:41:11 (connection refused from 2 sources)" {
		t.Fatalf("open: gate %+v", g)
	}
	if p := tb.Peek("api.x", at(71*time.Second)); p.Blocked || !p.Probe {
		t.Fatalf("after the cooldown Peek = %+v, want the probe", p)
	}
	// Cooldown over: exactly one probe.
	if g := tb.Admit("api.x", "a", at(71*time.Second)); g.Blocked || !g.Probe {
		t.Fatalf("after cooldown: gate %+v, want the probe", g)
	}
	if g := tb.Admit("api.x", "b", at(72*time.Second)); !g.Blocked || g.Probe {
		t.Fatalf("probe in flight: gate %+v, want blocked", g)
	}
	if o, _ := tb.Object("api.x", at(72*time.Second)); o.State != StateHalfOpen || o.Until != nil {
		t.Fatalf("object while probing: %+v", o)
	}
	// The probe fails: open again, no new host_open.
	if ev := tb.Finish("api.x", fail("a"), at(73*time.Second)); ev != nil {
		t.Fatalf("failed probe: events %v, want none", ev)
	}
	if g := tb.Admit("api.x", "b", at(74*time.Second)); !g.Blocked || !g.Until.Equal(at(133*time.Second)) {
		t.Fatalf("reopened: gate %+v", g)
	}
	// Next probe: a different source; it succeeds: host_recovered once.
	if g := tb.Admit("api.x", "a", at(133*time.Second)); !g.Blocked {
		t.Fatalf("the previous prober probes again: %+v", g)
	}
	if g := tb.Admit("api.x", "b", at(133*time.Second)); !g.Probe {
		t.Fatalf("another source: gate %+v, want the probe", g)
	}
	ev = tb.Finish("api.x", ok("b"), at(134*time.Second))
	if len(ev) != 1 || ev[0].Kind != EventRecovered || ev[0].Sources != 3 {
		t.Fatalf("probe success: events %+v, want one host_recovered", ev)
	}
	for _, src := range []string{"a", "b", "c"} {
		if g := tb.Admit("api.x", src, at(135*time.Second)); g.Blocked || g.Probe {
			t.Fatalf("closed: %s gate %+v", src, g)
		}
	}
	if ev := tb.Finish("api.x", ok("c"), at(136*time.Second)); ev != nil {
		t.Fatalf("a success when closed: events %v", ev)
	}
}

func TestBreakerWindowAndOff(t *testing.T) {
	tb := table(Settings{Breaker: brk}, 2)
	// 5 failures from 2 sources spread over more than a window: never open.
	for i := range 10 {
		src := []string{"a", "b"}[i%2]
		if ev := tb.Finish("api.x", fail(src), at(time.Duration(i)*16*time.Second)); ev != nil {
			t.Fatalf("failure %d at %v opened: %v", i, time.Duration(i)*16*time.Second, ev)
		}
	}
	// A non-success that is not connection-level (a 500) neither counts nor resets.
	tb2 := table(Settings{Breaker: brk}, 2)
	for i := range 4 {
		tb2.Finish("api.x", fail([]string{"a", "b"}[i%2]), at(time.Duration(i)*time.Second))
	}
	tb2.Finish("api.x", Outcome{Source: "a", Latency: time.Millisecond}, at(5*time.Second))
	if ev := tb2.Finish("api.x", fail("a"), at(6*time.Second)); len(ev) != 1 {
		t.Fatalf("a 500 between failures reset the count: %v", ev)
	}
	off := table(Settings{}, 2)
	for i := range 50 {
		if ev := off.Finish("api.x", fail("a"), at(time.Duration(i)*time.Second)); ev != nil {
			t.Fatalf("breaker off opened: %v", ev)
		}
	}
	if g := off.Admit("api.x", "a", at(time.Minute)); g.Blocked {
		t.Fatalf("breaker off blocks: %+v", g)
	}
	if g := New().Admit("nowhere", "a", t0); g.Blocked || g.Probe {
		t.Fatalf("unknown host: %+v", g)
	}
}

// TestDeadHostArithmetic: 200 sources of a dead host each ask every second
// for 5 minutes; the host is called at most failures + 2 + one per cooldown.
func TestDeadHostArithmetic(t *testing.T) {
	tb := table(Settings{Breaker: brk}, 200)
	calls, opens, probes := 0, 0, map[string]int{}
	for sec := range 300 {
		now := at(time.Duration(sec) * time.Second)
		for i := range 200 {
			src := fmt.Sprintf("s%03d", (i+sec)%200)
			g := tb.Admit("api.x", src, now)
			if g.Blocked {
				continue
			}
			calls++
			if g.Probe {
				probes[src]++
			}
			for _, ev := range tb.Finish("api.x", fail(src), now) {
				if ev.Kind == EventOpen {
					opens++
				}
			}
		}
	}
	limit := brk.Failures + 2 + int(5*time.Minute/brk.Cooldown)
	if calls > limit || calls < brk.Failures || opens != 1 {
		t.Fatalf("calls %d (want %d..%d), host_open %d (want 1)", calls, brk.Failures, limit, opens)
	}
	for src, n := range probes {
		if n > 1 {
			t.Fatalf("source %s probed %d times: probes do not rotate (%v)", src, n, probes)
		}
	}
	t.Logf("200 sources, 5 minutes: %d calls (bound %d), %d probes", calls, limit, len(probes))
}

func TestProbeRotationAndAbandon(t *testing.T) {
	tb := table(Settings{Breaker: BreakerPolicy{Sources: 1, Failures: 1, Cooldown: 10 * time.Second}}, 3)
	tb.Finish("api.x", fail("a"), t0)
	var seq []string
	now := t0
	for range 6 { // every round, every source asks once after the cooldown; the probe fails
		now = now.Add(10 * time.Second)
		for _, src := range []string{"a", "b", "c"} {
			if g := tb.Admit("api.x", src, now); g.Probe {
				seq = append(seq, src)
				tb.Finish("api.x", fail(src), now)
			}
		}
	}
	for i := 1; i < len(seq); i++ {
		if seq[i] == seq[i-1] {
			t.Fatalf("probes %v: the same source twice in a row", seq)
		}
	}
	if len(seq) != 6 {
		t.Fatalf("probes %v, want one per cooldown", seq)
	}
	// A lone source may probe again: there is no other.
	one := table(Settings{Breaker: BreakerPolicy{Sources: 1, Failures: 1, Cooldown: 10 * time.Second}}, 1)
	one.Finish("api.x", fail("a"), t0)
	for i := 1; i <= 3; i++ {
		now := at(time.Duration(i) * 10 * time.Second)
		if g := one.Admit("api.x", "a", now); !g.Probe {
			t.Fatalf("lone source, round %d: %+v", i, g)
		}
		one.Finish("api.x", fail("a"), now)
	}
	// The last prober probes again when no other source asked for a whole cooldown.
	tb.Admit("api.x", "zzz", now) // nothing: still open
	last := seq[len(seq)-1]
	if g := tb.Admit("api.x", last, now.Add(20*time.Second)); !g.Probe {
		t.Fatalf("the previous prober after two cooldowns alone: %+v", g)
	}
	// An interrupted probe gives no verdict: the host stays half-open, another may probe.
	tb.Abandon("api.x", last, now.Add(21*time.Second))
	if g := tb.Peek("api.x", now.Add(21*time.Second)); g.Blocked || !g.Probe {
		t.Fatalf("after Abandon Peek = %+v, want the probe", g)
	}
	if g := tb.Admit("api.x", "b", now.Add(21*time.Second)); !g.Probe {
		t.Fatalf("after Abandon: %+v", g)
	}
}

func TestThrottleBlocksSiblings(t *testing.T) {
	tb := table(Settings{}, 3)
	until := at(5 * time.Second)
	tb.Finish("api.x", Outcome{Source: "a", Throttled: true, ThrottledUntil: until, Detail: "429 Too Many Requests"}, t0)
	for _, src := range []string{"a", "b", "c"} {
		for _, d := range []time.Duration{0, 4999 * time.Millisecond} {
			g := tb.Admit("api.x", src, at(d))
			if !g.Blocked || !g.Until.Equal(until) || g.Reason != "host api.x throttled until 10:40:05" {
				t.Fatalf("%s at +%v: %+v", src, d, g)
			}
		}
		if g := tb.Admit("api.x", src, until); g.Blocked {
			t.Fatalf("%s at the time: %+v", src, g)
		}
	}
	o, _ := tb.Object("api.x", at(time.Second))
	if o.State != StateThrottled || o.Until == nil || !o.Until.Equal(until) ||
		!strings.Contains(o.Why, "source a") || !strings.Contains(o.Why, "429") {
		t.Fatalf("object %+v", o)
	}
	// An earlier time does not shorten it; a later one extends it.
	tb.Finish("api.x", Outcome{Source: "b", ThrottledUntil: at(2 * time.Second)}, at(time.Second))
	tb.Finish("api.x", Outcome{Source: "c", ThrottledUntil: at(9 * time.Second)}, at(time.Second))
	if g := tb.Peek("api.x", at(6*time.Second)); !g.Blocked || !g.Until.Equal(at(9*time.Second)) {
		t.Fatalf("extended: %+v", g)
	}
}

// TestQuotaSpentIsSuccess: a 200 saying the quota is spent throttles the
// host and still counts as a success for the breaker.
func TestQuotaSpentIsSuccess(t *testing.T) {
	tb := table(Settings{Breaker: brk}, 3)
	for i := range 4 {
		tb.Finish("api.x", fail([]string{"a", "b"}[i%2]), at(time.Duration(i)*time.Second))
	}
	quota := Outcome{Source: "c", Success: true, Throttled: true, ThrottledUntil: at(30 * time.Second), Latency: time.Millisecond}
	if ev := tb.Finish("api.x", quota, at(4*time.Second)); ev != nil {
		t.Fatalf("quota answer: %v", ev)
	}
	if g := tb.Admit("api.x", "a", at(5*time.Second)); !g.Blocked || !strings.Contains(g.Reason, "throttled") {
		t.Fatalf("quota spent: %+v", g)
	}
	for i := range 4 { // the count restarted at the success
		if ev := tb.Finish("api.x", fail([]string{"a", "b"}[i%2]), at(time.Duration(31+i)*time.Second)); ev != nil {
			t.Fatalf("failure %d after the quota success opened: %v", i, ev)
		}
	}
}

func TestReset(t *testing.T) {
	s := Settings{Concurrency: 8, Breaker: brk, Adaptive: true}
	tb := table(s, 2)
	for i := range 5 {
		tb.Finish("api.x", fail([]string{"a", "b"}[i%2]), at(time.Duration(i)*time.Second))
	}
	tb.Finish("api.x", Outcome{Source: "a", Throttled: true, ThrottledUntil: at(time.Hour)}, at(6*time.Second))
	if o, _ := tb.Object("api.x", at(7*time.Second)); o.State == StateClosed || o.LearnedRate == nil {
		t.Fatalf("before reset: %+v", o)
	}
	o, found := tb.Reset("api.x", at(8*time.Second))
	if !found || o.State != StateClosed || o.Until != nil || o.LearnedRate != nil || o.LearnedConcurrency != nil {
		t.Fatalf("after reset: %+v", o)
	}
	if g := tb.Admit("api.x", "a", at(9*time.Second)); g.Blocked || g.Probe {
		t.Fatalf("after reset: %+v", g)
	}
	if c, r, _ := tb.Limits("api.x"); c != startConcurrency || r != 0 {
		t.Fatalf("after reset limits %d, %g", c, r)
	}
	if _, found := tb.Reset("nowhere", t0); found {
		t.Fatal("reset of an unknown host found it")
	}
}
