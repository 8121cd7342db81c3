package cluster

import (
	"testing"
	"time"
)

// TestOffsetFilter: the offset a member schedules by follows the measure of
// the shortest round trip; a measure stretched by a loaded machine does not
// move it; a step of a clock (a measure that cannot be of the same offset)
// does, at once.
func TestOffsetFilter(t *testing.T) {
	ms := time.Millisecond
	type m struct{ rtt, off, want time.Duration }
	cases := []struct {
		name string
		seq  []m
	}{
		{"first measure taken as it is", []m{{400 * ms, -190 * ms, -190 * ms}}},
		{"a shorter round trip corrects a stretched first measure", []m{{1500 * ms, -740 * ms, -740 * ms}, {4 * ms, 1 * ms, 1 * ms}}},
		{"a stretched measure later moves nothing", []m{{4 * ms, 1 * ms, 1 * ms}, {1500 * ms, -740 * ms, 1 * ms}, {900 * ms, 430 * ms, 1 * ms}}},
		{"small moves are not followed", []m{{4 * ms, 0, 0}, {2 * ms, 30 * ms, 0}}},
		{"a steady skew is found and kept", []m{{6 * ms, 30 * time.Second, 30 * time.Second}, {800 * ms, 30*time.Second + 350*ms, 30 * time.Second}}},
		{"a step of the clock is followed at once", []m{{4 * ms, 0, 0}, {3 * ms, 0, 0}, {5 * ms, time.Minute, time.Minute}, {900 * ms, time.Minute - 400*ms, time.Minute}}},
		{"the best measure ages out of the window", []m{{1 * ms, 0, 0}, {100 * ms, 60 * ms, 0}, {100 * ms, 60 * ms, 0}, {100 * ms, 60 * ms, 0},
			{100 * ms, 60 * ms, 0}, {100 * ms, 60 * ms, 0}, {100 * ms, 60 * ms, 0}, {100 * ms, 60 * ms, 0}, {100 * ms, 60 * ms, 60 * ms}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var f offsetFilter
			for i, s := range c.seq {
				if got := f.add(s.rtt, s.off); got != s.want {
					t.Fatalf("measure %d (rtt %v, offset %v): schedules by %v, want %v", i, s.rtt, s.off, got, s.want)
				}
			}
		})
	}
}
