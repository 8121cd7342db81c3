package dashboard_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// Issue 24 item 5 on the page: max_body in human units, numeric columns
// right-aligned with their headers, and the trigger button disabled, with
// its reason as a title, for a paused or errored source.
func TestPageFriction(t *testing.T) {
	f := newFixture(t, "")
	f.poll("xss", "error")
	if a := f.post("/sources/api-one/pause", url.Values{"reason": {"deploy"}}); a.code != http.StatusSeeOther {
		t.Fatalf("pause: %s", a)
	}
	for _, c := range []struct {
		name, title string
	}{{"api-one", "paused: resume it to poll it"}, {"xss", "in error: reset it to poll it"}} {
		p := f.get("/sources/" + c.name)
		if !strings.Contains(p.body, `id="trigger" disabled title="`+c.title+`">trigger</button>`) {
			t.Errorf("%s's trigger button is not disabled with its reason %q", c.name, c.title)
		}
	}
	p := f.get("/sources/api-two")
	if !strings.Contains(p.body, `id="trigger">trigger</button>`) {
		t.Errorf("api-two's trigger button should be enabled")
	}
	if !strings.Contains(p.body, `<dt>max_body</dt><dd class="text">10 MiB</dd>`) {
		t.Errorf("max_body is not shown as 10 MiB")
	}
	if !strings.Contains(p.body, `<th class="num">Duration</th><th class="num">Status</th><th class="num">Bytes</th>`) {
		t.Errorf("the history's numeric headers are not right-aligned")
	}
	if o := f.get("/"); !strings.Contains(o.body, `<th class="num"><a href=`) || !strings.Contains(o.body, `Failures`) {
		t.Errorf("the overview's Failures header is not right-aligned")
	}
	if css := f.get("/dash/static/style.css"); !strings.Contains(css.body, "td.num, th.num { text-align: right;") {
		t.Errorf("the style sheet does not right-align th.num")
	}
}
