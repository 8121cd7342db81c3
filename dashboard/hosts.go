package dashboard

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/pacer-dev/pacer/scheduler/hosts"
)

// hostRowsShown bounds the hosts table of the overview: the hosts in
// trouble first, so that 2,000 healthy hosts never push an open one off
// the page.
const hostRowsShown = 50

// hostRow is one line of the overview's hosts table (contract 13.7).
type hostRow struct {
	Host, State, Until, Limit, Learned, Latency, Why string
	Sources, Inflight                                int
}

// hostTable is the overview's hosts table: at most hostRowsShown rows,
// open, half-open and throttled hosts first, and how many hosts in all.
type hostTable struct {
	Rows  []hostRow
	Total int
}

// hostRank orders the states: trouble first.
func hostRank(state string) int {
	switch state {
	case hosts.StateOpen:
		return 0
	case hosts.StateHalfOpen:
		return 1
	case hosts.StateThrottled:
		return 2
	}
	return 3
}

// hostsTable builds the table from the scheduler's host objects.
func (d *Dashboard) hostsTable() hostTable {
	objs := d.c.Hosts()
	slices.SortStableFunc(objs, func(a, b hosts.Object) int {
		return cmp.Or(cmp.Compare(hostRank(a.State), hostRank(b.State)), cmp.Compare(b.Sources, a.Sources))
	})
	t := hostTable{Total: len(objs)}
	for _, o := range objs[:min(len(objs), hostRowsShown)] {
		r := hostRow{Host: o.Host, State: o.State, Sources: o.Sources, Inflight: o.Inflight, Why: o.Why,
			Limit: limitText(o.Concurrency, o.Rate)}
		if o.Until != nil {
			r.Until = o.Until.UTC().Format("15:04:05")
		}
		if o.LearnedConcurrency != nil || o.LearnedRate != nil {
			c, rate := 0, 0.0
			if o.LearnedConcurrency != nil {
				c = *o.LearnedConcurrency
			}
			if o.LearnedRate != nil {
				rate = *o.LearnedRate
			}
			r.Learned = limitText(c, rate)
		}
		if o.LatencyP90Ms != nil {
			r.Latency = fmt.Sprintf("%.0f ms", *o.LatencyP90Ms)
		}
		t.Rows = append(t.Rows, r)
	}
	return t
}

// limitText says a concurrency and a rate ("4 at once, 2.5/s"; "none").
func limitText(c int, r float64) string {
	switch {
	case c > 0 && r > 0:
		return fmt.Sprintf("%d at once, %s", c, rateText(r))
	case c > 0:
		return fmt.Sprintf("%d at once", c)
	case r > 0:
		return rateText(r)
	}
	return "none"
}

// rateText is a rate per second in the unit that reads best.
func rateText(r float64) string {
	if r >= 1 {
		return fmt.Sprintf("%.3g/s", r)
	}
	return fmt.Sprintf("%.3g/m", r*60)
}
