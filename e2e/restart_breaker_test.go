package e2e

import (
	"testing"
	"time"
)

// Rules 3.6 and 3.8: a breaker that was open before a restart (graceful or
// kill -9) is open in the new daemon, not only in its stored row. With
// breaker.failures: 2, a breaker restored closed would need two failures to
// open; the restored one is half-open after its cooldown, so one failed
// probe opens it again for another cooldown. Both sources get no call
// before their stored next_run_at; "heal" answers its probe with 200 and
// closes.
func TestBreakerOpenAcrossRestart(t *testing.T) {
	t.Parallel()
	for _, crash := range []bool{false, true} {
		name := "SIGTERM"
		if crash {
			name = "SIGKILL"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			testBreakerOpenAcrossRestart(t, crash)
		})
	}
}

func testBreakerOpenAcrossRestart(t *testing.T, crash bool) {
	const cooldown = 4 * time.Second
	u := newUpstream(t)
	in := newInst(t)
	u.Set("/probe", behavior{Status: 500})
	u.Set("/heal", behavior{Status: 500})
	in.writeConfig(`concurrency: 2
shutdown_timeout: 2s
defaults:
  schedule: "@every 1s"
  backoff: {initial: 100ms, max: 100ms, multiplier: 2, jitter: 0}
  breaker: {failures: 2, cooldown: 4s}
  error_after: 0
sources:
  - {name: probe, type: http, url: "` + u.URL("/probe") + `"}
  - {name: heal, type: http, url: "` + u.URL("/heal") + `"}
`)
	d := in.start()
	names := []string{"probe", "heal"}
	// Open after two failures, and stored so (status reads the store).
	eventually(t, 6*time.Second, "both breakers open and stored open", func() error {
		for _, n := range names {
			if o := in.statusJSON(n); o.State != "open" || o.Breaker != "open" || o.ConsecutiveFailures != 2 {
				return errf("%s stored: %s", n, o)
			}
		}
		return nil
	})
	before := d.sources()
	if crash {
		d.kill()
	} else {
		d.stop(10 * time.Second)
	}
	stoppedAt := time.Now()
	for _, n := range names {
		if o := before[n]; o.NextRunAt == nil || time.Until(*o.NextRunAt) < 500*time.Millisecond {
			t.Fatalf("%s: the cooldown ends too soon to restart within it (next_run_at %s)", n, fmtTime(o.NextRunAt))
		}
	}

	d2 := in.start()
	u.Set("/heal", behavior{})
	for _, n := range names {
		if o := d2.source(n); o.State != "open" || o.Breaker != "open" || !sameTime(o.NextRunAt, before[n].NextRunAt) {
			t.Errorf("%s after the restart: %s, want open until %s", n, o, fmtTime(before[n].NextRunAt))
		}
	}
	// No call before the stored end of the cooldown; the probe comes after.
	for _, n := range names {
		next := *before[n].NextRunAt
		u.noArrivals(t, "/"+n, stoppedAt, time.Until(next.Add(-20*time.Millisecond)), n+" must not be called while its breaker is open")
	}
	eventually(t, cooldown, "heal's probe succeeded and closed the breaker", func() error {
		if o := d2.source("heal"); o.State != "ok" || o.Breaker != "closed" || o.ConsecutiveFailures != 0 {
			return errf("heal: %s", o)
		}
		return nil
	})
	// probe's one failed probe re-opens its breaker for a whole cooldown (a
	// closed breaker with failures: 2 would be in backoff now, polled again
	// at the next tick).
	var after sourceObj
	eventually(t, cooldown, "probe's failed probe recorded", func() error {
		if after = d2.source("probe"); after.PollsTotal <= before["probe"].PollsTotal {
			return errf("no probe yet: %s", after)
		}
		return nil
	})
	if after.State != "open" || after.Breaker != "open" || after.ConsecutiveFailures != 3 {
		t.Fatalf("probe after one failed probe following the restart: %s, want open with 3 consecutive failures", after)
	}
	if after.NextRunAt == nil || after.LastRunAt == nil || after.NextRunAt.Before(after.LastRunAt.Add(cooldown)) {
		t.Fatalf("probe: next_run_at %s is before the end of a new cooldown after the probe at %s", fmtTime(after.NextRunAt), fmtTime(after.LastRunAt))
	}
	u.noArrivals(t, "/probe", u.Last("/probe").Add(time.Microsecond), time.Until(after.NextRunAt.Add(-20*time.Millisecond)),
		"probe must not be called during its new cooldown")
}
