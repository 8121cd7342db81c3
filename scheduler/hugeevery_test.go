package scheduler

import (
	"context"
	"fmt"
	"math"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/scheduler/policy"
	"github.com/pacer-dev/pacer/sources"
)

// A source on "@every 2562047h" (the longest whole-hour duration) is not
// polled in the first hour, and its next run is ahead (round 1: "phase + D"
// wrapped around int64 into the past and it was polled ~20 times a
// second). The schedule is set on the loaded configuration, whatever bound
// validation puts on "@every".
func TestHugeEveryIsNotPolled(t *testing.T) {
	for _, d := range []time.Duration{2562047 * time.Hour, math.MaxInt64, 200 * 365 * 24 * time.Hour} {
		t.Run(d.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				// A name whose phase lies before the bubble's start (2000):
				// its ticks are phase + k*D, the next one past int64.
				name := ""
				for i := 0; name == ""; i++ {
					if n := fmt.Sprintf("rare-%d", i); policy.NewTiming(n, config.Every{D: d}).Phase < 20*365*24*time.Hour {
						name = n
					}
				}
				dir := t.TempDir()
				cfg := writeConfig(t, dir, lifecycleDefaults+"  - {name: "+name+", type: exec, command: [\"true\"]}\n")
				cfg.Sources[0].Schedule = config.Every{D: d}
				var polls atomic.Int64
				h := startWith(t, dir, cfg, nil, func(*config.Source) (sources.Poller, error) {
					return countingPoller{&polls}, nil
				})
				defer h.stop()
				time.Sleep(time.Hour)
				o := h.source(name)
				if n := polls.Load(); n != 0 || o.NextRunAt == nil || !o.NextRunAt.After(time.Now()) {
					t.Fatalf("polled %d times in an hour; next run %v (now %v)", n, o.NextRunAt, time.Now())
				}
			})
		})
	}
}

// countingPoller succeeds and counts its polls.
type countingPoller struct{ n *atomic.Int64 }

func (p countingPoller) Poll(context.Context) sources.Result {
	p.n.Add(1)
	return sources.Result{ExitCode: 0}
}
