package svgchart

import (
	"html/template"
	"strconv"
)

// Share is one row of a ShareChart: Part of Whole (successful polls of
// all polls), its label (a source or a host) and the unit of Whole.
type Share struct {
	Label string
	Part  int64
	Whole int64
	Unit  string // "polls", "records": shown after Whole
}

// ShareChart is horizontal bars of shares from 0 to 100 %: the success
// share per source or per host. The track behind each bar is the rest.
type ShareChart struct {
	ID     string
	Title  string
	XLabel string
	Width  float64 // the viewBox's width (default 1000)
	Rows   []Share
	Legend []LegendItem // default: successful, the rest
	Empty  string
}

// shareRow is a ShareChart row's height; labelW the labels' column.
const (
	shareRow = 26
	labelW   = 230
	valueW   = 190
)

// SVG renders the chart: one <rect class="share"> per row (of width 0 for
// a row with no poll), its label left, its percentage and count right.
func (c ShareChart) SVG() template.HTML {
	width := c.Width
	if width <= 0 {
		width = defaultW
	}
	rows := max(len(c.Rows), 1)
	top := float64(padTop + 6)
	bottom := top + float64(rows*shareRow)
	height := bottom + padBottom
	left, right := float64(labelW), width-valueW
	var w writer
	w.open(c.ID, "shares", c.Title, width, height)
	legend := c.Legend
	if legend == nil {
		legend = []LegendItem{{Label: "successful", Color: ColorSuccess}, {Label: "failed, throttled or other", Color: ColorTrack}}
	}
	w.legend(padLeft+textWidth(c.Title)+40, legend)
	if len(c.Rows) == 0 {
		w.text((left+right)/2, top+shareRow/2+4, "middle", "empty", c.Empty, `fill-opacity="0.7"`)
	}
	for i, s := range c.Rows {
		y := top + float64(i*shareRow)
		c.row(&w, s, left, right, y)
	}
	for _, p := range []float64{0, 25, 50, 75, 100} {
		x := left + (right-left)*p/100
		w.b.WriteString(`<line class="grid" x1="` + num(x) + `" y1="` + num(top-2) + `" x2="` + num(x) + `" y2="` + num(bottom+4) + `" stroke="#c4c9d0" stroke-dasharray="2 3"/>`)
		w.text(x, bottom+18, "middle", "tick", strconv.Itoa(int(p))+" %", "")
	}
	w.text((left+right)/2, bottom+38, "middle", "axis-label", c.XLabel, "")
	return w.close()
}

// row writes one share at y: label, track, bar, figure.
func (c ShareChart) row(w *writer, s Share, left, right, y float64) {
	h := float64(shareRow - 8)
	w.text(left-8, y+h/2+5, "end", "row-label", Shorten(s.Label, 30), "")
	w.b.WriteString(`<rect class="track" x="` + num(left) + `" y="` + num(y) + `" width="` + num(right-left) + `" height="` + num(h) + `" fill="`)
	if s.Whole > 0 {
		w.b.WriteString(Color(ColorTrack))
	} else {
		w.b.WriteString("#eef1f5")
	}
	w.b.WriteString(`"/>`)
	frac := 0.0
	if s.Whole > 0 {
		frac = float64(min(max(s.Part, 0), s.Whole)) / float64(s.Whole)
	}
	w.b.WriteString(`<rect class="share" x="` + num(left) + `" y="` + num(y) + `" width="` + num((right-left)*frac) + `" height="` + num(h) +
		`" fill="` + Color(ColorSuccess) + `" data-part="` + strconv.FormatInt(s.Part, 10) + `" data-whole="` + strconv.FormatInt(s.Whole, 10) + `">`)
	w.b.WriteString(`<title>` + esc(s.Label+": "+ShareText(s)) + `</title></rect>`)
	w.text(right+8, y+h/2+5, "start", "row-value", ShareText(s), "")
}

// ShareText is a share in words: "97.3 % of 1,234 polls", or "no polls".
func ShareText(s Share) string {
	unit := s.Unit
	if unit == "" {
		unit = "polls"
	}
	if s.Whole <= 0 {
		return "no " + unit
	}
	p := 100 * float64(min(max(s.Part, 0), s.Whole)) / float64(s.Whole)
	pct := strconv.FormatFloat(p, 'f', 1, 64)
	if p == 100 || p == 0 {
		pct = strconv.FormatFloat(p, 'f', 0, 64)
	}
	return pct + " % of " + Thousands(s.Whole) + " " + unit
}

// Thousands formats n with commas between groups of three digits.
func Thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := ""
	if n < 0 {
		neg, s = "-", s[1:]
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return neg + s
}
