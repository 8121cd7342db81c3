package dashboard

import "time"

// SetTableCache sets when the table's snapshot is shared (from that many
// rows) and how old it may be.
func SetTableCache(d *Dashboard, from int, maxAge time.Duration) {
	d.table.from, d.table.maxAge = from, maxAge
}

// SetPageGate bounds the page builds of d: builds at once, waiting more,
// each for at most wait.
func SetPageGate(d *Dashboard, builds, waiting int, wait time.Duration) {
	d.gate = newGate(builds, waiting, wait)
}
