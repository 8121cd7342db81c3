// Package svgchart draws the status page's charts as inline SVG on the
// server, from plain data: no script, no style attribute, no asset from
// elsewhere, so the page's Content-Security-Policy stays as strict as it is
// (SVG presentation attributes such as fill are not styles). Every chart
// has axis labels with their units and a legend, and is sized in viewBox
// units so that it scales with the page and stays readable in a screenshot
// at 1400x1000.
//
// Every text a chart shows (labels, titles, legend entries) is escaped
// here, and only the code of this package builds the markup, which is why
// it may return template.HTML: html/template inserts it as it is.
package svgchart

import (
	"html"
	"html/template"
	"math"
	"strconv"
	"strings"
	"unicode"
)

// Colour keys a chart's data names its colours by; an unknown key is grey.
// Outcome keys match domain's outcomes and the scheduler's extra counts.
const (
	ColorSuccess     = "success"
	ColorFailure     = "failure"
	ColorThrottled   = "throttled"
	ColorInterrupted = "interrupted"
	ColorRejected    = "rejected"
	ColorLocal       = "local_error"
	ColorInflight    = "inflight"
	ColorCap         = "cap"
	ColorChanged     = "changed"
	ColorTrack       = "track"
)

// Color returns the fill of a colour key: the status page's own palette
// (style.css), so that a chart's outcome reads as the table's strip does.
func Color(key string) string {
	switch key {
	case ColorSuccess:
		return "#1e8e3e"
	case ColorFailure:
		return "#c5221f"
	case ColorThrottled:
		return "#7b4fc9"
	case ColorRejected:
		return "#d2451e"
	case ColorLocal:
		return "#c77700"
	case ColorInflight:
		return "#1f5fbf"
	case ColorCap:
		return "#1d232b"
	case ColorChanged:
		return "#111827"
	case ColorTrack:
		return "#f2c4c2"
	}
	return "#8a939f" // interrupted, pending and anything else
}

// LegendItem is one entry of a chart's legend: a swatch of Color(Color)
// (a line for a line chart's series, a triangle for Mark) and its label.
type LegendItem struct {
	Label  string
	Color  string
	Mark   bool // the swatch is the bar chart's mark
	Line   bool // the swatch is a line
	Dashed bool // ... a dashed one
}

// Geometry shared by the charts, in viewBox units.
const (
	fontSize   = 13
	padLeft    = 64 // tick labels and the rotated y label
	padRight   = 16
	padTop     = 40 // the title and the legend
	padBottom  = 46 // tick labels and the x label
	defaultW   = 1000
	legendY    = 26
	swatchSize = 11
)

// writer builds a chart's markup; every text goes through esc.
type writer struct{ b strings.Builder }

// open starts the svg element: a viewBox of w x h, scaled to the width of
// its container by the page's style sheet, and its accessible name.
func (w *writer) open(id, class, title string, width, height float64) {
	w.b.WriteString(`<svg xmlns="http://www.w3.org/2000/svg" class="chart `)
	w.b.WriteString(esc(class))
	w.b.WriteString(`" id="`)
	w.b.WriteString(esc(id))
	w.b.WriteString(`" viewBox="0 0 ` + num(width) + " " + num(height) + `" role="img" aria-label="`)
	w.b.WriteString(esc(title))
	w.b.WriteString(`" font-family="system-ui, sans-serif" font-size="` + num(fontSize) + `">`)
	w.b.WriteString(`<title>` + esc(title) + `</title>`)
	w.text(padLeft, 16, "start", "chart-title", title, `font-weight="600" font-size="14"`)
}

// close ends the svg element and returns the markup.
func (w *writer) close() template.HTML {
	w.b.WriteString(`</svg>`)
	return template.HTML(w.b.String()) //nolint:gosec // every text in it went through esc
}

// text writes a text element at x, y; extra is trusted attribute markup
// from this package.
func (w *writer) text(x, y float64, anchor, class, s, extra string) {
	w.b.WriteString(`<text x="` + num(x) + `" y="` + num(y) + `" text-anchor="` + anchor + `" class="` + class + `" fill="#1d232b"`)
	if extra != "" {
		w.b.WriteString(" " + extra)
	}
	w.b.WriteString(">" + esc(s) + "</text>")
}

// yLabel writes the y axis's label, rotated, left of the tick labels.
func (w *writer) yLabel(plotTop, plotBottom float64, s string) {
	y := (plotTop + plotBottom) / 2
	w.text(14, y, "middle", "axis-label", s, `transform="rotate(-90 14 `+num(y)+`)"`)
}

// legend writes items in a row from x, right of the title's line.
func (w *writer) legend(x float64, items []LegendItem) {
	for _, it := range items {
		c := Color(it.Color)
		y := float64(legendY)
		switch {
		case it.Mark:
			w.b.WriteString(`<path class="legend-swatch" d="` + markPath(x+swatchSize/2, y+1) + `" fill="` + c + `"/>`)
		case it.Line:
			dash := ""
			if it.Dashed {
				dash = ` stroke-dasharray="6 4"`
			}
			w.b.WriteString(`<line class="legend-swatch" x1="` + num(x) + `" y1="` + num(y-4) + `" x2="` + num(x+18) + `" y2="` + num(y-4) + `" stroke="` + c + `" stroke-width="3"` + dash + `/>`)
			x += 7
		default:
			w.b.WriteString(`<rect class="legend-swatch" x="` + num(x) + `" y="` + num(y-swatchSize+1) + `" width="` + num(swatchSize) + `" height="` + num(swatchSize) + `" fill="` + c + `"/>`)
		}
		w.text(x+swatchSize+5, y, "start", "legend", it.Label, "")
		x += swatchSize + 5 + textWidth(it.Label) + 18
	}
}

// yAxis writes the horizontal grid lines and their labels for the ticks of
// 0..top over the plot's box, and returns the scale of a value to y.
func (w *writer) yAxis(left, right, plotTop, plotBottom, top float64, ticks []float64) func(float64) float64 {
	scale := func(v float64) float64 {
		if !(v > 0) { // NaN and negative values sit on the axis
			v = 0
		}
		if top <= 0 {
			return plotBottom
		}
		return plotBottom - (plotBottom-plotTop)*math.Min(v, top)/top
	}
	for _, t := range ticks {
		y := scale(t)
		w.b.WriteString(`<line class="grid" x1="` + num(left) + `" y1="` + num(y) + `" x2="` + num(right) + `" y2="` + num(y) + `" stroke="#e1e4e8"/>`)
		w.text(left-6, y+4, "end", "tick", tickLabel(t), "")
	}
	w.b.WriteString(`<line class="axis" x1="` + num(left) + `" y1="` + num(plotBottom) + `" x2="` + num(right) + `" y2="` + num(plotBottom) + `" stroke="#687281"/>`)
	return scale
}

// finiteMax is the larger of hi and v, ignoring v when it is NaN or
// infinite (an infinite bar is drawn to the top of the axis).
func finiteMax(hi, v float64) float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return hi
	}
	return max(hi, v)
}

// markPath is the bar chart's mark: a small triangle pointing down at x, y.
func markPath(x, y float64) string {
	return "M" + num(x-5) + " " + num(y-8) + "h10l-5 8z"
}

// niceTicks returns the ticks 0, step, ... up to the first at or above hi
// (at least 1), with step 1, 2 or 5 times a power of ten, about 4 of them.
func niceTicks(hi float64) []float64 {
	if !(hi > 0) || math.IsInf(hi, 0) {
		hi = 1
	}
	raw := hi / 4
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	step := 10 * p
	for _, m := range []float64{1, 2, 5} {
		if m*p >= raw {
			step = m * p
			break
		}
	}
	var out []float64
	for i := 0; ; i++ {
		t := float64(i) * step
		out = append(out, t)
		if t >= hi || i > 20 {
			return out
		}
	}
}

// tickLabel formats a tick value: no decimals from 1 up, else as few as
// it needs; thousands as "k".
func tickLabel(v float64) string {
	switch {
	case v >= 10000:
		return strconv.FormatFloat(v/1000, 'f', -1, 64) + "k"
	case v >= 1 || v == 0:
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	return strconv.FormatFloat(v, 'g', 2, 64)
}

// num formats a coordinate with at most one decimal.
func num(f float64) string {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		f = 0
	}
	return strconv.FormatFloat(math.Round(f*10)/10, 'f', -1, 64)
}

// esc makes s safe as text and as an attribute value: valid UTF-8, no
// control characters (XML 1.0 allows none but tab and newlines, shown as
// spaces here), and the five HTML specials escaped.
func esc(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
			return ' '
		}
		return r
	}, s)
	return html.EscapeString(s)
}

// textWidth estimates the width of s at fontSize, for laying out a legend.
func textWidth(s string) float64 {
	return float64(len([]rune(s))) * fontSize * 0.56
}

// Shorten cuts s to at most n runes, ending in "…" when cut.
func Shorten(s string, n int) string {
	r := []rune(s)
	if len(r) <= n || n < 2 {
		return s
	}
	return string(r[:n-1]) + "…"
}
