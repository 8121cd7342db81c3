package scheduler

import (
	"testing"

	"github.com/pacer-dev/pacer/config"
)

// TestShareLimit: a member's part of a host's limits is its share of the
// host's sources, the concurrency rounded down but at least 1, so that
// the members' caps add up to no more than the host's.
func TestShareLimit(t *testing.T) {
	for _, c := range []struct {
		in   config.Limit
		f    float64
		want config.Limit
	}{
		{config.Limit{Concurrency: 16, Rate: 30, Burst: 3}, 1.0 / 3, config.Limit{Concurrency: 5, Rate: 10, Burst: 1}},
		{config.Limit{Concurrency: 2, Burst: 1}, 0.2, config.Limit{Concurrency: 1, Burst: 1}},
		{config.Limit{Rate: 5, Burst: 10}, 0.5, config.Limit{Rate: 2.5, Burst: 5}},
	} {
		if got := shareLimit(c.in, c.f); got != c.want {
			t.Errorf("shareLimit(%+v, %v) = %+v, want %+v", c.in, c.f, got, c.want)
		}
	}
	// Three members with a third each never exceed the host's cap of 16.
	sum := 0
	for range 3 {
		sum += shareLimit(config.Limit{Concurrency: 16, Burst: 1}, 1.0/3).Concurrency
	}
	if sum > 16 {
		t.Errorf("the members' caps add up to %d, over the host's 16", sum)
	}
}
