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

// LastTick is the latest activation in (from, to]: for "@every" the one
// within a period before to, if after from; for a cron schedule the last
// one reached from from.
func TestLastTick(t *testing.T) {
	every := Timing{Every: 10 * time.Second, Phase: 3 * time.Second}
	cronEvery5 := Timing{Sched: fiveSeconds{}}
	at := func(s int) time.Time { return time.Unix(int64(s), 0).UTC() }
	for _, c := range []struct {
		name     string
		tm       Timing
		from, to time.Time
		want     time.Time
		ok       bool
	}{
		{"every: a tick in the interval", every, at(100), at(115), at(113), true},
		{"every: the tick at to counts", every, at(100), at(113), at(113), true},
		{"every: the tick at from does not", every, at(113), at(120), time.Time{}, false},
		{"every: the latest of two", every, at(100), at(125), at(123), true},
		{"every: none yet", every, at(104), at(112), time.Time{}, false},
		{"every: empty interval", every, at(120), at(100), time.Time{}, false},
		{"cron: the latest", cronEvery5, at(100), at(112), at(110), true},
		{"cron: none", cronEvery5, at(101), at(104), time.Time{}, false},
		{"never", Timing{}, at(100), at(200), time.Time{}, false},
	} {
		got, ok := c.tm.LastTick(c.from, c.to)
		if ok != c.ok || (ok && !got.Equal(c.want)) {
			t.Errorf("%s: LastTick(%v, %v) = %v, %v; want %v, %v", c.name, c.from.Unix(), c.to.Unix(), got, ok, c.want, c.ok)
		}
	}
}

// fiveSeconds is a cron-like schedule firing on every multiple of 5 s.
type fiveSeconds struct{}

func (fiveSeconds) Next(t time.Time) time.Time {
	return t.Truncate(5 * time.Second).Add(5 * time.Second)
}
