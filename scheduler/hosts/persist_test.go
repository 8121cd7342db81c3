package hosts

import (
	"reflect"
	"testing"
	"time"
)

func TestSettingsKey(t *testing.T) {
	a := Settings{Concurrency: 4, Rate: 2.5, Burst: 1, Breaker: brk, Adaptive: true}
	if SettingsKey(a) != SettingsKey(a) {
		t.Fatal("equal settings, different keys")
	}
	for _, b := range []Settings{
		{Concurrency: 5, Rate: 2.5, Burst: 1, Breaker: brk, Adaptive: true},
		{Concurrency: 4, Rate: 2.6, Burst: 1, Breaker: brk, Adaptive: true},
		{Concurrency: 4, Rate: 2.5, Burst: 2, Breaker: brk, Adaptive: true},
		{Concurrency: 4, Rate: 2.5, Burst: 1, Breaker: BreakerPolicy{Sources: 2, Failures: 5, Window: time.Minute, Cooldown: 2 * time.Minute}, Adaptive: true},
		{Concurrency: 4, Rate: 2.5, Burst: 1, Breaker: brk},
	} {
		if SettingsKey(a) == SettingsKey(b) {
			t.Fatalf("%+v and %+v share the key %q", a, b, SettingsKey(a))
		}
	}
}

// learnedTable returns a table whose host api.x has learned limits, a
// baseline, a throttle and an open breaker.
func learnedTable(s Settings) *Table {
	tb := table(s, 3)
	for i := range 20 {
		tb.Admit("api.x", "a", at(time.Duration(i)*100*time.Millisecond))
	}
	drive(tb, 100, 40*time.Millisecond, true, 1, t0)
	tb.Finish("api.x", Outcome{Source: "b", Throttled: true, ThrottledUntil: at(30 * time.Second)}, at(2*time.Second))
	for i := range 5 {
		tb.Finish("api.x", fail([]string{"a", "b"}[i%2]), at(3*time.Second))
	}
	return tb
}

func TestSnapshotRestore(t *testing.T) {
	s := Settings{Concurrency: 8, Breaker: brk, Adaptive: true}
	a := learnedTable(s)
	snap := a.Snapshot()
	if len(snap) != 1 || snap[0].Host != "api.x" || !snap[0].Open || snap[0].LearnedRate == 0 ||
		snap[0].LearnedConcurrency == 0 || snap[0].Baseline != 40*time.Millisecond || !snap[0].ThrottledUntil.Equal(at(30*time.Second)) {
		t.Fatalf("snapshot %+v", snap)
	}
	if again := a.Snapshot(); again != nil {
		t.Fatalf("a second snapshot with nothing changed: %+v", again)
	}
	b := table(s, 3)
	b.Restore(snap, at(4*time.Second))
	if again := b.Snapshot(); again != nil {
		t.Fatalf("restoring dirtied: %+v", again)
	}
	ca, ra, ba := a.Limits("api.x")
	cb, rb, bb := b.Limits("api.x")
	if ca != cb || ra != rb || ba != bb {
		t.Fatalf("limits %d %g %d restored as %d %g %d", ca, ra, ba, cb, rb, bb)
	}
	for _, now := range []time.Time{at(5 * time.Second), at(40 * time.Second), at(63 * time.Second)} {
		oa, _ := a.Object("api.x", now)
		ob, _ := b.Object("api.x", now)
		oa.LatencyP90Ms, ob.LatencyP90Ms = nil, nil // samples are not stored
		if !reflect.DeepEqual(oa, ob) {
			t.Fatalf("at %v:\n%+v\nrestored as\n%+v", now, oa, ob)
		}
		if ga, gb := a.Peek("api.x", now), b.Peek("api.x", now); ga != gb {
			t.Fatalf("at %v gate %+v restored as %+v", now, ga, gb)
		}
	}
	// Restored open, the probe closes it with one host_recovered.
	if g := b.Admit("api.x", "c", at(63*time.Second)); !g.Probe {
		t.Fatalf("restored open breaker after its cooldown: %+v", g)
	}
	if ev := b.Finish("api.x", ok("c"), at(64*time.Second)); len(ev) != 1 || ev[0].Kind != EventRecovered {
		t.Fatalf("events %v", ev)
	}
	// ... and that is newer than the stored open state: a later Restore keeps it closed.
	b.Restore(snap, at(65*time.Second))
	if o, _ := b.Object("api.x", at(65*time.Second)); o.State != StateClosed {
		t.Fatalf("an older stored breaker won: %+v", o)
	}
}

func TestRestoreOtherSettings(t *testing.T) {
	s := Settings{Concurrency: 8, Breaker: brk, Adaptive: true}
	snap := learnedTable(s).Snapshot()
	s.Concurrency = 4
	b := table(s, 3)
	b.Restore(snap, at(4*time.Second))
	o, _ := b.Object("api.x", at(5*time.Second))
	if o.LearnedConcurrency != nil || o.LearnedRate != nil || o.BaselineMs != nil {
		t.Fatalf("learned under other settings, adopted: %+v", o)
	}
	if o.State != StateThrottled && o.State != StateOpen {
		t.Fatalf("throttle and breaker are not settings-bound, lost: %+v", o)
	}
	// Unknown hosts are ignored; newer local learned values win.
	c := table(Settings{Concurrency: 8, Breaker: brk, Adaptive: true}, 3)
	drive(c, 300, 40*time.Millisecond, true, 1, at(time.Hour))
	cc, _, _ := c.Limits("api.x")
	old := snap[0]
	old.LearnedConcurrency = 1
	c.Restore([]Persisted{old, {Host: "nowhere", LearnedConcurrency: 3}}, at(time.Hour))
	if got, _, _ := c.Limits("api.x"); got != cc {
		t.Fatalf("an older stored concurrency won: %d, want %d", got, cc)
	}
	newer := old
	newer.LearnedAt = at(2 * time.Hour)
	c.Restore([]Persisted{newer}, at(2*time.Hour))
	if got, _, _ := c.Limits("api.x"); got != 1 {
		t.Fatalf("a newer stored concurrency lost: %d, want 1", got)
	}
}

// TestClusterProbe: two members share a host through the store: a probe
// admitted on one blocks the other's sources, its verdict reaches the
// other, and a probe whose member died is lost after its lease.
func TestClusterProbe(t *testing.T) {
	s := Settings{Breaker: BreakerPolicy{Sources: 1, Failures: 1, Cooldown: time.Minute}}
	a, b := table(s, 4), table(s, 4)
	a.Finish("api.x", fail("a1"), t0)
	b.Restore(a.Snapshot(), at(time.Second))
	if g := b.Admit("api.x", "b1", at(2*time.Second)); !g.Blocked || !g.Until.Equal(at(time.Minute)) {
		t.Fatalf("member b, host open on a: %+v", g)
	}
	if g := a.Admit("api.x", "a2", at(61*time.Second)); !g.Probe {
		t.Fatalf("member a after the cooldown: %+v", g)
	}
	b.Restore(a.Snapshot(), at(62*time.Second))
	if g := b.Admit("api.x", "b1", at(62*time.Second)); !g.Blocked || g.Probe {
		t.Fatalf("member b while a probes: %+v", g)
	}
	if ev := a.Finish("api.x", ok("a2"), at(63*time.Second)); len(ev) != 1 {
		t.Fatalf("probe verdict: %v", ev)
	}
	b.Restore(a.Snapshot(), at(64*time.Second))
	if g := b.Admit("api.x", "b1", at(64*time.Second)); g.Blocked || g.Probe {
		t.Fatalf("member b after a's probe closed it: %+v", g)
	}
	// A lost probe: a opens again and probes, then dies; b probes after the lease.
	a.Finish("api.x", fail("a1"), at(100*time.Second))
	if g := a.Admit("api.x", "a3", at(160*time.Second)); !g.Probe {
		t.Fatalf("member a, second probe: %+v", g)
	}
	b.Restore(a.Snapshot(), at(161*time.Second))
	lease := at(160*time.Second + probeLease(s.Breaker))
	if g := b.Admit("api.x", "b1", lease.Add(-time.Second)); !g.Blocked {
		t.Fatalf("within the lost probe's lease: %+v", g)
	}
	if g := b.Admit("api.x", "b1", lease); !g.Probe {
		t.Fatalf("after the lost probe's lease: %+v", g)
	}
	if o, _ := b.Object("api.x", lease); o.State != StateHalfOpen || o.Why == "" {
		t.Fatalf("object %+v", o)
	}
}
