package dashboard_test

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/dashboard"
	"github.com/pacer-dev/pacer/domain"
	"github.com/pacer-dev/pacer/internal/waitfor"
)

// chart returns the <svg> element of id in body, failing when absent.
func chart(t *testing.T, body, id string) string {
	t.Helper()
	i := strings.Index(body, `id="`+id+`"`)
	if i < 0 {
		t.Fatalf("no chart %s in the page", id)
	}
	start := strings.LastIndex(body[:i], "<svg")
	end := strings.Index(body[i:], "</svg>")
	if start < 0 || end < 0 {
		t.Fatalf("chart %s is not an svg element", id)
	}
	return body[start : i+end+len("</svg>")]
}

var shareAttrs = regexp.MustCompile(`<rect class="share"[^>]* data-part="(\d+)" data-whole="(\d+)"`)

// A source page draws its last polls (a bar per record, red for a failure,
// a mark per changed result) and its success share; the page keeps its
// CSP and has no inline script or style.
func TestSourcePageCharts(t *testing.T) {
	f := newFixture(t, "")
	for range 3 {
		f.poll("api-one", "ok")
	}
	f.poll("down", "backoff")
	f.poll("down", "backoff")
	recs, err := f.sched.History(context.Background(), "api-one", 100)
	if err != nil || len(recs) != 3 {
		t.Fatalf("history of api-one: %d records, %v", len(recs), err)
	}
	changed := 0
	for _, r := range recs {
		if r.Changed {
			changed++
		}
	}
	a := f.get("/sources/api-one")
	if a.code != http.StatusOK {
		t.Fatalf("GET /sources/api-one: %s", a)
	}
	wantSecurityHeaders(t, "source page", a)
	if strings.Contains(a.body, "style=") || strings.Count(a.body, "<script") != 1 {
		t.Errorf("the source page has inline script or style")
	}
	polls := chart(t, a.body, "chart-polls")
	if n := strings.Count(polls, `<rect class="bar"`); n != 3 {
		t.Errorf("api-one: %d bars, want 3", n)
	}
	if n := strings.Count(polls, `<path class="mark"`); n != changed {
		t.Errorf("api-one: %d change marks, want %d (its changed records)", n, changed)
	}
	for _, s := range []string{"duration (ms)", "polls ago (1 = the newest)", ">result changed<", ">success<", ">failure<"} {
		if !strings.Contains(polls, s) {
			t.Errorf("the polls chart lacks %q (axis labels, units, legend)", s)
		}
	}
	share := shareAttrs.FindAllStringSubmatch(chart(t, a.body, "chart-share"), -1)
	if len(share) != 2 || share[0][1] != "3" || share[0][2] != "3" || share[1][1] != "3" || share[1][2] != "3" {
		t.Errorf("api-one's shares %v, want 3 of 3 in the history and 3 of 3 counted", share)
	}
	down := chart(t, f.get("/sources/down").body, "chart-polls")
	if n := strings.Count(down, `data-color="`+domain.OutcomeFailure+`"`); n != 2 {
		t.Errorf("down: %d failure bars, want 2", n)
	}
	if strings.Contains(down, `<path class="mark"`) {
		t.Errorf("down: a failed poll marked as changed")
	}
}

// The overview draws the load charts (empty until the first sample, 10 s
// after the start) and the success share per host: the fixture's http
// sources all poll one loopback host.
func TestOverviewCharts(t *testing.T) {
	f := newFixture(t, "")
	f.poll("api-one", "ok")
	f.poll("api-two", "ok")
	f.poll("down", "backoff")
	a := f.get("/")
	if a.code != http.StatusOK {
		t.Fatalf("GET /: %s", a)
	}
	for _, id := range []string{"chart-rate", "chart-inflight"} {
		c := chart(t, a.body, id)
		if n := strings.Count(c, `<polyline class="series"`); n < 2 {
			t.Errorf("%s: %d series, want at least 2", id, n)
		}
		for _, s := range []string{"−60 min", ">now<", "polls", "last hour, a sample every 10 s"} {
			if !strings.Contains(c, s) {
				t.Errorf("%s lacks %q", id, s)
			}
		}
	}
	hosts := chart(t, a.body, "chart-hosts")
	m := shareAttrs.FindAllStringSubmatch(hosts, -1)
	if len(m) != 1 || m[0][1] != "2" || m[0][2] != "3" {
		t.Errorf("host shares %v, want one host with 2 of 3 polls successful", m)
	}
	if !strings.Contains(hosts, ">127.0.0.1:") || !strings.Contains(hosts, "66.7 % of 3 polls") {
		t.Errorf("the host chart lacks its host or its figure:\n%s", hosts)
	}
	if !strings.Contains(a.body, "4 http sources on 1 hosts") {
		t.Errorf("the host chart's note is missing")
	}
}

// On a large daemon the host shares are computed in the background: the
// first page says so, a later one shows them; a page never waits.
func TestHostSharesInTheBackground(t *testing.T) {
	f := newFixture(t, "")
	d := f.dash
	dashboard.SetHostShareCache(d, 0, time.Hour)
	a := f.get("/")
	if !strings.Contains(a.body, "the shares per host are being computed") || strings.Contains(a.body, `id="chart-hosts"`) {
		t.Fatalf("the first page of a large daemon should not wait for the host shares")
	}
	waitfor.True(t, 10*time.Second, "the host chart", func() bool {
		return strings.Contains(f.get("/").body, `id="chart-hosts"`)
	})
}
