package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/scheduler/policy"
	"github.com/pacer-dev/pacer/sources"
)

func TestThrottleFlip(t *testing.T) {
	tests := []struct {
		prev, cur string
		want      bool
	}{
		{policy.StateOK, policy.StateThrottled, true},
		{policy.StateThrottled, policy.StateOK, true},
		{policy.StatePending, policy.StateThrottled, true},
		{policy.StateBackoff, policy.StateThrottled, false},
		{policy.StateThrottled, policy.StateBackoff, false},
		{policy.StateHalfOpen, policy.StateThrottled, false},
		{policy.StateThrottled, policy.StateOpen, false},
		{policy.StateThrottled, policy.StateError, false},
		{policy.StateThrottled, policy.StatePaused, false},
		{policy.StatePaused, policy.StateThrottled, false},
		{policy.StateOK, policy.StateBackoff, false},
		{policy.StateThrottled, policy.StateThrottled, false},
	}
	for _, tt := range tests {
		if got := throttleFlip(tt.prev, tt.cur); got != tt.want {
			t.Errorf("throttleFlip(%s, %s) = %v, want %v", tt.prev, tt.cur, got, tt.want)
		}
	}
}

// flapPoller alternates between success and a 429 (Retry-After: 1), and
// fails at the calls listed in fail. It records the state each call leads
// to (ok, throttled or backoff).
type flapPoller struct {
	mu     sync.Mutex
	fail   map[int]bool
	states []string
}

func (p *flapPoller) Poll(context.Context) sources.Result {
	p.mu.Lock()
	defer p.mu.Unlock()
	i := len(p.states)
	switch {
	case p.fail[i]:
		p.states = append(p.states, policy.StateBackoff)
		return sources.Result{Err: errors.New("GET x: 502 Bad Gateway"), StatusCode: 502, ExitCode: -1}
	case i%2 == 1:
		p.states = append(p.states, policy.StateThrottled)
		return sources.Result{Err: errors.New("GET x: 429 Too Many Requests"), Throttled: true, RetryAfter: "1", StatusCode: 429, ExitCode: -1}
	}
	p.states = append(p.states, policy.StateOK)
	return sources.Result{StatusCode: 200, ExitCode: -1}
}

// Six sources flapping between ok and throttled for 100 s (as behind an
// nginx at its rate limit: 546 lines in round 1) log one line when they
// start and one a minute after with the count of transitions coalesced; a
// failure in the middle of a window is logged at once (rule 3.12), after a
// line for what was coalesced before it; every transition is accounted for.
func TestThrottleTransitionsCoalesced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		body := `
concurrency: 6
defaults:
  schedule: "@every 1s"
  backoff: {initial: 1s, max: 1s, multiplier: 2, jitter: 0}
  breaker: {failures: 5, cooldown: 1m}
  error_after: 0
sources:
`
		const nsrc = 6
		for i := range nsrc {
			body += fmt.Sprintf("  - {name: s%d, type: exec, command: [\"true\"]}\n", i)
		}
		logs := newLogCapture()
		var mu sync.Mutex
		pollers := map[string]*flapPoller{}
		h := startWith(t, dir, writeConfig(t, dir, body), slog.New(logs), func(src *config.Source) (sources.Poller, error) {
			mu.Lock()
			defer mu.Unlock()
			p := &flapPoller{}
			if src.Name == "s0" {
				p.fail = map[int]bool{40: true}
			}
			pollers[src.Name] = p
			return p, nil
		})
		time.Sleep(100 * time.Second)
		h.stop()

		changes := logs.lines("source state changed")
		coalesced := logs.lines("source throttle transitions coalesced")
		t.Logf("%d sources flapping for 100 s: %d state-change lines, %d coalesced lines", nsrc, len(changes), len(coalesced))
		if n := len(changes) + len(coalesced); n > nsrc*5 {
			t.Errorf("%d lines for %d sources in 100 s; want at most 5 each", n, nsrc)
		}
		for name, p := range pollers {
			flips, others := 0, 0
			prev := policy.StatePending
			for _, st := range p.states {
				switch {
				case throttleFlip(prev, st):
					flips++
				case st != prev:
					others++
				}
				prev = st
			}
			if flips < 50 {
				t.Fatalf("%s: only %d throttle transitions in 100 s", name, flips)
			}
			loggedFlips, loggedOthers, counted := 0, 0, 0
			for _, l := range changes {
				if l["source"] != name {
					continue
				}
				if throttleFlip(l["from"], l["to"]) {
					loggedFlips++
				} else {
					loggedOthers++
				}
			}
			for _, l := range coalesced {
				if l["source"] == name {
					n, _ := strconv.Atoi(l["transitions"])
					counted += n
				}
			}
			if loggedOthers != others {
				t.Errorf("%s: %d other changes logged, want all %d", name, loggedOthers, others)
			}
			if loggedFlips+counted != flips {
				t.Errorf("%s: %d throttle transitions logged + %d coalesced, want %d", name, loggedFlips, counted, flips)
			}
		}
		// s0's failure (throttled -> backoff, at its 41st poll) is logged
		// when it happened, right after a line for the transitions
		// coalesced before it, and so is its way back (backoff ->
		// throttled); the window then runs to the end.
		var s0 []string
		for _, r := range logs.all() {
			if r["source"] == "s0" {
				s0 = append(s0, r["msg"]+" "+r["from"]+" -> "+r["to"])
			}
		}
		want := []string{
			"source state changed pending -> ok",
			"source state changed ok -> throttled",
			"source throttle transitions coalesced throttled -> throttled",
			"source state changed throttled -> backoff",
			"source state changed backoff -> throttled",
			"source throttle transitions coalesced throttled -> " + pollers["s0"].states[len(pollers["s0"].states)-1],
		}
		if fmt.Sprint(s0) != fmt.Sprint(want) {
			t.Errorf("s0's lines:\n%q\nwant\n%q", s0, want)
		}
	})
}
