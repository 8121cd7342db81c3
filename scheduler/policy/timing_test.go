package policy

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/domain"
)

// Phases lie in [0, d) on a grid of phaseGrid(d), follow the order of the names' hashes for every
// period (the order of the store's rows), spread 10,000 sources over the
// minute, and anchor each source's ticks on the epoch, so they survive a
// restart.
func TestPhases(t *testing.T) {
	const n = 10_000
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("source-%d", i)
	}
	slices.SortFunc(names, func(a, b string) int {
		ha, hb := domain.NameHash(a), domain.NameHash(b)
		switch {
		case ha < hb:
			return -1
		case ha > hb:
			return 1
		}
		return 0
	})
	for _, d := range []time.Duration{100 * time.Millisecond, time.Second, time.Minute, 24 * time.Hour} {
		prev := time.Duration(-1)
		for _, name := range names {
			p := phaseOf(name, d)
			if p < 0 || p >= d {
				t.Fatalf("phaseOf(%s, %v) = %v, outside [0, %v)", name, d, p, d)
			}
			if g := phaseGrid(d); p%g != 0 {
				t.Fatalf("phaseOf(%s, %v) = %v, not on the grid of %v", name, d, p, g)
			}
			if p < prev {
				t.Fatalf("phaseOf(%s, %v) = %v < %v: phases do not follow the hash order", name, d, p, prev)
			}
			prev = p
		}
	}
	// Spread: no second of the minute gets more than twice its share.
	var perSecond [60]int
	for _, name := range names {
		perSecond[phaseOf(name, time.Minute)/time.Second]++
	}
	if most := slices.Max(perSecond[:]); most > 2*n/60 {
		t.Errorf("%d of %d sources in one second of the minute", most, n)
	}
	// Anchored on the epoch: two timings of the same source agree, and the
	// next tick after any instant is the same one.
	a := NewTiming("x", config.Every{D: time.Minute})
	b := NewTiming("x", config.Every{D: time.Minute})
	at := time.Date(2026, 11, 30, 10, 0, 7, 0, time.UTC)
	if na, nb := a.Next(at), b.Next(at); !na.Equal(nb) || !na.After(at) || na.Sub(at) > time.Minute ||
		time.Duration(na.UnixNano()%int64(time.Minute)) != a.Phase {
		t.Errorf("next(%v) = %v and %v; phase %v", at, na, nb, a.Phase)
	}
}
