package cluster

// Which member a shard belongs to: rendezvous hashing among the members
// that may own it.

import (
	"strconv"

	"github.com/pacer-dev/pacer/domain"
)

// Assign is the member, among live, that shard belongs to: the one with
// the highest hash of (member, shard); "" when live is empty.
func Assign(live []string, shard int) string {
	best, bestH := "", uint64(0)
	suffix := "\x00" + strconv.Itoa(shard)
	for _, name := range live {
		if v := domain.NameHash(name + suffix); best == "" || v > bestH || (v == bestH && name < best) {
			best, bestH = name, v
		}
	}
	return best
}

// Candidates is, of live, the members that may own shard. With has (the
// number of sources each member has on each shard; nil: alike) it is
// those with the most sources on the shard, so that a source in one
// member's config and not in another's is owned, and polled, by one that
// has it (rule 8.1): the member a source was added to first takes its
// shard, and a member that still has a source removed from another's
// config keeps it. Two members each with a source of one shard that the
// other has not cannot both poll it: the shard goes to one of them until
// their configs agree.
func Candidates(live []string, has map[string]map[int]int, shard int) []string {
	if has == nil {
		return live
	}
	best := 0
	for _, name := range live {
		best = max(best, has[name][shard])
	}
	if best == 0 {
		return live
	}
	out := make([]string, 0, len(live))
	for _, name := range live {
		if has[name][shard] == best {
			out = append(out, name)
		}
	}
	return out
}
