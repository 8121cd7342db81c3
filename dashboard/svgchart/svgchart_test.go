package svgchart

import (
	"bytes"
	"encoding/xml"
	"html/template"
	"io"
	"math"
	"strconv"
	"strings"
	"testing"
)

// element is one element of a parsed chart: its name, attributes and
// the text directly inside it.
type element struct {
	name  string
	attrs map[string]string
	text  string
}

// parse reads a chart as XML (it must be well-formed: every text escaped)
// and returns its elements in document order.
func parse(t testing.TB, h template.HTML) []element {
	t.Helper()
	dec := xml.NewDecoder(strings.NewReader(string(h)))
	dec.Strict = true
	var out []element
	var stack []int
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("chart is not well-formed XML: %v\n%s", err, h)
		}
		switch v := tok.(type) {
		case xml.StartElement:
			e := element{name: v.Name.Local, attrs: map[string]string{}}
			for _, a := range v.Attr {
				e.attrs[a.Name.Local] = a.Value
			}
			out = append(out, e)
			stack = append(stack, len(out)-1)
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		case xml.CharData:
			if len(stack) > 0 {
				out[stack[len(stack)-1]].text += string(v)
			}
		}
	}
	if len(out) == 0 || out[0].name != "svg" {
		t.Fatalf("not an svg element: %s", h)
	}
	return out
}

// count returns the elements named name whose class is class.
func count(els []element, name, class string) []element {
	var out []element
	for _, e := range els {
		if e.name == name && e.attrs["class"] == class {
			out = append(out, e)
		}
	}
	return out
}

// texts returns every text of the chart, joined by newlines.
func texts(els []element) string {
	var b strings.Builder
	for _, e := range els {
		if e.name == "text" || e.name == "title" {
			b.WriteString(e.text + "\n")
		}
	}
	return b.String()
}

const evil = `<script>alert("x")</script> & 'q'`

func TestBarChartCountsEscapesAndLegend(t *testing.T) {
	c := BarChart{ID: "hist", Title: "Last polls " + evil, XLabel: "polls ago", YLabel: "duration (ms)", Slots: 100,
		Legend: []LegendItem{{Label: "success", Color: ColorSuccess}, {Label: "changed " + evil, Color: ColorChanged, Mark: true}}}
	for i := range 37 {
		b := Bar{Value: float64(i * 10), Color: ColorSuccess, Title: "poll " + evil}
		if i%5 == 0 {
			b.Color, b.Marked = ColorFailure, true
		}
		c.Bars = append(c.Bars, b)
	}
	h := c.SVG()
	if strings.Contains(string(h), "<script") {
		t.Fatalf("unescaped text in the chart:\n%s", h)
	}
	els := parse(t, h)
	if got := len(count(els, "rect", "bar")); got != 37 {
		t.Errorf("bars: %d, want 37", got)
	}
	if got := len(count(els, "rect", "band")); got != 37 {
		t.Errorf("outcome bands: %d, want 37", got)
	}
	if got := len(count(els, "path", "mark")); got != 8 {
		t.Errorf("marks: %d, want 8 (every 5th of 37)", got)
	}
	if got := len(count(els, "text", "legend")); got != 2 {
		t.Errorf("legend entries: %d, want 2", got)
	}
	all := texts(els)
	for _, want := range []string{"duration (ms)", "polls ago", "changed " + evil, "poll " + evil, "Last polls " + evil} {
		if !strings.Contains(all, want) {
			t.Errorf("chart lacks the text %q:\n%s", want, all)
		}
	}
	failed := 0
	for _, b := range count(els, "rect", "bar") {
		if b.attrs["fill"] == Color(ColorFailure) {
			failed++
		}
	}
	if failed != 8 {
		t.Errorf("red bars: %d, want 8", failed)
	}
}

func TestBarChartEmptyAndZero(t *testing.T) {
	els := parse(t, BarChart{ID: "e", Title: "t", Empty: "not polled yet"}.SVG())
	if len(count(els, "rect", "bar")) != 0 || !strings.Contains(texts(els), "not polled yet") {
		t.Errorf("empty chart: want no bar and its text, got %s", texts(els))
	}
	els = parse(t, BarChart{ID: "z", Bars: []Bar{{Value: 0}, {Value: math.NaN()}, {Value: math.Inf(1)}}}.SVG())
	for _, b := range count(els, "rect", "bar") {
		if b.attrs["height"] == "0" || strings.Contains(b.attrs["height"], "N") {
			t.Errorf("a bar of 0, NaN or Inf must show with a finite height: %v", b.attrs)
		}
	}
}

func TestLineChartCountsAndTicks(t *testing.T) {
	c := LineChart{ID: "rate", Title: "Polls per second", XLabel: "time (UTC)", YLabel: "polls/s", Slots: 360, MinTop: 1,
		XTicks: []Tick{{0, "−60 min"}, {359, "now " + evil}}}
	for i, name := range []string{"success", "failure", "throttled"} {
		s := Series{Label: name, Color: name}
		for j := range 120 + i {
			s.Values = append(s.Values, float64(j%7))
		}
		c.Series = append(c.Series, s)
	}
	els := parse(t, c.SVG())
	lines := count(els, "polyline", "series")
	if len(lines) != 3 {
		t.Fatalf("polylines: %d, want 3", len(lines))
	}
	for i, l := range lines {
		pts := strings.Fields(l.attrs["points"])
		if want := 120 + i; len(pts) != want || l.attrs["data-points"] != strconv.Itoa(want) {
			t.Errorf("series %d: %d points (data-points %s), want %d", i, len(pts), l.attrs["data-points"], want)
		}
	}
	if got := len(count(els, "circle", "dot")); got != 0 {
		t.Errorf("dots on series of 120 values: %d, want none", got)
	}
	c.Series = c.Series[:2]
	c.Series[0].Values, c.Series[1].Values = []float64{1, 2, 3}, []float64{0, 0, 0}
	if got := len(count(parse(t, c.SVG()), "circle", "dot")); got != 6 {
		t.Errorf("dots on 2 series of 3 values: %d, want 6", got)
	}
	if got := len(count(els, "line", "legend-swatch")); got != 3 {
		t.Errorf("legend swatches: %d, want 3", got)
	}
	if !strings.Contains(texts(els), "now "+evil) || !strings.Contains(texts(els), "polls/s") {
		t.Errorf("ticks or y label missing: %s", texts(els))
	}
}

func TestShareChart(t *testing.T) {
	c := ShareChart{ID: "hosts", Title: "Success per host", XLabel: "share of polls",
		Rows: []Share{{Label: "a.example:8443", Part: 973, Whole: 1000}, {Label: evil, Part: 0, Whole: 0}, {Label: "b", Part: 5, Whole: 4}}}
	els := parse(t, c.SVG())
	bars := count(els, "rect", "share")
	if len(bars) != 3 {
		t.Fatalf("share bars: %d, want 3", len(bars))
	}
	all := texts(els)
	for _, want := range []string{"97.3 % of 1,000 polls", "no polls", "100 % of 4 polls", "successful"} {
		if !strings.Contains(all, want) {
			t.Errorf("chart lacks %q:\n%s", want, all)
		}
	}
	if bars[1].attrs["width"] != "0" {
		t.Errorf("a row with no poll has a bar of width %s", bars[1].attrs["width"])
	}
	if bars[2].attrs["width"] != bars[0].attrs["width"] && bars[2].attrs["width"] <= bars[0].attrs["width"] {
		t.Errorf("a share above 1 is not clamped to the full track: %v", bars[2].attrs)
	}
}

func TestThousandsAndTicks(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567", -4500: "-4,500"} {
		if got := Thousands(n); got != want {
			t.Errorf("Thousands(%d) = %q, want %q", n, got, want)
		}
	}
	for _, hi := range []float64{0, 0.03, 1, 7, 99, 101, 12345} {
		ts := niceTicks(hi)
		if ts[0] != 0 || ts[len(ts)-1] < hi || len(ts) > 7 {
			t.Errorf("niceTicks(%v) = %v", hi, ts)
		}
	}
}

// FuzzChartText: any label, title or tick text makes a well-formed chart
// with the text in it escaped.
func FuzzChartText(f *testing.F) {
	for _, s := range []string{evil, "", "\x00\x1f\u2028", "\xff\xfe", "]]><!--", "a&amp;b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, h := range []template.HTML{
			BarChart{ID: s, Title: s, XLabel: s, YLabel: s, Bars: []Bar{{Value: 1, Color: s, Title: s, Marked: true}}, Legend: []LegendItem{{Label: s}}}.SVG(),
			LineChart{ID: s, Title: s, Series: []Series{{Label: s, Values: []float64{1, 2}}}, XTicks: []Tick{{1, s}}}.SVG(),
			ShareChart{ID: s, Title: s, Rows: []Share{{Label: s, Part: 1, Whole: 2, Unit: s}}}.SVG(),
		} {
			parse(t, h)
			if bytes.Contains([]byte(h), []byte("<script")) {
				t.Fatalf("unescaped: %s", h)
			}
		}
	})
}
