package policy

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/breaker"
	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/domain"
)

var t0 = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)

func testSource() *config.Source {
	return &config.Source{
		Name: "api", Type: "http", ScheduleSpec: "@every 1m", Schedule: config.Every{D: time.Minute},
		Timeout:    10 * time.Second,
		Backoff:    config.Backoff{Initial: time.Second, Max: 15 * time.Minute, Multiplier: 2},
		Breaker:    config.Breaker{Failures: 5, Cooldown: time.Minute},
		ErrorAfter: 10,
	}
}

// TestApplyOutcome walks the transitions of rules 3.4 to 3.8 through the
// pure state function.
func TestApplyOutcome(t *testing.T) {
	src := testSource()
	src.Schedule = config.Every{D: time.Second}
	src.ScheduleSpec = "@every 1s"
	tm := Timing{Sched: src.Schedule} // no Phase: ticks at t+1s
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	fail := func(st domain.SourceState, brk breaker.Snapshot) domain.SourceState {
		return Apply(st, src, tm, Outcome{Kind: domain.OutcomeFailure, Err: "GET x: 502 Bad Gateway", Start: t0, End: t0, Brk: brk, Jitter: 0.5})
	}
	tests := []struct {
		name  string
		in    domain.SourceState
		o     Outcome
		check func(t *testing.T, st domain.SourceState)
	}{
		{
			name: "success resets failures and schedules the next tick",
			in:   domain.SourceState{ConsecutiveFailures: 3, ConsecutiveThrottles: 2, LastError: "old"},
			o:    Outcome{Kind: domain.OutcomeSuccess, Start: t0, End: at(100 * time.Millisecond), Brk: breaker.Snapshot{State: breaker.Closed}},
			check: func(t *testing.T, st domain.SourceState) {
				if st.ConsecutiveFailures != 0 || st.ConsecutiveThrottles != 0 || st.PollsTotal != 1 {
					t.Errorf("got %+v", st)
				}
				if !st.LastSuccessAt.Equal(at(100*time.Millisecond)) || !st.NextRunAt.Equal(at(1100*time.Millisecond)) {
					t.Errorf("last success %v next %v", st.LastSuccessAt, st.NextRunAt)
				}
				if StateOf(&st, at(time.Second)) != StateOK {
					t.Errorf("state %s", StateOf(&st, at(time.Second)))
				}
			},
		},
		{
			name: "k-th failure backs off initial*multiplier^(k-1), not before the next tick",
			in:   domain.SourceState{ConsecutiveFailures: 4},
			o:    Outcome{Kind: domain.OutcomeFailure, Err: "boom", Start: t0, End: t0, Brk: breaker.Snapshot{State: breaker.Closed}, Jitter: 0.5},
			check: func(t *testing.T, st domain.SourceState) {
				if st.ConsecutiveFailures != 5 || st.FailuresTotal != 1 || st.LastError != "boom" || st.LastErrorAt == nil || !st.LastErrorAt.Equal(t0) {
					t.Errorf("got %+v", st)
				}
				if want := at(16 * time.Second); !st.NextRunAt.Equal(want) {
					t.Errorf("next %v, want %v", st.NextRunAt, want)
				}
				if StateOf(&st, t0) != StateBackoff {
					t.Errorf("state %s", StateOf(&st, t0))
				}
			},
		},
		{
			name: "first failure: the next tick wins over a shorter backoff",
			in:   domain.SourceState{},
			o:    Outcome{Kind: domain.OutcomeFailure, Err: "boom", Start: t0, End: t0, Brk: breaker.Snapshot{State: breaker.Closed}, Jitter: 0.5},
			check: func(t *testing.T, st domain.SourceState) {
				if !st.NextRunAt.Equal(at(time.Second)) {
					t.Errorf("next %v", st.NextRunAt)
				}
			},
		},
		{
			name: "backoff is capped at max",
			in:   domain.SourceState{ConsecutiveFailures: 8},
			o:    Outcome{Kind: domain.OutcomeFailure, Err: "boom", Start: t0, End: t0, Brk: breaker.Snapshot{State: breaker.Closed}, Jitter: 0.5},
			check: func(t *testing.T, st domain.SourceState) {
				// error_after is 10: the 9th failure is still backoff; 2^8 s > 15m? no: 256s.
				if !st.NextRunAt.Equal(at(256 * time.Second)) {
					t.Errorf("next %v", st.NextRunAt)
				}
			},
		},
		{
			name: "open breaker defers the next poll past its cooldown",
			in:   domain.SourceState{ConsecutiveFailures: 4},
			o:    Outcome{Kind: domain.OutcomeFailure, Err: "boom", Start: t0, End: t0, Brk: breaker.Snapshot{State: breaker.Open, Until: at(time.Minute)}, Jitter: 0.5},
			check: func(t *testing.T, st domain.SourceState) {
				if st.BreakerState != breaker.Open || !st.BreakerUntil.Equal(at(time.Minute)) {
					t.Errorf("breaker %s until %v", st.BreakerState, st.BreakerUntil)
				}
				if st.NextRunAt.Before(at(time.Minute)) {
					t.Errorf("next %v before the cooldown ends", st.NextRunAt)
				}
				if s := StateOf(&st, at(30*time.Second)); s != StateOpen {
					t.Errorf("state during cooldown %s", s)
				}
				if s := StateOf(&st, at(61*time.Second)); s != StateHalfOpen {
					t.Errorf("state after cooldown %s", s)
				}
			},
		},
		{
			name: "error_after failures enter the error state with the reason",
			in:   domain.SourceState{ConsecutiveFailures: 9},
			o:    Outcome{Kind: domain.OutcomeFailure, Err: "GET https://example.com/status: 502 Bad Gateway", Start: t0, End: t0, Brk: breaker.Snapshot{State: breaker.Open, Until: at(time.Minute)}},
			check: func(t *testing.T, st domain.SourceState) {
				want := "10 consecutive failures; last: GET https://example.com/status: 502 Bad Gateway"
				if st.ErrorReason != want || st.NextRunAt != nil || st.ConsecutiveFailures != 10 {
					t.Errorf("got reason %q next %v failures %d", st.ErrorReason, st.NextRunAt, st.ConsecutiveFailures)
				}
				if StateOf(&st, t0) != StateError {
					t.Errorf("state %s", StateOf(&st, t0))
				}
			},
		},
		{
			name: "throttled with Retry-After seconds: not counted as a failure",
			in:   domain.SourceState{ConsecutiveFailures: 2},
			o:    Outcome{Kind: domain.OutcomeThrottled, Err: "429", RetryAfter: "120", Start: t0, End: t0, Brk: breaker.Snapshot{State: breaker.Closed}},
			check: func(t *testing.T, st domain.SourceState) {
				if st.ConsecutiveFailures != 2 || st.FailuresTotal != 0 || st.ThrottledTotal != 1 || st.ConsecutiveThrottles != 1 {
					t.Errorf("got %+v", st)
				}
				if !st.NextRunAt.Equal(at(120 * time.Second)) {
					t.Errorf("next %v", st.NextRunAt)
				}
				if StateOf(&st, t0) != StateThrottled {
					t.Errorf("state %s", StateOf(&st, t0))
				}
			},
		},
		{
			name: "throttled with an HTTP date",
			in:   domain.SourceState{},
			o:    Outcome{Kind: domain.OutcomeThrottled, RetryAfter: at(5 * time.Minute).Format(http.TimeFormat), Start: t0, End: t0, Brk: breaker.Snapshot{State: breaker.Closed}},
			check: func(t *testing.T, st domain.SourceState) {
				if !st.NextRunAt.Equal(at(5 * time.Minute)) {
					t.Errorf("next %v", st.NextRunAt)
				}
			},
		},
		{
			name: "throttled without Retry-After backs off by consecutive throttles",
			in:   domain.SourceState{ConsecutiveThrottles: 3},
			o:    Outcome{Kind: domain.OutcomeThrottled, Start: t0, End: t0, Brk: breaker.Snapshot{State: breaker.Closed}, Jitter: 0.5},
			check: func(t *testing.T, st domain.SourceState) {
				if !st.NextRunAt.Equal(at(8 * time.Second)) {
					t.Errorf("next %v", st.NextRunAt)
				}
			},
		},
		{
			name: "a throttled half-open probe leaves the breaker half-open",
			in:   domain.SourceState{ConsecutiveFailures: 5, BreakerState: breaker.Open, BreakerUntil: UTCPtr(t0.Add(-time.Second))},
			o:    Outcome{Kind: domain.OutcomeThrottled, RetryAfter: "1", Start: t0, End: t0, Brk: breaker.Snapshot{State: breaker.HalfOpen}},
			check: func(t *testing.T, st domain.SourceState) {
				if st.BreakerState != breaker.HalfOpen || st.ConsecutiveFailures != 5 {
					t.Errorf("breaker %s failures %d", st.BreakerState, st.ConsecutiveFailures)
				}
				if StateOf(&st, t0) != StateThrottled || BreakerOf(&st, t0) != breaker.HalfOpen {
					t.Errorf("state %s breaker %s", StateOf(&st, t0), BreakerOf(&st, t0))
				}
			},
		},
		{
			name: "rejected by the open breaker: nothing counts, due after its cooldown",
			in:   domain.SourceState{ConsecutiveFailures: 5, PollsTotal: 7, LastRunAt: UTCPtr(t0), LastOutcome: domain.OutcomeFailure, NextRunAt: UTCPtr(t0)},
			o:    Outcome{Kind: KindRejected, Start: t0, End: t0, Brk: breaker.Snapshot{State: breaker.Open, Until: at(time.Minute)}},
			check: func(t *testing.T, st domain.SourceState) {
				if st.ConsecutiveFailures != 5 || st.PollsTotal != 7 || st.FailuresTotal != 0 || !st.LastRunAt.Equal(t0) || st.LastOutcome != domain.OutcomeFailure {
					t.Errorf("a rejected poll counted: %+v", st)
				}
				if st.BreakerState != breaker.Open || !st.BreakerUntil.Equal(at(time.Minute)) {
					t.Errorf("breaker %s until %v; want the live breaker's", st.BreakerState, st.BreakerUntil)
				}
				if want := at(time.Minute + time.Microsecond); !st.NextRunAt.Equal(want) {
					t.Errorf("next %v, want %v (just after the cooldown: its probe, to the store's microsecond)", st.NextRunAt, want)
				}
			},
		},
		{
			name: "rejected records the live breaker over a stale stored one",
			in:   domain.SourceState{ConsecutiveFailures: 5, BreakerState: breaker.Closed},
			o:    Outcome{Kind: KindRejected, Start: t0, End: t0, Brk: breaker.Snapshot{State: breaker.Open, Until: at(10 * time.Second)}},
			check: func(t *testing.T, st domain.SourceState) {
				if StateOf(&st, t0) != StateOpen || !st.NextRunAt.Equal(at(10*time.Second+time.Microsecond)) {
					t.Errorf("state %s next %v", StateOf(&st, t0), st.NextRunAt)
				}
			},
		},
		{
			name: "interrupted changes nothing but makes the source due",
			in:   domain.SourceState{ConsecutiveFailures: 2, PollsTotal: 7, NextRunAt: UTCPtr(at(time.Hour))},
			o:    Outcome{Kind: domain.OutcomeInterrupted, Start: t0, End: at(time.Second)},
			check: func(t *testing.T, st domain.SourceState) {
				if st.ConsecutiveFailures != 2 || st.PollsTotal != 7 || st.LastRunAt != nil || !st.NextRunAt.Equal(t0) {
					t.Errorf("got %+v", st)
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.check(t, Apply(tc.in, src, tm, tc.o))
		})
	}

	// A run of failures: backoff, then open, then error.
	st := domain.SourceState{}
	for k := 1; k <= 10; k++ {
		brk := breaker.Snapshot{State: breaker.Closed}
		if k >= 5 {
			brk = breaker.Snapshot{State: breaker.Open, Until: t0.Add(time.Minute)}
		}
		st = fail(st, brk)
		want := StateBackoff
		switch {
		case k == 10:
			want = StateError
		case k >= 5:
			want = StateOpen
		}
		if got := StateOf(&st, t0); got != want {
			t.Fatalf("after %d failures: state %s, want %s", k, got, want)
		}
	}
	if !strings.HasPrefix(st.ErrorReason, "10 consecutive failures; last: ") {
		t.Errorf("reason %q", st.ErrorReason)
	}
}

func TestApplyAction(t *testing.T) {
	src := testSource()
	errored := domain.SourceState{Name: "api", ConsecutiveFailures: 10, ErrorReason: "10 consecutive failures; last: x",
		BreakerState: breaker.Open, BreakerUntil: UTCPtr(t0.Add(time.Minute)), LastRunAt: UTCPtr(t0), LastOutcome: domain.OutcomeFailure, PollsTotal: 10}
	tests := []struct {
		name, action, reason string
		in                   domain.SourceState
		state                string
		next                 bool
	}{
		{"reset clears error, failures and breaker", ActionReset, "", errored, StateOK, true},
		{"pause keeps the reason and has no next run", ActionPause, "maintenance", domain.SourceState{Name: "api"}, StatePaused, false},
		{"pause without reason", ActionPause, "", domain.SourceState{Name: "api"}, StatePaused, false},
		{"resume of a paused source schedules it", ActionResume, "", domain.SourceState{Name: "api", Paused: true, PausedReason: "x"}, StatePending, true},
		{"resume of a paused source in error keeps the error", ActionResume, "", func() domain.SourceState { s := errored; s.Paused = true; return s }(), StateError, false},
		{"resume of a running source is a no-op", ActionResume, "", domain.SourceState{Name: "api", NextRunAt: UTCPtr(t0)}, StatePending, true},
		{"reset of a paused source keeps it paused", ActionReset, "", func() domain.SourceState { s := errored; s.Paused = true; return s }(), StatePaused, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st, err := ApplyAction(tc.action, src, tc.in, tc.reason, t0)
			if err != nil {
				t.Fatal(err)
			}
			if got := StateOf(&st, t0); got != tc.state {
				t.Errorf("state %s, want %s", got, tc.state)
			}
			if (st.NextRunAt != nil) != tc.next {
				t.Errorf("next run %v, want set=%v", st.NextRunAt, tc.next)
			}
			if tc.action == ActionReset && (st.ConsecutiveFailures != 0 || st.ErrorReason != "" || st.BreakerUntil != nil || st.PollsTotal != tc.in.PollsTotal) {
				t.Errorf("reset left %+v", st)
			}
			if tc.action == ActionPause && st.PausedReason == "" {
				t.Errorf("pause without a reason")
			}
		})
	}
	if _, err := ApplyAction("explode", src, domain.SourceState{}, "", t0); err == nil {
		t.Error("unknown action accepted")
	}
}

func TestTimingPhase(t *testing.T) {
	// @every ticks keep a stable phase per name, spread over the interval.
	d := time.Minute
	seen := map[time.Duration]bool{}
	for i := range 1000 {
		name := "src-" + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + time.Duration(i).String()
		tm := NewTiming(name, config.Every{D: d})
		n1 := tm.Next(t0)
		if !n1.After(t0) || n1.Sub(t0) > d {
			t.Fatalf("first tick %v not within (t0, t0+D]", n1.Sub(t0))
		}
		if n2 := tm.Next(n1); n2.Sub(n1) != d {
			t.Fatalf("ticks %v apart, want %v", n2.Sub(n1), d)
		}
		if again := NewTiming(name, config.Every{D: d}).Next(t0); !again.Equal(n1) {
			t.Fatalf("phase not stable: %v vs %v", again, n1)
		}
		seen[n1.Sub(t0).Truncate(time.Second)] = true
	}
	// 1000 sources over 60 one-second buckets: nearly all buckets used.
	if len(seen) < 55 {
		t.Errorf("phases use only %d of 60 seconds", len(seen))
	}
	cron, err := config.ParseSchedule("*/5 * * * *")
	if err != nil {
		t.Fatal(err)
	}
	tm := NewTiming("c", cron)
	if got := tm.Next(t0.Add(time.Second)); !got.Equal(t0.Add(5 * time.Minute)) {
		t.Errorf("cron next %v", got)
	}
	if n := tm.TicksBetween(t0, t0.Add(time.Hour), 1000); n != 12 {
		t.Errorf("ticks in an hour: %d", n)
	}
	if n := NewTiming("e", config.Every{D: time.Second}).TicksBetween(t0, t0.Add(time.Hour), 100); n != 100 {
		t.Errorf("tick count not capped: %d", n)
	}
}

// CeilMicro rounds up to the store's precision and never earlier.
func TestCeilMicro(t *testing.T) {
	base := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct{ in, want time.Time }{
		{base, base},
		{base.Add(time.Microsecond), base.Add(time.Microsecond)},
		{base.Add(1), base.Add(time.Microsecond)},
		{base.Add(999), base.Add(time.Microsecond)},
		{base.Add(1001), base.Add(2 * time.Microsecond)},
	} {
		if got := CeilMicro(c.in); !got.Equal(c.want) {
			t.Errorf("CeilMicro(%s) = %s, want %s", c.in.Format(time.RFC3339Nano), got.Format(time.RFC3339Nano), c.want.Format(time.RFC3339Nano))
		}
	}
}

// TestNextRun pins the one rule for the next poll: the first tick after
// now, no earlier than the backoff or Retry-After, and after an open
// breaker's Until, rounded up to the microsecond.
func TestNextRun(t *testing.T) {
	tm := Timing{Sched: config.Every{D: time.Second}, Every: time.Second} // phase 0: ticks at whole seconds
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	closed := breaker.Snapshot{State: breaker.Closed}
	tests := []struct {
		name      string
		now       time.Time
		notBefore time.Time
		brk       breaker.Snapshot
		want      time.Time
	}{
		{"the next tick", at(300 * time.Millisecond), time.Time{}, closed, at(time.Second)},
		{"a tick is strictly after now", at(time.Second), time.Time{}, closed, at(2 * time.Second)},
		{"a backoff before the tick loses", at(0), at(500 * time.Millisecond), closed, at(time.Second)},
		{"a backoff after the tick wins", at(0), at(7 * time.Second), closed, at(7 * time.Second)},
		{"an open breaker: just after its Until", at(0), at(2 * time.Second), breaker.Snapshot{State: breaker.Open, Until: at(30 * time.Second)}, at(30*time.Second + time.Microsecond)},
		{"an open breaker whose Until is past: the tick", at(0), time.Time{}, breaker.Snapshot{State: breaker.Open, Until: at(-time.Minute)}, at(time.Second)},
		{"a backoff after the breaker's Until wins", at(0), at(time.Minute), breaker.Snapshot{State: breaker.Open, Until: at(30 * time.Second)}, at(time.Minute)},
		{"a half-open breaker does not delay", at(0), time.Time{}, breaker.Snapshot{State: breaker.HalfOpen, Until: at(time.Hour)}, at(time.Second)},
		{"rounded up to the microsecond", at(0), at(5*time.Second + 1), closed, at(5*time.Second + time.Microsecond)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := NextRun(tc.now, tm, tc.notBefore, tc.brk); !got.Equal(tc.want) {
				t.Errorf("nextRun = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestSetBreaker: the breaker fields of a state are written in one place,
// and read back as they were written.
func TestSetBreaker(t *testing.T) {
	for _, b := range []breaker.Snapshot{
		{State: breaker.Closed}, {State: breaker.HalfOpen}, {State: breaker.Open, Until: t0.Add(time.Minute)},
	} {
		st := domain.SourceState{BreakerState: breaker.Open, BreakerUntil: UTCPtr(t0)}
		SetBreaker(&st, b)
		if got := SnapshotOf(&st); got.State != b.State || !got.Until.Equal(b.Until) {
			t.Errorf("SetBreaker(%+v) reads back as %+v", b, got)
		}
		if b.State != breaker.Open && st.BreakerUntil != nil {
			t.Errorf("SetBreaker(%+v) left BreakerUntil %v", b, st.BreakerUntil)
		}
	}
	if got := SnapshotOf(&domain.SourceState{}); got.State != breaker.Closed {
		t.Errorf(`an empty breaker state reads as %q, want closed`, got.State)
	}
}
