package dashboard

import (
	"slices"
	"testing"
)

func TestLowerShareFirst(t *testing.T) {
	hs := []hostShare{
		{host: "never", polls: 0},
		{host: "good", ok: 99, polls: 100},
		{host: "bad", ok: 1, polls: 10},
		{host: "half-big", ok: 500, polls: 1000},
		{host: "half-small", ok: 5, polls: 10},
	}
	slices.SortFunc(hs, lowerShareFirst)
	var got []string
	for _, h := range hs {
		got = append(got, h.host)
	}
	want := []string{"bad", "half-big", "half-small", "good", "never"}
	if !slices.Equal(got, want) {
		t.Errorf("order %v, want %v (lowest share first, more polls first among equals, never polled last)", got, want)
	}
}
