package e2e

import (
	"testing"
	"time"
)

// Issue 24, item 5: the breaker's half-open state shows while its probe
// runs (from the end of the cooldown to the probe's result), so that an
// operator polling the API once a second sees it.
func TestHalfOpenVisibleDuringProbe(t *testing.T) {
	t.Parallel()
	u := newUpstream(t)
	in := newInst(t)
	u.Set("/x", behavior{Status: 500})
	in.writeConfig(`concurrency: 2
shutdown_timeout: 5s
sources:
  - name: x
    type: http
    url: "` + u.URL("/x") + `"
    schedule: "@every 1s"
    timeout: 10s
    backoff: {initial: 100ms, max: 30s, multiplier: 2, jitter: 0}
    breaker: {failures: 1, cooldown: 2s}
    error_after: 10
`)
	d := in.start()
	u.waitArrivals(t, "/x", 1, 5*time.Second)
	eventually(t, 3*time.Second, "x open after its first failure", func() error {
		if o := d.source("x"); o.Breaker != "open" {
			return errf("%s", o)
		}
		return nil
	})
	// The probe takes 1.5 s: while it runs, the source is half-open.
	u.Set("/x", behavior{Hold: 1500 * time.Millisecond})
	u.waitArrivals(t, "/x", 2, 6*time.Second)
	seen := 0
	for i := 0; i < 3; i++ {
		a := u.Arrivals("/x")
		if len(a) != 2 || !a[1].End.IsZero() {
			break // answered already: a starved test process looked too late
		}
		if o := d.source("x"); o.State != "half-open" || o.Breaker != "half-open" {
			t.Fatalf("during the probe x should be half-open (state and breaker): %s", o)
		}
		seen++
		time.Sleep(200 * time.Millisecond) // sample the probe's 1.5 s a few times
	}
	t.Logf("half-open seen in %d samples during the probe", seen)
	eventually(t, 5*time.Second, "the probe's success to close the breaker", func() error {
		if o := d.source("x"); o.State != "ok" || o.Breaker != "closed" {
			return errf("%s", o)
		}
		return nil
	})
}
