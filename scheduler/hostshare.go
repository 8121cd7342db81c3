package scheduler

import (
	"github.com/pacer-dev/pacer/config"
)

// Host limits on a cluster (contract 13.1): a host's sources stay spread
// over the members like any others (pinning them to one shard, as the
// `limits` groups are, would leave every member but one idle when most
// sources call one API), so its concurrency and rate are shared instead:
// each member applies the part of the host's limits that its share of the
// host's sources is (the sources on the shards it polls over all of the
// host's), rounded down for the concurrency but at least 1, so that the
// members' caps add up to at most the host's (at least 1 each: a host
// with fewer places than members gets one per member that polls it). The
// shares follow the shards: they are computed again whenever the member
// gains or loses one, as its share of cluster.concurrency is.

// shareHosts recomputes the member's share of each host's sources and
// applies it to the host groups. A single daemon polls every source: its
// shares are whole. mu held.
func (t hostsRoom) shareHosts() {
	if !t.shards.Member() || !t.cfg.Hosts.Present {
		t.hs.share = nil
		return
	}
	mine, all := map[string]int{}, map[string]int{}
	for _, e := range t.entries {
		if h := e.src.Host; h != "" && !e.removed {
			all[h]++
			if !t.dormant(e) {
				mine[h]++
			}
		}
	}
	t.hs.share = make(map[string]float64, len(all))
	for h, n := range all {
		t.hs.share[h] = float64(mine[h]) / float64(n)
	}
	for h := range all {
		t.applyHostLimit(h)
	}
}

// applyHostLimit sets host's group limit to the member's share of what
// the host room says now (hostLimit). mu held.
func (t hostsRoom) applyHostLimit(host string) {
	l, ok := t.hostLimit(host)
	if !ok {
		return
	}
	if f, member := t.hs.share[host]; member && f > 0 && f < 1 {
		l = shareLimit(l, f)
	}
	t.q.SetHostLimit(host, l)
}

// shareLimit is the part f (0 < f < 1) of l: the concurrency and burst
// rounded down but at least 1, the rate in proportion.
func shareLimit(l config.Limit, f float64) config.Limit {
	if l.Concurrency > 0 {
		l.Concurrency = max(int(float64(l.Concurrency)*f), 1)
	}
	l.Rate *= f
	l.Burst = max(int(float64(l.Burst)*f), 1)
	return l
}
