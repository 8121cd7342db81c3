package scheduler

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/pacer-dev/pacer/breaker"
	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/domain"
	"github.com/pacer-dev/pacer/scheduler/policy"
	"github.com/pacer-dev/pacer/sources"
)

// localPoller fails with a local resource error its first n calls, then
// succeeds; it records when it was called.
type localPoller struct {
	mu    sync.Mutex
	n     int
	calls []time.Time
}

func (p *localPoller) Poll(context.Context) sources.Result {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls = append(p.calls, time.Now())
	if len(p.calls) <= p.n {
		return sources.Result{Err: fmt.Errorf("exec true: fork/exec /bin/true: %w", syscall.EAGAIN), Local: true, ExitCode: -1}
	}
	return sources.Result{ExitCode: 0}
}

func (p *localPoller) times() []time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]time.Time(nil), p.calls...)
}

// A source whose polls fail 20 times in a row for lack of pacer's own
// resources never leaves ok, though breaker.failures and error_after are 1:
// the retries back off (memory: the gaps grow to policy.LocalBackoff's max), they
// are counted as local_error, they write no history, and the warnings are
// rate-limited daemon-wide (30 sources failing together, on the hour: at
// most one line a second).
func TestLocalErrorsNeverBlameTheSource(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		const nsrc, nerr = 30, 20
		body := `
concurrency: 4
defaults:
  schedule: "0 * * * *"
  backoff: {initial: 1s, max: 1h, multiplier: 2, jitter: 0}
  breaker: {failures: 1, cooldown: 1h}
  error_after: 1
sources:
`
		for i := range nsrc {
			body += fmt.Sprintf("  - {name: s%02d, type: exec, command: [\"true\"]}\n", i)
		}
		cfg := writeConfig(t, dir, body)
		logs := newLogCapture()
		var mu sync.Mutex
		pollers := map[string]*localPoller{}
		h := startWith(t, dir, cfg, slog.New(logs), func(src *config.Source) (sources.Poller, error) {
			mu.Lock()
			defer mu.Unlock()
			p := &localPoller{n: nerr}
			pollers[src.Name] = p
			return p, nil
		})
		defer h.stop()
		began := time.Now()
		seen := map[string]bool{}
		// Checked every second of fake time (the retries are >= 800 ms apart).
		for deadline := began.Add(3 * time.Hour); len(seen) < nsrc; time.Sleep(time.Second) {
			if time.Now().After(deadline) {
				t.Fatalf("after 3h, %d of %d sources succeeded", len(seen), nsrc)
			}
			for _, o := range h.s.Sources() {
				if o.State != policy.StatePending && o.State != policy.StateOK {
					t.Fatalf("%s entered %s: %+v", o.Name, o.State, o)
				}
				if o.ConsecutiveFailures != 0 || o.LastError != "" || o.Breaker != breaker.Closed || o.FailuresTotal != 0 {
					t.Fatalf("%s blamed for a local error: %+v", o.Name, o)
				}
				if o.PollsTotal > 0 {
					seen[o.Name] = true
				}
			}
		}
		elapsed := time.Since(began)
		if got := h.metric("pacer_polls_total", "outcome", "local_error"); got != nsrc*nerr {
			t.Errorf("local_error polls %v, want %d", got, nsrc*nerr)
		}
		if got := h.metric("pacer_polls_total", "outcome", "failure"); got != 0 {
			t.Errorf("failure polls %v, want 0", got)
		}
		for name, p := range pollers {
			calls := p.times()
			if len(calls) < nerr+1 {
				t.Fatalf("%s: %d calls", name, len(calls))
			}
			for i := 1; i <= nerr; i++ {
				want := policy.LocalBackoff().Delay(i, 0.5)
				gap := calls[i].Sub(calls[i-1])
				if gap < want*8/10 || gap > want*12/10+100*time.Millisecond {
					t.Errorf("%s: gap before retry %d = %v, want %v +/-20%%", name, i, gap, want)
				}
			}
			recs, err := h.s.History(t.Context(), name, 100)
			if err != nil || len(recs) == 0 || len(recs) != len(calls)-nerr {
				t.Errorf("%s: %d records for %d calls (%v), want one per success only", name, len(recs), len(calls), err)
			}
			for _, r := range recs {
				if r.Outcome != domain.OutcomeSuccess {
					t.Errorf("%s: a record with policy.Outcome %s", name, r.Outcome)
				}
			}
		}
		warns := logs.lines("poll failed for lack of pacer's own resources; retrying, not counted against the source")
		t.Logf("%d sources x %d local errors over %v: %d warnings", nsrc, nerr, elapsed, len(warns))
		if max := int(elapsed/localLogEvery) + 1; len(warns) == 0 || len(warns) > max {
			t.Errorf("%d local-error warnings over %v, want 1 to %d", len(warns), elapsed, max)
		}
		suppressed := 0
		for _, w := range warns {
			n, _ := strconv.Atoi(w["suppressed_since_last_line"])
			suppressed += n
		}
		if suppressed+len(warns) > nsrc*nerr || suppressed == 0 {
			t.Errorf("warnings %d + suppressed %d for %d local errors", len(warns), suppressed, nsrc*nerr)
		}
		if n := len(logs.lines("source state changed")); n != nsrc {
			t.Errorf("%d state changes logged, want %d (pending -> ok)", n, nsrc)
		}
	})
}
