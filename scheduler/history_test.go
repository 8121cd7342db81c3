package scheduler

import (
	"slices"
	"testing"

	"github.com/pacer-dev/pacer/domain"
)

// History merges what the flusher still holds with what the store has
// read, whichever commits landed between the two reads.
func TestMergeHistory(t *testing.T) {
	recs := func(seqs ...int64) []domain.PollRecord {
		var out []domain.PollRecord
		for _, q := range seqs {
			out = append(out, domain.PollRecord{Source: "a", Seq: q})
		}
		return out
	}
	seqs := func(rs []domain.PollRecord) []int64 {
		out := []int64{}
		for _, r := range rs {
			out = append(out, r.Seq)
		}
		return out
	}
	for _, c := range []struct {
		name            string
		pending, stored []domain.PollRecord
		n               int
		want            []int64
	}{
		{"nothing pending", nil, recs(4, 3, 2), 2, []int64{4, 3}},
		{"pending newer", recs(6, 5), recs(4, 3), 3, []int64{6, 5, 4}},
		{"a pending one committed meanwhile", recs(5), recs(5, 4, 3), 3, []int64{5, 4, 3}},
		{"committed meanwhile, and a newer one after it", recs(5), recs(6, 5, 4), 2, []int64{6, 5}},
		{"fewer than n", recs(2), recs(1), 5, []int64{2, 1}},
	} {
		if got := seqs(mergeHistory(c.pending, c.stored, c.n)); !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
