package dashboard

import (
	"html/template"
	"time"

	"github.com/pacer-dev/pacer/dashboard/svgchart"
	"github.com/pacer-dev/pacer/domain"
	"github.com/pacer-dev/pacer/scheduler/rates"
	srcview "github.com/pacer-dev/pacer/scheduler/view"
)

// The status page's charts (contract 15.4), drawn on the server as inline
// SVG by svgchart: the overview's load over the last hour (from the
// scheduler's ring of samples, rates) and success share per host
// (hostshare.go), and a source page's last polls and success share. None
// reads more than the page already does: the load is 360 samples in
// memory, the host shares a cached aggregate, a source's polls the
// records its page shows.

// overviewCharts are the overview's charts, rendered.
type overviewCharts struct {
	Rate     template.HTML // polls per second by outcome
	Inflight template.HTML // polls in flight against the cap
	Hosts    template.HTML // success share per host; "" while computing
	HostNote string        // what the host chart covers, or why it is not there
}

// sourceCharts are a source page's charts, rendered.
type sourceCharts struct {
	Polls template.HTML // the last polls' durations, outcomes and changes
	Share template.HTML // the success share of the kept history and of all polls
}

// rateSeries are the outcomes the rate chart always shows; the others
// (rejected, interrupted, local_error) only when the hour had some.
func rateAlways(i int) bool {
	return i == rates.Success || i == rates.Failure || i == rates.Throttled
}

// loadCharts draws the overview's two load charts from samples (oldest
// first, one every rates.Every) at now.
func loadCharts(samples []rates.Sample, now time.Time) (rate, inflight template.HTML) {
	names := rates.OutcomeNames()
	var series []svgchart.Series
	for i, name := range names {
		s := svgchart.Series{Label: name, Color: name, Values: make([]float64, len(samples))}
		seen := false
		for j, smp := range samples {
			s.Values[j] = smp.PerSecond[i]
			seen = seen || smp.PerSecond[i] > 0
		}
		if seen || rateAlways(i) {
			series = append(series, s)
		}
	}
	in := svgchart.Series{Label: "in flight", Color: svgchart.ColorInflight, Values: make([]float64, len(samples))}
	limit := svgchart.Series{Label: "cap", Color: svgchart.ColorCap, Dashed: true, Values: make([]float64, len(samples))}
	top := 1.0
	for j, smp := range samples {
		in.Values[j], limit.Values[j] = float64(smp.Inflight), float64(smp.Limit)
		top = max(top, float64(smp.Limit))
	}
	ticks := hourTicks()
	xl := "last hour, a sample every 10 s (polls counted over its 10 s) · now " + now.UTC().Format("15:04:05") + " UTC"
	empty := "no sample yet: the first is taken 10 s after the daemon starts"
	rate = svgchart.LineChart{ID: "chart-rate", Title: "Polls per second by outcome", XLabel: xl, YLabel: "polls per second",
		Width: 620, Height: 270, Slots: rates.Size, Series: series, XTicks: ticks, MinTop: 1, Empty: empty}.SVG()
	inflight = svgchart.LineChart{ID: "chart-inflight", Title: "Polls in flight against the cap", XLabel: xl, YLabel: "polls in flight",
		Width: 620, Height: 270, Slots: rates.Size, Series: []svgchart.Series{in, limit}, XTicks: ticks, MinTop: top, Empty: empty}.SVG()
	return rate, inflight
}

// hourTicks label the hour's window every 15 min.
func hourTicks() []svgchart.Tick {
	per := int(15 * time.Minute / rates.Every)
	return []svgchart.Tick{{Slot: 0, Label: "−60 min"}, {Slot: per, Label: "−45 min"}, {Slot: 2 * per, Label: "−30 min"},
		{Slot: 3 * per, Label: "−15 min"}, {Slot: rates.Size - 1, Label: "now"}}
}

// pollsChart draws a source's last polls (recs, newest first): a bar per
// poll, its height the duration, its colour the outcome, a mark above it
// when its result changed.
func pollsChart(recs []domain.PollRecord) template.HTML {
	bars := make([]svgchart.Bar, len(recs))
	for i, rec := range recs {
		t := rec.StartedAt.UTC().Format("2006-01-02 15:04:05") + " · " + rec.Outcome + " · " + svgchart.Thousands(rec.DurationMs) + " ms"
		if rec.Changed {
			t += " · changed"
		}
		if rec.Error != "" {
			t += " · " + shorten(rec.Error, 120)
		}
		bars[len(recs)-1-i] = svgchart.Bar{Value: float64(rec.DurationMs), Color: rec.Outcome, Marked: rec.Changed, Title: t}
	}
	legend := []svgchart.LegendItem{
		{Label: domain.OutcomeSuccess, Color: svgchart.ColorSuccess}, {Label: domain.OutcomeFailure, Color: svgchart.ColorFailure},
		{Label: domain.OutcomeThrottled, Color: svgchart.ColorThrottled}, {Label: domain.OutcomeInterrupted, Color: svgchart.ColorInterrupted},
		{Label: "result changed", Color: svgchart.ColorChanged, Mark: true},
	}
	return svgchart.BarChart{ID: "chart-polls", Title: "Last polls: duration and outcome", XLabel: "polls ago (1 = the newest)",
		YLabel: "duration (ms)", Width: 1100, Height: 300, Slots: historyLen, Bars: bars, Legend: legend, Empty: "not polled yet"}.SVG()
}

// sourceShareChart draws a source's success share over the records its
// page shows (its kept history, up to historyLen) and over every poll its
// state has counted.
func sourceShareChart(o srcview.Explained, recs []domain.PollRecord) template.HTML {
	ok := int64(0)
	for _, rec := range recs {
		if rec.Outcome == domain.OutcomeSuccess {
			ok++
		}
	}
	all := max(o.PollsTotal-o.FailuresTotal-o.ThrottledTotal, 0)
	rows := []svgchart.Share{
		{Label: "kept history (last polls)", Part: ok, Whole: int64(len(recs)), Unit: "polls"},
		{Label: "every poll counted", Part: all, Whole: o.PollsTotal, Unit: "polls"},
	}
	return svgchart.ShareChart{ID: "chart-share", Title: "Success share", XLabel: "share of polls that succeeded",
		Width: 1100, Rows: rows, Empty: "not polled yet"}.SVG()
}

// overviewCharts draws the overview's charts; sources is the table's count.
func (d *Dashboard) overviewCharts(sources int) overviewCharts {
	var c overviewCharts
	c.Rate, c.Inflight = loadCharts(d.c.Rates(), d.now())
	hs := d.hosts.get(sources)
	if hs != nil {
		c.Hosts = hs.chart
	}
	c.HostNote = hostNote(hs)
	return c
}
