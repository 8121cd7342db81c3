package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// hostObj is a host as GET /api/hosts shows it (contract 13.7).
type hostObj struct {
	Host               string   `json:"host"`
	Sources            int      `json:"sources"`
	Inflight           int      `json:"inflight"`
	State              string   `json:"state"`
	Until              *string  `json:"until"`
	Concurrency        int      `json:"concurrency"`
	Rate               float64  `json:"rate"`
	LearnedConcurrency *int     `json:"learned_concurrency"`
	LearnedRate        *float64 `json:"learned_rate"`
	Why                string   `json:"why"`
}

// Section 13 from outside: a throttled host and a dead one, their sources
// and a dependent blocked, the hosts API, pacer hosts and status, the
// status page's hosts table in Chromium, a host reset, and the host state
// kept across kill -9.
func TestHostsFromOutside(t *testing.T) {
	t.Parallel()
	thr := newUpstream(t)
	for i := range 4 {
		thr.Set(fmt.Sprintf("/t%d", i), behavior{Status: 429, RetryAfter: "120"})
	}
	dead := "127.0.0.4:" + strconv.Itoa(portOf(t, freeAddr(t))) // nothing listens: connection refused
	thrHost := strings.TrimPrefix(thr.URL(""), "http://")
	in := newInst(t)
	var b strings.Builder
	b.WriteString(`concurrency: 8
shutdown_timeout: 2s
hosts:
  breaker: {sources: 2, failures: 3, window: 1m, cooldown: 1m}
  overrides:
    "` + thrHost + `": {concurrency: 2, rate: 10/s, adaptive: true}
defaults:
  schedule: "@every 1s"
  timeout: 2s
  backoff: {initial: 1s, max: 2s, multiplier: 2, jitter: 0}
sources:
`)
	for i := range 4 {
		fmt.Fprintf(&b, "  - {name: t%d, type: http, url: %q}\n", i, thr.URL(fmt.Sprintf("/t%d", i)))
		fmt.Fprintf(&b, "  - {name: d%d, type: http, url: \"http://%s/d%d\"}\n", i, dead, i)
	}
	b.WriteString("  - {name: dep, type: exec, command: [\"true\"], depends_on: [d0]}\n")
	in.writeConfig(b.String())
	d := in.start()

	hostsByName := func() map[string]hostObj {
		var hs []hostObj
		d.getJSON("/api/hosts", &hs)
		out := map[string]hostObj{}
		for _, h := range hs {
			out[h.Host] = h
		}
		return out
	}
	eventually(t, 30*time.Second, "one host throttled, the other open", func() error {
		hs := hostsByName()
		if hs[thrHost].State != "throttled" || (hs[dead].State != "open" && hs[dead].State != "half-open") {
			return errf("hosts %+v", hs)
		}
		return nil
	})
	code, body := d.do(http.MethodGet, "/api/hosts", "", "")
	var raw []map[string]any
	if err := json.Unmarshal(body, &raw); code != http.StatusOK || err != nil || len(raw) != 2 {
		t.Fatalf("GET /api/hosts: %d %s", code, body)
	}
	for _, k := range []string{"host", "sources", "inflight", "state", "until", "concurrency", "rate", "learned_concurrency",
		"learned_rate", "latency_p90_ms", "baseline_ms", "why"} {
		if _, ok := raw[0][k]; !ok {
			t.Errorf("the host object lacks %q: %s", k, body)
		}
	}
	if h := hostsByName()[thrHost]; h.Sources != 4 || h.Concurrency != 2 || h.Rate != 10 || h.Until == nil || !strings.Contains(h.Why, "throttled") {
		t.Errorf("the throttled host: %+v", h)
	}
	if code, _ := d.do(http.MethodGet, "/api/hosts/nowhere.example", "", ""); code != http.StatusNotFound {
		t.Errorf("GET an unknown host: %d, want 404", code)
	}
	eventually(t, 20*time.Second, "siblings and the dependent blocked", func() error {
		blocked := 0
		for _, name := range []string{"t0", "t1", "t2", "t3", "d0", "d1", "d2", "d3"} {
			if o := d.source(name); o.State == "blocked" {
				blocked++
			}
		}
		if o := d.source("dep"); o.State != "blocked" {
			return errf("dep is %s", o.State)
		}
		if blocked < 4 {
			return errf("%d sources blocked", blocked)
		}
		return nil
	})
	// The host state is committed within a second (pacer hosts reads the
	// store): the CLI reads it from there, and it survives kill -9.
	eventually(t, 10*time.Second, "the throttled host in the store", func() error {
		var stored []hostObj
		if err := json.Unmarshal([]byte(in.mustCLI("hosts", "-json").stdout), &stored); err != nil {
			return err
		}
		states := map[string]string{}
		for _, h := range stored {
			states[h.Host] = h.State
		}
		if states[thrHost] != "throttled" || (states[dead] != "open" && states[dead] != "half-open") {
			return errf("stored hosts %+v", stored)
		}
		return nil
	})
	checkHostsCLI(t, in, thrHost, dead)
	checkHostsPage(t, in)

	d.kill()
	d = in.start()
	if h := hostsByName()[thrHost]; h.State != "throttled" || h.Until == nil {
		t.Fatalf("after kill -9 and a restart the throttled host is %+v, want still throttled", h)
	}
	code, body = d.do(http.MethodPost, "/api/hosts/"+url.PathEscape(thrHost)+"/reset", "", "")
	var reset hostObj
	if err := json.Unmarshal(body, &reset); code != http.StatusOK || err != nil || reset.State != "closed" || reset.Until != nil {
		t.Fatalf("POST reset: %d %s", code, body)
	}
	d.stop(10 * time.Second)
}

// portOf is the port of a host:port.
func portOf(t *testing.T, addr string) int {
	t.Helper()
	_, p, _ := strings.Cut(addr, ":")
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// checkHostsCLI: pacer hosts lists both hosts with their states, and
// pacer status shows the blocked sources.
func checkHostsCLI(t *testing.T, in *inst, thrHost, dead string) {
	t.Helper()
	out := in.mustCLI("hosts").stdout
	if !strings.Contains(out, thrHost) || !strings.Contains(out, dead) || !strings.Contains(out, "throttled") {
		t.Errorf("pacer hosts:\n%s", out)
	}
	var hs []hostObj
	if err := json.Unmarshal([]byte(in.mustCLI("hosts", "-json").stdout), &hs); err != nil || len(hs) != 2 {
		t.Errorf("pacer hosts -json: %v %+v", err, hs)
	}
	if o := in.statusJSON("dep"); o.State != "blocked" {
		t.Errorf("pacer status: dep is %q, want blocked", o.State)
	}
}

// checkHostsPage: the overview lists the two hosts and counts the blocked
// sources.
func checkHostsPage(t *testing.T, in *inst) {
	t.Helper()
	ctx := browser(t)
	run(t, ctx, "load the overview", chromedp.EmulateViewport(1400, 1000),
		chromedp.Navigate("http://"+in.addr+"/"), chromedp.WaitVisible(css("#hosts-table")))
	rows := get(t, ctx, "count the hosts", chromedp.Evaluate[int](`document.querySelectorAll("#hosts-table tr.host").length`))
	if rows != 2 {
		t.Errorf("the hosts table has %d rows, want 2", rows)
	}
	states := get(t, ctx, "read the states", chromedp.Evaluate[[]string](
		`Array.from(document.querySelectorAll("#hosts-table tr.host")).map(r => r.dataset.state)`))
	if len(states) != 2 || states[1] != "throttled" {
		t.Errorf("host states on the page %v, want the open one first, then the throttled one", states)
	}
	blocked := get(t, ctx, "the blocked count", chromedp.Evaluate[string](
		`(document.querySelector(".count.s-blocked b") || {textContent: "none"}).textContent`))
	if n, err := strconv.Atoi(blocked); err != nil || n < 1 {
		t.Errorf("the overview counts %q blocked sources", blocked)
	}
	viewportShot(t, ctx, screenshotDir(t), "hosts-overview.png")
}
