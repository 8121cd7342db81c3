package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/scheduler/rates"
	"github.com/pacer-dev/pacer/sources"
)

// ratePoller succeeds, or fails when fail is set.
type ratePoller struct{ fail bool }

func (p ratePoller) Poll(context.Context) sources.Result {
	if p.fail {
		return sources.Result{Err: errors.New("upstream said no"), ExitCode: 1}
	}
	return sources.Result{}
}

// The scheduler's sampler runs with it, on its clock: after a minute of
// 3 sources polled every second (2 succeed, 1 fails), Rates holds 6
// samples of about 2 successes and 1 failure a second, with the cap; after
// Shutdown it takes no more.
func TestRatesSampleThePollCounters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		body := "concurrency: 4\ndefaults: {schedule: \"@every 1s\", breaker: {failures: 0}, error_after: 0, backoff: {initial: 1s, max: 1s, multiplier: 1, jitter: 0}}\nsources:\n"
		for i := range 3 {
			body += fmt.Sprintf("  - {name: s%d, type: exec, command: [\"true\"]}\n", i)
		}
		cfg := writeConfig(t, dir, body)
		h := startWith(t, dir, cfg, slog.New(slog.DiscardHandler), func(src *config.Source) (sources.Poller, error) {
			return ratePoller{fail: src.Name == "s2"}, nil
		})
		time.Sleep(65 * time.Second)
		synctest.Wait()
		got := h.s.Rates()
		h.stop()
		if len(got) != 6 {
			t.Fatalf("after 65 s: %d samples, want 6", len(got))
		}
		for i, s := range got[1:] { // the first may hold the start-up
			ok, bad := s.PerSecond[rates.Success], s.PerSecond[rates.Failure]
			if ok < 1.5 || ok > 2.5 || bad < 0.5 || bad > 1.5 {
				t.Errorf("sample %d: %.2f successes and %.2f failures a second, want about 2 and 1", i+1, ok, bad)
			}
			if s.Limit != 4 {
				t.Errorf("sample %d: cap %d, want 4", i+1, s.Limit)
			}
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		if n := len(h.s.Rates()); n != 6 {
			t.Errorf("after Shutdown the sampler still runs: %d samples", n)
		}
	})
}
