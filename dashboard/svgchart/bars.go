package svgchart

import (
	"html/template"
	"strconv"
)

// Bar is one bar of a BarChart: its value, its colour key, a mark above it
// (a poll whose result changed) and its tooltip.
type Bar struct {
	Value  float64
	Color  string
	Marked bool
	Title  string
}

// BarChart is a row of vertical bars, oldest on the left, over a y axis
// from 0: a source's last polls by duration, coloured by outcome.
type BarChart struct {
	ID     string
	Title  string // shown above the chart and as its accessible name
	XLabel string // under the x axis, with its unit
	YLabel string // beside the y axis, with its unit
	// Width and Height are the viewBox's size (default 1000 x 300).
	Width, Height float64
	// Slots is how many bars the x axis has room for (at least len(Bars)):
	// fewer bars are drawn right-aligned, so that the newest poll is
	// always at the right edge.
	Slots  int
	Bars   []Bar
	Legend []LegendItem
	Empty  string // the text shown when there is no bar
}

// SVG renders the chart: one <rect class="bar"> per bar, with its title
// as a tooltip, and one <rect class="band"> of its colour under the axis;
// one <path class="mark"> per marked bar.
func (c BarChart) SVG() template.HTML {
	width, height := c.Width, c.Height
	if width <= 0 {
		width = defaultW
	}
	if height <= 0 {
		height = 300
	}
	left, right := float64(padLeft), width-padRight
	top, bottom := float64(padTop+8), height-padBottom-10 // room for the outcome band
	var w writer
	w.open(c.ID, "bars", c.Title, width, height)
	w.legend(left+textWidth(c.Title)+40, c.Legend)
	hi := 0.0
	for _, b := range c.Bars {
		hi = finiteMax(hi, b.Value)
	}
	ticks := niceTicks(hi)
	scale := w.yAxis(left, right, top, bottom, ticks[len(ticks)-1], ticks)
	w.yLabel(top, bottom, c.YLabel)
	slots := max(c.Slots, len(c.Bars))
	if len(c.Bars) == 0 {
		w.text((left+right)/2, (top+bottom)/2, "middle", "empty", c.Empty, `fill-opacity="0.7"`)
	} else {
		c.bars(&w, scale, left, right, bottom, slots)
	}
	c.xAxis(&w, left, right, bottom, slots)
	return w.close()
}

// bars writes the bars in slots across left..right, right-aligned.
func (c BarChart) bars(w *writer, scale func(float64) float64, left, right, bottom float64, slots int) {
	slotW := (right - left) / float64(slots)
	barW := max(slotW*0.72, 1)
	first := slots - len(c.Bars)
	for i, b := range c.Bars {
		x := left + float64(first+i)*slotW + (slotW-barW)/2
		y := scale(b.Value)
		if bottom-y < 2 { // a poll of 0 ms still shows
			y = bottom - 2
		}
		w.b.WriteString(`<rect class="bar" x="` + num(x) + `" y="` + num(y) + `" width="` + num(barW) + `" height="` + num(bottom-y) + `" fill="` + Color(b.Color) + `" data-color="` + esc(b.Color) + `">`)
		w.b.WriteString(`<title>` + esc(b.Title) + `</title></rect>`)
		// The colour again in a band under the axis: a poll too short
		// for its bar to show still shows its outcome.
		w.b.WriteString(`<rect class="band" x="` + num(x) + `" y="` + num(bottom+3) + `" width="` + num(barW) + `" height="7" fill="` + Color(b.Color) + `"/>`)
		if b.Marked {
			w.b.WriteString(`<path class="mark" d="` + markPath(x+barW/2, y-3) + `" fill="` + Color(ColorChanged) + `"/>`)
		}
	}
}

// xAxis writes the x axis's ticks (every 10 slots, counted from the
// newest at the right: 1 is the newest) and its label.
func (c BarChart) xAxis(w *writer, left, right, bottom float64, slots int) {
	slotW := (right - left) / float64(slots)
	step := 10
	if slots <= 20 {
		step = 5
	}
	for back := 1; back <= slots; back++ {
		if back != 1 && back%step != 0 {
			continue
		}
		x := right - (float64(back)-0.5)*slotW
		w.b.WriteString(`<line class="xtick" x1="` + num(x) + `" y1="` + num(bottom+11) + `" x2="` + num(x) + `" y2="` + num(bottom+15) + `" stroke="#687281"/>`)
		w.text(x, bottom+28, "middle", "tick", strconv.Itoa(back), "")
	}
	w.text((left+right)/2, bottom+48, "middle", "axis-label", c.XLabel, "")
}
