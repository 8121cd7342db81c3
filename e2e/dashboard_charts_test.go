package e2e

// Contract 15.4: the status page's charts in a real headless Chromium
// against the real daemon: the overview's load over the last hour and its
// success share per host, a source page's last polls and success share,
// each counted in the browser's DOM and saved as a 1400x1000 screenshot in
// e2e/testdata/screenshots/ (ignored by git).

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// screenshotDir is where the chart tests leave their screenshots.
func screenshotDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("testdata", "screenshots"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("screenshot dir: %v", err)
	}
	return dir
}

// viewportShot saves what a 1400x1000 window shows.
func viewportShot(t *testing.T, ctx context.Context, dir, name string) {
	t.Helper()
	png := get(t, ctx, "screenshot", chromedp.CaptureScreenshot())
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, png, 0o644); err != nil {
		t.Fatalf("write screenshot: %v", err)
	}
	t.Logf("screenshot: %s (%d bytes)", p, len(png))
}

const chartSources = `concurrency: 3
defaults:
  breaker: {failures: 0}
  error_after: 0
  backoff: {initial: 1s, max: 2s, multiplier: 2, jitter: 0}
sources:
  - {name: web-a, type: http, url: "%U1%/a", schedule: "@every 1s"}
  - {name: web-b, type: http, url: "%U1%/b", schedule: "@every 1s"}
  - {name: flaky, type: http, url: "%U2%/flaky", schedule: "@every 1s"}
  - {name: slow, type: http, url: "%U3%/slow", schedule: "@every 2s"}
  - {name: local, type: exec, command: ["true"], schedule: "@every 5s"}
`

// The overview draws polls per second by outcome and polls in flight
// against the cap (a line per series, a point per 10 s sample) and the
// success share of the three hosts; a source page draws a bar per kept
// record, a mark per changed result, and its shares.
func TestDashboardChartsBrowser(t *testing.T) {
	t.Parallel()
	start := time.Now()
	in := newInst(t)
	u1, u2, u3 := newUpstream(t), newUpstream(t), newUpstream(t)
	u1.Set("/a", behavior{Hold: 40 * time.Millisecond, Body: 100})
	u1.Set("/b", behavior{Hold: 120 * time.Millisecond})
	u2.Set("/flaky", behavior{Status: 502})
	u3.Set("/slow", behavior{Hold: 400 * time.Millisecond})
	in.writeConfig(strings.NewReplacer("%U1%", u1.URL(""), "%U2%", u2.URL(""), "%U3%", u3.URL("")).Replace(chartSources))
	d := in.start()

	// Three samples (30 s and more): meanwhile web-a's body changes every
	// 5 s, flaky heals and breaks every 10 s.
	eventually(t, 90*time.Second, "3 samples in the rate chart", func() error {
		step := int(time.Since(start) / (5 * time.Second))
		u1.Set("/a", behavior{Hold: 40 * time.Millisecond, Body: 100 + step})
		u2.Set("/flaky", behavior{Status: []int{502, 200}[step/2%2]})
		code, body := d.do(http.MethodGet, "/", "", "")
		m := regexp.MustCompile(`<polyline class="series" data-series="success" data-points="(\d+)"`).FindSubmatch(body)
		if code != http.StatusOK || m == nil {
			return errf("GET /: %d, no success series", code)
		}
		if n, _ := strconv.Atoi(string(m[1])); n < 3 {
			return errf("%d samples", n)
		}
		return nil
	})
	for _, name := range []string{"web-a", "flaky"} { // their history stays as counted below
		if code, body := d.do(http.MethodPost, "/api/sources/"+name+"/pause", "", `{"reason": "chart check"}`); code != http.StatusOK {
			t.Fatalf("pause %s: %d %s", name, code, body)
		}
	}
	ctx := browser(t)
	dir := screenshotDir(t)
	base := "http://" + in.addr
	run(t, ctx, "load the overview at 1400x1000", chromedp.EmulateViewport(1400, 1000),
		chromedp.Navigate(base+"/"), chromedp.WaitVisible(css("#chart-rate")))
	count := func(sel string) int {
		return get(t, ctx, "count "+sel, chromedp.Evaluate[int](`document.querySelectorAll(`+strconv.Quote(sel)+`).length`))
	}
	if n := count("#chart-rate polyline.series"); n < 3 {
		t.Errorf("rate chart: %d series, want success, failure, throttled at least", n)
	}
	pts := get(t, ctx, "read the points", chromedp.Evaluate[[]string](
		`Array.from(document.querySelectorAll("#chart-rate polyline.series, #chart-inflight polyline.series")).map(p => p.dataset.points + "/" + p.getAttribute("points").trim().split(/\s+/).length)`))
	for _, p := range pts {
		a, b, _ := strings.Cut(p, "/")
		n, _ := strconv.Atoi(a)
		if a != b || n < 3 {
			t.Errorf("a series has data-points/points %s, want equal and at least 3", p)
		}
	}
	if n, series := count("#chart-rate circle.dot"), count("#chart-rate polyline.series"); n < 3*series {
		t.Errorf("rate chart: %d dots on %d series of at least 3 samples", n, series)
	}
	if n := count("#chart-inflight polyline.series"); n != 2 {
		t.Errorf("in-flight chart: %d series, want in flight and cap", n)
	}
	if n := count("#chart-hosts rect.share"); n != 3 {
		t.Errorf("host chart: %d hosts, want 3 (one per upstream; the exec source has none)", n)
	}
	if n := count("svg.chart .legend"); n < 3+2+2 {
		t.Errorf("%d legend entries on the overview", n)
	}
	viewportShot(t, ctx, dir, "charts-overview.png")
	screenshot(t, ctx, dir, "charts-overview-full.png")

	var recs []struct {
		Outcome string `json:"outcome"`
		Changed bool   `json:"changed"`
	}
	d.getJSON("/api/sources/web-a/history?n=100", &recs)
	changed := 0
	for _, r := range recs {
		if r.Changed {
			changed++
		}
	}
	run(t, ctx, "load web-a's page", chromedp.Navigate(base+"/sources/web-a"), chromedp.WaitVisible(css("#chart-polls")))
	if n := count("#chart-polls rect.bar"); n != len(recs) || n < 10 {
		t.Errorf("web-a: %d bars, want its %d records (at least 10)", n, len(recs))
	}
	if n := count("#chart-polls rect.band"); n != len(recs) {
		t.Errorf("web-a: %d outcome bands, want %d", n, len(recs))
	}
	if n := count("#chart-polls path.mark"); n != changed || n < 2 {
		t.Errorf("web-a: %d change marks, want its %d changed records (at least 2)", n, changed)
	}
	if n := count("#chart-share rect.share"); n != 2 {
		t.Errorf("web-a: %d share bars, want 2", n)
	}
	viewportShot(t, ctx, dir, "charts-source.png")
	d.getJSON("/api/sources/flaky/history?n=100", &recs)
	failed := 0
	for _, r := range recs {
		if r.Outcome == "failure" {
			failed++
		}
	}
	run(t, ctx, "load flaky's page", chromedp.Navigate(base+"/sources/flaky"), chromedp.WaitVisible(css("#chart-polls")))
	if n := count(`#chart-polls rect.bar[data-color="failure"]`); n != failed || n == 0 {
		t.Errorf("flaky: %d red bars, want its %d failed records", n, failed)
	}
	viewportShot(t, ctx, dir, "charts-source-flaky.png")
	t.Logf("chart browser test took %v", time.Since(start).Round(time.Millisecond))
}
