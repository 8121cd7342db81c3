package config

import "testing"

// TestSourceArenaGrowth: the chunks double from one source to 256, so that
// a load of a few sources does not hold a large chunk, and the copies are
// the sources given.
func TestSourceArenaGrowth(t *testing.T) {
	var a sourceArena
	var caps []int
	for i := range 1000 {
		got := a.keep(&Source{Name: string(rune('a' + i%26))})
		if got.Name != string(rune('a'+i%26)) {
			t.Fatalf("source %d: kept %q", i, got.Name)
		}
		if len(a.chunk) == 1 { // a new chunk
			caps = append(caps, cap(a.chunk))
		}
	}
	want := []int{1, 2, 4, 8, 16, 32, 64, 128, 256, 256, 256} // 1,000 sources
	if len(caps) != len(want) {
		t.Fatalf("chunk capacities %v, want %v", caps, want)
	}
	for i := range want {
		if caps[i] != want[i] {
			t.Fatalf("chunk capacities %v, want %v", caps, want)
		}
	}
}
