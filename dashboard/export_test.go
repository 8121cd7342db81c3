package dashboard

import (
	"time"

	"github.com/pacer-dev/pacer/internal/turns"
)

// SetTableCache sets when the table's snapshot is shared (from that many
// rows), how old it may be, and how old it is still served while the next
// is built.
func SetTableCache(d *Dashboard, from int, maxAge, staleAge time.Duration) {
	d.table.from, d.table.maxAge, d.table.staleAge = from, maxAge, staleAge
}

// SetPageGate bounds the page builds of d: builds at once, waiting more,
// each for at most wait.
func SetPageGate(d *Dashboard, builds, waiting int, wait time.Duration) {
	d.gate = turns.New(builds, waiting, wait)
}

// SetHostShareCache sets from how many sources the host shares are
// computed in the background, and how old they may be.
func SetHostShareCache(d *Dashboard, from int, maxAge time.Duration) {
	d.hosts.from, d.hosts.maxAge = from, maxAge
}

// ComputeHostShares computes d's host shares now and returns how many
// hosts they count.
func ComputeHostShares(d *Dashboard) int { return d.hosts.compute().total }
