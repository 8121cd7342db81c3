package policy

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/breaker"
	"github.com/pacer-dev/pacer/domain"
)

// A local error (KindLocal) moves only the next run: to LocalBackoff's
// delay for the source's consecutive local errors, never past its next
// tick, always after now. Failures, throttles, the breaker, the error
// state, the counters and the last error stay as they were.
func TestApplyOutcomeLocal(t *testing.T) {
	src := testSource() // @every 1m; error_after 10; breaker 5
	tm := Timing{Sched: src.Schedule, Every: time.Minute}
	end := t0.Add(10 * time.Second) // next tick: t0 + 1m
	until := t0.Add(-time.Second)
	states := map[string]domain.SourceState{
		"ok":       {LastOutcome: domain.OutcomeSuccess, LastRunAt: UTCPtr(t0), PollsTotal: 7},
		"backoff":  {LastOutcome: domain.OutcomeFailure, ConsecutiveFailures: 9, FailuresTotal: 9, PollsTotal: 9, LastError: "GET x: 502"},
		"throttle": {LastOutcome: domain.OutcomeThrottled, ConsecutiveThrottles: 3, ThrottledTotal: 3, PollsTotal: 3},
		"probe":    {LastOutcome: domain.OutcomeFailure, ConsecutiveFailures: 5, BreakerState: breaker.Open, BreakerUntil: &until, LastError: "boom"},
	}
	tests := []struct {
		k      int
		jitter float64
		want   time.Time
	}{
		{1, 0.5, end.Add(time.Second)},
		{1, 0, end.Add(800 * time.Millisecond)},
		{1, 0.999999, end.Add(1200 * time.Millisecond).Add(-200 * time.Nanosecond).Truncate(time.Microsecond).Add(time.Microsecond)},
		{3, 0.5, end.Add(4 * time.Second)},
		{6, 0.5, end.Add(32 * time.Second)},
		{7, 0.5, t0.Add(time.Minute)}, // 64 s > the tick 50 s away: the tick
		{1 << 40, 0.5, t0.Add(time.Minute)},
	}
	for name, in := range states {
		for _, tt := range tests {
			t.Run(name+"/k="+strconv.Itoa(tt.k), func(t *testing.T) {
				brk := SnapshotOf(&in)
				if name == "probe" {
					brk = breaker.Snapshot{State: breaker.HalfOpen}
				}
				got := Apply(in, src, tm, Outcome{Kind: KindLocal, Local: tt.k, Jitter: tt.jitter,
					Err: "open /dev/null: too many open files", Start: t0, End: end, Brk: brk})
				if got.NextRunAt == nil || !got.NextRunAt.Equal(tt.want) {
					t.Fatalf("next run %v, want %v", got.NextRunAt, tt.want)
				}
				want := in
				want.NextRunAt = got.NextRunAt
				SetBreaker(&want, brk)
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("state changed beyond the next run:\n got %+v\nwant %+v", got, want)
				}
				if s, w := StateOf(&got, end), StateOf(&want, end); s != w || s == StateError {
					t.Errorf("state %s, want %s", s, w)
				}
			})
		}
	}
}
