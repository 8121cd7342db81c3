package svgchart

import (
	"html/template"
	"strconv"
	"strings"
)

// Series is one line of a LineChart: its values in time order (the last
// is the newest), its label in the legend and its colour key.
type Series struct {
	Label  string
	Color  string
	Values []float64
	Dashed bool
}

// Tick labels the x axis at a slot (0 is the oldest slot, Slots-1 now).
type Tick struct {
	Slot  int
	Label string
}

// LineChart is lines over a fixed window of slots (one sample each), the
// newest at the right edge: the overview's polls per second by outcome
// and the polls in flight against the cap over the last hour.
type LineChart struct {
	ID     string
	Title  string
	XLabel string
	YLabel string
	// Width and Height are the viewBox's size (default 1000 x 280).
	Width, Height float64
	// Slots is the window's length in samples (at least the longest
	// series); a shorter series is drawn right-aligned.
	Slots  int
	Series []Series
	XTicks []Tick
	// MinTop is the y axis's least top, so that an idle daemon's zeros
	// sit on an axis with a scale.
	MinTop float64
	Empty  string // the text shown while no series has a value
}

// SVG renders the chart: one <polyline class="series"> per series, whose
// data-points attribute is its number of values, and with up to dotsUpTo
// values one <circle class="dot"> per value.
func (c LineChart) SVG() template.HTML {
	width, height := c.Width, c.Height
	if width <= 0 {
		width = defaultW
	}
	if height <= 0 {
		height = 280
	}
	left, right := float64(padLeft), width-padRight
	top, bottom := float64(padTop+8), height-padBottom
	var w writer
	w.open(c.ID, "lines", c.Title, width, height)
	items := make([]LegendItem, len(c.Series))
	hi, n := c.MinTop, 0
	for i, s := range c.Series {
		items[i] = LegendItem{Label: s.Label, Color: s.Color, Line: true, Dashed: s.Dashed}
		for _, v := range s.Values {
			hi = finiteMax(hi, v)
		}
		n = max(n, len(s.Values))
	}
	w.legend(left+textWidth(c.Title)+40, items)
	ticks := niceTicks(hi)
	scale := w.yAxis(left, right, top, bottom, ticks[len(ticks)-1], ticks)
	w.yLabel(top, bottom, c.YLabel)
	slots := max(c.Slots, n, 2)
	xOf := func(slot int) float64 { return left + (right-left)*float64(slot)/float64(slots-1) }
	for _, s := range c.Series {
		c.line(&w, s, scale, xOf, slots)
	}
	if n == 0 {
		w.text((left+right)/2, (top+bottom)/2, "middle", "empty", c.Empty, `fill-opacity="0.7"`)
	}
	for _, t := range c.XTicks {
		x := xOf(t.Slot)
		w.b.WriteString(`<line class="xtick" x1="` + num(x) + `" y1="` + num(bottom) + `" x2="` + num(x) + `" y2="` + num(bottom+5) + `" stroke="#687281"/>`)
		anchor := "middle"
		if t.Slot >= slots-1 {
			anchor = "end"
		}
		w.text(x, bottom+18, anchor, "tick", t.Label, "")
	}
	w.text((left+right)/2, bottom+38, "middle", "axis-label", c.XLabel, "")
	return w.close()
}

// line writes one series as a polyline, right-aligned in slots.
func (c LineChart) line(w *writer, s Series, scale func(float64) float64, xOf func(int) float64, slots int) {
	var pts strings.Builder
	first := slots - len(s.Values)
	for i, v := range s.Values {
		if i > 0 {
			pts.WriteByte(' ')
		}
		pts.WriteString(num(xOf(first+i)) + "," + num(scale(v)))
	}
	dash := ""
	if s.Dashed {
		dash = ` stroke-dasharray="6 4"`
	}
	w.b.WriteString(`<polyline class="series" data-series="` + esc(s.Label) + `" data-points="` + strconv.Itoa(len(s.Values)) +
		`" points="` + pts.String() + `" fill="none" stroke="` + Color(s.Color) + `" stroke-width="2" stroke-linejoin="round"` + dash + `/>`)
	if len(s.Values) > dotsUpTo {
		return
	}
	// A few samples (a daemon started minutes ago) are a few pixels at
	// the right edge: a dot each makes them visible.
	for i, v := range s.Values {
		w.b.WriteString(`<circle class="dot" cx="` + num(xOf(first+i)) + `" cy="` + num(scale(v)) + `" r="3" fill="` + Color(s.Color) + `"/>`)
	}
}

// dotsUpTo: a series of at most this many values has a dot per value.
const dotsUpTo = 60
